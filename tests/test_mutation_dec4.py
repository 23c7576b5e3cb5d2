r"""Tests written from a mutation-testing pass (2026-12-04) over the code changed since 8bd9827:
``fedlib.solvers`` (check_own_step, builtin_step, STEP_METHODS), ``fedlib.checkpoint`` (the part
types), ``fedlib.sampling`` (round_participation), ``fedlib.results`` (summary against history),
``fedlib.algorithms`` (server_state_mismatch, apply_server_optimizer), ``fedlib.data.synthetic``
(class scores that overflow) and ``fedlib.theory`` (App. G's conditions). Each test checks a
documented behaviour that a surviving mutant showed the rest of the suite left unchecked; expected
values are worked by hand (the comments show the arithmetic), never stored outputs."""
from __future__ import annotations

import dataclasses
import hashlib
import pickle
import time

import numpy as np
import pytest

from fedlib.solvers import LocalSolver, check_builtin_step, check_own_step, own_step_methods, sgd


# ---------------------------------------------------------------- solvers: what counts as an own step
@dataclasses.dataclass(frozen=True)
class _OwnInit(LocalSolver):
    """Overrides only ``init`` (here the same start): its step is no longer LocalSolver's own."""

    def init(self, params, correction=None):
        return super().init(params, correction)


@dataclasses.dataclass(frozen=True)
class _WrongCounter(LocalSolver):
    """LocalSolver's step, but a counter that reports twice the steps taken."""

    def counter_step(self, k, counter):
        a, u = super().counter_step(k, counter)
        return (a + 1.0, u)


def test_overriding_init_alone_makes_the_step_the_solvers_own():
    """STEP_METHODS names init: a fused engine would start the round without the subclass's init."""
    solver = _OwnInit(lr=0.1)
    assert own_step_methods(_OwnInit) == ["init"]
    assert not solver.builtin_step
    with pytest.raises(ValueError, match=r"^e: _OwnInit overrides LocalSolver's step \(init\), which x$"):
        check_builtin_step("e", [solver], "x")


def test_overriding_counter_step_alone_is_probed_and_a_wrong_counter_refused():
    """STEP_METHODS names counter_step: a subclass that changes only the counter is not built-in, so
    check_own_step probes it. One step from 0 with gradient e_0 moves by -lr e_0 (a = [1], sum 1) while
    this counter reports 1 + 1 = 2: refused, where FedNova would divide by 2 instead of 1."""
    solver = _WrongCounter(lr=0.1)
    assert own_step_methods(_WrongCounter) == ["counter_step"]
    assert not solver.builtin_step
    with pytest.raises(ValueError, match=r"^s: _WrongCounter reports \|\|a_i\|\|_1 = 2\.0 after 1 step\(s\)"):
        check_own_step("s", solver)


@dataclasses.dataclass(frozen=True)
class _SameStep(LocalSolver):
    """Overrides ``update`` with LocalSolver's own step (so it is probed, and must pass)."""

    def update(self, state, grads):
        return super().update(state, grads)


def test_a_correct_own_step_with_weight_decay_passes_the_probe():
    """The probe turns weight decay off (decay is part of G_i, not of a_i). With it on, two SGD steps
    from 0 on gradients e_0, e_1 would give x_2 = -lr e_0 - lr (e_1 - wd lr e_0), a = [1 - wd lr, 1]
    (sum 2 - 0.01 = 1.99 at lr = 0.1, wd = 0.1) against the counter's 2: a right solver refused."""
    solver = _SameStep(lr=0.1, weight_decay=0.1)
    assert not solver.builtin_step
    assert check_own_step("s", solver) is solver
    # the arithmetic above, on the solver itself with decay on: the counter (2) is not the decayed sum
    state = solver.init(np.zeros(2))
    for k in range(2):
        state = solver.update(state, np.eye(2)[k])
    np.testing.assert_allclose(-state.params / 0.1, [1 - 0.1 * 0.1, 1.0], rtol=1e-14)
    assert state.a_norm == 2.0


