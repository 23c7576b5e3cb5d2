"""What executing the chapters under other seeds and parameters showed (chapters 1-10, profile ci,
seeds 1-3): each test fails on the code before its fix. The runs of two chapter seeds share no run seed,
and every problem a chapter builds is drawn from a stream of its own."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from fedlib.data.clients import FederatedDataset
from fedlib.experiments import surrogate as SU
from fedlib.experiments import run_seeds
from fedlib.problems.logistic import LogisticProblem
from bookutil import require_book_module


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


def test_profile_sizes_names_a_table_that_is_no_mapping_of_mappings():
    """Was: table=None (or 3, or a list) raised "'NoneType' object is not iterable" from the profile check,
    {"ci": None} "'NoneType' object is not iterable" from dict(table[profile]), naming no argument."""
    from fedlib.experiments import profile_sizes

    for table in (None, 3, [("ci", {"rounds": 1})], {"ci": None}, {"ci": {"rounds": 1}, "full": [1]}):
        with pytest.raises(TypeError, match=r"^profile_sizes: table must map each profile to its sizes"):
            profile_sizes("ci", table)
    assert profile_sizes("ci", {"ci": {"rounds": 1}, "full": {"rounds": 2}}, rounds=3) == {"rounds": 3}


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


# --------------------------------------------------------------------------- chapter 3's problems
ROOT = Path(__file__).resolve().parents[1]


def _chapter3_problem_seeds(monkeypatch, seed: int) -> list:
    """Execute chapter 3's code (ci profile, parameter ``seed``, two robustness problems, figures
    not saved) and return the ``seed`` of every ``random_quadratic`` it builds, in order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import fedlib.plotting
    import fedlib.problems
    require_book_module("IPython")
    from IPython import display as ipy_display

    from fedlib.problems.quadratic import random_quadratic as real

    seeds: list = []

    def recording(*args, **kwargs):
        seeds.append(int(kwargs["seed"]))
        return real(*args, **kwargs)

    monkeypatch.setattr(fedlib.problems, "random_quadratic", recording)
    monkeypatch.setattr(fedlib.plotting, "save_figure", lambda *a, **k: [])
    monkeypatch.setattr(ipy_display, "display", lambda *a, **k: None)
    monkeypatch.setattr(plt, "show", lambda *a, **k: None)
    cells = json.loads((ROOT / "book" / "03_fedprox_tradeoff.ipynb").read_text())["cells"]
    namespace: dict = {}
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        src = "".join(line for line in cell["source"] if not line.startswith("%"))
        exec(src, namespace)  # noqa: S102 - the repository's own chapter
        if "parameters" in cell["metadata"].get("tags", []):
            namespace.update(seed=seed, robustness_seeds=2)
    plt.close("all")
    return seeds


def test_chapter3_draws_each_problem_from_its_own_stream(monkeypatch):
    """The probe problem (16 clients, d = 5, the CIFAR-10 p_i) and the trade-off problem
    (m clients, d) are different instances; they were both built from the chapter's ``seed``, so
    client i of both drew from the same stream (their first draws equal), and the robustness
    problems used seeds seed+1, ..., so chapter seed 1's problem was chapter seed 0's first
    robustness problem. Now every problem is an instance of its own (Q.instance_seed): within one
    execution and across chapter seeds 0 and 1, no two problems share a seed."""
    runs = {s: _chapter3_problem_seeds(monkeypatch, s) for s in (0, 1)}
    distinct = {s: set(v) for s, v in runs.items()}
    assert all(len(d) == 1 + 1 + 2 for d in distinct.values()), runs  # probe, problem, 2 robustness problems
    assert not distinct[0] & distinct[1], runs


# --------------------------------------------------------------------------- chapters' run seeds
BOOK = Path(__file__).resolve().parents[1] / "book"


def test_run_seeds_are_disjoint_blocks_that_keep_seed_zero():
    assert run_seeds(0, 3) == (0, 1, 2) and run_seeds(0, 4) == (0, 1, 2, 3)
    assert run_seeds(1, 3) == (3, 4, 5) and run_seeds(7, 1) == (7,)
    for count in (1, 2, 3, 4):
        blocks = [set(run_seeds(s, count)) for s in range(40)]
        assert all(len(b) == count for b in blocks)
        assert len(set().union(*blocks)) == 40 * count  # no run seed in two blocks
    with pytest.raises(ValueError, match=r"^count must be an integer >= 1, got 0$"):
        run_seeds(0, 0)
    with pytest.raises(ValueError, match=r"^seed must be an integer >= 0, got -1$"):
        run_seeds(-1, 3)
    with pytest.raises(ValueError, match=r"^seed must be an integer >= 0, got 1\.0$"):
        run_seeds(1.0, 3)


