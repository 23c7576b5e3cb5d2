"""Mutation-testing pass on the end of fedlib.experiments.acceleration (the logistic linearisation at x*
and the readers of scripts/vr_spectrum.py's records): the defaults the docstrings state, argument checks
that no test exercised, and orderings checked on values small enough to sort by hand.

Mutants of 37f92d9..28127ce (third, the changed hunks of fedlib/experiments/acceleration.py)
(pass described in tests/README.md, Mutation passes):
  AC1 vr_limit's VRLSGD weights p_i tau_i not renormalised; AC2 not multiplied by tau_i; AC3 a wrong unused
  local_steps let through; AC4 a non-VR variant let through; AC5 ``weights`` ignored; AC6 spectrum_summary's dtype
  kinds ``"bSUV"`` -> ``"bV"``; AC7 limit_distances' lrs without check_sequence; AC8 variant_radius by
  spectral_radius of the map itself. killed by the suite: AC1-AC5, AC7. killed here: AC6, AC8.

Mutants of f9b9704..2e0d04d (fedlib/experiments/acceleration.py: _variant's label, limit_distances' names[k], rate_check's
floor, vr_limit's weights) (pass described in tests/README.md, Mutation passes):
  E1 _variant's default label ``variant``; E2 limit_distances' names unlabelled; E3 the VRLSGD refusal skipped for
  names[0]; E4 rate_check re-raises check_in_range's message; E5 ``checked == 0`` -> ``< 0``; E6 ``floor = checked``
  dropped; E7 the message shows the checked value; E8 vr_limit's weights unchecked (as ``pass``; a first draft that
  left an empty block was a syntax error, not counted). killed by the suite: E1-E5, E7, E8. equivalent: E6
  (check_in_range returns ``float(floor)`` of an accepted number, which the arithmetic after it gives the same
  value).
"""
import numpy as np
import pytest

from fedlib.data import synthetic
from fedlib.experiments import acceleration as A
from fedlib.problems.logistic import LogisticProblem

STEPS = [2, 4, 40]


@pytest.fixture(scope="module")
def small_logistic():
    problem = LogisticProblem(synthetic(0, 0, num_clients=3, dim=5, num_classes=3, num_samples=[300, 500, 900], seed=1))
    return problem, A.logistic_optimum(problem)


def test_logistic_optimum_defaults(small_logistic):
    """tol = 1e-11 (relative) and max_steps = 100 by default: an unreachable tol stops after 100 steps, one
    step is not enough at the default tol; both say so."""
    problem, opt = small_logistic
    assert opt.newton_steps <= 100 and opt.grad_norm < 1e-12
    with pytest.raises(RuntimeError, match=r"\(tol 1e-11 relative .* after 1 Newton steps"):
        A.logistic_optimum(problem, max_steps=1)
    with pytest.raises(RuntimeError, match="after 100 Newton steps"):
        A.logistic_optimum(problem, tol=1e-300)


def test_linearised_vr_eigenvalues_default_k(small_logistic):
    problem, opt = small_logistic
    lead = A.linearised_vr_eigenvalues(problem, opt, "fednova-vr", 1.0, STEPS)
    assert lead.shape == (4,)
    assert np.allclose(lead, A.linearised_vr_eigenvalues(problem, opt, "fednova-vr", 1.0, STEPS, k=4), rtol=1e-10)


def test_linearised_count_defaults_and_checks(small_logistic, capsys):
    """The default deflation points are gradient descent's eigenvalues at step lr * tau_bar, the default phase
    step is theory's validated 0.4, no progress bar unless asked; a bad name or step vector is refused by name."""
    problem, opt = small_logistic
    lr, radius = 0.5, 0.9
    tau_bar = float(problem.p @ np.array(STEPS))
    got = A.linearised_vr_count_outside(problem, opt, "fednova-vr", lr, STEPS, radius)
    assert capsys.readouterr().err == ""
    gd = A.linearised_gd_eigenvalues(problem, opt, lr * tau_bar)
    explicit = A.linearised_vr_count_outside(problem, opt, "fednova-vr", lr, STEPS, radius, deflate=gd,
                                             max_phase_step=0.4)
    assert got == explicit
    every = np.linalg.eigvals(A.linearised_vr_matrix(problem, opt, "fednova-vr", lr, STEPS))
    assert got.outside == int(np.sum(np.abs(every) > radius)) > 0
    # the same count with other points or another phase step takes another number of determinants
    other_points = A.linearised_vr_count_outside(problem, opt, "fednova-vr", lr, STEPS, radius,
                                                 deflate=A.linearised_gd_eigenvalues(problem, opt, lr / tau_bar))
    other_step = A.linearised_vr_count_outside(problem, opt, "fednova-vr", lr, STEPS, radius, max_phase_step=0.8)
    assert other_points.outside == other_step.outside == got.outside
    assert other_points.evaluations != got.evaluations and other_step.evaluations != got.evaluations
    with pytest.raises(ValueError, match="name"):
        A.linearised_vr_count_outside(problem, opt, "fedavg", lr, STEPS, radius)
    with pytest.raises(ValueError, match="local_steps"):
        A.linearised_vr_count_outside(problem, opt, "fednova-vr", lr, [2, 4], radius)