@dataclasses.dataclass(frozen=True)
class _DoubleStepCount(LocalSolver):
    """LocalSolver's step, but ``step`` advanced by two."""

    def update(self, state, grads):
        new = super().update(state, grads)
        return new._replace(step=state.step + 2)


def test_an_update_that_advances_step_by_two_is_refused():
    """``update`` must advance ``step`` by one (the within-round schedule and the counter read it)."""
    with pytest.raises(ValueError, match=r"^s: _DoubleStepCount\.update must return a SolverState with step "
                                         r"advanced by one \(0 -> 1\), got 2$"):
        check_own_step("s", _DoubleStepCount(lr=0.1))


@dataclasses.dataclass(frozen=True)
class _ShortAVector(LocalSolver):
    """Plain SGD whose closed form ``a_vector`` always has one entry (numpy would broadcast it)."""

    def a_vector(self, tau):
        return np.ones(1)


def test_an_a_vector_of_the_wrong_length_is_refused_even_when_it_broadcasts():
    """SGD's a_i is [1] * tau; a_vector(2) = [1.] equals it entry by entry under broadcasting, but its
    length is 1, not tau = 2 (run_replicas reads the length)."""
    with pytest.raises(ValueError, match=r"^s: _ShortAVector\.a_vector\(2\) is \[1\.0\] \(shape \(1,\)\), but its "
                                         r"step gives a_i = \[1\.0, 1\.0\] \(length 2\)$"):
        check_own_step("s", _ShortAVector(lr=0.1))


@dataclasses.dataclass(frozen=True)
class _CounterOffByPpm(LocalSolver):
    """LocalSolver's step with a counter 1 ppm too large at every step."""

    def counter_step(self, k, counter):
        a, u = super().counter_step(k, counter)
        return (a * (1 + 1e-6), u)


def test_a_counter_one_ppm_off_is_refused():
    """The probe's tolerance is a relative 1e-9: after one SGD step the counter says 1.000001, the step
    moved by exactly 1."""
    with pytest.raises(ValueError, match=r"^s: _CounterOffByPpm reports \|\|a_i\|\|_1 = 1\.000001 after 1 step"):
        check_own_step("s", _CounterOffByPpm(lr=0.1))


@dataclasses.dataclass(frozen=True)
class _FasterFromStep3(LocalSolver):
    """Doubles the gradient from local step 2 on (a warm-up the counter does not know of)."""

    def update(self, state, grads):
        return super().update(state, grads if state.step < 2 else 2 * grads)


def test_a_step_that_departs_from_its_counter_only_after_two_steps_is_refused():
    """a_i = [1, 1, 2, 2, 2] after 5 steps (sum 8) while the inherited counter says 5; after 1 or 2 steps
    both are [1] / [1, 1]. The probe at tau = 5 catches it."""
    state = _FasterFromStep3(lr=0.5).init(np.zeros(2))
    for k in range(2):
        state = _FasterFromStep3(lr=0.5).update(state, np.eye(2)[k])
    assert state.a_norm == 2.0 and np.array_equal(state.params, [-0.5, -0.5])  # tau = 2: consistent
    with pytest.raises(ValueError, match=r"^s: _FasterFromStep3 reports \|\|a_i\|\|_1 = 5\.0 after 5 step\(s\), but "
                                         r"its update moves a unit-gradient probe by a_i = \[1\.0, 1\.0, 2\.0, 2\.0, "
                                         r"2\.0\] \(sum 8\.0\)"):
        check_own_step("s", _FasterFromStep3(lr=0.5))


