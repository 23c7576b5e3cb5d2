"""Bad-input audit (Dec 4, fuzz of the public API with NaN / inf / negative / bool / float / wrong-length
arguments substituted one at a time into each function's >>> example): the inputs that were accepted
silently, or failed with a message that did not name the argument. Each test fails on the code before
its fix."""
import math

import numpy as np
import pytest


@pytest.mark.parametrize("factor", [float("nan"), float("inf"), -1.0, 0.0, True, 10.0])
def test_step_decay_lr_refuses_a_factor_outside_0_1(factor):
    """Was: factor = nan gave lr nan after the first milestone, -1 a negative lr, 0 a zero lr, 10 a
    growing one."""
    from fedlib.schedules import step_decay_lr

    with pytest.raises(ValueError, match="^factor must"):
        step_decay_lr(1.0, 3, total_rounds=4, factor=factor)


@pytest.mark.parametrize("milestones, match", [((float("nan"),), r"milestones\[0\]"), ((0.5, -5.0), r"milestones\[1\]"),
                                               ((1.5,), r"milestones\[0\]"), (0.5, "^milestones must be a sequence"),
                                               ("ab", "^milestones must be a sequence")])
def test_step_decay_lr_refuses_bad_milestones(milestones, match):
    """Was: a NaN milestone failed in math.floor ('cannot convert float NaN to integer'), a negative one
    decayed from round 1, a bare number failed with "'float' object is not iterable"."""
    from fedlib.schedules import step_decay_lr

    with pytest.raises(ValueError, match=match):
        step_decay_lr(1.0, 3, total_rounds=4, milestones=milestones)


def test_step_decay_lr_valid_edges_still_accepted():
    from fedlib.schedules import step_decay_lr

    assert step_decay_lr(1.0, 3, 4, factor=1.0) == 1.0       # no decay
    assert step_decay_lr(1.0, 3, 4, milestones=()) == 1.0    # no milestone
    assert step_decay_lr(1.0, 3, 4, milestones=[0.0, 1.0], factor=0.5) == 0.5   # round max(1, 0) and round 4
    assert math.isclose(step_decay_lr(0.2, 75, 100), 0.002)


@pytest.mark.parametrize("clients, num_clients, match", [
    ([float("nan"), 1], 3, "^client must be an integer index"),
    ([0.5, 2], 3, "^client must be an integer index"),
    ([True], 3, "^client must be an integer index"),
    ([1], float("nan"), "^num_clients must be an integer >= 1"),
    ([1], 2.5, "^num_clients must be an integer >= 1"),
])
def test_check_client_indices_refuses_non_integer_indices(clients, num_clients, match):
    """Was: NaN and 0.5 passed both range comparisons (nan < 0 and nan >= 3 are False), so
    check_client_indices([nan, 1], 3) returned None; num_clients = nan let every index through."""
    from fedlib.algorithms import check_client_indices

    with pytest.raises(ValueError, match=match):
        check_client_indices(clients, num_clients)


def test_check_client_indices_still_takes_integer_and_empty_indices():
    from fedlib.algorithms import check_client_indices

    check_client_indices(np.array([0, 2]), np.int64(3))
    check_client_indices(np.array([], dtype=float), 3)   # a rank without clients (distributed_apply)
    check_client_indices([0, 7], None)                     # no range check without num_clients (documented)
    with pytest.raises(ValueError, match="^client must be an integer index, got 0.5"):
        check_client_indices([0.5], None)                  # but an index is an integer even then


def test_client_init_refuses_a_fractional_client():
    """Was: FedAvg (no variates) started a solver for 'client 1.5' without a word."""
    from fedlib.algorithms import make_algorithm
    from fedlib.solvers import sgd

    algo = make_algorithm("fedavg", sgd(0.1))
    state = algo.init(np.zeros(1), 3)
    with pytest.raises(ValueError, match="^client must be an integer index"):
        algo.client_init(state, 1.5)
    algo.client_init(state, np.int64(2))


def test_init_control_variates_refuses_a_bool_num_clients():
    """Was: True is an int, so init_control_variates(params, True) made variates for 1 client."""
    from fedlib.variance import init_control_variates

    with pytest.raises(ValueError, match=r"^num_clients must be an integer >= 1, got True"):
        init_control_variates(np.zeros(2), True)
    assert init_control_variates(np.zeros(2), np.int64(2)).client.shape == (2, 2)