def test_linearised_vr_matrix_refuses_other_names(small_logistic):
    problem, opt = small_logistic
    with pytest.raises(ValueError, match="name"):
        A.linearised_vr_matrix(problem, opt, "fedavg", 1.0, STEPS)


def test_spectrum_summary_defaults_and_checks():
    vals = np.array([1.5, 0.9, 0.2, 0.1, -0.1, -0.2, 0.3, 0.4, 0.5, 0.6])
    s = A.spectrum_summary(vals)
    assert s["slow"] == 0.05 and len(s["leading"]) == len(s["nearest_one"]) == 8
    # nearest 1 first: 0.9 (0.1 away), 0.6 (0.4), then 1.5 and 0.5 (0.5)
    assert [v[0] for v in s["nearest_one"][:2]] == [0.9, 0.6]
    assert s["slow_count"] == 0 and s["fast_radius"] == 1.5 and s["outside_unit_circle"] == 1
    assert A.spectrum_summary(vals, k=1)["leading"] == [[1.5, 0.0]]
    # within 0.5 of 1: 0.9 and 0.6 are slow; 0.5 and 1.5, exactly 0.5 away, are not
    assert A.spectrum_summary(vals, slow=0.5)["slow_count"] == 2
    for bad in (dict(k=0), dict(k=1.5), dict(slow=0.0), dict(slow=-0.1)):
        with pytest.raises(ValueError, match=next(iter(bad))):
            A.spectrum_summary(vals, **bad)


def test_spectrum_summary_counts_only_strictly_outside_the_unit_circle():
    s = A.spectrum_summary([1.0, -1.0, 1j, 0.6 + 0.8j, 0.5])
    assert s["outside_unit_circle"] == 0 and s["radius"] == 1.0
    assert A.spectrum_summary([1.0 + 1e-12, 0.5])["outside_unit_circle"] == 1


# --------------------------------------------------------------------------- readers of scripts/vr_spectrum.py
def _stored_count_record():
    import json
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "data" / "results" / "linearised" / "scaffold-count.json"
    return json.loads(src.read_text())


def _write_spectrum(folder, vals, *, rows=None, radius=None, kind="linearised-spectrum"):
    import json

    record = _stored_count_record()
    record["kind"] = kind
    record["config"]["rows"] = len(vals) if rows is None else rows
    record["summary"] = {"radius": float(np.abs(vals).max()) if radius is None else radius}
    (folder / "scaffold.json").write_text(json.dumps(record))
    np.savez(folder / "scaffold.npz", eigenvalues=np.asarray(vals))


def test_read_vr_spectrum_takes_a_string_and_checks_kind_and_count(tmp_path):
    vals = np.array([0.6 + 0.8j, 0.6 - 0.8j, 0.5])
    _write_spectrum(tmp_path, vals)
    got, record = A.read_vr_spectrum(str(tmp_path), "scaffold")
    assert np.array_equal(got, vals) and record["summary"]["radius"] == pytest.approx(1.0, rel=1e-15)
    _write_spectrum(tmp_path, vals, kind="linearised-count")
    with pytest.raises(ValueError, match="kind must be 'linearised-spectrum'"):
        A.read_vr_spectrum(tmp_path, "scaffold")
    _write_spectrum(tmp_path, vals, rows=4)          # the radius agrees, the count does not
    with pytest.raises(ValueError, match="its record says 4"):
        A.read_vr_spectrum(tmp_path, "scaffold")
    _write_spectrum(tmp_path, vals, radius=0.9)      # the count agrees, the radius does not
    with pytest.raises(ValueError, match="radius 0.9"):
        A.read_vr_spectrum(tmp_path, "scaffold")


