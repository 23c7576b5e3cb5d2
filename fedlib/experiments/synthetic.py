r"""Experiments of the chapter "Synthetic(1,1) logistic regression (Figure 5)" (paper §6).

Used by chapters 4, 9 and 10 (the last two for :func:`make_problem`); chapter 4 measures the paper's
"converges significantly faster" with :func:`rounds_to_best_loss`.

Multinomial logistic regression (:mod:`fedlib.problems.logistic`) on one
Synthetic(1,1) data set (30 clients, FedProx's generator, data seed 0 — the paper used
one fixed data file), batch 20, client lr 0.02 (paper App. I), trained by the batched
engine (:func:`fedlib.engines.batched.run_batched`) under three settings of
``SETTINGS``:

* ``fixed`` — every client runs :math:`E = 2` epochs: :math:`\tau_i = 2\lceil n_i/20\rceil`
  still differs across clients because the sizes :math:`n_i` do;
* ``random`` — :math:`E_i^{(t)} \sim \mathcal U\{1,\dots,5\}` per client and round
  (inclusive; our choice: the text does not give Figure 5's range);
* ``partial`` — 10 of the 30 clients per round, drawn uniformly without replacement with
  weights :math:`p_i m/q` (scheme (ii) of §4; App. G treats only scheme (i)), and :math:`E_i^{(t)} \sim \mathcal U\{1,\dots,5\}`.

With client sampling FedNova's :math:`\tau_{\text{eff}}` is fixed to the population value
:math:`\sum_{i=1}^m p_i\,\mathbb E\|a_i\|_1` (:func:`population_tau_eff`) instead of being
estimated from the sampled clients: the update :math:`\tau_{\text{eff}}\sum_{i\in S}\omega_i d_i`
is unbiased only if :math:`\tau_{\text{eff}}` does not depend on the sample (the product of
two sample-dependent factors is not; the chapter shows what goes wrong). Any positive
:math:`\tau_{\text{eff}}` keeps FedNova consistent (§5).

Everything returns plain arrays; the chapter plots and prints them.

Example
-------
>>> prob = make_problem()
>>> runs = run_grid(prob, SETTINGS[:1], {"FedNova": fednova_sgd}, seeds=[0], rounds=2)
>>> runs["fixed", "FedNova"].losses.shape      # (seeds, rounds + 1): initial loss first
(1, 3)
"""
from __future__ import annotations

import dataclasses
import inspect
from typing import Callable, Iterable, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from .._validate import check_choice, check_flag, check_instance, check_int, check_positive, check_sequence
from ..algorithms import FederatedAlgorithm, make_algorithm
from ..data import synthetic
from ..engines.batched import run_batched
from ..plotting import ALGORITHM_COLORS
from ..problems.logistic import LogisticProblem
from ..schedules import expected_a_norms, make_epoch_schedule, parse_epochs
from ..schedules import population_tau_eff as _population_tau_eff
from ..solvers import LocalSolver, proximal_sgd, sgd

__all__ = ["PAPER", "PROFILES", "Setting", "SETTINGS", "make_problem", "population_tau_eff", "fedavg_sgd",
           "fednova_sgd", "fedprox", "with_solver", "Curves", "run_setting", "run_grid", "final_losses",
           "claim_holds", "end_loss", "rounds_to_reach", "RoundsToBest", "rounds_to_best_loss", "plot_losses",
           "plot_diagnostics", "LABEL_STYLE", "lr_sweep"]

#: The paper's synthetic settings (App. I) and the data (FedProx's generator).
PAPER = {"alpha": 1.0, "beta": 1.0, "num_clients": 30, "batch_size": 20, "lr": 0.02}