def _code_cells(chapter: str) -> list[str]:
    cells = json.loads((BOOK / chapter).read_text(encoding="utf8"))["cells"]
    return [("parameters" in c["metadata"].get("tags", []), "".join(c["source"]))
            for c in cells if c["cell_type"] == "code"]


def _run_setup(chapter: str, seed: int, name: str):
    """Execute the chapter's parameters cell (with ``seed``) and the code cell after it; return ``name``."""
    require_book_module("IPython")  # the set-up cells display with it
    cells = _code_cells(chapter)
    k = next(i for i, (is_params, _) in enumerate(cells) if is_params)
    namespace: dict = {}
    exec(cells[k][1], namespace)  # noqa: S102 - the repository's own cells
    namespace["seed"] = seed
    exec(cells[k + 1][1], namespace)  # noqa: S102
    return tuple(namespace[name])


def _run_line(chapter: str, seed: int, name: str):
    """Evaluate the chapter's one-line assignment to ``name`` with ``seed`` (and ``run_seeds``)."""
    lines = [m.group(1) for _, src in _code_cells(chapter)
             for m in re.finditer(rf"^{name} = (.*)$", src, re.MULTILINE)]
    assert len(lines) == 1, lines
    return tuple(eval(lines[0], {"seed": seed, "run_seeds": run_seeds}))  # noqa: S307


@pytest.mark.parametrize("chapter, name, how", [
    ("04_synthetic_logistic.ipynb", "seeds", _run_setup),  # was (seed, seed + 1, seed + 2)
    ("09_stragglers.ipynb", "seeds", _run_setup),  # was (0, 1, 2) for every chapter seed
    ("10_acceleration.ipynb", "syn_seeds", _run_line),  # was (0, 1, 2) on the same data for every chapter seed
])
def test_chapters_with_other_seeds_share_no_run(chapter, name, how):
    """Chapter 4 at seed 1 ran seeds (1, 2, 3): two of the three runs of seed 0, on the same data.
    Chapter 10's part 5 ran the same three runs (fixed data, seeds (0, 1, 2)) for every chapter seed."""
    per_seed = {s: how(chapter, s, name) for s in range(4)}
    assert per_seed[0] == (0, 1, 2)  # the committed figures' runs
    for s in range(4):
        for t in range(s):
            assert not set(per_seed[s]) & set(per_seed[t]), (s, per_seed[s], t, per_seed[t])


def test_no_chapter_derives_run_seeds_by_adding_to_its_seed():
    found = [(path.name, m.group(0)) for path in sorted(BOOK.glob("[0-9][0-9]_*.ipynb"))
             for _, src in _code_cells(path.name) for m in re.finditer(r"\bseed \+ \w+", src)]
    assert not found, found


def test_engine_against_reference_runs_share_no_seed_between_chapter_seeds(monkeypatch):
    """Chapter 5's engine check stacked runs with seeds seed + r: seed 1's FedAvg run had the
    initial model, epochs and batches of seed 0's FedNova run."""
    import fedlib.engines.stacked as stacked
    from fedlib.experiments import cifar10 as C

    class Captured(Exception):
        pass

    def capture(model, train, run, **kwargs):
        raise Captured(run)

    monkeypatch.setattr(stacked, "reference_run", capture)
    seeds = {}
    for chapter_seed in (0, 1):
        with pytest.raises(Captured) as info:
            C.engine_against_reference(width=1 / 32, rounds=1, clients=2, samples_per_client=8, batch_size=4,
                                       seed=chapter_seed)
        first = info.value.args[0]
        assert first.name == "FedAvg, momentum"
        seeds[chapter_seed] = first.seed
    assert seeds == {0: 0, 1: 3}


@pytest.mark.parametrize("which", ["sampling_grid", "sampling_bias"])
def test_chapter8_sampling_seeds_of_other_chapter_seeds_are_disjoint(monkeypatch, which):
    """Chapter 8 passes its seed to sampling_grid and sampling_bias, which ran sampling seeds seed, seed + 1,
    ...: chapter seed 1 drew the participants and gradient noise of seed 0's sampling seeds 1 and 2."""
    from fedlib.experiments import speedup as S

    base, work = S.base_setup(seed=0, dim=3)
    real = S.run_replicas
    used: list = []

    def record(*args, seed, **kwargs):
        used.append(seed)
        return real(*args, seed=seed, **kwargs)

    monkeypatch.setattr(S, "run_replicas", record)
    per_seed = {}
    for chapter_seed in (0, 1, 2):
        used.clear()
        if which == "sampling_grid":
            S.sampling_grid(base, work, [1], [2], [4], replicas=1, seeds=3, seed=chapter_seed)
        else:
            S.sampling_bias(base, work, [2], [4], tau_effs=("population",), seeds=3, seed=chapter_seed)
        per_seed[chapter_seed] = tuple(used)
    assert per_seed == {0: (0, 1, 2), 1: (3, 4, 5), 2: (6, 7, 8)}
