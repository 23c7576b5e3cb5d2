"""Review and hand mutation test of the library changes of efe3bcd..52ae29d (Dec 4 input checks).

Review fixes (tests first in this file): round_lr took np.True_ / np.array(True) / torch.tensor(True) as lr 1.0;
tree_index let a 0-d bool array or tensor through; check_client_indices and as_participation took a bool next
to integers ([0, True] is the integer array [0, 1]) as client 1.

112 hand mutants, each applied alone to a copy of the tree, run against tests/test_mutation_dec4f.py,
test_bad_input_dec4.py, test_user_journey_dec4.py, test_mutation_dec4d/e.py, the module's own test files and
its doctests (test_global_hooks.py for the hook changes); survivors re-run against the other test files
that name the function (test_bad_inputs_core.py, test_user_api_audit.py, test_new_user_dec4.py, ...).

Mutants (id: file, change):
  V1-V6 _validate.round_lr: lr <= 0 -> < 0; drop isfinite; drop the bool test; catch ValueError only; drop the
        0-d bool dtype test; default returned without float().
  S1-S8 solvers.make_solver: drop the mu check; mu == 0 -> <= 0; drop the momentum check; drop _is_number(mu)
        for prox; ignore the given momentum; momentum-prox without a buffer; drop the name check;
        momentum is not None -> truthy.
  SC1-SC15 schedules: whole_steps work < 0 -> < -1, no finiteness check; WallClock no clip before whole_steps,
        overflow message from the clipped steps, straggler_prob without _is_real / < 1, straggler_factor
        0 <= / without _is_real; step_decay_lr factor without the upper bound / _is_real, milestones without
        the upper bound / 0 excluded / the str test / the list(); _is_real without np.bool_.
  T1-T2 tree_index: np.bool_ dropped; the ndim == 0 condition dropped (refusing a bool mask).
  A1-A18 algorithms: check_client_indices kinds "iub", size test dropped, num_clients unchecked / minimum 0,
        bad entry = the whole input / without the bool test; client_final unchecked; apply's p check dropped;
        make_algorithm server callables / empty name; _check_state_kinds not called / never firing / no early
        return; apply_server_optimizer lr / finiteness unchecked, kind hint dropped; p checked without its size;
        server.name only truthy.
  R1-R7 run_sequential: seed, sampling, grad_fn None, server_state_mismatch, finiteness unchecked; TypeError
        taken as finite; LocalSolver hint dropped.
  RU1-RU3, RU5-RU6 rule (no RU4): Mapping refusal dropped / a dict's values aggregated; local_steps
        unchecked / without size; a_norms size != -> >.
  VA1-VA3 variance: NaN check dropped / on p; init_control_variates minimum 0.
  DI1-DI3 distributed_apply: p checked only with VR; VR without p let through; p without its size.
  CK1-CK6 checkpoint.to_torch_tree: dtype not the model's; integer arrays cast; dicts not converted; no copy;
        like unchecked; NamedTuples not rebuilt.
  RE1-RE5 results: make_provenance unchecked; history Mapping / str test dropped; _as_dict TypeError only;
        history[k] named 'history'.
  RP1-RP6 report: fmt spec unchecked / floats only / _formats TypeError escapes; plus_minus np.bool_ and
        0-d numbers unchecked / a string error parsed as a number.
  AC1-AC3 measured_rate: ndim unchecked / > 2; stop unchecked.
  Q1-Q4 quadratic: tau1 unchecked, tau2 >= 0, mu unchecked, tau2_values not checked to be a sequence.
  C1-C5 cifar10: result_name cell_id / seed, round_work num_train >= 0 / num_test unchecked / >= -5.
  B1 batched: _round_lr unchecked.  P1 dirichlet_partition_generator default seed 1.
  CU1-CU5 custom.train_clients: momentum check, test_x feature shape, test_y length, mu passed through, ndim.
  G1-G6, ST1-ST3 grouped / stacked hooks: global hooks not listed; backward not refused later; grouped ->
        vmap; no backward-first sort; owner name; vmap forward refused; no per-round check / checked as vmap;
        lr_at unchecked.

Counts: 88 killed by the existing suite; 20 survived it and are killed by the new tests here (V3, V5, T2 are
mutants of this file's review fixes; S2, S8, SC1, SC4, SC15, A15, A16, R3, R6, RE2, CK1-CK4, CU1, DI3, Q4);
4 equivalent: SC14 (np.bool_ is no numbers.Real, so _is_real refuses it anyway), T1 (np.True_ is 0-d with
a bool dtype: the new clause refuses it), CU5 (a 1-d test_x has shape[1:] == (), which differs from the
clients' feature shape unless client_x itself is 1-d, which train_clients refuses earlier), V6 (the default is
the solver's lr, already a float; the stacked engine's 0.0 default is never returned).
"""
import numpy as np
import pytest
import torch

