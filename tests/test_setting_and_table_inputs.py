"""Inputs that failed late or produced broken output: a chapter-4 ``Setting`` given its epochs
as the command line writes them (``"1-5"``), and ``markdown_table`` with no columns; the experiments' helpers that
named another parameter than the one given (``data_seed`` as ``seed``, ``weights`` as ``p``) or failed with a bare
``KeyError`` / numpy error for a label or threshold (chapter 4's grids), or a slice's ``TypeError`` for a count
(chapter 5's ``engine_against_reference``)."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.bench import bench_synthetic
from fedlib.experiments.acceleration import vr_limit
from fedlib.experiments.cifar10 import engine_against_reference
from fedlib.experiments.quadratic import small_lr_limit, surrogate_optimum
from fedlib.experiments.synthetic import (SETTINGS, Curves, Setting, claim_holds, make_problem, rounds_to_best_loss,
                                          rounds_to_reach)
from fedlib.problems import QuadraticProblem
from fedlib.report import markdown_table
from fedlib.schedules import RandomEpochs


def test_setting_takes_the_command_lines_epochs_string_and_pairs():
    """tuple("1-5") was ('1', '-', '5'): the schedule then failed with an unpacking error."""
    assert Setting("r", "r", "1-5").epochs == (1, 5)
    assert Setting("f", "f", "2").epochs == (2, 2)
    assert Setting("l", "l", [2, 3]).epochs == (2, 3)
    assert Setting("n", "n", (np.int64(1), np.int64(4))).epochs == (1, 4)
    assert [s.epochs for s in SETTINGS] == [(2, 2), (1, 5), (1, 5)]
    sched = Setting("r", "r", "1-5").schedule(make_problem(), seed=0)
    assert isinstance(sched, RandomEpochs) and (sched.low, sched.high) == (1, 5)


@pytest.mark.parametrize("bad", [(1, 2, 3), (2.0, 3), (5, 1), (0, 2), (True, 2), 3, None])
def test_setting_refuses_epochs_that_are_not_a_range(bad):
    with pytest.raises(ValueError, match=r"^epochs: expected integers \(low, high\) with 1 <= low <= high, or a "
                                         r"string like '1-5', got "):
        Setting("x", "x", bad)


def test_setting_refuses_a_bad_epochs_string_with_parse_epochs_message():
    with pytest.raises(ValueError, match="^epochs must be an integer like '2' or an inclusive range like '2-5', "
                                         "got 'x'$"):
        Setting("x", "x", "x")


def test_markdown_table_needs_a_column():
    with pytest.raises(ValueError, match="^header: a table needs at least one column$"):
        markdown_table([], [])
    assert markdown_table(["a"], []) == "| a |\n|---|"


_QP = QuadraticProblem(np.ones((2, 1, 1)), np.array([[1.0], [-1.0]]), np.array([0.75, 0.25]))
_C = lambda *rows: Curves((0,), np.array(rows, dtype=float), *[None] * 5)  # noqa: E731
_GRID = {("s", "A"): _C([2, 1.5, 1.2, 1.1, 1.15]), ("s", "B"): _C([2, 1.3, 1.0, 0.9, 0.8])}


@pytest.mark.parametrize("call,match", [
    # was 'seed must be an integer >= 0, got -1' (synthetic()'s name; bench_synthetic has a seed of its own)
    (lambda: make_problem(data_seed=-1), r"^data_seed must be an integer >= 0, got -1$"),
    (lambda: bench_synthetic(rounds=1, repeat=1, data_seed=None), r"^data_seed must be an integer >= 0, got None$"),
    # was 'p must have 2 entries (one per client), got 3' / 'p contains NaN or inf' (problem.p is another thing)
    (lambda: surrogate_optimum(_QP, [0.5, 0.25, 0.25]), r"^weights must have 2 entries \(one per client\), got 3$"),
    (lambda: small_lr_limit(_QP, "fedavg", [1, 3], weights=[np.nan, 1.0]), r"^weights contains NaN or inf$"),
    (lambda: vr_limit(_QP, "scaffold", weights=[0.5]), r"^weights must have 2 entries"),
    # were KeyError: ('s', 'X') / ('t', 'A'); AttributeError for a list
    (lambda: claim_holds(_GRID, ["s"], better="X", worse="A"), r"^better must be one of the grid's labels \['A', 'B'\], "
                                                               r"got 'X'$"),
    (lambda: rounds_to_best_loss(_GRID, ["s"], better="B", worse="Z"), r"^worse must be one of the grid's labels"),
    (lambda: rounds_to_best_loss(_GRID, ["t"], better="B", worse="A"), r"^settings must be one of the grid's settings "
                                                                       r"\['s'\], got 't'$"),
    (lambda: claim_holds([], ["s"]), r"^grid must be a mapping"),
    # was 'operands could not be broadcast together ...' / 'could not convert string to float'; None gave inf silently
    (lambda: rounds_to_reach(_GRID["s", "A"], [1.0, 1.2]), r"^threshold must be a number or one number per seed \(1\), "
                                                          r"got \[1.0, 1.2\]$"),
    (lambda: rounds_to_reach(_GRID["s", "A"], None), r"^threshold must be a number or one number per seed"),
    (lambda: rounds_to_reach(_GRID["s", "A"], "x"), r"^threshold must be"),
    # chapter 5's check, refused before the data are read. Were TypeError 'slice indices must be integers ...' (nan,
    # 1.5); clients=-1 left the last client out, 17 took the 16 of the official split, without a word
    (lambda: engine_against_reference(width=1 / 32, rounds=1, clients=float("nan"), samples_per_client=8,
                                      batch_size=4, data=object()), r"^clients must be an integer >= 1, got nan$"),
    (lambda: engine_against_reference(width=1 / 32, rounds=1, clients=-1, samples_per_client=8, batch_size=4,
                                      data=object()), r"^clients must be an integer >= 1, got -1$"),
    (lambda: engine_against_reference(width=1 / 32, rounds=1, clients=2, samples_per_client=1.5, batch_size=4,
                                      data=object()), r"^samples_per_client must be an integer >= 1, got 1.5$"),
    (lambda: engine_against_reference(width=1 / 32, rounds=1, clients=17, samples_per_client=8, batch_size=4),
     r"^clients must be at most 16 \(the clients of the official split\), got 17$"),
])
def test_experiment_helpers_name_the_bad_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_experiment_helpers_still_take_valid_arguments():
    assert make_problem(data_seed=np.int64(1)).num_clients == 30
    assert float(surrogate_optimum(_QP, [0.5, 0.5])[0]) == 0.0
    assert float(small_lr_limit(_QP, "fedavg", [1, 3], weights=np.array([0.5, 0.5]))[0]) == -0.5
    assert claim_holds(_GRID, ("s",), better="B", worse="A") == {"s": [True]}
    assert rounds_to_best_loss(_GRID, ["s"], better="B", worse="A")["s"].better_rounds.tolist() == [2.0]
    assert rounds_to_reach(_GRID["s", "A"], 1.2).tolist() == rounds_to_reach(_GRID["s", "A"], [1.2]).tolist() == [2.0]


@pytest.mark.parametrize("call,match", [
    (lambda: claim_holds(_GRID, [["s"]]), r"^settings must be one of the grid's settings \['s'\], got \['s'\]$"),
    (lambda: claim_holds(_GRID, ["s"], better=["B"], worse="A"),
     r"^better must be one of the grid's labels \['A', 'B'\], got \['B'\]$"),
    (lambda: rounds_to_best_loss(_GRID, ["s"], better="B", worse={"A": 1}),
     r"^worse must be one of the grid's labels \['A', 'B'\], got \{'A': 1\}$"),
])
def test_an_unhashable_setting_or_label_is_named_not_the_grid(call, match):
    """A dict grid looked up with an unhashable setting or label raises TypeError ('unhashable type: list'), which
    _grid_curves took for a grid that is no mapping. Before: 'grid must be a mapping {(setting, label): Curves}
    (run_grid's), got dict' for run_grid's own dict. Now the setting or label given is named, as for one that is
    not in the grid; a grid that is no mapping is still named (test above)."""
    with pytest.raises(ValueError, match=match):
        call()