@pytest.mark.parametrize("spec", ["bogus", ".4 f", 3, None])
def test_fmt_refuses_a_spec_that_formats_nothing(spec):
    """Was: format(0.01, spec) raised and fmt fell back to str(value), so a typo in a table's spec
    printed every number unformatted (fmt(0.0123456, "bogus") == "0.0123456", markdown_table the same)."""
    from fedlib.report import fmt, markdown_table, plus_minus

    with pytest.raises(ValueError, match="^spec must be a format spec"):
        fmt(0.0123456, spec)
    with pytest.raises(ValueError, match="^spec must be a format spec"):
        plus_minus(0.25, 0.01, spec)
    with pytest.raises(ValueError, match="^spec must be a format spec"):
        markdown_table(["a"], [[0.5]], spec=spec)


def test_fmt_string_specs_still_print_floats_as_str():
    from fedlib.report import fmt

    assert fmt(0.1234567, "s") == "0.1234567" and fmt(0.5, "") == "0.5" and fmt(0.01, ".4f") == "0.0100"


@pytest.mark.parametrize("seed", [float("nan"), 2.5, True, "a", -1])
def test_result_name_refuses_a_seed_that_is_no_integer(seed):
    """Was: result_name('fedavg', nan) == 'fedavg__seednan.json' (and 'seedTrue', 'seed2.5'): a file
    name that load_table1_results never reads back as a seed."""
    from fedlib.experiments.cifar10 import result_name

    with pytest.raises(ValueError, match="^seed must be an integer >= 0"):
        result_name("fedavg", seed)
    with pytest.raises(ValueError, match="^cell_id must be a string"):
        result_name(3, 0)
    assert result_name("fedavg", np.int64(2)) == "fedavg__seed2.json"


@pytest.mark.parametrize("num_train, num_test", [(float("nan"), 10), (float("inf"), 10), (-1, 10), (0, 10), (2.5, 10),
                                                 (100, float("nan")), (100, -1), (100, True)])
def test_round_work_refuses_bad_sizes(num_train, num_test):
    """Was: round_work('2-5', nan, 10) was nan, with -1 training images a negative work
    (-0.17), so Table 1's time estimates were nan or negative."""
    from fedlib.experiments.cifar10 import round_work

    with pytest.raises(ValueError, match="^num_t(rain|est) must be an integer"):
        round_work("2-5", num_train, num_test)
    assert round_work("2", 300, 0) == 600.0


@pytest.mark.parametrize("mu", [float("nan"), float("inf"), -1.0, "a"])
def test_quadratic_algorithm_checks_mu_even_where_it_is_unused(mu):
    """Was: quadratic_algorithm('fednova', 0.1, mu=nan) (or mu='a', mu=-1) returned plain SGD without a word;
    a finite mu >= 0 is still ignored there (documented)."""
    from fedlib.experiments.quadratic import quadratic_algorithm

    with pytest.raises(ValueError, match="^mu must be a finite number >= 0"):
        quadratic_algorithm("fednova", 0.1, mu)
    assert quadratic_algorithm("fednova", 0.1, 7.0).solver.mu == 0.0


def test_a_norms_length_mismatch_names_both_arguments():
    """Was: effective_weights('fednova', [1.0], [2.0, 6.0]) said 'a_norms must have 1 entries (one per
    client), got 2', blaming a_norms when the short one was client_weights."""
    from fedlib.rule import aggregate, aggregation_coefficients, effective_weights, fedavg_weights

    with pytest.raises(ValueError, match="^a_norms and client_weights must have one entry per client, got 2 a_norms "
                                         "and 1 client_weights"):
        effective_weights("fednova", [1.0], [2.0, 6.0])
    with pytest.raises(ValueError, match="^a_norms and client_weights must have one entry per client"):
        aggregate([np.ones(1)] * 2, [0.5, 0.25, 0.25], [1.0, 2.0])
    with pytest.raises(ValueError, match="^a_norms and weights must have one entry per client, got 2 a_norms and 3"):
        aggregation_coefficients(4.0, [0.5, 0.25, 0.25], [2.0, 6.0])
    with pytest.raises(ValueError, match="^a_norms and p must have one entry per client"):
        fedavg_weights([0.5, 0.5], [2.0])