# ---------------------------------------------------------------- checkpoint: the parts' types
def _rewritten_checkpoint(tmp_path, **change):
    """A checkpoint saved by save_checkpoint, then re-pickled by hand with ``change`` (no footer: read
    unchecked, as a file written before the footer existed)."""
    from fedlib.checkpoint import load_checkpoint, save_checkpoint

    path = save_checkpoint(tmp_path / "c.ckpt", config={"a": 1}, round_done=2, state={"x": np.zeros(2)},
                           history=[{"round": 0}, {"round": 1}], seed=0)
    doc = load_checkpoint(path)
    doc.update(change)
    path.write_bytes(pickle.dumps(doc, protocol=4))
    return path


def test_a_footerless_checkpoint_without_changes_loads(tmp_path):
    from fedlib.checkpoint import load_checkpoint

    doc = load_checkpoint(_rewritten_checkpoint(tmp_path))
    assert doc["round"] == 2 and doc["extra"] == {} and doc["config"] == {"a": 1}


def test_a_checkpoint_with_round_minus_one_is_refused(tmp_path):
    from fedlib.checkpoint import CheckpointError, load_checkpoint

    path = _rewritten_checkpoint(tmp_path, round=-1)
    with pytest.raises(CheckpointError, match=r"is corrupt: round -1 < 0$") as info:
        load_checkpoint(path)
    assert info.value.reason == "corrupt: round -1 < 0"


@pytest.mark.parametrize("part, value, got, want", [
    ("round", True, "bool", "int"),   # a bool is an int to isinstance, not a round count
    ("extra", [], "list", "Mapping"),
    ("config", [("a", 1)], "list", "Mapping"),
    ("history", {}, "dict", "list"),
])
def test_a_checkpoint_part_of_the_wrong_type_is_refused(tmp_path, part, value, got, want):
    from fedlib.checkpoint import CheckpointError, load_checkpoint

    path = _rewritten_checkpoint(tmp_path, **{part: value})
    with pytest.raises(CheckpointError) as info:
        load_checkpoint(path)
    assert info.value.reason == f"corrupt: its {part!r} is a {got}, not a {want}"


def test_a_file_that_is_only_a_footer_fails_its_sha256(tmp_path):
    """A footer whose digest is not that of the (empty) pickle before it is a SHA-256 mismatch: the
    check runs whenever the file ends in a footer, the shortest such file included."""
    from fedlib.checkpoint import FOOTER, CheckpointError, load_checkpoint

    path = tmp_path / "f.ckpt"
    path.write_bytes(FOOTER + hashlib.sha256(b"not empty").hexdigest().encode("ascii"))
    with pytest.raises(CheckpointError, match="is corrupt: its SHA-256 does not match") as info:
        load_checkpoint(path)
    assert info.value.reason.startswith("corrupt: its SHA-256 footer does not match")


# ---------------------------------------------------------------- sampling: a sampler's Participation
def _own(clients, weights):
    from fedlib.sampling import Participation

    return lambda t: Participation(np.asarray(clients), np.asarray(weights, dtype=float))


def test_a_sampler_naming_a_negative_client_is_refused():
    """Client -1 would index p[-1], the last client, without a word."""
    from fedlib.sampling import round_participation

    with pytest.raises(ValueError, match=r"^sampling\(0\): clients must lie in 0\.\.2 \(p has 3 clients\), got \[-1, 1\]$"):
        round_participation(_own([-1, 1], [0.5, 0.5]), np.full(3, 1 / 3), None, 0, 0)


def test_a_sampler_with_no_client_is_refused_by_name():
    from fedlib.sampling import round_participation

    with pytest.raises(ValueError, match=r"^sampling\(4\) must name at least one client by integer index, got "
                                         r"clients \[\]$"):
        round_participation(_own(np.zeros(0, dtype=np.int64), []), np.full(3, 1 / 3), None, 0, 4)


def test_a_sampler_whose_weights_sum_to_zero_is_refused():
    from fedlib.sampling import round_participation

    with pytest.raises(ValueError, match=r"^sampling\(0\): weights must be finite and >= 0 with a positive sum, "
                                         r"got \[0\.0, 0\.0\]$"):
        round_participation(_own([0, 2], [0.0, 0.0]), np.full(3, 1 / 3), None, 0, 0)


