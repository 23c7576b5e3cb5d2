r"""Fixed-length rounds against waiting for the slowest client (paper §1, §5; chapter 9).

Paper §1: "A naive approach to overcome heterogeneity is to fix a target number of local
updates :math:`\tau` that each client must finish within a communication round and keep
fast nodes idle while the slow clients finish their updates. This method will ensure
objective consistency [...], nonetheless, waiting for the slowest one can significantly
increase the total training time." FedNova's "bonus benefit" (§1, §5): a round can have a
fixed length, each client contributing the steps it finished — heterogeneous
:math:`\tau_i^{(t)}` that FedNova normalises and FedAvg does not.

Clients run at speeds :math:`s_i` (steps per second, lognormal across clients: hardware),
slowed every round by a lognormal jitter and, with some probability, by a straggling
factor (:class:`fedlib.schedules.WallClock`). Three strategies on the same clients:

* ``"wait-for-all"``: every client runs :math:`\tau` steps (the steps the median client
  finishes in a fixed-length round); the round lasts
  :math:`\max_i \tau/s_i^{(t)}` (:meth:`~fedlib.schedules.WallClock.seconds_to_finish`).
  All :math:`\tau_i` equal: FedAvg and FedNova are the same algorithm, :math:`w = p`;
* ``"fedavg-fixed-time"`` and ``"fednova-fixed-time"``: rounds of ``round_seconds``;
  client :math:`i` runs :math:`\tau_i^{(t)} = \max(1, \lfloor s_i^{(t)} T_r\rfloor)` steps
  (a client too slow for one step in the window still finishes its one step, and the
  round waits for it).

Every run is the batched engine (:func:`fedlib.engines.batched.run_batched`) on
Synthetic(1,1); each seed is its own mini-batches and its own straggling (the base speeds
are the clients' and stay). What is measured: the training loss :math:`F(x)` against the
simulated wall-clock time, and at the end, each client's loss :math:`F_i` at the model averaged over the last
rounds: FedAvg with fixed-length rounds weights client :math:`i` by
:math:`w_i^{(t)} = p_i\tau_i^{(t)}/\sum_j p_j\tau_j^{(t)}` and drifts towards the surrogate
:math:`\tilde F = \sum_i \bar w_i F_i` of Theorem 1 (:func:`objective_shift`), FedNova's weights are :math:`p`.

Example
-------
>>> from fedlib.experiments.synthetic import make_problem
>>> prob = make_problem()
>>> clock = make_clock(prob.num_clients, seed=0)
>>> runs = run_strategies(prob, clock, rounds=3, seeds=[0])
>>> runs["wait-for-all"].seconds.shape, bool(runs["wait-for-all"].seconds[0, -1] > 3 * clock.round_seconds)
((1, 4), True)
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Mapping, NamedTuple, Optional, Sequence

import numpy as np

from .._validate import (_is_number, check_choice, check_count, check_instance, check_int, check_nonnegative,
                         check_positive, check_sequence)
from ..algorithms import make_algorithm
from ..engines.batched import run_batched
from ..plotting import ALGORITHM_COLORS
from ..problems.logistic import LogisticProblem, unpack_params
from ..rng import generator
from ..schedules import FixedSteps, WallClock, whole_steps
from ..solvers import sgd

__all__ = ["STRATEGIES", "LABELS", "make_clock", "sync_steps_of", "StragglerCurves", "run_strategy",
           "run_strategies", "loss_at", "rounds_finished", "smoothed_loss_at", "time_to_reach", "smoothed_end_loss",
           "objective_shift", "objective_shift_spread", "last_lead_round", "plot_loss_vs_time", "summary_markdown"]

#: The three strategies, in the chapter's order.
STRATEGIES = ("wait-for-all", "fedavg-fixed-time", "fednova-fixed-time")
#: Their labels in tables and figures.
LABELS = {"wait-for-all": "wait for all (τ fixed)", "fedavg-fixed-time": "FedAvg, fixed-length rounds",
          "fednova-fixed-time": "FedNova, fixed-length rounds"}


def make_clock(num_clients: int, seed: int = 0, *, median_speed: float = 20.0, spread: float = 0.75,
               round_seconds: float = 0.5, jitter: float = 0.2, straggler_prob: float = 0.1,
               straggler_factor: float = 0.2) -> WallClock:
    r"""Clients with base speeds :math:`s_i = \bar s\,e^{\sigma_s Z_i}` (``median_speed``
    :math:`\bar s` steps per second, ``spread`` :math:`\sigma_s`, :math:`Z_i \sim N(0,1)` from
    ``generator(seed, "client_speeds")``) as a :class:`fedlib.schedules.WallClock` with
    per-round ``jitter`` and stragglers (probability ``straggler_prob``, speed times
    ``straggler_factor``); its straggling stream has the same ``seed``.

    ``num_clients`` is :math:`m \ge 1`; ``median_speed`` (> 0) and ``spread`` (:math:`\ge 0`) are checked here;
    ``round_seconds``, the fixed round length :math:`T_r` in seconds (default 0.5), ``jitter``, ``straggler_prob``,
    ``straggler_factor`` and ``seed`` go to :class:`fedlib.schedules.WallClock`, which checks them."""
    num_clients = check_int("num_clients", num_clients, minimum=1)
    check_positive("median_speed", median_speed)
    check_nonnegative("spread", spread)
    speeds = median_speed * np.exp(spread * generator(seed, "client_speeds").standard_normal(num_clients))
    return WallClock(speeds, round_seconds, jitter=jitter, straggler_prob=straggler_prob,
                     straggler_factor=straggler_factor, seed=seed)


def sync_steps_of(clock: WallClock) -> int:
    r"""The :math:`\tau` of ``"wait-for-all"``: what the median client finishes in one
    fixed-length round, :math:`\lfloor \operatorname{median}_i(s_i)\,T_r\rfloor` (at least 1).

    ``clock`` is a :class:`fedlib.schedules.WallClock`."""
    check_instance("clock", clock, WallClock)
    return max(1, int(whole_steps(np.median(clock.speeds) * clock.round_seconds)))


class StragglerCurves(NamedTuple):
    r"""One strategy over seeds: ``losses`` (seeds, rounds + 1), the initial loss first;
    ``seconds`` (seeds, rounds + 1), the wall-clock time at which each loss is reached
    (0 first); ``chi2`` (seeds, rounds), :math:`\chi^2(p\|w)` of every round's weights;
    ``mean_steps`` (seeds,), :math:`\bar\tau` averaged over the rounds; ``weights`` (seeds, m), the aggregation
    weights :math:`w^{(t)}` averaged over the rounds, each round by its :math:`\tau_{\text{eff}}^{(t)}` (the length
    of its step), :math:`\bar w = \sum_t \tau_{\text{eff}}^{(t)} w^{(t)} / \sum_t \tau_{\text{eff}}^{(t)}`, for
    FedAvg :math:`\bar w_i = p_i\sum_t\tau_i^{(t)} / \sum_t\sum_j p_j\tau_j^{(t)}`; ``end_client_losses`` (seeds, m),
    :math:`F_i` at the parameters averaged over the last rounds; ``end_rounds``, how many rounds that average spans
    (:func:`run_strategy`'s ``end_fraction`` of them, at least one). The last three are ``None`` in curves built
    without them."""

    strategy: str
    seeds: tuple
    losses: np.ndarray
    seconds: np.ndarray
    chi2: np.ndarray
    mean_steps: np.ndarray
    weights: Optional[np.ndarray] = None
    end_client_losses: Optional[np.ndarray] = None
    end_rounds: Optional[int] = None

    @property
    def label(self) -> str:
        return LABELS[self.strategy]


def _last_params(after: int) -> tuple:
    """``(kept, hook)``: ``hook`` as ``run_batched``'s ``on_round_end`` appends to the list ``kept`` a copy of the
    (packed) parameters after every round past the first ``after``."""
    kept = []

    def hook(state, history, initial):
        if len(history) > after:
            kept.append(np.array(state.params, dtype=float))
    return kept, hook


def run_strategy(problem: LogisticProblem, clock: WallClock, strategy: str, rounds: int, seeds: Sequence[int], *,
                 sync_steps: Optional[int] = None, lr: float = 0.02, batch_size: int = 20,
                 end_fraction: float = 0.05) -> StragglerCurves:
    r"""Run one of :data:`STRATEGIES` for every seed; round durations from ``clock`` with
    its straggling reseeded per run (``dataclasses.replace(clock, seed=seed)``).

    ``sync_steps`` is the :math:`\tau` of ``"wait-for-all"``, a whole number :math:`\ge 1` (default
    :func:`sync_steps_of`); the fixed-length strategies take their steps from the clock, so for them it is refused
    rather than ignored.

    ``problem`` is a :class:`~fedlib.problems.logistic.LogisticProblem` with as many clients as ``clock``; ``strategy``
    one of :data:`STRATEGIES`; ``rounds`` an integer :math:`\ge 1`; ``seeds`` a non-empty sequence of run seeds
    (integers :math:`\ge 0`); ``lr`` the local SGD step :math:`\eta` (default 0.02) and ``batch_size`` :math:`B`
    (default 20). ``end_client_losses`` are the :math:`F_i` at the mean of the parameters after each of the last
    ``end_fraction`` :math:`\in (0, 1]` of the rounds (default 0.05, as :func:`smoothed_end_loss`; at least the
    last round): the model with its SGD noise averaged."""
    check_instance("problem", problem, LogisticProblem)
    check_instance("clock", clock, WallClock)
    check_choice("strategy", strategy, STRATEGIES)
    rounds = check_int("rounds", rounds, minimum=1)
    if clock.num_clients != problem.num_clients:
        raise ValueError(f"clock: {clock.num_clients} clients, the problem has {problem.num_clients}")
    if sync_steps is not None and strategy != "wait-for-all":
        raise ValueError(f"sync_steps: only 'wait-for-all' runs a fixed number of steps; {strategy!r} takes "
                         f"tau_i^(t) from the clock, got sync_steps={sync_steps!r}")
    tau = sync_steps_of(clock) if sync_steps is None else check_count("sync_steps", sync_steps, minimum=1)
    seeds = [check_int("seeds", s) for s in check_sequence("seeds", seeds, "run seeds")]
    if not seeds:
        raise ValueError("seeds must name at least one run seed")
    _check_fraction("end_fraction", end_fraction)
    tail = _tail_rounds(end_fraction, rounds)
    losses, seconds, chi2, steps, weights, client_losses = [], [], [], [], [], []
    for seed in seeds:
        run_clock = dataclasses.replace(clock, seed=int(seed))
        if strategy == "wait-for-all":
            schedule, aggregation = FixedSteps([tau] * problem.num_clients), "fedavg"
            durations = [run_clock.seconds_to_finish(tau, t) for t in range(rounds)]
        else:
            schedule, aggregation = run_clock, strategy.split("-")[0]
            durations = [run_clock.round_duration(t) for t in range(rounds)]
        last, keep = _last_params(rounds - tail)
        run = run_batched(make_algorithm(aggregation, sgd(lr)), problem, schedule, rounds, batch_size=batch_size,
                          seed=int(seed), on_round_end=keep)
        end_params = unpack_params(np.mean(last, axis=0))
        client_losses.append([problem.client_loss(end_params, i) for i in range(problem.num_clients)])
        weights.append(_step_weighted_mean_weights(run.history))
        losses.append([run.initial["train_loss"]] + [h["train_loss"] for h in run.history])
        seconds.append(np.concatenate([[0.0], np.cumsum(durations)]))
        chi2.append([h["chi2"] for h in run.history])
        steps.append(np.mean([np.mean(h["local_steps"]) for h in run.history]))
    return StragglerCurves(strategy, tuple(int(s) for s in seeds), np.array(losses), np.array(seconds),
                           np.array(chi2), np.array(steps), np.array(weights), np.array(client_losses),
                           int(tail))


def _step_weighted_mean_weights(history: Sequence[dict]) -> np.ndarray:
    r""":math:`\bar w = \sum_t \tau_{\text{eff}}^{(t)} w^{(t)} / \sum_t \tau_{\text{eff}}^{(t)}` of a run's rounds
    (their ``tau_eff`` and ``weights``): round :math:`t` moves the model by
    :math:`-\eta\,\tau_{\text{eff}}^{(t)}\sum_i w_i^{(t)}\nabla F_i` (full gradients), so over the run the
    clients' gradients count in proportion to :math:`\sum_t \tau_{\text{eff}}^{(t)} w_i^{(t)}`, for FedAvg
    :math:`p_i\sum_t \tau_i^{(t)}`; the objective the rounds drift to weights them so, not by the plain mean of
    the :math:`w^{(t)}` (which gives a round of few steps the weight of a long one)."""
    tau_eff = np.array([h["tau_eff"] for h in history], dtype=float)
    return tau_eff @ np.array([h["weights"] for h in history], dtype=float) / tau_eff.sum()


def run_strategies(problem: LogisticProblem, clock: WallClock, rounds: int, seeds: Sequence[int], *,
                   sync_steps: Optional[int] = None, lr: float = 0.02, batch_size: int = 20, end_fraction: float = 0.05,
                   progress: Optional[Callable[[str], None]] = None) -> dict:
    r"""``{strategy: StragglerCurves}`` for all :data:`STRATEGIES`, the same rounds and seeds
    (``sync_steps``: the :math:`\tau` of ``"wait-for-all"``, see :func:`run_strategy`).

    ``problem``, ``clock``, ``rounds``, ``seeds``, ``lr``, ``batch_size`` and ``end_fraction`` are
    :func:`run_strategy`'s; ``progress``, if given, is called with each strategy's name once it has run."""
    check_instance("problem", problem, LogisticProblem)
    seeds = check_sequence("seeds", seeds, "run seeds")  # read once: a generator left the second strategy none
    out = {}
    for strategy in STRATEGIES:
        out[strategy] = run_strategy(problem, clock, strategy, rounds, seeds,
                                     sync_steps=sync_steps if strategy == "wait-for-all" else None, lr=lr,
                                     batch_size=batch_size, end_fraction=end_fraction)
        if progress:
            progress(strategy)
    return out


def loss_at(curves: StragglerCurves, seconds: float) -> np.ndarray:
    r"""Per seed: the loss of the last round finished by wall-clock time ``seconds`` (a time
    :math:`\ge 0`; ``inf``: the last round).

    ``curves`` is a :class:`StragglerCurves` of :func:`run_strategy`."""
    idx = rounds_finished(curves, seconds)
    return curves.losses[np.arange(len(idx)), idx]


def rounds_finished(curves: StragglerCurves, seconds: float) -> np.ndarray:
    r"""Per seed: how many rounds had finished by wall-clock time ``seconds`` (a time :math:`\ge 0`), the index in
    ``curves.losses`` of the loss reached then (chapter 9: how many rounds :func:`smoothed_loss_at`'s share of them
    spans).

    ``curves`` is a :class:`StragglerCurves` of :func:`run_strategy`."""
    if not _is_number(seconds) or seconds != seconds or seconds < 0:  # != itself: NaN (np.isnan fails on 10**20)
        raise ValueError(f"seconds must be a wall-clock time >= 0, got {seconds!r}")
    return np.array([np.searchsorted(s, seconds, side="right") - 1 for s in curves.seconds])


def _tail_rounds(fraction: float, rounds: int) -> int:
    """The last ``fraction`` of ``rounds`` rounds, as a count: at least one."""
    return max(1, int(round(fraction * rounds)))


def smoothed_loss_at(curves: StragglerCurves, seconds: float, fraction: float = 0.05) -> np.ndarray:
    r"""Per seed: the median loss over the last ``fraction`` :math:`\in (0, 1]` of the rounds finished by
    wall-clock time ``seconds`` (at least the last of them; the initial loss if none has): :func:`loss_at` with
    the SGD noise of single rounds averaged, as :func:`smoothed_end_loss` is at the end (``seconds`` ``inf``).

    ``curves`` is a :class:`StragglerCurves` of :func:`run_strategy`."""
    _check_fraction("fraction", fraction)
    return np.array([np.median(loss[done + 1 - _tail_rounds(fraction, done) if done else 0:done + 1])
                     for loss, done in zip(curves.losses, rounds_finished(curves, seconds))])


def time_to_reach(curves: StragglerCurves, target: float) -> np.ndarray:
    """Per seed: the wall-clock time of the first round whose loss is at most ``target``
    (``inf`` if no round gets there).

    ``curves`` is a :class:`StragglerCurves` of :func:`run_strategy`."""
    if not _is_number(target) or target != target:
        raise ValueError(f"target must be a loss (a number, not NaN), got {target!r}")
    out = np.full(len(curves.seeds), np.inf)
    for k, (loss, sec) in enumerate(zip(curves.losses, curves.seconds)):
        hit = np.flatnonzero(loss <= target)
        if hit.size:
            out[k] = sec[hit[0]]
    return out


def _check_fraction(name: str, value) -> None:
    """A share of the rounds: a number in (0, 1]."""
    if not _is_number(value) or not 0 < value <= 1:
        raise ValueError(f"{name} must lie in (0, 1], got {value!r}")


def smoothed_end_loss(curves: StragglerCurves, fraction: float = 0.05) -> np.ndarray:
    r"""Per seed: the median loss over the last ``fraction`` :math:`\in (0, 1]` of the rounds (SGD
    noise averaged; at least the last round, never the initial loss).

    ``curves`` is a :class:`StragglerCurves` of :func:`run_strategy`."""
    _check_fraction("fraction", fraction)
    tail = _tail_rounds(fraction, curves.losses.shape[1] - 1)
    return np.median(curves.losses[:, -tail:], axis=1)


def _end_client_losses(name: str, curves: StragglerCurves) -> np.ndarray:
    """``curves.end_client_losses``, refused (naming ``name``) when the curves were built without them."""
    check_instance(name, curves, StragglerCurves)
    if curves.end_client_losses is None or curves.weights is None:
        raise ValueError(f"{name}: curves without end_client_losses and weights (run_strategy records them)")
    return np.asarray(curves.end_client_losses, dtype=float)


def _shift_inputs(fedavg: StragglerCurves, fednova: StragglerCurves, p) -> tuple:
    """FedAvg's and FedNova's end client losses, FedAvg's mean weights and ``p``, checked against each other."""
    avg, nova = _end_client_losses("fedavg", fedavg), _end_client_losses("fednova", fednova)
    if tuple(fednova.seeds) != tuple(fedavg.seeds):
        raise ValueError(f"fednova: seeds {tuple(fednova.seeds)}, fedavg has {tuple(fedavg.seeds)} (runs are compared "
                         "seed by seed)")
    if fedavg.end_rounds != fednova.end_rounds:
        raise ValueError(f"fednova: models averaged over the last {fednova.end_rounds} rounds, fedavg's over "
                         f"{fedavg.end_rounds} (run both with one end_fraction and rounds)")
    p = np.asarray(p, dtype=float)
    if p.ndim != 1 or avg.shape[1] != p.size or nova.shape != avg.shape:
        raise ValueError(f"p: {p.shape} client weights, the end client losses are {avg.shape} (fedavg) and "
                         f"{nova.shape} (fednova)")
    return avg, nova, np.asarray(fedavg.weights, dtype=float), p


def objective_shift(fedavg: StragglerCurves, fednova: StragglerCurves, p) -> np.ndarray:
    r"""Per seed: :math:`\sum_i (p_i - \bar w_i)\,(F_i(x_{\text{avg}}) - F_i(x_{\text{nova}}))`, with
    :math:`\bar w` FedAvg's weights averaged over its rounds (:class:`StragglerCurves`' ``weights``, each round by its
    :math:`\tau_{\text{eff}}^{(t)}`) and :math:`x` each run's model at the end
    (``end_client_losses``). It is :math:`[F(x_{\text{avg}}) - F(x_{\text{nova}})] - [\tilde F(x_{\text{avg}}) -
    \tilde F(x_{\text{nova}})]` with :math:`F = \sum_i p_i F_i` and FedAvg's surrogate
    :math:`\tilde F = \sum_i \bar w_i F_i`: positive when, compared with FedNova's model, FedAvg's does worse on the
    clients it weights less than :math:`p` (the slow ones: :math:`\bar w_i < p_i` when client :math:`i`'s mean
    :math:`\tau_i^{(t)}` is below the rounds' mean :math:`\sum_j p_j\tau_j^{(t)}`) than on those it weights more. If
    each model minimised its own objective (FedAvg :math:`\tilde F`, FedNova :math:`F`), it would be :math:`\ge 0`:
    the sum of :math:`\tilde F(x_{\text{nova}}) - \tilde F(x_{\text{avg}}) \ge 0` and
    :math:`F(x_{\text{avg}}) - F(x_{\text{nova}}) \ge 0`. With one objective for both it is noise around 0
    (:func:`objective_shift_spread`).

    ``fedavg`` and ``fednova`` are the :class:`StragglerCurves` of :func:`run_strategy` (the same seeds, with
    ``end_client_losses`` and ``weights``); ``p`` the clients' weights :math:`p_i` (``problem.p``)."""
    avg, nova, w, p = _shift_inputs(fedavg, fednova, p)
    return np.einsum("ki,ki->k", p - w, avg - nova)


def objective_shift_spread(fedavg: StragglerCurves, fednova: StragglerCurves, p) -> float:
    r"""The noise of :func:`objective_shift`: its largest magnitude between two runs of the *same* strategy,
    :math:`\max |\sum_i (p_i - \bar w^{(k)}_i)(F_i(x_k) - F_i(x_j))|` over seeds :math:`k \ne j` of FedAvg's runs
    and of FedNova's, :math:`\bar w^{(k)}` FedAvg's mean weights of seed :math:`k`: runs with one objective, other
    mini-batches and straggling.

    ``fedavg``, ``fednova`` and ``p`` as :func:`objective_shift`'s, with at least two seeds (a ``ValueError``
    otherwise)."""
    avg, nova, w, p = _shift_inputs(fedavg, fednova, p)
    if len(avg) < 2:
        raise ValueError(f"fedavg: the spread between runs needs at least two seeds, got {tuple(fedavg.seeds)}")
    return float(max(abs((p - w[k]) @ (x[k] - x[j])) for x in (avg, nova) for k in range(len(x))
                     for j in range(len(x)) if j != k))


def last_lead_round(ahead: StragglerCurves, behind: StragglerCurves, window: int = 25) -> np.ndarray:
    """Per seed: the last round at which ``ahead`` still has the lower loss (running means
    over ``window`` rounds, same rounds and seeds for both; 0 if never).

    ``behind`` is the other strategy's :class:`StragglerCurves`; rounds or seeds that differ from ``ahead``'s are a
    ``ValueError``."""
    rounds = ahead.losses.shape[1] - 1
    if behind.losses.shape[1] - 1 != rounds:
        raise ValueError(f"behind: {behind.losses.shape[1] - 1} rounds, ahead has {rounds}")
    if tuple(behind.seeds) != tuple(ahead.seeds):
        raise ValueError(f"behind: seeds {tuple(behind.seeds)}, ahead has {tuple(ahead.seeds)} (runs are compared "
                         "seed by seed)")
    window = check_int("window", window, minimum=1)
    if window > rounds:
        raise ValueError(f"window must be at most the {rounds} rounds of the curves, got {window}")
    out = []
    for a, b in zip(ahead.losses, behind.losses):
        k = np.ones(window) / window
        diff = np.convolve(a[1:], k, mode="valid") - np.convolve(b[1:], k, mode="valid")
        lead = np.flatnonzero(diff < 0)
        out.append(int(lead[-1] + window) if lead.size else 0)
    return np.array(out)


def plot_loss_vs_time(axes, runs: Mapping[str, StragglerCurves]) -> None:
    """Left: training loss against wall-clock seconds (log scale; every seed, thin);
    right: against rounds. ``axes``: the two panels; ``runs``: keyed by :data:`STRATEGIES` (a
    ``ValueError`` naming ``axes`` or ``runs`` otherwise, before anything is drawn)."""
    if len(axes) != 2:
        raise ValueError(f"axes: plot_loss_vs_time draws two panels (seconds, rounds), got {len(axes)} axes")
    unknown = [k for k in runs if k not in STRATEGIES]
    if unknown:
        raise ValueError(f"runs: keys must be among STRATEGIES {STRATEGIES}, got {unknown}")
    colors = {"wait-for-all": "C2", "fedavg-fixed-time": ALGORITHM_COLORS["fedavg"],
              "fednova-fixed-time": ALGORITHM_COLORS["fednova"]}
    for strategy, c in runs.items():
        for k in range(len(c.seeds)):
            kw = dict(color=colors[strategy], lw=0.9, alpha=0.9 if k == 0 else 0.35,
                      label=c.label if k == 0 else None)
            axes[0].plot(c.seconds[k, 1:], c.losses[k, 1:], **kw)
            axes[1].plot(np.arange(1, c.losses.shape[1]), c.losses[k, 1:], **kw)
    axes[0].set_xscale("log")
    axes[0].set_xlabel("simulated wall-clock time (s)")
    axes[1].set_xlabel("rounds")
    for ax in axes:
        ax.set_ylabel("training loss $F(x)$")
        ax.legend(fontsize=8)


def summary_markdown(runs: Mapping[str, StragglerCurves], end_seconds: float, target: float,
                     times: Mapping[str, np.ndarray], ends: Mapping[str, np.ndarray],
                     lead_rounds: Optional[np.ndarray], lead_window: int = 25, end_fraction: float = 0.05,
                     shift: Optional[np.ndarray] = None, spread: Optional[float] = None) -> str:
    """Chapter 9's summary, written from the measured curves (``lead_window``: the running-mean
    window ``lead_rounds`` came from, :func:`last_lead_round`'s ``window``; ``end_fraction``: the
    ``fraction`` of :func:`smoothed_end_loss` that gave ``ends``, and of :func:`smoothed_loss_at`; the models in
    ``shift`` are averaged over the rounds FedAvg's curves record, ``end_rounds``).

    ``runs`` is :func:`run_strategies`' result (the three strategies); ``end_seconds`` the wall-clock time the losses
    are compared at (:func:`smoothed_loss_at`); ``target`` the loss of ``times``, the :func:`time_to_reach` per
    strategy; ``ends`` the :func:`smoothed_end_loss` per strategy; ``lead_rounds`` :func:`last_lead_round` of FedAvg
    against FedNova (``None``: that line is left out); ``shift`` the :func:`objective_shift` per seed and ``spread``
    its :func:`objective_shift_spread` (``shift`` ``None``: that line is left out)."""
    _check_fraction("end_fraction", end_fraction)
    wait, avg, nova = runs["wait-for-all"], runs["fedavg-fixed-time"], runs["fednova-fixed-time"]
    per_round = wait.seconds[:, -1].mean() / (wait.seconds.shape[1] - 1)
    ratio = times["wait-for-all"] / times["fednova-fixed-time"]
    lines = [
        f"- **Waiting for the slowest client** (every client {int(round(wait.mean_steps[0]))} steps) made a round last "
        f"{per_round:.1f} s on average instead of {avg.seconds[:, -1].mean() / (avg.seconds.shape[1] - 1):.2f} s. "
        f"At {end_seconds:.0f} s — when the fixed-length runs ended — its loss was "
        f"{smoothed_loss_at(wait, end_seconds, end_fraction).mean():.3f} after "
        f"{rounds_finished(wait, end_seconds).mean():.0f} rounds, against "
        f"{smoothed_loss_at(nova, end_seconds, end_fraction).mean():.3f} for FedNova with fixed-length rounds after "
        f"{rounds_finished(nova, end_seconds).mean():.0f} (each the median of the last {100 * end_fraction:g}% of the "
        f"rounds finished by then, at least the last; means over {len(wait.seeds)} seeds).",
        f"- To reach a loss of {target:.3f}, waiting for all took {np.median(ratio):.1f}× the wall-clock time of "
        f"FedNova with fixed-length rounds (median over seeds; {', '.join(f'{r:.1f}×' for r in ratio)}).",
        f"- **Fixed-length rounds, FedAvg vs FedNova.** FedAvg weights clients by the steps they finished "
        f"($\\chi^2(p\\|w)$ {avg.chi2.mean():.3f} on average; FedNova's is {nova.chi2.mean():.3g}). End loss "
        f"(median of the last {100 * end_fraction:g}% of rounds): FedAvg {ends['fedavg-fixed-time'].mean():.4f}, "
        f"FedNova {ends['fednova-fixed-time'].mean():.4f}; which is lower depends on the instance (FedNova's limit "
        "with a finite step is not the minimiser of $F$ either, and FedAvg's surrogate may have the lower $F$).",
    ]
    if shift is not None:
        against = "" if spread is None else f", against at most {spread:.4f} between two runs of the same strategy"
        # the models' average, as run_strategy recorded it (curves built without it: not said)
        averaged = "" if avg.end_rounds is None else f" (each model averaged over its last {avg.end_rounds} rounds)"
        lines.append(
            f"- **FedAvg drifts towards its surrogate** $\\tilde F = \\sum_i \\bar w_i F_i$ ($\\bar w$: its weights "
            f"averaged over the rounds, each by its $\\tau_{{\\text{{eff}}}}$): "
            f"$\\sum_i (p_i - \\bar w_i)(F_i(x_{{\\text{{avg}}}}) - F_i(x_{{\\text{{nova}}}}))$ was "
            f"{', '.join(f'{v:.4f}' for v in np.ravel(shift))} per seed{averaged}"
            f"{against}: compared with FedNova's model, "
            "FedAvg's does worse on the slow clients it weights less than $p$ than on the fast ones it weights more.")
    if lead_rounds is not None:
        if np.all(lead_rounds == 0):
            lines.append(f"- FedNova's loss (running mean over {lead_window} rounds) was below FedAvg's from the "
                         "first rounds on, for every seed.")
        else:
            lines.append(
                f"- FedAvg's loss (running mean over {lead_window} rounds) was lower until round "
                f"{', '.join(str(int(r)) for r in lead_rounds)} (per seed; 0: never, {avg.losses.shape[1] - 1}: to "
                "the end) — the fast clients' extra steps count more early on; where FedNova's was lower after, "
                "FedAvg's approached the optimum of its surrogate, not of $F$ (Theorem 1).")
    return "\n".join(lines)