#: The book's profiles, ``ci`` (under two minutes on two cores; chapter 4 ran in 103 s with 257c8a3's sizes on
#: 2026-12-06, other processes sharing the cores) and ``full`` (the paper's scale).
PROFILES = {
    # Figure 5 and the momentum comparison at 60 rounds: at 20, FedNova's early overshoot left it above FedAvg at the
    # end (median of the last quarter) of 12 of 60 run seeds under sampling, and of 6 of 60 with local momentum (seed
    # audit, 2026-12-05); at 60 rounds of none (and at 200 of none of 30 under sampling). With local momentum at 60
    # rounds, a burst of FedNova's filled the last quarter of 3 of run seeds 0-239 (audit of 2026-12-06): chapter 4
    # compares that pair on the last half of the rounds (FedNova / FedAvg <= 0.62 there). replacement_lrs: the
    # client learning rates of the sampling-with-replacement sweep (lr_sweep); the chapter asserts at its two ends
    # only, so ci runs those (its 900 rounds per seed and algorithm at four rates were 99 of the chapter's 146 s)
    "ci": {"rounds": 60, "seeds": (0, 1, 2), "solver_rounds": 60, "sweep_rounds": 20, "replacement_lrs": (0.02, 0.0025)},
    "full": {"rounds": 200, "seeds": (0, 1, 2), "solver_rounds": 200, "sweep_rounds": 100,
             "replacement_lrs": (0.02, 0.01, 0.005, 0.0025)},
}


@dataclasses.dataclass(frozen=True)
class Setting:
    r"""Local epochs ``(low, high)`` (inclusive, drawn per client and round when
    ``low < high``), participation (``sampling``, ``clients_per_round``) and the
    mini-batch size :math:`B` (:math:`\tau_i = E_i\lceil n_i/B\rceil`; the paper's 20).

    ``epochs`` may be given as the command line writes it, ``"2-5"``; the field then holds
    ``(2, 5)``.

    ``name`` keys the setting in :func:`run_grid`'s result (``"fixed"``, ``"random"``, ``"partial"``); ``label`` is
    its panel title in :func:`plot_losses` (matplotlib text); ``batch_size`` is :math:`B` (default 20), checked
    (an integer >= 1) when a schedule is made, not at construction."""

    name: str
    label: str
    epochs: Union[Tuple[int, int], str]
    sampling: str = "full"
    clients_per_round: Optional[int] = None
    batch_size: int = PAPER["batch_size"]

    def __post_init__(self):
        # "1-5" as the command line writes it, or a (low, high) pair: tuple("1-5") was ('1', '-', '5'),
        # which failed later in the schedule with an unpacking error
        epochs = parse_epochs(self.epochs) if isinstance(self.epochs, str) else self.epochs
        if not (isinstance(epochs, (tuple, list)) and len(epochs) == 2
                and all(isinstance(e, (int, np.integer)) and not isinstance(e, bool) for e in epochs)
                and 1 <= epochs[0] <= epochs[1]):
            raise ValueError(f"epochs: expected integers (low, high) with 1 <= low <= high, or a string like "
                             f"'1-5', got {self.epochs!r}")
        object.__setattr__(self, "epochs", (int(epochs[0]), int(epochs[1])))

    def schedule(self, problem: LogisticProblem, seed: int, batch_size: Optional[int] = None):
        """The local-step schedule (``batch_size``: default the setting's) for the client sizes of ``problem``;
        ``seed`` seeds the epochs drawn per client and round (unused when ``low == high``)."""
        b = self.batch_size if batch_size is None else batch_size
        return make_epoch_schedule(problem.num_samples, b, tuple(self.epochs), seed=seed)

    def expected_a_norms(self, problem: LogisticProblem, solver: LocalSolver,
                         batch_size: Optional[int] = None) -> np.ndarray:
        r""":math:`\mathbb E\|a_i\|_1` of every client over the uniform epochs
        (:func:`fedlib.schedules.expected_a_norms`; ``batch_size``: default the setting's), for the client sizes
        of ``problem`` and the local ``solver`` (a :class:`~fedlib.solvers.LocalSolver`, whose :math:`a_i` it is)."""
        return expected_a_norms(self.schedule(problem, 0, batch_size), solver)