@pytest.mark.parametrize("lr", [float("nan"), float("inf"), -1.0, 0.0, True])
def test_apply_server_optimizer_checks_lr(lr):
    """Was: apply_server_optimizer(plain(), change, state, nan) returned the moved model (the plain
    server does not use lr), so a NaN client rate went unnoticed where apply would refuse it."""
    from fedlib.algorithms import apply_server_optimizer, make_algorithm
    from fedlib.server import plain
    from fedlib.solvers import sgd

    state = make_algorithm("fedavg", sgd(0.1)).init(np.ones(1), 2)
    with pytest.raises(ValueError, match="^lr must be a finite number > 0"):
        apply_server_optimizer(plain(), np.array([-2.0]), state, lr)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_apply_server_optimizer_refuses_a_non_finite_change(bad):
    """Was: the plain server (and momentum, adam) turned a NaN aggregate into a NaN model without a word:
    apply_server_optimizer(plain(), [nan], state, 0.1) returned (array([nan]), ...)."""
    from fedlib.algorithms import apply_server_optimizer, make_algorithm
    from fedlib.server import plain
    from fedlib.solvers import sgd

    state = make_algorithm("fedavg", sgd(0.1)).init(np.ones(1), 2)
    with pytest.raises(FloatingPointError, match="aggregated update is not finite"):
        apply_server_optimizer(plain(), np.array([bad]), state, 0.1)
    params, _ = apply_server_optimizer(plain(), np.array([-2.0]), state, 0.1)
    assert params.tolist() == [-1.0]


@pytest.mark.parametrize("work", [float("nan"), float("inf"), -2.5, [1.0, float("nan")], "a"])
def test_whole_steps_refuses_non_finite_or_negative_work(work):
    """Was: whole_steps(nan) was nan, whole_steps(inf) inf and whole_steps(-2.5) -3.0 steps."""
    from fedlib.schedules import whole_steps

    with pytest.raises(ValueError, match="^work (must|contains)"):
        whole_steps(work)
    assert whole_steps([0.0, 100 * 0.29]).tolist() == [0.0, 29.0]


@pytest.mark.parametrize("kw", [dict(straggler_prob=True), dict(straggler_prob="a"),
                                dict(straggler_factor=True), dict(straggler_factor="a")])
def test_wall_clock_refuses_bool_or_text_probabilities(kw):
    """Was: WallClock(..., straggler_prob=True) made every client a straggler every round (True == 1.0),
    straggler_factor=True meant no slowdown; straggler_prob='a' failed with "'<=' not supported"."""
    from fedlib.schedules import WallClock

    with pytest.raises(ValueError, match=f"^{next(iter(kw))} must lie in"):
        WallClock([10.0, 2.5], 1.0, **kw)
    assert WallClock([10.0], 1.0, straggler_prob=np.float64(0.5), straggler_factor=1).straggler_prob == 0.5


@pytest.mark.parametrize("started, finished, name", [(float("nan"), 1.0, "started"), (0.0, float("inf"), "finished"),
                                                     (0.0, float("-inf"), "finished"), ("a", 1.0, "started")])
def test_make_provenance_names_a_bad_time(started, finished, name):
    """Was: nan failed inside datetime ('Invalid value NaN (not a number)'), inf with an OverflowError
    about the platform's time_t, a string with "'str' object cannot be interpreted as an integer"."""
    from fedlib.results import make_provenance

    with pytest.raises(ValueError, match=f"^{name} must be a finite number >= 0"):
        make_provenance(started, finished, command="x")
    assert make_provenance(np.float64(10.0), 12.5, command="x")["wall_time_s"] == 2.5


@pytest.mark.parametrize("tau1, tau2_values, name", [(True, [2], "tau1"), (1, [True], r"tau2_values\[0\]"),
                                                     (1, [2, 2.5], r"tau2_values\[1\]")])
def test_two_client_sweep_refuses_bool_step_counts(tau1, tau2_values, name):
    """Was: np.array([True, 2]) is [1, 2], so two_client_sweep(True, [2], 0.1) ran tau1 = 1 and recorded
    TwoClientPoint(tau1=1, ...); a step count of 2.5 failed as 'local_steps must hold integers'."""
    from fedlib.experiments.quadratic import two_client_sweep

    with pytest.raises(ValueError, match=f"^{name} must be an integer >= 1"):
        two_client_sweep(tau1, tau2_values, 0.1, reduction=1e-3)
    assert two_client_sweep(1, [2.0], 0.1, reduction=1e-3)[0].tau2 == 2


@pytest.mark.parametrize("client, match", [(1.5, "^client must be an integer index"),
                                           (float("nan"), "^client must be an integer index"),
                                           (True, "^client must be an integer index"),
                                           (7, "^client 7 is not one of the 3 clients")])
