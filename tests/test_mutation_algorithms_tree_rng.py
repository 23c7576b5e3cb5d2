"""Tests written against surviving mutants of fedlib.algorithms, fedlib.tree and fedlib.rng.

Every expected number is worked out by hand from the paper's update rule (eq. 4, §5,
App. B/G) or from a docstring; none is a frozen output.

Mutants of 677635c..166b66c, tree_index (fedlib/tree.py) (pass described in tests/README.md, Mutation passes):
  T7 remove the check, T8 slice off the fast path: killed by the suite;
  T2 a torch bool mask refused, T3 any torch tensor accepted (a float one too), T5 a numpy bool mask refused,
  T6 an unsigned index array refused: killed here;
  T1 ``np.integer`` off the fast path (np.asarray gives kind 'i'/'u': accepted), T4 drop ``i is not None``
  (np.asarray(None) has dtype object: refused with the same message): equivalent.

Mutants of 8bd9827.., ``fedlib.algorithms`` (server_state_mismatch, apply_server_optimizer) (pass described in
tests/README.md, Mutation passes).

Review and mutants of efe3bcd..52ae29d, fedlib/tree.py and fedlib/algorithms.py (pass described in tests/README.md,
Mutation passes):
Review fixes (their tests first): tree_index let a 0-d bool array or tensor through; check_client_indices took a
bool next to integers ([0, True] is the integer array [0, 1]) as client 1.
  T1-T2 tree_index: np.bool_ dropped; the ndim == 0 condition dropped (refusing a bool mask).
  A1-A18 algorithms: check_client_indices kinds "iub", size test dropped, num_clients unchecked / minimum 0,
        bad entry = the whole input / without the bool test; client_final unchecked; apply's p check dropped;
        make_algorithm server callables / empty name; _check_state_kinds not called / never firing / no early
        return; apply_server_optimizer lr / finiteness unchecked, kind hint dropped; p checked without its size;
        server.name only truthy.
  killed here: T2 (a mutant of the review fix), A15, A16; equivalent: T1 (np.True_ is 0-d with a bool dtype: the
  new clause refuses it).

Mutants of 86c5527..90cbd4d (algorithms.py, distributed.py, tree.py) (pass described in tests/README.md, Mutation
passes):
algorithms.py, the per-client fast path (client_init / client_final):
  A1 ``type(client) is int`` -> ``isinstance`` (a bool on the fast path); A2 drop ``type(num_clients) is int`` (a
  4-field state's None); A4 ``client < num_clients`` -> ``<=``; A6 / A7 drop client_init's / client_final's client
  check; A9 drop ``type(state) is not ServerState`` (a tuple: AttributeError); A10 / A11 drop the variates / kind
  clause; A12 the condition -> ``False``; A14 drop client_final's ServerState check: killed by the suite.
  A3 ``0 <= client`` -> ``0 < client`` (client 0 off the fast path), A5 the fast path's ``return`` -> ``pass``,
  A13 client_init's condition -> ``True`` (every state through _check_state): the same answers, only slower;
  killed here by a test that the fast paths are taken (they are the commit's point: 5 % of chapter 10's time).
  A8 ``type(state) is not ServerState`` -> ``not isinstance(...)``: equivalent (a ServerState subclass then skips
  _check_state only where _check_state returns without a word: variates None for an algorithm that keeps none).
_check_state / _refuse_state / server_state_mismatch / apply / apply_server_optimizer / distributed_apply, all
  killed by the suite: S1 drop the ServerState check; S2 ``kind is not None`` -> ``is None``; S3 drop the
  ``return``; S4 drop the ControlVariates check; S5 ``kind is None`` -> ``is not None``; S6 ``!=`` -> ``==``; S7 drop
  the kind check; S8 _AGGREGATION_NAMES swapped; S9 ``ALGORITHMS[...][1]`` -> ``[0]``; S10 the raw aggregation name;
  RS1 the tuple hint for a list; RS2 drop the dict hint; RS3 drop the hint; SM1 the message's parts swapped; SM2 its
  test flipped; AP1 / AP2 apply without _check_state / _check_server_kind; ASO1 / ASO2 apply_server_optimizer
  without its ServerState / kind check; D1 / D2 distributed_apply without either check; D3 another owner named.
_kept_state_type / _check_server_kind:
  K1 the key without the model type; K2 / K3 / K6 the look-up never kept (init every round); K7 ``kinds is None``
  flipped; C2 ``is not`` -> ``is``; C4 saved / kept swapped in the message; C5 apply_server_optimizer named "the
  algorithm's": killed by the suite.
  K4 ``kept = None`` -> ``raise`` when init fails, C1 drop ``kept is not None``: killed here (a server optimizer
  whose init fails on the model is not checked). K5 ``kinds = {}`` -> ``raise`` for an init that takes no weak
  reference (``np.zeros_like``): killed here.
  C3 ``saved is not kept`` -> ``not issubclass(saved, kept)``: killed here, and it showed a bug. The check refused,
  in round 2, the state that a server optimizer of your own had returned in round 1 whenever its type was not the
  one its init made (``None`` until the first update makes a buffer; a ``float`` that becomes a ``numpy.float64``):
  'its server optimizer state (state.server) is a ndarray, but the algorithm's server optimizer keeps a NoneType'.
  Fixed: only fedlib's server states (fedlib.server's types) are told apart by type, on either side. Mutants of the
  fix: C7 only ``kept``'s module asked (a PlainState under your own server passes), C9 ``in`` -> ``not in``, C10
  another module name: killed by the suite; C6 drop the fedlib clause (the bug back), C8 only ``saved``'s module
  asked (your own state under fedlib's momentum passes): killed here.
tree.py: TI1 drop the tuple refusal: killed by the suite. TI2 ``isinstance(i, tuple)`` -> ``type(i) is tuple`` (a
  namedtuple indexes one axis per entry too): killed here. TI3 ``{i!r}`` -> ``{i}``: equivalent (``str`` of a tuple
  is its ``repr``).

Mutants of 37f92d9..d2bb791 (fedlib/algorithms.py) (pass described in tests/README.md, Mutation passes):
  killed by the suite: A1 _refuse_state without the SolverState hint; A2 / A3 _count_value takes a bool / a
  string; A4 _check_one_client without the swapped-arguments message; A5 ``np.ndim(client) != 0`` -> ``> 1``; A6
  check_own_step with ``correction=False`` (tests/test_solvers.py); A7 the server's update probed with 3
  arguments; A8 init takes params that require grad; A9 init's hint without ``__next__``; A10 client_init takes a
  solver that is no LocalSolver; A12 ``check_sequence`` -> ``list(updates)``; A13 the pair-order hint inverted; A14
  the new_state kind check dropped (tests/test_server.py); A16 _requires_grad returns leaf 0; A17 without the
  nested-tree fallback; A19 ``k < 0`` -> ``k < -1`` (tests/test_server.py).
  killed here: A11 client_final without ``callable(solver_state.step)``.
  equivalent: A15 _requires_grad's fast path for lists only: a flat tuple goes to the ``tree_leaves`` loop,
  which gives the same first index (a tuple's leaves in order); only the time differs.
  left alive: A18 _fits returns True on an exception: tree_structure_equal raises only where tree_map cannot
  rebuild a container from its entries (a torch.Size paired with a list of numbers), a server state no server
  optimizer keeps; the hint would then be added wrongly. No test.

Review and mutants of f9b9704..2e0d04d (fedlib/algorithms.py: _note_server_kind, _run_server_optimizer's try/except)
(pass described in tests/README.md, Mutation passes):
  review fix (4da0855, its test in tests/test_extensions.py): the note was added where an own state changed type as
  allowed (a float that becomes a numpy.float64); now only where both types are state classes (NamedTuples).
  A1 ``saved is kept`` -> ``is not``; A2 drop the ``saved`` NamedTuple test; A3 drop the ``kept`` NamedTuple test;
  A4 drop ``kept is None``; A5 ``except Exception`` -> ``except AttributeError``; A6 ``raise`` -> ``raise exc from
  None``; A7 the two classes swapped in the note; A8 the server named by repr, not its name; A9 return before the
  note. killed by the suite: A1, A3, A9. killed here: A2, A5, A7, A8. equivalent: A4 (None has no ``_fields``: the
  NamedTuple test returns for it too); A6 (the update's exception was raised outside any handler: no context to
  suppress, the same object with its note is raised).

Mutants of 2e0d04d..fb2fbe6 (fedlib/rng.py: torch_generator's device) (pass described in tests/README.md, Mutation
passes): R1 a TypeError re-raised as torch's; R2 every error relabelled "not a torch device"; R3 only a TypeError
caught. killed by the suite: R3. killed here: R1, R2.

Mutants of 41ab8e8..3aae5f7 (fedlib/algorithms.py, eb26f0b: ``_non_finite_changes``, apply's list of the clients
whose change is not finite) (pass described in tests/README.md, Mutation passes): 5 mutants (ids as drafted: gaps
are drafts not run), one at a time, ``pytest -x -q`` on test_algorithms.py, this file and test_state_checks.py;
survivors re-run against test_mutation_batched_reference.py, test_mutation_stacked.py, test_custom_model.py and
test_mutation_quadratic_custom.py: 2 killed by the suite, 3 here, 0 equivalent.
  NF1 seven clients listed (``bad[:7]``); NF2 ", ..." from ten bad clients on (``> 9``); NF3 the ``if not bad``
  branch dropped (an overflowing sum of finite changes named "0 of the 4"); NF5 the participants counted as the bad
  ones; NF6 no ", ...". killed by the suite: NF3, NF5. killed here: NF1, NF2, NF6
  (test_apply_lists_at_most_eight_clients_whose_change_is_not_finite).
"""
from __future__ import annotations