#: The chapter's three settings — :math:`E = 2`, :math:`E_i^{(t)}` uniform on 1..5, and the latter
#: with 10 of the 30 clients sampled uniformly per round.
#:
#: :meta hide-value:
SETTINGS = (
    Setting("fixed", r"$E=2$ for every client", (2, 2)),
    Setting("random", r"$E_i^{(t)}\sim\mathcal{U}\{1,\dots,5\}$", (1, 5)),
    Setting("partial", r"10 of 30 clients (uniform), $E_i^{(t)}\sim\mathcal{U}\{1,\dots,5\}$", (1, 5), "uniform", 10),
)


def make_problem(data_seed: int = 0, l2: float = 0.0, **overrides) -> LogisticProblem:
    r"""Synthetic(1,1), 30 clients (FedProx's generator, ``data_seed``), logistic regression.

    ``overrides``: any other keyword argument of :func:`fedlib.data.synthetic` but ``seed``
    (``alpha``, ``beta``, ``num_clients``, ``dim``, ``num_classes``, ``train_fraction``,
    ``iid``, ``num_samples``); an unknown one is a ``ValueError``, not silently dropped. ``l2`` is the
    :class:`~fedlib.problems.logistic.LogisticProblem`'s penalty :math:`\lambda \ge 0` on ``W`` (default 0)."""
    allowed = set(inspect.signature(synthetic).parameters) - {"seed"}
    unknown = sorted(set(overrides) - allowed)
    if unknown:
        raise ValueError(f"overrides: {', '.join(unknown)} is not a parameter of synthetic() (the data seed is "
                         f"data_seed); use {', '.join(sorted(allowed))}")
    kw = {"alpha": PAPER["alpha"], "beta": PAPER["beta"], "num_clients": PAPER["num_clients"], **overrides}
    # checked here: synthetic() named it 'seed', which is no parameter of make_problem
    return LogisticProblem(synthetic(seed=check_int("data_seed", data_seed), **kw), l2=l2)


def population_tau_eff(problem: LogisticProblem, setting: Setting, solver: LocalSolver,
                       batch_size: Optional[int] = None) -> float:
    r""":math:`\sum_{i=1}^m p_i\,\mathbb E\|a_i\|_1` over *all* clients: FedNova's
    sample-independent :math:`\tau_{\text{eff}}` under client sampling
    (:func:`fedlib.schedules.population_tau_eff` of the setting's epochs and, by default,
    batch size).

    ``problem`` gives the :math:`p_i` and client sizes, ``setting`` the epochs, ``solver`` (a
    :class:`~fedlib.solvers.LocalSolver`) the :math:`a_i`; ``batch_size`` defaults to the setting's."""
    check_instance("problem", problem, LogisticProblem)
    return _population_tau_eff(problem.p, setting.schedule(problem, 0, batch_size), solver)


# --------------------------------------------------------------------------- algorithms
# An algorithm factory is ``(problem, setting) -> FederatedAlgorithm``.
def fedavg_sgd(problem, setting, lr: float = PAPER["lr"]) -> FederatedAlgorithm:
    """FedAvg with local SGD at the client learning rate ``lr`` (> 0; default the paper's 0.02).

    An algorithm factory: ``problem`` and ``setting`` are taken, as every factory's are, and not used."""
    return make_algorithm("fedavg", sgd(lr))


def fednova_sgd(problem, setting, lr: float = PAPER["lr"]) -> FederatedAlgorithm:
    r"""FedNova with local SGD; :math:`\tau_{\text{eff}}` = :func:`population_tau_eff` with sampling.

    ``lr`` is the client learning rate (> 0; default the paper's 0.02); ``problem`` and ``setting`` give the
    population :math:`\tau_{\text{eff}}` when ``setting`` samples clients (its ``sampling`` not ``"full"``)."""
    return with_solver("fednova", sgd(lr))(problem, setting)