def test_a_sampler_may_give_one_participant_weight_zero():
    """omega_i >= 0 (documented): a participant of weight 0 is allowed, as sample_uniform gives a
    client with p_i = 0."""
    from fedlib.sampling import round_participation

    part = round_participation(_own([0, 2], [0.0, 1.5]), np.array([0.0, 0.5, 0.5]), None, 0, 0)
    assert part.clients.tolist() == [0, 2] and part.weights.tolist() == [0.0, 1.5]


# ---------------------------------------------------------------- results: summary against history
def test_a_summary_final_value_of_no_history_field_is_not_checked():
    """summary.final_<field> is compared with the last record's <field> where the record has one; a
    summary value of another name (here final_wall_s) is kept, not a KeyError."""
    from fedlib.results import make_provenance, make_result, validate_result

    history = [{"round": t, "train_loss": 1.0 / (t + 1), "test_accuracy": None, "tau_eff": 2.0, "chi2": 0.0,
                "local_steps": [2, 2]} for t in range(2)]
    res = make_result({"rounds": 2}, history, make_provenance(0.0, 1.0),
                      summary={"final_train_loss": 0.5, "final_wall_s": 3.0, "rounds": 2})
    assert validate_result(res)["summary"]["final_wall_s"] == 3.0
    res["summary"]["final_train_loss"] = 1.0  # the first record's, not the last's
    with pytest.raises(ValueError, match=r"summary\.final_train_loss is 1\.0 but the last round \(history\[1\]\)"):
        validate_result(res)


# ---------------------------------------------------------------- algorithms: server state and update
def test_a_saved_plain_tuple_is_not_the_momentum_state_the_server_keeps():
    """A tuple (buffer, count) has MomentumState's fields by position but not by name: the update reads
    state.buffer, so the saved state is refused (a plain tuple is not a MomentumState)."""
    from fedlib.algorithms import ServerState, make_algorithm, server_state_mismatch
    from fedlib.server import momentum

    alg = make_algorithm("fednova", sgd(0.1), server=momentum(0.9))
    x = np.zeros(2)
    assert server_state_mismatch(alg, ServerState(x, alg.server.init(x), None, 0)) is None
    why = server_state_mismatch(alg, ServerState(x, (np.zeros(2), 0), None, 0))
    assert why == ("the saved server optimizer state is a tuple, but the algorithm's server optimizer keeps a "
                   "MomentumState ('momentum'; written with another server optimizer?)")


def _server(update):
    from fedlib.server import ServerOptimizer, plain

    return ServerOptimizer(plain().init, update, "mine")


def test_a_server_update_returning_three_values_is_refused_by_name():
    from fedlib.algorithms import ServerState, apply_server_optimizer

    server = _server(lambda change, state, params, lr: (params + change, state, 0))
    x = np.zeros(2)
    with pytest.raises(ValueError, match=r"^server optimizer 'mine': update\(change, state, params, lr\) must return "
                                         r"\(new_params, new_state\), got tuple$"):
        apply_server_optimizer(server, np.ones(2), ServerState(x, server.init(x), None, 0), 1.0)


def test_a_server_update_returning_torch_params_for_numpy_ones_is_refused():
    """Same shapes, another array kind: every later numpy + torch sum would fail deep in a round."""
    import torch

    from fedlib.algorithms import ServerState, apply_server_optimizer

    server = _server(lambda change, state, params, lr: (torch.as_tensor(params + change), state))
    x = np.zeros(2)
    with pytest.raises(ValueError, match=r"^server optimizer 'mine': update must return \(new_params, new_state\) "
                                         r"with new_params of the structure and leaf shapes of state\.params \(and its "
                                         r"array kind\)"):
        apply_server_optimizer(server, np.ones(2), ServerState(x, server.init(x), None, 0), 1.0)
    ok = _server(lambda change, state, params, lr: (params + change, state))
    new, _ = apply_server_optimizer(ok, np.ones(2), ServerState(x, ok.init(x), None, 0), 1.0)
    assert new.tolist() == [1.0, 1.0]