import ast
import collections
import dataclasses
import pathlib
from typing import NamedTuple

import numpy as np
import pytest
import torch

import fedlib
import fedlib.algorithms as algorithms
from fedlib import algorithms as AL
from fedlib import rng
from fedlib import tree as T
from fedlib.algorithms import ClientUpdate, ServerState, make_algorithm
from fedlib.sampling import Participation, full_participation
from fedlib.server import ServerOptimizer, momentum
from fedlib.solvers import proximal_sgd, sgd
from fedlib.tree import tree_index


def _run_clients(algo, state, steps, grads, solver=None):
    """client_init -> tau_i steps with a constant gradient -> client_final, for clients 0..len(steps)-1."""
    solver = solver or algo.solver
    ups = []
    for i, tau in enumerate(steps):
        s = algo.client_init(state, i, solver)
        for _ in range(tau):
            s = solver.update(s, grads[i])
        ups.append(algo.client_final(state, i, s))
    return ups


# =============================================================== algorithms
def test_client_index_range_is_0_to_m_minus_1():
    """check_client_indices: every index must lie in 0..m-1 (docstring); m-1 is fine, m is not."""
    algo = AL.make_algorithm("fedavg", sgd(0.1))
    state = algo.init(np.zeros(2), 3)
    algo.client_init(state, 2)                              # last valid index
    for bad in (3, -1):
        with pytest.raises(ValueError, match=rf"client {bad} is not one of the 3 clients given to init \(indices 0\.\.2\)"):
            algo.client_init(state, bad)
    with pytest.raises(ValueError, match=r"client 4 is not one of the 3 clients"):
        AL.check_client_indices([1, 4], 3)               # the first bad index is named
    AL.check_client_indices(np.array([[0, 2], [1, 1]]), 3)  # any array shape of valid indices