def fedprox(mu: float, lr: float = PAPER["lr"]) -> Callable:
    """FedProx (FedAvg aggregation, proximal local SGD with coefficient ``mu``); the factory
    takes an optional client ``lr`` too, like :func:`fedavg_sgd` (for :func:`lr_sweep`)."""
    def make(problem, setting, lr: float = lr):
        return make_algorithm("fedprox", proximal_sgd(lr, mu))

    return make


def with_solver(name: str, solver: LocalSolver) -> Callable:
    """Factory of ``name`` (``"fedavg"`` or ``"fednova"``) with any local ``solver``."""
    def make(problem, setting):
        tau_eff = None
        if name == "fednova" and setting.sampling != "full":
            tau_eff = population_tau_eff(problem, setting, solver)
        return make_algorithm(name, solver, tau_eff=tau_eff)

    return make


# --------------------------------------------------------------------------- runs
class Curves(NamedTuple):
    r"""One (setting, algorithm) over seeds: ``losses`` (seeds, rounds + 1) with the initial
    loss first; per round (seeds, rounds): ``accuracy``, ``chi2``, ``tau_eff`` and
    ``max_coef`` :math:`= \max_i c_i`, :math:`c_i = \tau_{\text{eff}} w_i/\|a_i\|_1` — how many
    times the server applies a client's own change :math:`\Delta_i` (FedAvg: :math:`c_i = p_i`
    or :math:`\omega_i`); ``seconds`` per run."""

    seeds: tuple
    losses: np.ndarray
    accuracy: np.ndarray
    chi2: np.ndarray
    tau_eff: np.ndarray
    max_coef: np.ndarray
    seconds: np.ndarray


def _check_seeds(seeds) -> tuple:
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Iterable):
        raise TypeError(f"seeds must be a sequence of integer run seeds, got {type(seeds).__name__}")
    seeds = tuple(check_int("seeds", s) for s in seeds)
    if not seeds:
        raise ValueError("seeds must name at least one run seed, got none")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct (a repeated seed repeats the same run), got {seeds}")
    return seeds


def run_setting(problem: LogisticProblem, setting: Setting, factory: Callable, seeds: Sequence[int], rounds: int,
                batch_size: Optional[int] = None) -> Curves:
    r"""Run one algorithm factory in one setting for every seed (batched engine).

    ``batch_size`` (default the setting's) replaces the setting's before the factory sees
    it, so that FedNova's population :math:`\tau_{\text{eff}}` (:func:`with_solver`) is the
    one of the batches actually run. ``seeds``: one or more distinct integers >= 0 (every
    claim of chapter 4 is read seed by seed: no seeds, or one seed repeated, would make it a claim
    about nothing or about one run); ``rounds`` >= 1 (at 0 every algorithm stays at the initial loss
    and "FedNova ends below FedAvg" fails for want of any round, not because of the paper).
    Raises ``ValueError`` naming the argument otherwise. ``problem`` is the
    :class:`~fedlib.problems.logistic.LogisticProblem` trained (by :func:`make_problem`)."""
    import time

    check_instance("problem", problem, LogisticProblem)
    seeds = _check_seeds(seeds)
    rounds = check_int("rounds", rounds, minimum=1)
    if batch_size is not None and batch_size != setting.batch_size:
        setting = dataclasses.replace(setting, batch_size=batch_size)
    batch_size = setting.batch_size
    losses, acc, chi2, tau, coef, secs = [], [], [], [], [], []
    for seed in seeds:
        algo = factory(problem, setting)
        t0 = time.perf_counter()
        run = run_batched(algo, problem, setting.schedule(problem, seed, batch_size), rounds, batch_size=batch_size,
                          seed=seed, sampling=setting.sampling, clients_per_round=setting.clients_per_round)
        secs.append(time.perf_counter() - t0)
        losses.append([run.initial["train_loss"]] + [h["train_loss"] for h in run.history])
        acc.append([np.nan if h["test_accuracy"] is None else h["test_accuracy"] for h in run.history])
        chi2.append([h["chi2"] for h in run.history])
        tau.append([h["tau_eff"] for h in run.history])
        coef.append([h["tau_eff"] * max(w / a for w, a in zip(h["weights"], h["a_norms"])) for h in run.history])
    return Curves(tuple(seeds), np.array(losses), np.array(acc), np.array(chi2), np.array(tau), np.array(coef),
                  np.array(secs))


