"""Chapter 8, "Why FedNova's tau_eff must not come from the sample": the paired displacement check
(:func:`fedlib.experiments.speedup.paired_displacement_error`) that replaced the factor-2 same-order
assert at q = 4."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.experiments import speedup as S


def _row(tau_eff: str, averaged, limit, clients: int = 4, rounds: int = 100) -> S.BiasRow:
    nan = float("nan")  # fields the helper must not read
    return S.BiasRow(clients, rounds, 0.1, tau_eff, nan, nan, nan, nan, nan, nan, np.array(averaged, dtype=float),
                     np.array(limit, dtype=float))


def test_paired_displacement_error_by_hand():
    """x* = (1, -1), x_c = (3, -1): predicted displacement (2, 0). Seeds' displacements (2.1, 0.1) and
    (1.9, 0.5): mean (2, 0.3), off by (0, 0.3), relative 0.15. Not the distance of the choice's iterates to
    x_c (mean |x - x_c| = 0.25): the fixed run's iterates (off x* by (0.1, 0), (-0.1, 0.2)) are subtracted."""
    fixed = _row("population", [[1.1, -1.0], [0.9, -0.8]], [1.0, -1.0])
    part = _row("participants", [[3.2, -0.9], [2.8, -0.3]], [3.0, -1.0])
    other = _row("participants", [[9.0, 9.0], [9.0, 9.0]], [5.0, 5.0], rounds=200)  # another T: not read
    assert S.paired_displacement_error([other, fixed, part], 4, 100, "participants") == pytest.approx(0.15, rel=1e-12)
    # no displacement at all (the sample's tau_eff landing where the fixed one does): 1
    same = _row("selected_p", fixed.averaged, [1.0, 1.0])
    assert S.paired_displacement_error([fixed, same], 4, 100, "selected_p") == pytest.approx(1.0, rel=1e-12)
    # displaced exactly as predicted: 0
    exact = _row("selected_p", fixed.averaged + np.array([0.0, 2.0]), [1.0, 1.0])
    assert S.paired_displacement_error([fixed, exact], 4, 100, "selected_p") == pytest.approx(0.0, abs=1e-15)


def test_paired_displacement_error_refuses_what_it_cannot_pair():
    fixed = _row("population", [[0.0, 0.0], [1.0, 1.0]], [0.0, 0.0])
    part = _row("participants", [[1.0, 0.0], [1.0, 1.0]], [1.0, 0.0])
    with pytest.raises(ValueError, match="population row is the reference"):
        S.paired_displacement_error([fixed, part], 4, 100, "population")
    with pytest.raises(ValueError, match="tau_eff must be one of"):
        S.paired_displacement_error([fixed, part], 4, 100, "server")
    with pytest.raises(ValueError, match=r"no sampling_bias row with q=4, T=100, tau_eff='population'"):
        S.paired_displacement_error([part], 4, 100, "participants")
    with pytest.raises(ValueError, match="not the same seeds"):
        S.paired_displacement_error([_row("population", [[0.0, 0.0]], [0.0, 0.0]), part], 4, 100, "participants")
    with pytest.raises(ValueError, match="no predicted displacement"):
        S.paired_displacement_error([fixed, _row("participants", part.averaged, [0.0, 0.0])], 4, 100,
                                    "participants")


def test_paired_displacement_error_of_a_run_matches_its_rows():
    """On sampling_bias's own rows the helper is the formula of its docstring (q = 4, short run)."""
    base, work = S.base_setup(seed=0, dim=3)
    rows = S.sampling_bias(base, work, [4], [60], seeds=2, tau_effs=("population", "participants", "selected_p"))
    x_star = base.optimum()
    fixed = S.bias_row(rows, 4, 60, "population")
    np.testing.assert_allclose(fixed.limit, x_star, rtol=1e-10, atol=1e-12)
    for choice in ("participants", "selected_p"):
        r = S.bias_row(rows, 4, 60, choice)
        want = np.linalg.norm((r.averaged - fixed.averaged).mean(axis=0) - (r.limit - x_star)) / np.linalg.norm(
            r.limit - x_star)
        assert S.paired_displacement_error(rows, 4, 60, choice) == pytest.approx(want, rel=1e-8)


def test_sampling_bias_distances_stay_finite_past_the_norm_overflow(monkeypatch):
    """Averaged iterates of size 1e200 (a divergent step, still finite): np.linalg.norm overflowed to inf there
    (its sqrt(x.x) passes 1e308); sampling_bias's distances are _scaled_norm's, finite and right to rounding. Where
    np.linalg.norm is finite they are its values bit for bit (the test above and the chapter)."""
    base, work = S.base_setup(seed=0, dim=3)
    x_star = base.optimum()
    real = S.run_replicas
    huge = np.array([3e200, -4e200, 0.0])

    def blown_up(*args, **kwargs):
        run = real(*args, **kwargs)
        return run._replace(mean_params=np.array([x_star + huge]))

    monkeypatch.setattr(S, "run_replicas", blown_up)
    rows = S.sampling_bias(base, work, [4], [5], seeds=2, tau_effs=("population",))
    (row,) = rows
    with np.errstate(over="ignore"):
        assert np.isinf(np.linalg.norm(huge))  # what the distances were
    assert row.distance == pytest.approx(5e200, rel=1e-12) and row.off_prediction == pytest.approx(5e200, rel=1e-12)


@pytest.mark.parametrize("problem_seed", [2])
def test_chapter8_paired_check_holds_at_q4_on_other_problem_seeds(problem_seed):
    """Chapter 8's setting (dim 10, c = 0.5, 3 sampling seeds from the problem seed) at q = 4 and its shorter
    T = 500, the larger eta: the sample's tau_eff is displaced from the fixed run by the predicted x_c - x*,
    nearer it than no displacement at all (the chapter's decision rule < 1/2)."""
    base, work = S.base_setup(seed=problem_seed, dim=10)
    rows = S.sampling_bias(base, work, [4], [500], lr_scale=0.5, seeds=3, seed=problem_seed)
    for choice in ("participants", "selected_p"):
        assert S.paired_displacement_error(rows, 4, 500, choice) < 0.5


def _script_main():
    import runpy
    from pathlib import Path

    return runpy.run_path(str(Path(__file__).resolve().parents[1] / "scripts" / "measure_bias_limit.py"),
                          run_name="measure_bias_limit")["main"]


def test_measure_bias_limit_script_runs_tiny_and_refuses_one_T(capsys):
    """scripts/measure_bias_limit.py (the numbers of chapter 8's comment) at tiny sizes: one line per (q, choice)."""
    main = _script_main()
    main(["--rounds", "40", "20", "--seeds", "2", "--problem-seeds", "0"])
    out = capsys.readouterr().out
    for q in (2, 4):
        for choice in ("participants", "selected_p"):
            assert f"q = {q}, {choice}: paired error at T = 20: " in out
    assert "at T = 40: " in out and "of 1); off_prediction / predicted" in out
    with pytest.raises(SystemExit) as exit_info:
        main(["--rounds", "30", "30"])
    assert exit_info.value.code == 2 and "give two different T" in capsys.readouterr().err