from fedlib._validate import round_lr
from fedlib.tree import tree_index


# ---------------------------------------------------------------- review fixes: bool bypasses

@pytest.mark.parametrize("value", [np.True_, np.array(True), torch.tensor(True)])
def test_round_lr_refuses_numpy_and_torch_bools(value):
    # float() of each is 1.0: an lr_at returning a bool trained at lr 1.0
    with pytest.raises(ValueError, match=r"lr_at\(2\) must return the round's client learning rate"):
        round_lr("lr_at", lambda t: value, 2, 0.1)


@pytest.mark.parametrize("value", [np.float32(0.05), np.array(0.05), torch.tensor(0.05, dtype=torch.float64)])
def test_round_lr_takes_numpy_and_torch_numbers(value):
    assert round_lr("lr_at", lambda t: value, 0, 0.1) == pytest.approx(0.05)


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


# ---------------------------------------------------------------- surviving mutants

@pytest.mark.parametrize("name", ["sgd", "momentum"])
def test_make_solver_refuses_a_negative_mu_for_a_solver_without_prox(name):
    # mutant S2 (mu == 0 -> mu <= 0): mu=-1 was dropped silently
    from fedlib.solvers import make_solver

    with pytest.raises(ValueError, match=rf"^mu: solver '{name}' has no proximal term, got mu = -1\.0"):
        make_solver(name, 0.1, mu=-1.0)


def test_whole_steps_refuses_work_between_minus_one_and_zero():
    # mutant SC1 (work < 0 -> work < -1): -0.5 gave -1 steps
    from fedlib.schedules import whole_steps

    with pytest.raises(ValueError, match=r"^work must be >= 0 \(a number of steps\), got min -0\.5"):
        whole_steps([2.0, -0.5])
    assert whole_steps(0.0) == 0.0


def test_wall_clock_overflow_names_the_client_and_its_work():
    # mutant SC4: the message said 1.8446744073709552e+19 (the clip) for a client whose work is 1e300 steps
    # (the inf case is SC3's, also killed by tests/test_user_api_audit.py)
    from fedlib.schedules import WallClock

    with pytest.raises(ValueError, match=r"^speeds: client 1 would take inf steps in round_seconds = 10\.0"):
        WallClock([1.0, 1e308], 10.0).local_steps(0)
    with pytest.raises(ValueError, match=r"^speeds: client 0 would take 1e\+300 steps in round_seconds = 1\.0"):
        WallClock([1e300, 1.0], 1.0).local_steps(0)


def test_to_torch_tree_dtype_kinds_containers_and_copies():
    # mutants CK1 (float arrays kept float64 for a float32 model), CK2 (integer arrays cast to the model's
    # float dtype), CK3 (dicts left as numpy), CK4 (tensors sharing memory with the loaded arrays)
    from fedlib.checkpoint import to_torch_tree

    like = [torch.zeros(2, dtype=torch.float32)]
    saved = {"w": np.array([1.0, 2.0]), "count": np.array([3, 4]), "nested": [np.array([5.0])], "n": 7}
    out = to_torch_tree(saved, like=like)
    assert isinstance(out, dict) and isinstance(out["w"], torch.Tensor)
    assert out["w"].dtype == torch.float32 and out["nested"][0].dtype == torch.float32
    assert out["count"].dtype == torch.int64 and out["n"] == 7
    same_dtype = to_torch_tree({"w": saved["w"]}, like=torch.zeros(1, dtype=torch.float64))
    same_dtype["w"].add_(10.0)
    np.testing.assert_array_equal(saved["w"], [1.0, 2.0])  # the loaded arrays are not changed through the tensors


def test_run_sequential_names_a_missing_grad_fn():
    # mutant R3 (grad_fn None let through): failed in round 0 with "'NoneType' object is not callable"
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    with pytest.raises(ValueError, match=r"^grad_fn must be a callable \(params, client, round, step\) -> grads, "
                                         r"got NoneType"):
        run_sequential(make_algorithm("fedavg", sgd(0.1)), np.zeros(2), None, [0.5, 0.5], FixedSteps([1, 1]), 1)