def run_grid(problem: LogisticProblem, settings: Iterable[Setting], algorithms: Mapping[str, Callable],
             seeds: Sequence[int], rounds: int, progress: Optional[Callable[[str], None]] = None) -> dict:
    """``{(setting.name, label): Curves}`` for every setting and algorithm factory (``seeds`` read once).

    ``problem``, ``seeds`` and ``rounds`` (>= 1) are :func:`run_setting`'s; ``settings`` are :class:`Setting`
    instances; ``algorithms`` maps a label to a factory ``(problem, setting) -> FederatedAlgorithm``
    (:func:`fedavg_sgd`, :func:`with_solver`). ``progress``, if given, is called with one line per (setting,
    algorithm) once it has run: its names and the seconds of its runs."""
    check_instance("problem", problem, LogisticProblem)
    seeds = _check_seeds(seeds)  # a generator was used up by the first run: the second had "no seeds"
    out = {}
    for setting in settings:
        for label, factory in algorithms.items():
            out[setting.name, label] = run_setting(problem, setting, factory, seeds, rounds)
            if progress:
                progress(f"{setting.name:8s} {label:18s} {out[setting.name, label].seconds.sum():6.1f} s")
    return out


def lr_sweep(problem: LogisticProblem, setting: Setting, algorithms: Mapping[str, Callable], lrs: Sequence[float],
             seeds: Sequence[int], rounds: int) -> dict:
    r"""``{(lr, label): Curves}``: each factory ``factory(problem, setting, lr)`` at every client
    learning rate of ``lrs``, with :math:`\eta T` held at the paper's: ``rounds`` at
    :math:`\eta = 0.02`, ``round(rounds * 0.02 / lr)`` at ``lr``. Chapter 4 uses it to show that
    FedNova's loss to FedAvg under sampling with replacement is a step-size effect (the spread of
    the server step grows with :math:`\eta`) that reverses at smaller :math:`\eta`.

    ``algorithms`` maps a label to such a factory (:func:`fedavg_sgd`, :func:`fednova_sgd`, :func:`fedprox`);
    ``seeds`` and ``rounds`` (>= 1) are checked as by :func:`run_setting`; ``lrs`` are one or more numbers > 0."""
    check_instance("problem", problem, LogisticProblem)
    rounds = check_int("rounds", rounds, minimum=1)
    seeds = _check_seeds(seeds)
    lrs = [check_positive("lrs", lr) for lr in check_sequence("lrs", lrs, "learning rates")]
    if not lrs:
        raise ValueError("lrs must name at least one learning rate, got none")
    out = {}
    for lr in lrs:
        steps = max(1, int(round(rounds * PAPER["lr"] / lr)))
        for label, factory in algorithms.items():
            out[lr, label] = run_setting(problem, setting, lambda prob, st, f=factory, lr=lr: f(prob, st, lr), seeds,
                                         steps)
    return out


def final_losses(grid: Mapping) -> list:
    """Rows ``(setting, algorithm, mean, std, per-seed finals)`` of the final training losses, one per entry of
    ``grid`` (:func:`run_grid`'s result), in its order."""
    rows = []
    for (setting, label), c in grid.items():
        fin = c.losses[:, -1]
        rows.append((setting, label, float(fin.mean()), float(fin.std()), fin.tolist()))
    return rows