# ---------------------------------------------------------------- synthetic: class scores that overflow
def test_synthetic_refuses_beta_whose_inputs_fit_but_class_scores_overflow():
    """One client, d = 1, C = 2, alpha = 0, seed 19: the stream (19, "data", 0) draws Z0 (u = 0 Z0), Z1
    (B = beta Z1), Z2, Z3 (W = [Z2, Z3]), Z4, Z5 (b), Z6 (v), Z7, Z8 (x). With beta = 1.2e308,
    x_i = beta Z1 + O(1) ~ 1.43e308 is finite, but x_i Z3 (|Z3| = 1.64) passes the largest double:
    a class score is -inf and the labels would be an argmax over it."""
    from fedlib.data.synthetic import synthetic
    from fedlib.rng import generator

    z = generator(19, "data", 0).standard_normal(9)
    top = np.finfo(np.float64).max
    x_max = 1.2e308 * z[1] + z[6] + max(z[7], z[8])
    assert 0 < x_max < top and top / abs(z[3]) < 1.2e308 * z[1] - 10  # the inputs fit, a score does not
    with np.errstate(all="raise"):
        with pytest.raises(ValueError, match=r"^alpha=0\.0, beta=1\.2e\+308 are too large: client 0's class scores "
                                             r"x\^T W_k \+ b_k .* overflow float64 \(inf or NaN\)"):
            synthetic(0.0, 1.2e308, num_clients=1, dim=1, num_classes=2, seed=19, num_samples=2)


# ---------------------------------------------------------------- theory: App. G's conditions
def test_appg_first_condition_holds_at_equality():
    """eta L <= 1/(2 tau_eff): with tau_eff = 2, L = 1, eta = 1/4, 2 tau_eff eta L = 1 exactly: met."""
    from fedlib.theory import appg_step_conditions

    c = appg_step_conditions(0.25, 1.0, 1.0, 1, 2.0, [[1.0]])
    assert c.first == 1.0 and c.first_holds
    assert c.second == 6.0 and not c.second_holds  # 6 * 2 * 0.25 * (1 + 1/1) = 6 > 1/2
    assert not appg_step_conditions(0.25 * (1 + 1e-9), 1.0, 1.0, 1, 2.0, [[1.0]]).first_holds


@pytest.mark.parametrize("value", ["ab", b"\x01\x02"])
def test_appg_refuses_a_string_of_a_vectors_by_name(value):
    """A str or bytes is iterable (bytes into small integers) but is not one vector per client."""
    from fedlib.theory import appg_max_lr

    with pytest.raises(ValueError, match=r"^a_vectors must be a sequence of one vector per client, got "):
        appg_max_lr(1.0, 1.0, 1, 1.0, value)


def test_chapter8_conditions_use_the_problems_own_weights_p():
    """beta^2 of Assumption 3 is for the weights p of the problem (sum_i p_i H_i^2 <= beta^2 H~^2, H~ =
    sum_i p_i H_i): with p = (0.1, 0.2, 0.3, 0.4) it is not the uniform weights' value. Computed here as
    the largest generalised eigenvalue of (sum p H^2, H~^2) (positive definite H_i), and tau_eff as
    sum_i p_i E||a_i||_1 over client i's tau range and the four solvers."""
    import scipy.linalg

    from fedlib.experiments import speedup as S
    from fedlib.problems.quadratic import QuadraticProblem

    base, work = S.base_setup(seed=0, dim=3)
    p = np.array([0.1, 0.2, 0.3, 0.4])
    problem = QuadraticProblem(base.H, base.e, p)

    def beta2_of(w):
        h = np.einsum("i,ijk->jk", w, base.H)
        h2 = np.einsum("i,ijk,ikl->jl", w, base.H, base.H)
        return max(1.0, scipy.linalg.eigh(h2, h @ h, eigvals_only=True).max())

    assert abs(beta2_of(p) - beta2_of(np.full(4, 0.25))) > 1e-3  # the weights matter here
    solvers = S.make_solvers(0.01)
    got = S.sampling_step_conditions(problem, work, solvers, 4)
    assert got.beta2 == pytest.approx(beta2_of(p), rel=1e-10)
    means = [np.mean([s.a_vector(t).sum() for s in solvers for t in range(lo, hi + 1)])
             for lo, hi in zip(work.low, work.high)]
    assert got.tau_eff == pytest.approx(float(p @ np.array(means)), rel=1e-12)


