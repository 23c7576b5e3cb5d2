"""What executing the chapters under other seeds and parameters showed (chapters 1-10, profile ci,
seeds 1-3): each test fails on the code before its fix."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.data.clients import FederatedDataset
from fedlib.experiments import surrogate as SU
from fedlib.problems.logistic import LogisticProblem


def _three_classes_one_unseen() -> FederatedDataset:
    """Labels 0 and 2 in training (client 0: only 0), class 1 only in a test sample: b_1 has no minimiser."""
    return FederatedDataset(
        train_x=[np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[1.0, 1.0], [0.5, -1.0], [-1.0, 0.5]])],
        train_y=[np.array([0, 0]), np.array([2, 0, 2])],
        test_x=[np.array([[3.0, 4.0], [5.0, 6.0]]), np.array([[7.0, 8.0]])],
        test_y=[np.array([1, 2]), np.array([0])], num_classes=3, name="hand")


def test_observed_classes_renumbers_by_hand():
    """Classes {0, 2} seen: 0 -> 0, 2 -> 1; the test sample of class 1 is dropped, the others kept."""
    out = SU.observed_classes(_three_classes_one_unseen())
    assert out.num_classes == 2 and out.meta["observed_classes"] == [0, 2]
    assert [y.tolist() for y in out.train_y] == [[0, 0], [1, 0, 1]]
    assert [y.tolist() for y in out.test_y] == [[1], [0]]
    np.testing.assert_array_equal(out.test_x[0], [[5.0, 6.0]])
    np.testing.assert_array_equal(out.test_x[1], [[7.0, 8.0]])
    np.testing.assert_array_equal(out.train_x[1], [[1.0, 1.0], [0.5, -1.0], [-1.0, 0.5]])


def test_observed_classes_keeps_a_complete_data_set_and_refuses_one_class():
    ds = _three_classes_one_unseen()
    full = SU.observed_classes(SU.observed_classes(ds))
    assert SU.observed_classes(full) is full
    one = FederatedDataset(train_x=[np.ones((2, 2))], train_y=[np.array([1, 1])], test_x=[np.zeros((0, 2))],
                           test_y=[np.zeros(0, dtype=np.int64)], num_classes=3, name="one")
    with pytest.raises(ValueError, match=r"^one: the training data has 1 class\(es\) \[1\]"):
        SU.observed_classes(one)
    with pytest.raises(TypeError, match="dataset must be a FederatedDataset, got dict"):
        SU.observed_classes({})


def test_a_class_absent_from_training_is_refused_not_solved_for():
    """Chapter 7, seed 1: classes 1, 2 and 9 occur in no client's training data, so
    dF/db_c = mean softmax_c > 0 everywhere and there is no minimiser and no fixed point. The old
    code returned a 'minimiser' (Newton drove b_c to about -25 until the gradient fell under the
    relative tolerance) and failed the fixed point after 30 s of Newton-Krylov (RuntimeError)."""
    prob = LogisticProblem(_three_classes_one_unseen(), l2=0.1)
    with pytest.raises(ValueError, match=r"^weighted minimiser: class\(es\) \[1\] of 3 never occur in the training "
                                         r"data of the clients with positive weight: .*observed_classes"):
        SU.weighted_minimizer(prob, prob.p)
    with pytest.raises(ValueError, match=r"^fixed point of fedavg \(lr 0\.1\): class\(es\) \[1\] of 3 never occur"):
        SU.fixed_point_of_round(prob, "fedavg", 0.1, [2, 3])
    assert SU.unseen_classes(prob) == [1]
    assert SU.unseen_classes(prob, [1.0, 0.0]) == [1, 2]
    # client 1 alone has classes 0 and 2: its own minimiser exists
    restricted = LogisticProblem(SU.observed_classes(_three_classes_one_unseen()), l2=0.1)
    x, res = SU.fixed_point_of_round(restricted, "fedavg", 0.1, [2, 3])
    assert res < 1e-10 and np.all(np.isfinite(x["b"]))
    _, g = SU.weighted_minimizer(restricted, [0.0, 1.0])
    assert g < 1e-8


def test_chapter7_sweep_without_step_sizes_is_refused_before_solving():
    """Chapter 7 with lrs=() (once profile_sizes keeps it) gave no point and failed in np.polyfit."""
    prob = LogisticProblem(SU.observed_classes(_three_classes_one_unseen()), l2=0.1)
    with pytest.raises(ValueError, match=r"^lrs must name at least one step size, got none$"):
        SU.surrogate_sweep(prob, [2, 3], ())
    with pytest.raises(ValueError, match=r"^lrs must be a finite number > 0, got 0\.0$"):
        SU.surrogate_sweep(prob, [2, 3], (0.1, 0.0))


# --------------------------------------------------------------------------- chapter 4's parameters
@pytest.fixture(scope="module")
def small_synthetic():
    from fedlib.experiments import synthetic as S

    return S.make_problem(num_clients=3, dim=4, num_classes=3, num_samples=[30, 50, 80])


@pytest.mark.parametrize("seeds, message", [
    ((), r"^seeds must name at least one run seed, got none$"),
    ((0, 0, 0), r"^seeds must be distinct \(a repeated seed repeats the same run\), got \(0, 0, 0\)$"),
    ((0, -1), r"^seeds must be an integer >= 0, got -1$"),
])
def test_chapter4_seeds_without_runs_are_refused(small_synthetic, seeds, message):
    """Chapter 4 with seeds=() ran nothing and failed later with an IndexError in final_losses; with
    seeds=(0, 0, 0) its 'for every seed' claims were one run counted three times."""
    from fedlib.experiments import synthetic as S

    with pytest.raises(ValueError, match=message):
        S.run_grid(small_synthetic, [S.SETTINGS[0]], {"FedAvg": S.fedavg_sgd}, seeds, 1)
    with pytest.raises(TypeError, match="^seeds must be a sequence of integer run seeds, got int$"):
        S.run_setting(small_synthetic, S.SETTINGS[0], S.fedavg_sgd, 3, 1)


def test_chapter4_zero_rounds_and_no_learning_rates_are_refused(small_synthetic):
    """rounds=0 ran no round, so chapter 4's claim 'FedNova ends below FedAvg' failed (both at the
    initial loss log 3) as if the paper were wrong; lr_sweep with lrs=() returned {} (then an
    IndexError in the chapter) and with rounds=0 ran 1 round (max(1, 0))."""
    from fedlib.experiments import synthetic as S

    with pytest.raises(ValueError, match=r"^rounds must be an integer >= 1, got 0$"):
        S.run_grid(small_synthetic, [S.SETTINGS[0]], {"FedAvg": S.fedavg_sgd}, (0,), 0)
    with pytest.raises(ValueError, match=r"^lrs must name at least one learning rate, got none$"):
        S.lr_sweep(small_synthetic, S.SETTINGS[0], {"FedAvg": S.fedavg_sgd}, (), (0,), 2)
    with pytest.raises(ValueError, match=r"^rounds must be an integer >= 1, got 0$"):
        S.lr_sweep(small_synthetic, S.SETTINGS[0], {"FedAvg": S.fedavg_sgd}, (0.02,), (0,), 0)


# --------------------------------------------------------------------------- the chapters' profile sizes
def test_profile_sizes_keeps_every_given_value_but_none():
    """rounds=0 or seeds=() in a chapter's parameters cell ran the profile's 20 rounds or 3 seeds
    (chapters 6-10: ``rounds = rounds or {...}[profile]``); now only None means the profile's."""
    from fedlib.experiments import profile_sizes

    table = {"ci": {"rounds": 20, "seeds": (0, 1, 2)}, "full": {"rounds": 100, "seeds": (0, 1, 2, 3)}}
    assert profile_sizes("ci", table) == {"rounds": 20, "seeds": (0, 1, 2)}
    assert profile_sizes("full", table, rounds=None, seeds=()) == {"rounds": 100, "seeds": ()}
    assert profile_sizes("ci", table, rounds=0) == {"rounds": 0, "seeds": (0, 1, 2)}
    assert table["ci"] == {"rounds": 20, "seeds": (0, 1, 2)}  # the table is not changed
    with pytest.raises(ValueError, match=r"^profile must be one of \['ci', 'full'\], got 'foo'$"):
        profile_sizes("foo", table)
    with pytest.raises(TypeError, match=r"^profile must be a string, one of \['ci', 'full'\]; got NoneType$"):
        profile_sizes(None, table)
    with pytest.raises(TypeError, match=r"^profile_sizes: \['round'\] are not sizes of profile 'ci'"):
        profile_sizes("ci", table, round=5)