def test_state_without_num_clients_is_not_checked():
    """ServerState docstring: a state built by hand has num_clients None and indices are not checked."""
    algo = AL.make_algorithm("fedavg", sgd(0.1))
    x0 = np.array([1.0, -1.0])
    state = AL.ServerState(x0, algo.server.init(x0), None, 0)
    assert state.num_clients is None
    AL.check_client_indices([7, -3], None)
    s = algo.solver.update(algo.client_init(state, 7), np.ones(2))
    u = algo.client_final(state, 7, s)
    new, _ = algo.apply(state, Participation(np.array([7]), np.array([1.0])), [u], 0.1)
    np.testing.assert_allclose(new.params, x0 - 0.1, atol=1e-15)
    assert new.num_clients is None and new.round == 1


def test_federated_algorithm_default_tau_eff_is_fednova_default():
    """FederatedAlgorithm built directly: tau_eff defaults to None, i.e. sum_i p_i ||a_i||_1 (§5)."""
    assert AL.FederatedAlgorithm("fedavg", sgd(0.1)).tau_eff is None
    algo = AL.FederatedAlgorithm("fednova", sgd(0.1))
    assert algo.tau_eff is None and algo.server.name == "plain"
    p = np.array([0.5, 0.5])
    state = algo.init(np.array([1.0, -1.0]), 2)
    ups = _run_clients(algo, state, [1, 3], [np.array([1.0, 0.0]), np.array([0.0, 1.0])])
    new, diag = algo.apply(state, full_participation(p), ups, 0.1)
    assert diag.tau_eff == pytest.approx(0.5 * 1 + 0.5 * 3)
    np.testing.assert_allclose(new.params - state.params, [-0.1, -0.1], atol=1e-15)  # 2 * 0.1 * (g1 + g2)/2