def end_loss(curves: Curves, tail: Optional[int] = None, *, statistic: str = "median") -> np.ndarray:
    r"""Per seed: the final loss (``tail=None``) or, over the last ``tail`` rounds (an integer from 1 to the number of
    rounds; the initial loss is not a round's) of ``curves``, a :class:`Curves`, their median (``statistic="median"``,
    the default) or their mean (``"mean"``).

    The median is where a run settles, whatever a few rounds far above it do; the mean counts those rounds too, so it is
    what bursts cost over the window. Chapter 4 compares FedNova and FedAvg under sampling with replacement by the mean
    over the last half of the rounds, the rest of its claims by the median over the last quarter.

    Example
    -------
    One seed, initial loss 9, then rounds 3, 1, 8, 1 (a burst in the third):

    >>> c = Curves((0,), np.array([[9.0, 3.0, 1.0, 8.0, 1.0]]), *(np.zeros((1, 4)),) * 4, np.zeros(1))
    >>> end_loss(c).tolist(), end_loss(c, 3).tolist(), end_loss(c, 3, statistic="mean").tolist()
    ([1.0], [1.0], [3.3333333333333335])
    """
    statistic = check_choice("statistic", statistic, ("median", "mean"))
    if tail is None:
        return curves.losses[:, -1]
    rounds = curves.losses.shape[1] - 1
    tail = check_int("tail", tail, minimum=1)
    if tail > rounds:
        raise ValueError(f"tail: the {statistic} over the last {tail} rounds of a {rounds}-round run would take in "
                         "the initial loss")
    window = curves.losses[:, -tail:]
    return np.median(window, axis=1) if statistic == "median" else window.mean(axis=1)


def _grid_curves(grid: Mapping, setting: str, label: str, name: str) -> Curves:
    """``grid[setting, label]``, or a ``ValueError`` naming the parameter (``name``: ``better``, ``worse``,
    ``settings``) whose value is not in the grid, instead of a bare ``KeyError: ('s', 'FedNova')``."""
    try:
        return grid[setting, label]
    except KeyError:
        pass
    except TypeError:  # a list, None: not a mapping of (setting, label) keys; in a mapping, an unhashable setting or
        if not isinstance(grid, Mapping):  # label (a list), named below: the dict was blamed as 'no mapping'
            raise ValueError(f"grid must be a mapping {{(setting, label): Curves}} (run_grid's), got "
                             f"{type(grid).__name__}") from None
    keys = [k for k in grid if isinstance(k, tuple) and len(k) == 2]
    labels = sorted({k[1] for k in keys if k[0] == setting}, key=str)
    if not labels:
        value = setting
        name, choices = "settings", sorted({k[0] for k in keys}, key=str)
    else:
        value, choices = label, labels
    raise ValueError(f"{name} must be one of the grid's {'settings' if name == 'settings' else 'labels'} "
                     f"{choices}, got {value!r}")


def claim_holds(grid: Mapping, settings: Iterable[str], better: str = "FedNova", worse: str = "FedAvg",
                tail: Optional[int] = None) -> dict:
    """``{setting: per-seed booleans}``: is ``better``'s final loss (or its median over the
    last ``tail`` rounds) below ``worse``'s, seed by seed? ``grid`` is :func:`run_grid`'s result, holding
    ``(setting, better)`` and ``(setting, worse)`` for each of ``settings`` (setting names)."""
    settings = check_sequence("settings", settings, "setting names")
    return {s: (end_loss(_grid_curves(grid, s, better, "better"), tail)
                < end_loss(_grid_curves(grid, s, worse, "worse"), tail)).tolist() for s in settings}