def test_client_final_checks_the_client_index(client, match):
    """Was: client_final(state, 1.5, ...) packaged ClientUpdate(client=1) (int() truncated it), 7 of 3
    clients passed, and nan failed as 'cannot convert float NaN to integer'."""
    from fedlib.algorithms import make_algorithm
    from fedlib.solvers import sgd

    algo = make_algorithm("fedavg", sgd(0.1))
    state = algo.init(np.zeros(1), 3)
    done = sgd(0.1).update(algo.client_init(state, 1), np.ones(1))
    with pytest.raises(ValueError, match=match):
        algo.client_final(state, client, done)
    assert algo.client_final(state, np.int64(1), done).client == 1


@pytest.mark.parametrize("mu", ["a", None, [0.5]])
def test_make_solver_prox_names_a_mu_that_is_no_number(mu):
    """Was: make_solver('prox', 0.5, mu='a') failed with "'<=' not supported between instances of 'str'
    and 'int'" (None and a list alike), not naming mu."""
    from fedlib.solvers import make_solver

    with pytest.raises(ValueError, match="^mu must be > 0 for the proximal solver"):
        make_solver("prox", 0.5, mu=mu)
    assert make_solver("prox", 0.5, mu=np.float64(0.5)).mu == 0.5


@pytest.mark.parametrize("i", [True, np.bool_(False)])
def test_tree_index_refuses_a_bool(i):
    """Was: tree_index(stacked, True) returned every leaf with a new leading axis (x[True] is a 0-d
    boolean mask), shape (1, 2, 2) for a (2, 2) leaf, not row 1."""
    from fedlib.tree import tree_index, tree_stack

    stacked = tree_stack([{"w": np.array([1.0, 2.0])}, {"w": np.array([3.0, -1.0])}])
    with pytest.raises(ValueError, match="^i must be a row index"):
        tree_index(stacked, i)
    assert tree_index(stacked, np.int64(1))["w"].tolist() == [3.0, -1.0]


@pytest.mark.parametrize("distances, stop, match", [([1.0, 0.5, 0.25, 0.125], 2.5, "^stop must be an integer"),
                                                    ([1.0, 0.5, 0.25, 0.125], True, "^stop must be an integer"),
                                                    ([[1.0, 0.5, 0.25]], None, "^distances must be a 1-d sequence")])
def test_measured_rate_names_a_bad_stop_or_shape(distances, stop, match):
    """Was: stop=2.5 failed as 'slice indices must be integers or None', a (1, T) array inside np.polyfit
    ('expected x and y to have same length'), and stop=True read as 1."""
    from fedlib.experiments.acceleration import measured_rate

    with pytest.raises(ValueError, match=match):
        measured_rate(distances, 0, stop)
    assert measured_rate([1.0, 0.5, 0.25, 0.125], 0, np.int64(3)) == pytest.approx(0.5)


@pytest.mark.parametrize("field", ["config", "provenance", "summary", "history", "history[0]"])
def test_make_result_names_a_part_that_is_no_mapping(field):
    """Was: make_result('abc', ...) failed with 'dictionary update sequence element #0 has length 1; 2 is
    required' (and summary=3 with "'int' object is not iterable"), not naming the part."""
    from fedlib.results import make_provenance, make_result

    provenance = make_provenance(0.0, 1.0, command="x")
    args = {"config": {"rounds": 1}, "history": [{"round": 0, "train_loss": 0.5}], "provenance": provenance}
    kw = {}
    if field == "summary":
        kw["summary"] = 3
    elif field == "history[0]":
        args["history"] = [3]
    else:
        args[field] = "abc"
    with pytest.raises(ValueError, match=rf"^{field.replace('[', '.').replace(']', '.')} must be a"):
        make_result(args["config"], args["history"], args["provenance"], **kw)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_control_variates_refuses_non_finite_variates(bad):
    """Was: control_variates(np.array([[nan], [-1.0]]), [0.5, 0.5]) returned mean [nan], so every
    client's correction (mean - c_i) was NaN from the first round."""
    from fedlib.variance import control_variates

    with pytest.raises(ValueError, match="^client: the variates hold NaN or inf"):
        control_variates(np.array([[bad], [-1.0]]), [0.5, 0.5])
    assert control_variates(np.array([[3.0], [-1.0]]), [0.5, 0.5]).mean.tolist() == [1.0]