def test_algorithm_is_immutable_so_validation_cannot_be_bypassed():
    algo = AL.make_algorithm("fednova", sgd(0.1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        algo.tau_eff = -1.0


def test_client_init_uses_the_solver_passed_in():
    """A per-client solver (here FedProx's, alpha = eta*mu = 0.1) replaces the algorithm's: two steps on a
    constant g give Delta = -eta (2 - alpha) g and ||a||_1 = (1 - (1-alpha)^2)/alpha = 1.9 (App. B.1)."""
    algo = AL.make_algorithm("fedavg", sgd(0.1))
    state = algo.init(np.zeros(2), 1)
    prox = proximal_sgd(0.1, 1.0)
    (u,) = _run_clients(algo, state, [2], [np.array([1.0, -2.0])], solver=prox)
    np.testing.assert_allclose(u.delta, -0.1 * 1.9 * np.array([1.0, -2.0]), rtol=1e-14)
    assert u.a_norm == pytest.approx(1.9, rel=1e-14) and u.local_steps == 2


def test_single_client_round():
    """m = 1 is allowed; with one client FedAvg and FedNova both apply its own change."""
    for name in ("fedavg", "fednova"):
        algo = AL.make_algorithm(name, sgd(0.1))
        state = algo.init(np.zeros(1), 1)
        (u,) = _run_clients(algo, state, [4], [np.array([2.0])])
        new, diag = algo.apply(state, full_participation([1.0]), [u], 0.1)
        np.testing.assert_allclose(new.params, [-0.8], rtol=1e-14)
        assert diag.tau_eff == pytest.approx(4.0) and diag.chi2 == 0.0


def test_sampled_fednova_round_by_hand():
    """Uniform sampling of clients {1, 3} of p = (.1,.2,.3,.4), q = 2: omega = p m/q = (.4, .8) (App. G).
    FedNova: w = omega, tau_eff = sum omega ||a||_1 = .4*2 + .8*5 = 4.8, change = -tau_eff eta sum omega d
    = -4.8 * .1 * (.4 + .8) * 1 = -.576; normalised omega and w coincide, so chi2 = 0."""
    algo = AL.make_algorithm("fednova", sgd(0.1))
    state = algo.init(np.zeros(1), 4)
    part = Participation(np.array([1, 3]), np.array([0.4, 0.8]))
    ups = [AL.ClientUpdate(1, np.array([-0.2]), 2.0, 2), AL.ClientUpdate(3, np.array([-0.5]), 5.0, 5)]
    new, diag = algo.apply(state, part, ups, 0.1)
    np.testing.assert_allclose(new.params, [-0.576], rtol=1e-14)
    assert diag.tau_eff == pytest.approx(4.8)
    np.testing.assert_allclose(diag.weights, [0.4, 0.8])
    assert diag.chi2 == pytest.approx(0.0, abs=1e-15)


def test_vrlsgd_aggregates_like_fedavg():
    """VRLSGD uses FedAvg's aggregation (module table); round 0 has zero variates, so the change is
    sum_i p_i Delta_i = .25*(-.1, 0) + .75*(0, -.3)."""
    algo = AL.make_algorithm("vrlsgd", sgd(0.1))
    assert (algo.aggregation, algo.variance) == ("fedavg", "vrlsgd")
    p = np.array([0.25, 0.75])
    state = algo.init(np.zeros(2), 2)
    ups = _run_clients(algo, state, [1, 3], [np.array([1.0, 0.0]), np.array([0.0, 1.0])])
    new, diag = algo.apply(state, full_participation(p), ups, 0.1, p)
    np.testing.assert_allclose(new.params, [-0.025, -0.225], atol=1e-15)
    assert diag.tau_eff == pytest.approx(0.25 * 1 + 0.75 * 3) and new.variates is not None


def test_error_messages_start_with_the_parameter_name():
    """fedlib._validate: every message starts with the name of the offending parameter."""
    with pytest.raises(ValueError, match="^algorithm must be one of"):
        AL.FederatedAlgorithm("fedsgd", sgd(0.1))
    algo = AL.make_algorithm("fedavg", sgd(0.1))
    with pytest.raises(ValueError, match="^num_clients must"):
        algo.init(np.zeros(2), 0)
    state = algo.init(np.zeros(1), 1)
    (u,) = _run_clients(algo, state, [1], [np.ones(1)])
    for lr in (0.0, -0.1, float("nan")):   # lr is checked even where no variate needs it
        with pytest.raises(ValueError, match="^lr must"):
            algo.apply(state, full_participation([1.0]), [u], lr)
    with pytest.raises(ValueError, match="^seed must"):
        rng.generator(-1, "data")
    with pytest.raises(ValueError, match="^key must"):
        rng.generator(0, "data", 2, -1)
    for purpose in ("", 3, None):
        with pytest.raises(ValueError, match="^purpose must"):
            rng.generator(0, purpose)


# =============================================================== rng
def test_torch_seed_uses_more_than_32_bits():
    """Per-(round, client) streams number in the 10^5s; a 32-bit torch seed would make birthday
    collisions between them likely (REFERENCE §5), so the seed must carry more bits."""
    seeds = [rng.torch_generator(0, "augment", t, c).initial_seed() for t in range(20) for c in range(10)]
    assert len(set(seeds)) == len(seeds)
    assert max(seeds) >= 2 ** 40


def _purposes_used_in_fedlib() -> set:
    """String purposes passed to fedlib.rng (literal second argument, or a ``purpose=`` default)."""
    used = set()
    for path in pathlib.Path(fedlib.__file__).parent.rglob("*.py"):
        text = path.read_text()
        if path.name == "rng.py" or not any(k in text for k in ("generator(", "_stream(", "seed_sequence(", "purpose")):
            continue
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                    and isinstance(node.args[1].value, str):
                f = node.func
                name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
                if name in ("generator", "torch_generator", "seed_sequence", "_stream"):
                    used.add(node.args[1].value)
            if isinstance(node, ast.FunctionDef):
                args = node.args.args[-len(node.args.defaults):] if node.args.defaults else []
                for a, d in zip(args, node.args.defaults):
                    if a.arg == "purpose" and isinstance(d, ast.Constant):
                        used.add(d.value)
    return used


def test_purposes_lists_the_purposes_fedlib_uses():
    assert set(rng.PURPOSES) == _purposes_used_in_fedlib()


# =============================================================== tree
def test_tree_map_dict_against_sequence_is_a_structure_error():
    for a, b in (({"a": 1.0, "b": 2.0}, [1.0, 2.0]), ([1.0, 2.0], {"a": 1.0, "b": 2.0})):
        with pytest.raises(ValueError, match="tree structures differ"):
            T.tree_map(lambda x, y: x + y, a, b)
        assert T.tree_structure_equal(a, b) is False
    assert T.tree_structure_equal({"a": np.zeros(2)}, {"a": np.zeros(3)}) is False
    assert T.tree_structure_equal({"a": np.zeros(2)}, {"a": np.ones(2)}) is True


def test_all_finite_returns_bools():
    assert T.tree_all_finite([np.ones(2), torch.ones(2)]) is True
    assert T.tree_all_finite([np.ones(2), np.array([np.inf])]) is False
    assert T.tree_all_finite({"w": torch.tensor([0.0, float("nan")])}) is False


def test_weighted_sum_unit_coefficient_on_a_later_tree():
    """0.5 * a + 1.0 * b with a = (2, 4), b = (1, -1) is (2, 1)."""
    for lib in (np.array, torch.tensor):
        out = T.tree_weighted_sum([{"w": lib([2.0, 4.0])}, {"w": lib([1.0, -1.0])}], [0.5, 1.0])
        np.testing.assert_array_equal(np.asarray(out["w"]), [2.0, 1.0])


def test_weighted_sum_keeps_float32_with_numpy_coefficients():
    """Coefficients may be numpy floats (docstring): a float32 model stays float32, as with Python floats and torch."""
    trees = [np.ones(3, dtype=np.float32), np.full(3, 2.0, dtype=np.float32)]
    out = T.tree_weighted_sum(trees, np.array([0.5, 0.25]))
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.ones(3, dtype=np.float32))


def test_weighted_sum_refuses_mixed_numpy_and_torch_leaves():
    with pytest.raises(ValueError, match=r"leaf of tree 1 is a torch tensor, tree 0's is a numpy array"):
        T.tree_weighted_sum([np.zeros(2), torch.zeros(2)], [1.0, 1.0])
    with pytest.raises(ValueError, match=r"leaf of tree 2 is a numpy array, tree 0's is a torch tensor"):
        T.tree_weighted_sum([torch.zeros(2), torch.zeros(2), np.zeros(2)], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"leaf of tree 2 has shape \(1,\), tree 0 has \(3,\)"):
        T.tree_weighted_sum([np.zeros(3), np.zeros(3), np.zeros(1)], [1.0, 1.0, 1.0])


def test_vdot_and_norm_on_torch_leaves():
    """<a, b> with a = (1, 2, 3), b = (4, -5, 6): 4 - 10 + 18 = 12; ||a|| = sqrt(14); also for tensors
    that require grad (model parameters)."""
    a = {"w": torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True), "b": torch.tensor([3.0], dtype=torch.float64)}
    b = {"w": torch.tensor([4.0, -5.0], dtype=torch.float64), "b": torch.tensor([6.0], dtype=torch.float64)}
    assert T.tree_vdot(a, b) == pytest.approx(12.0, abs=1e-12)
    assert T.tree_norm(a) == pytest.approx(np.sqrt(14.0), abs=1e-12)