def test_read_vr_count_checks_kind(tmp_path):
    import json

    record = _stored_count_record()
    record["kind"] = "linearised-spectrum"
    (tmp_path / "scaffold-count.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="kind must be 'linearised-count'"):
        A.read_vr_count(tmp_path, "scaffold")


# --------------------------------------------------------------------------- perturbation_growth
def test_perturbation_growth_defaults_and_checks(small_logistic):
    problem, opt = small_logistic
    run = A.perturbation_growth(problem, opt, "fednova-vr", 0.5, STEPS, 4)
    assert run.distances.shape == (5,) and run.distances[0] == pytest.approx(1e-7, rel=1e-6)   # size 1e-7
    assert np.array_equal(run.distances,
                          A.perturbation_growth(problem, opt, "fednova-vr", 0.5, STEPS, 4, size=1e-7, seed=0).distances)
    assert not np.array_equal(run.distances,
                              A.perturbation_growth(problem, opt, "fednova-vr", 0.5, STEPS, 4, seed=1).distances)
    # the rate is fitted on the second half: rounds 2..4 of 4
    assert run.rate == A.measured_rate(run.distances, 2) != A.measured_rate(run.distances, 1)
    assert A.perturbation_growth(problem, opt, "scaffold", 0.5, STEPS, 2).distances.shape == (3,)
    for bad, match in ((dict(rounds=1), "rounds"), (dict(size=0.0), "size"), (dict(size=-1e-7), "size"),
                       (dict(local_steps=[2, 4]), "local_steps")):
        args = dict(name="fednova-vr", lr=0.5, local_steps=STEPS, rounds=4) | bad
        with pytest.raises(ValueError, match=match):
            A.perturbation_growth(problem, opt, **args)


def test_perturbation_growth_starts_at_x_star_plus_delta(small_logistic):
    """The start is x* + size * delta/|delta|, delta = basis @ (standard normal draws of SeedSequence(seed)),
    with the fixed-point variates: one round rebuilt by hand from that state moves it as the function's does
    (a large size, so that x* - delta would land elsewhere)."""
    import math

    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.experiments.surrogate import full_batch_grad_fn
    from fedlib.problems.logistic import pack_params, unpack_params
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd
    from fedlib.variance import control_variates

    problem, opt = small_logistic
    lr, size, m = 0.5, 0.3, problem.num_clients
    run = A.perturbation_growth(problem, opt, "fednova-vr", lr, STEPS, 2, size=size, seed=5)
    shape = pack_params(problem.init_params()).shape
    delta = opt.basis @ np.random.default_rng(np.random.SeedSequence(5)).standard_normal(opt.basis.shape[1])
    algo = make_algorithm("fednova-vr", sgd(lr))
    state = algo.init(unpack_params((opt.theta + size * delta / np.linalg.norm(delta)).reshape(shape)), m)
    state = state._replace(variates=control_variates(unpack_params(opt.client_grads.reshape((m,) + shape)), problem.p))
    state = run_sequential(algo, None, full_batch_grad_fn(problem), problem.p, FixedSteps(STEPS), 1,
                           initial_state=state).state
    x = pack_params(state.params).ravel() - opt.theta
    c = pack_params(state.variates.client).reshape(m, -1) - opt.client_grads
    assert run.distances[1] == pytest.approx(math.sqrt(float(x @ x) + float(np.sum(c * c))), rel=1e-12)


# ------------------------------------------------------------------------ mutants of 37f92d9..28127ce (third)
@pytest.mark.parametrize("eigenvalues", [["0.5", "0.25"], np.array(["0.5", "0.25"]), [b"0.5"]],
                         ids=["str list", "str array", "bytes"])
def test_spectrum_summary_refuses_eigenvalues_given_as_text(eigenvalues):
    """Eigenvalues are numbers: text, which numpy would parse as 0.5, is refused by name (mutant AC6, the dtype kinds
    ``"bSUV"`` -> ``"bV"``, summarised '0.5' as the eigenvalue 0.5)."""
    with pytest.raises(ValueError, match="^eigenvalues must be real or complex numbers, got"):
        A.spectrum_summary(eigenvalues)


def test_variant_radius_is_inf_for_an_overflowing_map_and_the_radius_otherwise():
    """variant_radius is ``inf`` when the round map overflows float64 (mutant AC8, spectral_radius of the map
    itself: 'M contains NaN or inf', an M the caller never gave). H = (I, 2I), p = (1/2, 1/2), tau = (1, 2000),
    lr = 1.5: (1 - 3)^2000 overflows. FedAvg at tau = (1, 2), lr = 0.1: M = 1 - (0.5 * 0.1 + 0.5 * 0.18 * 2) = 0.77
    (K_2 = 0.1 (1 + 0.8) = 0.18)."""
    from fedlib.problems.quadratic import QuadraticProblem

    prob = QuadraticProblem(np.array([np.eye(2), 2 * np.eye(2)]), np.ones((2, 2)), np.array([0.5, 0.5]))
    with np.errstate(over="ignore", invalid="ignore"):
        assert A.variant_radius(prob, "fedavg", 1.5, [1, 2000]) == float("inf")
    assert A.variant_radius(prob, "fedavg", 0.1, [1, 2]) == pytest.approx(0.77, rel=1e-12)