def rounds_to_reach(curves: Curves, threshold) -> np.ndarray:
    r"""Per seed: the first round :math:`t \ge 1` after which the training loss is at or below the seed's
    ``threshold`` (``losses[seed, t] <= threshold[seed]``; a scalar applies to every seed), ``inf`` when no round of
    the run gets there. Round 0 is the initial loss, not a round's, and never counts. Only the ``losses`` of
    ``curves`` (a :class:`Curves`) are read.

    >>> c = Curves((0, 1), np.array([[2.0, 1.5, 1.0, 1.2], [2.0, 1.9, 1.8, 1.7]]), *[None] * 5)
    >>> rounds_to_reach(c, [1.2, 1.0])
    array([ 2., inf])
    """
    losses = curves.losses[:, 1:]
    seeds = losses.shape[0]
    # by name: None became NaN (never reached: inf for every seed without a word), 'x' or a wrong length failed in
    # numpy ('could not convert string to float', 'operands could not be broadcast')
    try:
        t = None if threshold is None or isinstance(threshold, (str, bytes)) else np.asarray(threshold, np.float64)
    except (TypeError, ValueError):
        t = None
    if t is None or t.ndim > 1 or (t.ndim == 1 and t.shape[0] != seeds):
        raise ValueError(f"threshold must be a number or one number per seed ({seeds}), got {threshold!r}")
    threshold = np.broadcast_to(t, (seeds,))
    reached = losses <= threshold[:, None]
    return np.where(reached.any(axis=1), reached.argmax(axis=1) + 1.0, np.inf)


class RoundsToBest(NamedTuple):
    r"""One setting of :func:`rounds_to_best_loss`, one entry per seed: ``threshold`` is ``worse``'s lowest
    training loss over its rounds, ``worse_rounds`` the round it first gets there (the round of that minimum),
    ``better_rounds`` the round ``better`` first gets there (``inf``: not within the run)."""

    threshold: np.ndarray
    worse_rounds: np.ndarray
    better_rounds: np.ndarray


def rounds_to_best_loss(grid: Mapping, settings: Iterable[str], better: str = "FedNova",
                        worse: str = "FedAvg") -> dict:
    r"""``{setting: RoundsToBest}``: how many rounds each algorithm needs to reach ``worse``'s lowest training loss
    of the run, seed by seed — chapter 4's measure of the paper's "FedNova converges significantly faster than
    FedAvg" (§6, Figure 5). The threshold is relative to the run: :math:`L^\star_s = \min_{1\le t\le T}
    L^{\text{worse}}_s(t)` for seed :math:`s`; ``worse`` needs :math:`\arg\min_t L^{\text{worse}}_s(t)` rounds (the
    first, on a tie), ``better`` the first :math:`t` with :math:`L^{\text{better}}_s(t) \le L^\star_s`
    (:func:`rounds_to_reach`). A ratio ``better_rounds / worse_rounds`` well below 1 says that ``better`` gets where
    ``worse`` ends up best in a fraction of its rounds. Both curves must hold the same seeds.
    ``grid`` is :func:`run_grid`'s result and ``settings`` the setting names to measure.

    >>> c = lambda *rows: Curves((0,), np.array(rows, dtype=float), *[None] * 5)
    >>> rows = rounds_to_best_loss({("s", "A"): c([2, 1.5, 1.2, 1.1, 1.15]), ("s", "B"): c([2, 1.3, 1.0, 0.9, 0.8])},
    ...                            ["s"], better="B", worse="A")
    >>> rows["s"].threshold, rows["s"].worse_rounds, rows["s"].better_rounds
    (array([1.1]), array([3.]), array([2.]))
    """
    out = {}
    for s in check_sequence("settings", settings, "setting names"):
        w, b = _grid_curves(grid, s, worse, "worse"), _grid_curves(grid, s, better, "better")
        if tuple(w.seeds) != tuple(b.seeds):
            raise ValueError(f"{s}: {worse} ran seeds {w.seeds}, {better} {b.seeds}: the rounds compare seed by seed")
        if w.losses.shape[1] < 2:
            raise ValueError(f"{s}: {worse} ran no round: no lowest loss to reach")
        threshold = w.losses[:, 1:].min(axis=1)
        out[s] = RoundsToBest(threshold, rounds_to_reach(w, threshold), rounds_to_reach(b, threshold))
    return out


# --------------------------------------------------------------------------- figures
#: label -> matplotlib style
LABEL_STYLE = {label: {"color": ALGORITHM_COLORS[label.lower()]} for label in ("FedAvg", "FedProx", "FedNova")}