def test_stack_and_stacked_sum_keep_torch_tensors():
    trees = [{"w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([3.0, -1.0])}]
    st = T.tree_stack(trees)
    assert isinstance(st["w"], torch.Tensor) and st["w"].shape == (2, 2) and st["w"].dtype == torch.float32
    out = T.tree_stacked_weighted_sum(st, [0.5, 2.0])          # .5*(1, 2) + 2*(3, -1) = (6.5, -1)
    assert isinstance(out["w"], torch.Tensor) and out["w"].dtype == torch.float32
    np.testing.assert_allclose(out["w"].numpy(), [6.5, -1.0], rtol=1e-6)
    one = T.tree_stack([{"w": torch.tensor([1.0])}])           # a single tree stacks too
    assert isinstance(one["w"], torch.Tensor) and one["w"].shape == (1, 1)
    assert T.tree_stack([np.zeros(2)]).shape == (1, 2)
    with pytest.raises(ValueError, match="leading size 3 but there are 2 coefficients"):
        T.tree_stacked_weighted_sum(np.zeros(3), [1.0, 2.0])


def test_copy_keeps_torch_tensors():
    t = {"w": torch.tensor([1.0, 2.0], dtype=torch.float64)}
    c = T.tree_copy(t)
    assert isinstance(c["w"], torch.Tensor) and c["w"].dtype == torch.float64
    c["w"][0] = 5.0
    assert t["w"][0] == 1.0


def test_vdot_pairs_leaves_like_tree_map():
    assert T.tree_vdot({"a": 1.0, "b": 2.0}, {"b": 2.0, "a": 1.0}) == 5.0   # position pairing gives 4.0
    with pytest.raises(ValueError):
        T.tree_vdot([np.ones(2)], [np.ones(2), np.ones(3)])               # zip drops the second leaf
    with pytest.raises(ValueError):
        T.tree_vdot(torch.ones(3), torch.ones(1))                          # broadcast: 3.0


# ------------------------------------------------------------------- tree_index: mutants of 677635c..166b66c
LEAVES = [np.arange(6.0).reshape(3, 2), torch.arange(6.0).reshape(3, 2)]


@pytest.mark.parametrize("leaf", LEAVES)
@pytest.mark.parametrize("mask", [np.array([True, False, True]), torch.tensor([True, False, True])])
def test_tree_index_takes_a_boolean_mask(leaf, mask):  # T2 (torch mask), T5 (numpy mask)
    rows = tree_index({"w": leaf}, mask)["w"]
    assert np.asarray(rows).tolist() == [[0.0, 1.0], [4.0, 5.0]]


def test_tree_index_takes_an_unsigned_index_array():  # T6 (numpy leaf: torch reads a uint8 index as a mask)
    leaf = np.arange(6.0).reshape(3, 2)
    assert tree_index({"w": leaf}, np.array([2, 0], dtype=np.uint8))["w"].tolist() == [[4.0, 5.0], [0.0, 1.0]]


@pytest.mark.parametrize("leaf", LEAVES)
def test_tree_index_refuses_a_float_tensor(leaf):  # T3
    with pytest.raises(ValueError, match=r"^i must be a row index \(an int, slice or index array\), got tensor"):
        tree_index({"w": leaf}, torch.tensor([0.0, 2.0]))


# ------------------------------------------------- algorithms, server state and update: mutants of 8bd9827..
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


# -------------------------------------------------------------------- review and mutants of efe3bcd..52ae29d
@pytest.mark.parametrize("index", [np.array(True), torch.tensor(True)])
def test_tree_index_refuses_a_0d_bool(index):
    # np.array(True) added an axis (shape (1, 3, 2)); torch.tensor(True) picked row 1
    stacked = {"w": np.arange(6.0).reshape(3, 2)}
    with pytest.raises(ValueError, match="i must be a row index"):
        tree_index(stacked, index)


def test_tree_index_keeps_a_bool_mask_and_integer_scalars():
    stacked = {"w": np.arange(6.0).reshape(3, 2)}
    np.testing.assert_array_equal(tree_index(stacked, np.array([True, False, True]))["w"], [[0, 1], [4, 5]])
    np.testing.assert_array_equal(tree_index(stacked, np.int64(2))["w"], [4, 5])
    np.testing.assert_array_equal(tree_index(stacked, np.array(1))["w"], [2, 3])


@pytest.mark.parametrize("clients", [[0, True], (np.True_, 1), [[0, 1], [2, False]], [True], np.array([True, False]),
                                     torch.tensor([True])])
def test_check_client_indices_refuses_a_bool_in_a_list_of_integers(clients):
    # review: np.asarray([0, True]) is the integer array [0, 1], so a bool next to integers was taken as
    # client 1 (check_client_indices([0, True], 3) passed); mutant A15 (the bool test dropped from the
    # search for the bad entry) named the whole list instead of the bool
    from fedlib.algorithms import check_client_indices

    with pytest.raises(ValueError, match=r"^client must be an integer index, got (True|False)$"):
        check_client_indices(clients, 3)
    check_client_indices([0, 2], 3)
    check_client_indices(np.array([0, 1]), 3)
    check_client_indices(torch.tensor([1, 2]), 3)


def test_apply_with_a_scalar_model_has_no_array_kind_to_compare():
    # mutant A16 (the early return of _check_state_kinds for a model without arrays): IndexError
    from fedlib.algorithms import ClientUpdate, make_algorithm
    from fedlib.sampling import full_participation
    from fedlib.solvers import sgd

    algo = make_algorithm("fedavg", sgd(0.1))
    state = algo.init(0.0, 2)
    updates = [ClientUpdate(0, -0.1, 1.0, 1), ClientUpdate(1, -0.3, 1.0, 1)]
    new, _ = algo.apply(state, full_participation([0.5, 0.5]), updates, 0.1)
    assert new.params == pytest.approx(-0.2)


# ------------------------------------------------------------------------------- mutants of 86c5527..90cbd4d
P = [0.5, 0.5]


KIND = r"^state: its server optimizer state \(state\.server\) is a "


KEEPS = ", but the algorithm's server optimizer keeps a "


UPDATES = [ClientUpdate(0, np.array([-1.0]), 1.0, 1), ClientUpdate(1, np.array([2.0]), 2.0, 2)]  # change +0.5 a round


def _rounds(algo, state, n):
    for _ in range(n):
        state, _ = algo.apply(state, full_participation(P), UPDATES, 1.0, P)
    return state


def test_client_init_and_final_take_the_fast_path_for_a_plain_int(monkeypatch):  # A3, A5, A13
    algo = make_algorithm("fedavg", sgd(0.1))
    state = algo.init(np.zeros(2), num_clients=3)

    def slow(*args, **kwargs):
        raise AssertionError("the per-client fast path was not taken")

    monkeypatch.setattr(algorithms, "check_client_indices", slow)
    monkeypatch.setattr(algorithms, "_check_state", slow)
    for client in (0, 2):
        run = algo.solver.update(algo.client_init(state, client), np.ones(2))
        assert algo.client_final(state, client, run).client == client


def test_a_server_optimizer_whose_init_fails_on_the_model_is_not_checked():  # K4, C1
    """``_kept_state_type`` is None when init fails (its problem, met where the state is built): the round runs."""
    def init(params):
        raise RuntimeError("this init takes no model")

    counting = ServerOptimizer(init, lambda change, state, params, lr: (params + change, state + 1), "counting")
    algo = make_algorithm("fedavg", sgd(1.0), counting)
    state = _rounds(algo, ServerState(np.zeros(1), 0, None, 0, 2), 2)
    assert state.server == 2 and float(state.params[0]) == 1.0


def test_a_server_optimizer_whose_init_takes_no_weak_reference_is_still_checked():  # K5
    # init: a method descriptor (the model's copy, zeros here), which takes no weak reference on every numpy and
    # Python (np.zeros_like did on numpy 2 only: on numpy 1.x it is a plain Python function)
    summing = ServerOptimizer(np.ndarray.copy, lambda change, state, params, lr: (params + change, state + change),
                              "sum")
    algo = make_algorithm("fedavg", sgd(1.0), summing)
    with pytest.raises(TypeError):  # what the look-up's cache meets: the init takes no weak reference
        algorithms._KEPT_STATE_TYPE.get(np.ndarray.copy)
    state = _rounds(algo, algo.init(np.zeros(1), num_clients=2), 2)
    assert float(state.params[0]) == 1.0 and float(state.server[0]) == 1.0
    plain_state = make_algorithm("fedavg", sgd(1.0)).init(np.zeros(1), num_clients=2)
    with pytest.raises(ValueError, match=KIND + "PlainState" + KEEPS
                                         + r"ndarray \('sum';"):
        _rounds(algo, plain_state, 1)


def _lazy_momentum(change, state, params, lr):  # the buffer is made by the first update: init returns None
    buffer = change if state is None else 0.9 * state + change
    return params + buffer, buffer


def _norm_sum(change, state, params, lr):  # init's 0.0 becomes a numpy.float64
    return params + change, state + np.abs(change).sum()


@pytest.mark.parametrize("server", [ServerOptimizer(lambda params: None, _lazy_momentum, "lazy-momentum"),
                                    ServerOptimizer(lambda params: 0.0, _norm_sum, "norm-sum")])
def test_a_server_optimizer_of_your_own_keeps_what_its_update_returns(server):  # C3 (the bug), C6
    """Was: round 2 raised "state: its server optimizer state (state.server) is a ndarray, but the algorithm's server
    optimizer keeps a NoneType" (and "a float64 ... keeps a float"): the state its own update had returned."""
    algo = make_algorithm("fedavg", sgd(1.0), server)
    state = _rounds(algo, algo.init(np.zeros(1), num_clients=2), 3)
    assert state.round == 3 and type(state.server) is not type(server.init(state.params))
    new, _ = algorithms.apply_server_optimizer(server, np.ones(1), state, 1.0)
    assert np.isfinite(new).all()


def test_fedlib_server_states_are_told_apart_on_either_side():  # C3, C7, C8
    """A server of your own whose init makes a plain tuple refuses fedlib's PlainState (a tuple subclass, C3) ...
    and fedlib's momentum refuses a state of your own (C8); a PlainState under your own server is refused (C7)."""
    plain_state = make_algorithm("fedavg", sgd(1.0)).init(np.zeros(1), num_clients=2)
    tupled = ServerOptimizer(lambda params: (), lambda c, s, p, lr: (p + c, s), "tupled")
    with pytest.raises(ValueError, match=KIND + "PlainState" + KEEPS
                                         + r"tuple \('tupled';"):
        _rounds(make_algorithm("fedavg", sgd(1.0), tupled), plain_state, 1)
    own = ServerOptimizer(lambda params: None, _lazy_momentum, "lazy-momentum")
    own_state = _rounds(make_algorithm("fedavg", sgd(1.0), own), make_algorithm("fedavg", sgd(1.0), own).init(
        np.zeros(1), num_clients=2), 1)
    with pytest.raises(ValueError, match=KIND + "ndarray" + KEEPS
                                         + r"MomentumState \('momentum';"):
        _rounds(make_algorithm("fedavg", sgd(1.0), momentum(0.9)), own_state, 1)
    with pytest.raises(ValueError, match=r"is a PlainState, but the algorithm's server optimizer keeps a NoneType"):
        _rounds(make_algorithm("fedavg", sgd(1.0), own), plain_state, 1)


def test_tree_index_refuses_a_namedtuple():  # TI2: numpy and torch read it as one index per axis as well
    Pair = collections.namedtuple("Pair", "row col")
    for leaf in (np.arange(12).reshape(3, 4), torch.arange(12).reshape(3, 4)):
        assert int(leaf[Pair(1, 2)]) == 6  # what it would have picked: one entry
        with pytest.raises(ValueError, match=r"^i must be a row index .* got the tuple Pair\(row=1, col=2\) \(one"):
            tree_index({"a": leaf}, Pair(1, 2))


# ------------------------------------------------------------------------ mutants of 37f92d9..d2bb791 (algorithms.py)
def test_client_final_names_an_optimizer_like_object_whose_step_is_a_method():
    """client_final refuses, naming ``solver_state``, an object that has ``params``, ``step`` and ``a_norm`` but whose
    ``step`` is a method (an optimizer of your own given for its state), as the docstring says; mutant A11 (without
    the ``callable(solver_state.step)`` test) let it through to ``step < 1``: Python's TypeError "'<' not supported
    between instances of 'method' and 'int'"."""
    class MyOptimizer:  # what a loop of your own may hold: the parameters, the counter, a step method
        def __init__(self, params):
            self.params, self.a_norm = params, 1.0

        def step(self):
            return None

    algo = make_algorithm("fednova", sgd(0.1))
    server = algo.init({"w": np.zeros(2)}, 2)
    with pytest.raises(ValueError, match=r"^solver_state must be the client's finished fedlib\.solvers\.SolverState "
                                         r"\(what solver\.update returned\), got MyOptimizer$"):
        algo.client_final(server, 1, MyOptimizer({"w": np.ones(2)}))
    # a SolverState-like record with a number for step is taken (the check is for methods, not for other types)
    Record = collections.namedtuple("Record", "params step a_norm correction anchor momentum_buf")
    update = algo.client_final(server, 1, Record({"w": np.ones(2)}, 2, 2.0, None, None, None))
    assert (update.client, update.local_steps, update.a_norm) == (1, 2, 2.0)
    np.testing.assert_array_equal(update.delta["w"], [1.0, 1.0])  # Delta_i = x_i^(t,tau) - x^(t,0) = 1 - 0


# ====================================================================== f9b9704..HEAD: _note_server_kind
class BufState(NamedTuple):
    """An own server optimizer's state (module level, as a checkpointed state must be)."""
    buf: object


class CountState(NamedTuple):
    """Another own server optimizer's state class."""
    count: int


def _buf_server(update):
    return ServerOptimizer(lambda params: BufState(np.zeros_like(params)), update, "buf")


def _round_on(server_state, update):
    """One FedAvg round of one client (Delta = 1) with an own server optimizer, its state replaced."""
    algo = make_algorithm("fedavg", sgd(0.1), server=_buf_server(update))
    state = algo.init(np.zeros(2), num_clients=1)._replace(server=server_state)
    return algo.apply(state, full_participation([1.0]), [ClientUpdate(0, np.ones(2), 1.0, 1)], 0.1, [1.0])


def test_the_server_kind_note_names_the_saved_class_first_and_the_server_by_name():
    """The note on an own update's error over another own state class: 'state.server is a <saved>, but server
    optimizer '<name>' makes a <init's> in its init' (the saved class first, the server optimizer by its name, not
    its repr). Kills the mutants that swap the two classes and that name the server by repr."""
    def update(change, state, params, lr=None):
        return params + state.buf + change, BufState(state.buf)   # CountState has no buf: AttributeError

    with pytest.raises(AttributeError, match="buf") as info:
        _round_on(CountState(3), update)
    assert info.value.__notes__ == [
        "fedlib: state.server is a CountState, but server optimizer 'buf' makes a BufState in its init: a state "
        "written by another server optimizer (a checkpoint of another run?) continues only under the server "
        "optimizer that wrote it"]


def test_the_server_kind_note_is_added_to_any_error_of_the_update_not_only_an_attribute_error():
    """An own update that fails on another own state class with a TypeError (here: CountState(3)[0] + an array
    works, but indexing it as a mapping does not) carries the note too: the note is for any error of update."""
    def update(change, state, params, lr=None):
        return params + state["buf"] + change, state   # a NamedTuple indexed by a string: TypeError

    with pytest.raises(TypeError) as info:
        _round_on(CountState(3), update)
    assert len(info.value.__notes__) == 1 and "is a CountState" in info.value.__notes__[0]
    # the same update on its own state class fails alike, with no note (the state is of init's type)
    with pytest.raises(TypeError) as info:
        _round_on(BufState(np.zeros(2)), update)
    assert not getattr(info.value, "__notes__", [])


def test_no_server_kind_note_where_the_state_is_no_state_class():
    """The note is added only where both types are state classes (NamedTuples): an own state that init makes as a
    BufState and that a round may hold as a plain float (a state may change type after init) gets no note on an
    update's error."""
    def update(change, state, params, lr=None):
        raise ValueError("a failure of its own")

    with pytest.raises(ValueError, match="a failure of its own") as info:
        _round_on(1.5, update)
    assert not getattr(info.value, "__notes__", [])


# ---------------------------------------------------------------- mutants of 2e0d04d..fb2fbe6 (fedlib/rng.py)
def test_torch_generator_names_a_device_of_no_device_type_and_keeps_torch_s_own_errors():
    """torch_generator's device: a value of no device type (1.5, a list: torch's TypeError) is a ValueError naming
    ``device``; a real device torch cannot give a generator for ('meta': "not an accelerator") keeps torch's own
    RuntimeError, not relabelled "not a torch device" (mutants R1 of 2e0d04d..fb2fbe6: TypeError re-raised as it came; R2:
    every error relabelled)."""
    for bad in (1.5, ["cpu"]):
        with pytest.raises(ValueError, match=r"^device: not a torch device: "):
            rng.torch_generator(0, "augment", 1, device=bad)
    with pytest.raises(RuntimeError) as info:
        rng.torch_generator(0, "augment", 1, device="meta")
    assert not isinstance(info.value, ValueError) and "not a torch device" not in str(info.value)
    assert rng.torch_generator(0, "augment", 1, device=None).device == torch.device("cpu")  # torch's default


@pytest.mark.parametrize("bad, shown", [(8, "[1, 2, 3, 4, 5, 6, 7, 8]"), (9, "[1, 2, 3, 4, 5, 6, 7, 8, ...]")])
def test_apply_lists_at_most_eight_clients_whose_change_is_not_finite(bad, shown):
    """apply's divergence message lists at most 8 of the clients whose change holds NaN or inf, with ", ..." after
    them where there are more, and counts them all: of 10 clients, 8 bad (clients 1-8) are all listed, 9 bad (1-9)
    list the first 8 and "...". Mutants: NF1 seven listed, NF2 "..." from 10 on, NF6 no "..."."""
    algo = make_algorithm("fednova", sgd(0.1))
    p = np.full(10, 0.1)
    ups = [ClientUpdate(i, np.array([np.nan]) if 1 <= i <= bad else np.zeros(1), 1.0, 1) for i in range(10)]
    with pytest.raises(FloatingPointError) as info:
        algo.apply(algo.init(np.zeros(1), num_clients=10), full_participation(p), ups, 0.1, p)
    assert str(info.value) == (f"round 0: the aggregated update is not finite (diverged): the change of {bad} of "
                               f"the 10 participating clients, {shown}, holds NaN or inf (NaN or inf in their data "
                               "or loss, or a learning rate too large for them)")