@pytest.mark.parametrize("params", [np.array(["a", "b"]), {"w": None}])
def test_run_sequential_refuses_an_initial_state_of_no_numbers(params):
    # mutant R6 (a TypeError of tree_all_finite taken as finite)
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    algo = make_algorithm("fedavg", sgd(0.1))
    state = algo.init(np.zeros(2), 2)._replace(params=params)
    with pytest.raises(ValueError, match=r"^initial_state\.params hold NaN or inf, or are no tree of numbers"):
        run_sequential(algo, None, lambda x, i, t, k: x, [0.5, 0.5], FixedSteps([1, 1]), 1, initial_state=state)


def test_make_result_names_a_mapping_given_as_history():
    # mutant RE2 (Mapping check dropped): a dict history was iterated by its keys, and the error named
    # history[0] ('round' is no mapping) instead of the history
    from fedlib.results import make_provenance, make_result

    provenance = make_provenance(0.0, 1.0, command="x")
    with pytest.raises(ValueError, match=r"^history must be a sequence of per-round mappings, got dict"):
        make_result({"rounds": 1}, {"round": 0, "train_loss": 0.5}, provenance)


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


def test_participation_refuses_a_bool_among_its_clients():
    from fedlib.sampling import Participation, as_participation

    with pytest.raises(ValueError, match=r"^participation: clients must be integer indices, got \[0, True\]"):
        as_participation(Participation([0, True], [0.5, 0.5]))
    assert as_participation(Participation([0, 1], [0.5, 0.5])).clients.tolist() == [0, 1]


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


def test_step_decay_lr_takes_milestones_from_a_generator():
    # mutant SC15 (milestones not turned into a list): the check consumed the generator, so no decay
    from fedlib.schedules import step_decay_lr

    assert step_decay_lr(1.0, 3, 4, milestones=(f for f in (0.5, 0.75)), factor=0.1) == pytest.approx(0.01)


def test_make_solver_refuses_a_zero_momentum_for_a_solver_without_a_buffer():
    # mutant S8 (momentum is not None -> truthy momentum): momentum=0.0 with 'sgd' passed; the documented
    # rule (and train_clients / the CLI) refuses any momentum given to a solver without a buffer
    from fedlib.solvers import make_solver

    with pytest.raises(ValueError, match=r"^momentum: solver 'sgd' has no momentum buffer, got momentum = 0\.0"):
        make_solver("sgd", 0.1, momentum=0.0)


def test_train_clients_refuses_momentum_before_looking_at_the_data():
    # mutant CU1 (train_clients' own check dropped): make_solver refused it later, after the data checks, so a
    # momentum with 'sgd' and mismatched client lists named the lists, and the hint was make_solver's
    from torch import nn

    from fedlib.experiments.custom import train_clients

    with pytest.raises(ValueError, match=r"^momentum: solver 'sgd' has no momentum buffer, got momentum = 0\.9 "
                                         r"\(local momentum: solver='momentum' or 'momentum-prox'\)"):
        train_clients(nn.Linear(2, 2), [torch.zeros(3, 2)], [], solver="sgd", momentum=0.9)


def test_distributed_apply_checks_the_size_of_p_without_variance_reduction():
    # mutant DI3 (p checked without size=state.num_clients): the weights of another number of clients were
    # taken silently by FedAvg / FedNova, which do not use them (apply refuses them by name)
    from fedlib.algorithms import ClientUpdate, make_algorithm
    from fedlib.distributed import LocalCommunicator, distributed_apply
    from fedlib.sampling import full_participation
    from fedlib.solvers import sgd

    algo = make_algorithm("fednova", sgd(1.0))
    state = algo.init(np.zeros(1), num_clients=2)
    updates = [ClientUpdate(0, np.array([-1.0]), a_norm=1.0, local_steps=1),
               ClientUpdate(1, np.array([2.0]), a_norm=2.0, local_steps=2)]
    with pytest.raises(ValueError, match=r"^p must have 2 entries"):
        distributed_apply(LocalCommunicator(), algo, state, full_participation([0.5, 0.5]), updates, 1.0,
                          [0.25, 0.25, 0.5])


@pytest.mark.parametrize("tau2_values", [5, None])
def test_two_client_sweep_names_tau2_values_that_are_no_sequence(tau2_values):
    # mutant Q4 (check_sequence dropped): enumerate(5) failed with "'int' object is not iterable"
    from fedlib.experiments.quadratic import two_client_sweep

    with pytest.raises(ValueError, match=r"^tau2_values must be a sequence of step counts"):
        two_client_sweep(1, tau2_values, 1e-3)