def _style(label: str, i: int) -> dict:
    for key, st in LABEL_STYLE.items():
        if label.startswith(key):
            return dict(st, ls="-" if label == key else "--")
    return {"color": f"C{i}"}


def _check_plotted(grid: Mapping, settings: Sequence[Setting], labels: Sequence[str]) -> None:
    """At least one setting, and a curve of ``grid`` for every (setting, label) drawn: checked before a
    figure is made (a ``ValueError`` naming ``settings`` or ``grid``)."""
    if len(settings) == 0:
        raise ValueError("settings: no setting to draw (one panel per setting), got none")
    missing = [(st.name, label) for st in settings for label in labels if (st.name, label) not in grid]
    if missing:
        raise ValueError(f"grid: no curves for {missing[:3]}{' ...' if len(missing) > 3 else ''} "
                         f"(keys are (setting.name, label))")


def plot_losses(grid: Mapping, settings: Sequence[Setting], labels: Sequence[str], axes=None, logy: bool = True):
    """One panel per setting: mean training loss vs rounds, shaded min-max over seeds (at least one
    setting, and ``grid[setting.name, label]`` for each setting and label: a ``ValueError`` naming
    ``settings`` or ``grid`` otherwise, before any figure is made).

    ``labels`` are the algorithms drawn (their keys in ``grid``; FedAvg, FedProx and FedNova take
    :data:`LABEL_STYLE`'s colours). ``axes``: one matplotlib ``Axes`` per setting (default ``None``: a new figure);
    ``logy`` (``True`` or ``False``, default ``True``) draws a log scale. Returns the figure."""
    import matplotlib.pyplot as plt

    _check_plotted(grid, settings, labels)
    logy = check_flag("logy", logy)  # "no" is truthy: it drew a log scale

    if axes is None:
        fig, axes = plt.subplots(1, len(settings), figsize=(4.2 * len(settings), 3.4), sharey=True, squeeze=False)
        axes = axes[0]
    else:
        fig = axes[0].figure
    for ax, setting in zip(axes, settings):
        for i, label in enumerate(labels):
            c = grid[setting.name, label]
            x = np.arange(c.losses.shape[1])
            st = _style(label, i)
            ax.plot(x, c.losses.mean(0), label=label, **st)
            ax.fill_between(x, c.losses.min(0), c.losses.max(0), color=st.get("color"), alpha=0.2, lw=0)
        ax.set_title(setting.label, fontsize=10)
        ax.set_xlabel("communication round")
        if logy:
            ax.set_yscale("log")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel(r"global training loss $F(x)$")
    axes[0].legend(fontsize=9)
    fig.tight_layout()
    return fig


def plot_diagnostics(grid: Mapping, settings: Sequence[Setting], labels: Sequence[str]):
    r"""Two rows: :math:`\chi^2(p\|w)` per round and :math:`\tau_{\text{eff}}` per round (seed mean);
    ``grid``, ``settings`` and ``labels`` as in :func:`plot_losses`."""
    import matplotlib.pyplot as plt

    _check_plotted(grid, settings, labels)

    fig, axes = plt.subplots(2, len(settings), figsize=(4.2 * len(settings), 5.6), sharex=True, squeeze=False)
    for j, setting in enumerate(settings):
        for i, label in enumerate(labels):
            c = grid[setting.name, label]
            x = np.arange(1, c.chi2.shape[1] + 1)
            st = dict(_style(label, i), lw=2.6 - 0.8 * i)  # thinner on top: equal curves stay visible
            axes[0, j].plot(x, c.chi2.mean(0), label=label, **st)
            axes[1, j].plot(x, c.tau_eff.mean(0), label=label, **st)
        axes[0, j].set_title(setting.label, fontsize=10)
        axes[1, j].set_xlabel("communication round")
        for ax in axes[:, j]:
            ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel(r"$\chi^2_{p\|w}$")
    axes[1, 0].set_ylabel(r"$\tau_{\mathrm{eff}}$")
    axes[0, 0].legend(fontsize=9)
    fig.tight_layout()
    return fig