def test_no_chapter_replaces_a_falsy_parameter_by_the_profiles():
    """``x = x or default`` turns a user's 0 or () into the default without a word."""
    import json
    import re
    from pathlib import Path

    book = Path(__file__).resolve().parents[1] / "book"
    found = []
    for path in sorted(book.glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf8"))["cells"]:
            if cell["cell_type"] == "code":
                found += [(path.name, m.group(0)) for m in
                          re.finditer(r"^(\w+) = \1 or .*$", "".join(cell["source"]), re.MULTILINE)]
    assert not found, found


def test_chapter10_comparison_of_no_round_is_refused():
    """Chapter 10 with rounds=0 (after profile_sizes keeps it): compare_with_closed_form compared the
    common start only, max difference 0, so 'every run equals its closed form in every round' held
    without a single round."""
    from fedlib.experiments import acceleration as A
    from fedlib.problems import random_quadratic
    from fedlib.schedules import FixedSteps

    problem = random_quadratic(4, 3, seed=0)
    with pytest.raises(ValueError, match=r"^rounds must be an integer >= 1, got 0$"):
        A.compare_with_closed_form(problem, "fedavg", 0.02, FixedSteps([1, 2, 3, 4]), 0)
    one = A.compare_with_closed_form(problem, "fedavg", 0.02, FixedSteps([1, 2, 3, 4]), 1)
    assert one.run.distances.size == 2 and one.max_relative_difference < 1e-12