# ---------------------------------------------------------------- anatomy: chapter 1's solver family
def test_chapter1_solver_family_gives_every_solver_the_weight_decay():
    """weight_decay is part of G_i for every solver of the family (chapter 1 compares them at one lambda):
    each of the five has it, with lr = 0.05, mu = alpha / lr = 1 (prox), rho = 0.9 (momentum)."""
    from fedlib import anatomy

    family = anatomy.solver_family(0.05, 0.9, 0.05, 0.95, weight_decay=1e-3)
    assert {name: s.weight_decay for name, s in family.items()} == dict.fromkeys(family, 1e-3)
    assert {name: s.lr for name, s in family.items()} == dict.fromkeys(family, 0.05)
    assert [family[n].momentum for n in family] == [0.0, 0.0, 0.0, 0.9, 0.9]
    assert [family[n].mu for n in family] == [0.0, 0.0, 0.05 / 0.05, 0.0, 0.05 / 0.05]
    assert family["decayed SGD"].step_size(2) == pytest.approx(0.05 * 0.95 ** 2, rel=1e-15)


def test_a_checkpoint_path_that_cannot_be_read_is_a_checkpoint_error(tmp_path):
    """A folder given as the checkpoint (IsADirectoryError, an OSError): a CheckpointError naming the file,
    not a traceback."""
    from fedlib.checkpoint import CheckpointError, load_checkpoint

    folder = tmp_path / "ck"
    folder.mkdir()
    with pytest.raises(CheckpointError, match=rf"^--resume: checkpoint {folder} cannot be read \(") as info:
        load_checkpoint(folder)
    assert info.value.reason.startswith("unreadable (")


def test_check_sampling_prefixes_the_scheme_name_with_where():
    """The stacked engine checks runs[r].sampling: an unknown scheme is named with its run."""
    from fedlib.sampling import check_sampling

    with pytest.raises(ValueError, match=r"^runs\[2\]\.sampling must be one of \['full', 'uniform', "
                                         r"'with-replacement'\], got 'bogus'$"):
        check_sampling("bogus", None, where="runs[2].")
    assert check_sampling("uniform", 3, where="runs[2].") is None
    assert check_sampling(lambda t: None, None) is None


@dataclasses.dataclass(frozen=True)
class _TorchOnlyInit(LocalSolver):
    """An ``init`` written with a tensor-only method (``Tensor.clone``)."""

    def init(self, params, correction=None):
        return super().init(params.clone(), correction)


def test_a_torch_only_init_is_refused_naming_it_and_the_numpy_probe():
    """The probe starts every tau with init(np.zeros(tau)): numpy has no .clone(), and the refusal names
    the class and the method (init), the AttributeError chained as its cause."""
    with pytest.raises(ValueError, match=r"^solver: _TorchOnlyInit\.init raised AttributeError.*probe runs on numpy "
                                         r"float64 vectors \(here of length 1\)") as info:
        check_own_step("solver", _TorchOnlyInit(lr=0.1))
    assert isinstance(info.value.__cause__, AttributeError)
