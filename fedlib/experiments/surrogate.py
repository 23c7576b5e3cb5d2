r"""Theorem 1 beyond quadratics: which objective each algorithm's limit is stationary for.

Used by chapter 7 ("Theorem 1: the surrogate objective"). Paper §4, Theorem 1:
with local SGD and heterogeneous :math:`\tau_i`, the general rule (eq. 4) converges to a
stationary point of the *surrogate*

.. math::

    \widetilde F(x) = \sum_{i=1}^m w_i F_i(x), \qquad
    w_i = \frac{p_i \|a_i\|_1}{\sum_j p_j \|a_j\|_1}
    \quad(\text{FedAvg: } w_i = p_i\tau_i / \textstyle\sum_j p_j\tau_j),

not of :math:`F = \sum_i p_i F_i` — unless :math:`w = p`, which is what FedNova
enforces. On quadratics (chapter 2) the limits have closed forms; here the clients
minimise multinomial logistic regression (:mod:`fedlib.problems.logistic`, the model
of the Synthetic(1,1) experiment, with an L2 penalty so that :math:`F` and
:math:`\widetilde F` have unique minimisers — given that every class occurs in the training
data, :func:`observed_classes`), where they do not.

How a limit is found without a closed form: one round of an algorithm with full-batch
local gradient descent is a deterministic map :math:`\Phi` of the global model (the
library's own round, :func:`fedlib.engines.reference.run_sequential`); its fixed point
:math:`\tilde x = \Phi(\tilde x)` is solved for with Newton–Krylov
(:func:`scipy.optimize.root`, each function evaluation = one real round), and the
residual :math:`\|\Phi(\tilde x) - \tilde x\|` is reported. The minimisers of :math:`F`
and :math:`\widetilde F` are found by Newton's method with the exact Hessians of the clients
(:func:`weighted_minimizer`, :func:`newton_minimize`; a Newton–Krylov solve on the gradient
stalls when :math:`\sum_i w_i\nabla^2 F_i` is ill-conditioned). The claim
to check: as :math:`\eta \to 0`, FedAvg's limit tends to :math:`\arg\min \widetilde F`
and FedNova's to :math:`\arg\min F`, each within :math:`O(\eta)`.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, List, NamedTuple, Optional, Sequence

import numpy as np

from .._validate import (check_choice, check_instance, check_int, check_local_steps, check_positive,
                         check_probability_vector, check_sequence, check_weights)
from ..algorithms import make_algorithm
from ..data.clients import FederatedDataset
from ..engines.reference import run_sequential
from ..problems.logistic import LogisticProblem, pack_params, unpack_params
from ..schedules import FixedSteps
from ..solvers import sgd
from ..theory import fedavg_weights

__all__ = ["unit_scaled", "observed_classes", "unseen_classes", "full_batch_grad_fn", "client_gradients", "round_map", "canonical", "fixed_point_of_round",
           "flat_directions", "newton_minimize", "weighted_minimizer", "SurrogatePoint", "surrogate_sweep"]

ALGORITHMS = ("fedavg", "fednova")


def unit_scaled(dataset: FederatedDataset) -> FederatedDataset:
    r"""``dataset`` with every feature vector divided by :math:`\sqrt{\lambda_{\max}}` of
    the pooled training second moment :math:`\frac1n\sum_s x_s x_s^\top` (train and test
    alike). The loss's Hessian is :math:`\frac1n\sum_s \tilde x_s\tilde x_s^\top \otimes
    (\mathrm{diag}(P_s) - P_sP_s^\top)` with :math:`\tilde x_s = (x_s, 1)` and
    :math:`\|\mathrm{diag}(P_s) - P_sP_s^\top\|_2 \le \frac12`, so after the scaling the pooled loss is
    :math:`L`-smooth with :math:`L \le \frac12\lambda_{\max}(\frac1n\sum_s\tilde x_s\tilde x_s^\top) \le 1`
    (the bias coordinate adds up to 1 to the scaled second moment's 1); a client's own :math:`F_i`, its
    features clustered around their own mean, can have a bound several times larger (Synthetic(1,1),
    seed 0: 0.78 pooled, 1.0 to 5.8 per client). Full-batch local steps with
    :math:`\eta\tau_i` up to a few units are then stable. Synthetic(1,1)'s raw features have
    :math:`\lambda_{\max}` in the hundreds (client-specific means). Raises ``ValueError`` when
    :math:`\lambda_{\max}` is 0 (every training feature is 0) or not finite."""
    X = np.concatenate([np.asarray(x, dtype=np.float64) for x in dataset.train_x])
    with np.errstate(over="ignore", invalid="ignore"):
        moment = X.T @ X / X.shape[0]
    lam = float(np.linalg.eigvalsh(moment).max()) if np.all(np.isfinite(moment)) else float("inf")
    if not 0 < lam < np.inf:
        raise ValueError(f"{dataset.name}: the pooled training second moment has largest eigenvalue {lam!r}: "
                         + ("every feature is 0, nothing to scale" if lam <= 0 else "features too large to square"))
    scale = 1.0 / np.sqrt(lam)
    return dataclasses.replace(dataset, train_x=[np.asarray(x, dtype=np.float64) * scale for x in dataset.train_x],
                               test_x=[np.asarray(x, dtype=np.float64) * scale for x in dataset.test_x])


def observed_classes(dataset: FederatedDataset) -> FederatedDataset:
    r"""``dataset`` restricted to the classes that occur in its training data, renumbered
    ``0..k-1`` in increasing order; test samples of the other classes are dropped. The
    original labels are in ``meta["observed_classes"]`` (``new label -> old label``).

    Why: the bias of :class:`~fedlib.problems.logistic.LogisticRegression` carries no
    penalty, and a class :math:`c` that no training sample has makes
    :math:`\partial F_i/\partial b_c = \frac{1}{n_i}\sum_s \mathrm{softmax}_c(z_s) > 0`
    everywhere: :math:`F`, :math:`\widetilde F` and every round's map have no minimiser, no
    stationary point and no fixed point (:math:`b_c \to -\infty`). A softmax over the
    classes that occur is the model whose limits exist; with every class present the data
    set is returned unchanged. Raises ``ValueError`` when fewer than 2 classes occur."""
    if not isinstance(dataset, FederatedDataset):
        raise TypeError(f"dataset must be a FederatedDataset, got {type(dataset).__name__}")
    seen = np.unique(np.concatenate([np.asarray(y, dtype=np.int64) for y in dataset.train_y]))
    if seen.size == dataset.num_classes:
        return dataset
    if seen.size < 2:
        raise ValueError(f"{dataset.name}: the training data has {seen.size} class(es) {seen.tolist()}; "
                         "a classifier needs at least 2")
    new_label = np.full(dataset.num_classes, -1, dtype=np.int64)
    new_label[seen] = np.arange(seen.size)
    test_x, test_y = [], []
    for x, y in zip(dataset.test_x, dataset.test_y):
        y = np.asarray(y, dtype=np.int64)
        keep = new_label[y] >= 0
        test_x.append(np.asarray(x)[keep])
        test_y.append(new_label[y[keep]])
    return dataclasses.replace(dataset, train_y=[new_label[np.asarray(y, dtype=np.int64)] for y in dataset.train_y],
                               test_x=test_x, test_y=test_y, num_classes=int(seen.size),
                               meta={**dataset.meta, "observed_classes": seen.tolist()})


def unseen_classes(problem: LogisticProblem, weights: Any = None) -> list[int]:
    r"""The model's classes that no training sample of a client with positive weight has
    (``weights``: default every client). Empty when :math:`\sum_i w_i F_i` can have a minimiser;
    otherwise it has none (see :func:`observed_classes`). ``weights``: one finite number >= 0 per client
    (``ValueError`` otherwise). ``problem`` is a :class:`~fedlib.problems.logistic.LogisticProblem`; its model's
    classes are ``0..C-1`` (``C`` the model's ``num_classes``, which may exceed the data set's)."""
    check_instance("problem", problem, LogisticProblem)
    # one finite weight >= 0 per client: zip() below cut a short list (or a long one) to the clients it covered
    w = np.ones(problem.num_clients) if weights is None else check_weights("weights", weights, size=problem.num_clients)
    labels = [np.asarray(y, dtype=np.int64) for y, w_i in zip(problem.dataset.train_y, w) if w_i > 0]
    seen = np.unique(np.concatenate(labels)) if labels else np.zeros(0, dtype=np.int64)
    return sorted(set(range(problem.model.num_classes)) - set(seen.tolist()))


def _refuse_unseen_classes(problem: LogisticProblem, weights: Any, what: str) -> None:
    missing = unseen_classes(problem, weights)
    if missing:
        raise ValueError(f"{what}: class(es) {missing} of {problem.model.num_classes} never occur in the training data"
                         + ("" if weights is None else " of the clients with positive weight")
                         + ": their unpenalised biases decrease the loss without end, so there is no minimiser or "
                           "fixed point; restrict the data with surrogate.observed_classes(dataset)")


def full_batch_grad_fn(problem: LogisticProblem):
    """``grad_fn(params, client, round, step)``: client's gradient on all its training data.

    ``problem`` is a :class:`~fedlib.problems.logistic.LogisticProblem`; the gradient is its model's (the L2 penalty
    included) and ignores ``round`` and ``step``."""
    check_instance("problem", problem, LogisticProblem)
    xs = [np.asarray(x, dtype=np.float64) for x in problem.dataset.train_x]
    ys = [np.asarray(y, dtype=np.int64) for y in problem.dataset.train_y]
    return lambda params, i, t, k: problem.model.grad(params, xs[i], ys[i])


def client_gradients(problem: LogisticProblem, params: dict, grad_fn=None) -> np.ndarray:
    r"""``(m, P)``: :math:`\nabla F_i(x)` of every client, packed and flattened
    (``grad_fn``: a :func:`full_batch_grad_fn` of ``problem`` to reuse across calls). ``params`` is
    ``{"W": (d, C), "b": (C,)}``; ``P = (d+1)C``."""
    check_instance("problem", problem, LogisticProblem)
    grad = full_batch_grad_fn(problem) if grad_fn is None else grad_fn
    return np.array([pack_params(grad(params, i, 0, 0)).ravel() for i in range(problem.num_clients)])


def round_map(problem: LogisticProblem, algorithm: str, lr: float, local_steps: Sequence[int]):
    r""":math:`\Phi`: packed flat parameters -> packed flat parameters after one round of
    ``algorithm`` (``"fedavg"`` or ``"fednova"``, local gradient descent at step ``lr``,
    :math:`\tau_i` = ``local_steps``, full participation), run by
    :func:`~fedlib.engines.reference.run_sequential`.

    ``problem`` is a :class:`~fedlib.problems.logistic.LogisticProblem` (its ``p`` weights the clients); ``lr``
    must be a finite number > 0 and ``local_steps`` one whole number :math:`\ge 1` per client (``ValueError``
    otherwise)."""
    check_instance("problem", problem, LogisticProblem)
    check_choice("algorithm", algorithm, ALGORITHMS)
    lr = check_positive("lr", lr)
    tau = check_local_steps("local_steps", local_steps, size=problem.num_clients)
    alg = make_algorithm(algorithm, sgd(lr))
    grad = full_batch_grad_fn(problem)
    shape = pack_params(problem.init_params()).shape
    schedule = FixedSteps(tau)

    def phi(v: np.ndarray) -> np.ndarray:
        params = unpack_params(np.asarray(v, dtype=np.float64).reshape(shape))
        return pack_params(run_sequential(alg, params, grad, problem.p, schedule, 1).state.params).ravel()

    return phi


def canonical(params: dict) -> np.ndarray:
    r"""Packed flat parameters with the bias centred over the classes. The logits, hence
    every :math:`F_i`, are unchanged by adding one constant to all classes' biases (the
    bias carries no penalty), so that direction is flat: minimisers and fixed points are
    compared in the quotient, after removing it.

    ``params`` is ``{"W": (d, C), "b": (C,)}`` (other keys or shapes are a ``ValueError``); returns the
    ``((d+1)C,)`` vector of :math:`\Theta = [W; b]` with that bias row centred, row by row."""
    theta = pack_params(params).copy()
    theta[-1] -= theta[-1].mean()
    return theta.ravel()


def _solve(fun, x0: np.ndarray, tol: float, scale: float, what: str) -> np.ndarray:
    r"""A root of ``fun`` from ``x0`` by Newton-Krylov, to :math:`\|f(x)\|_\infty \le` ``tol * scale``.

    ``scale`` carries the units of ``fun`` (for a fixed point, the first round's step), so that
    the same ``tol`` means the same thing for features in any units: an absolute tolerance is
    below rounding noise for large residuals and loose for small ones. ``scale = 0`` means ``x0``
    is already a root.

    A root is only accepted where the tolerance is resolvable: a round at :math:`x` rounds each
    coordinate to a spacing of about :math:`\varepsilon |x_j|` (:math:`\varepsilon = 2^{-52}`), so an
    update :math:`\Phi(x) - x` smaller than :math:`\varepsilon\|x\|_\infty` can be lost to rounding, and
    :math:`\|f(x)\|_\infty \le` ``tol * scale`` certifies nothing once
    :math:`\varepsilon\|x\|_\infty >` ``tol * scale``: such an :math:`x` is refused (``RuntimeError``), not
    returned as a root. Chapter 7's instance (Synthetic(1,1), unit-scaled, :math:`\ell_2 = 0.1`) at seed 17
    and :math:`\eta = 0.0125`: FedNova's solve from zeros ran away to :math:`\|x\|_\infty = 1.6 \cdot 10^{14}`
    (residual :math:`4 \cdot 10^{-16}`), where :math:`\varepsilon\|x\|_\infty / (\text{tol} \cdot \text{scale})
    \approx 1.4 \cdot 10^{13}`;
    at the genuine limits of seeds 0, 7, 17, 18 and 23 (both algorithms, :math:`\eta` from 0.0125 to 0.4)
    the same ratio is 0.0074 to 0.40. The rule separates the two by more than :math:`10^{12}`."""
    from scipy.optimize import root

    tol = check_positive("tol", tol)
    if not np.isfinite(scale):
        raise ValueError(f"{what}: the starting point gives a non-finite residual scale {scale!r}")
    if scale == 0.0:
        return np.array(x0, dtype=np.float64)
    try:
        sol = root(fun, x0, method="krylov", options={"fatol": tol * scale, "maxiter": 200})
    except (ValueError, ArithmeticError, np.linalg.LinAlgError) as exc:  # scipy's inner Krylov solve broke down
        raise RuntimeError(f"{what}: Newton-Krylov broke down ({exc}); an ill-conditioned round map (a step size "
                           f"far below 1/L, features in large units) needs unit-scaled features") from exc
    if not sol.success:
        raise RuntimeError(f"{what}: Newton-Krylov did not converge to {tol:g} x {scale:.3g} ({sol.message})")
    largest = float(np.max(np.abs(sol.x), initial=0.0))
    rounding = float(np.finfo(np.float64).eps) * largest
    if not rounding <= tol * scale:  # NaN included
        raise RuntimeError(f"{what}: Newton-Krylov stopped at a point with max|x| = "
                           f"{largest:.3g}, where the rounding of one round "
                           f"({rounding:.3g}) exceeds the tolerance {tol:g} x {scale:.3g}: an update lost to "
                           "rounding, not a fixed point (the solve ran away: start it nearer the limit; for a limit "
                           "this large, a larger tol)")
    return sol.x


def fixed_point_of_round(problem: LogisticProblem, algorithm: str, lr: float, local_steps: Sequence[int],
                         tol: float = 1e-13, start: Optional[dict] = None) -> tuple[dict, float]:
    r"""The limit :math:`\tilde x = \Phi(\tilde x)` of ``algorithm`` (see :func:`round_map`)
    and its residual :math:`\|\Phi(\tilde x) - \tilde x\|` (one more real round).

    ``tol`` is relative: the solve stops when :math:`\|\Phi(x) - x\|_\infty \le`
    ``tol`` :math:`\cdot \|\Phi(x_0) - x_0\|_2`, the first round's step from the initial point
    :math:`x_0` (``problem.init_params()``, whatever ``start`` is: a start near the limit must not shrink
    the tolerance).

    ``start``: where Newton-Krylov starts, packed parameters ``{"W": (d, C), "b": (C,)}`` like the result
    (finite, of the model's shape; ``ValueError`` otherwise); default ``None``, the initial point :math:`x_0`.
    A start near the limit avoids a runaway: :func:`surrogate_sweep` starts FedNova from
    :math:`\arg\min F` and FedAvg from :math:`\arg\min\widetilde F`, where the limits go as
    :math:`\eta \to 0`; from zeros, FedNova's solve at chapter 7's seed 17 (:math:`\eta = 0.0125`) ran away
    to :math:`\|x\|_\infty = 1.6 \cdot 10^{14}` and at seeds 7 and 23 did not converge.

    ``problem``, ``algorithm``, ``lr`` (:math:`\eta > 0`) and ``local_steps`` (:math:`\tau_i`, one whole number
    :math:`\ge 1` per client) are :func:`round_map`'s. A class that no training sample has is a ``ValueError``
    (:func:`unseen_classes`); a solve that does not converge, or that stops where :math:`\varepsilon\|x\|_\infty`
    (the rounding of one round there) exceeds the tolerance, a ``RuntimeError``: such a point, where a round's
    update is lost to rounding, is not a fixed point."""
    check_instance("problem", problem, LogisticProblem)
    phi = round_map(problem, algorithm, lr, local_steps)
    _refuse_unseen_classes(problem, None, f"fixed point of {algorithm} (lr {lr})")
    theta0 = pack_params(problem.init_params())
    x0, shape = theta0.ravel(), theta0.shape
    scale = float(np.linalg.norm(phi(x0) - x0))
    if start is not None:
        theta = np.asarray(pack_params(start), dtype=np.float64)
        if theta.shape != shape or not np.all(np.isfinite(theta)):
            raise ValueError(f"start must be finite parameters of the model's shape {shape} (packed), got shape "
                             f"{theta.shape}" + ("" if theta.shape != shape else " with non-finite entries"))
        x0 = theta.ravel()
    x = _solve(lambda v: phi(v) - v, x0, tol, scale, f"fixed point of {algorithm} (lr {lr})")
    return unpack_params(x.reshape(shape)), float(np.linalg.norm(phi(x) - x))


def flat_directions(problem) -> np.ndarray:
    r"""``(P, k)`` orthonormal basis of the directions along which every :math:`F_i` of a
    :class:`~fedlib.problems.logistic.LogisticProblem` is constant: adding one vector to every
    class's column of :math:`\Theta = [W; b]` leaves the softmax unchanged (:math:`k = d+1`;
    with an L2 penalty on :math:`W` only the bias direction, :math:`k = 1`). ``problem``'s ``l2`` picks the case and
    :math:`P = (d+1)C`."""
    check_instance("problem", problem, LogisticProblem)
    D, C = problem.model.num_features + 1, problem.model.num_classes
    rows = range(D) if problem.l2 == 0 else [D - 1]
    B = np.zeros((D * C, len(rows)))
    for col, j in enumerate(rows):
        B[j * C:(j + 1) * C, col] = 1.0 / math.sqrt(C)
    return B


def newton_minimize(problem: LogisticProblem, weights: Any, *, tol: float = 1e-11, max_steps: int = 100,
                    loss: Optional[Callable[[dict], float]] = None,
                    what: str = "newton_minimize") -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    r""":math:`\arg\min_\theta \sum_i w_i F_i(\theta)` by Newton's method with backtracking.

    Newton steps :math:`\theta \leftarrow \theta - t\,Q(Q^\top H Q)^{-1}Q^\top g`, with
    :math:`g = \sum_i w_i\nabla F_i`, :math:`H = \sum_i w_i\nabla^2 F_i` (exact Hessians) and
    :math:`Q` an orthonormal basis orthogonal to :func:`flat_directions` (where :math:`H` is
    positive definite), :math:`t` halved until the Armijo condition holds on ``loss``
    (default :math:`\sum_i w_i F_i`). Stops when
    :math:`\|g\|_2 \le` ``tol`` :math:`\cdot\sum_i w_i\|\nabla F_i(\theta_0)\|_2` at the start
    :math:`\theta_0`: relative, so features in any units stop at the same point (the
    gradients, and their rounding, scale with the features). Raises ``RuntimeError`` after
    ``max_steps`` steps.

    Returns ``(theta, client_grads, Q, steps)``: the minimiser packed and flattened with its
    flat-direction component removed (the canonical representative), :math:`\nabla F_i` there
    ``(m, P)``, the basis ``Q`` ``(P, r)`` and the number of Newton steps taken.

    ``problem`` is a :class:`~fedlib.problems.logistic.LogisticProblem`; ``weights`` the (m,) :math:`w_i`
    (non-negative, summing to 1); ``tol`` > 0; ``max_steps`` an integer :math:`\ge 1`;
    ``what`` labels the error messages. A class that no client of positive weight has is a ``ValueError``
    (:func:`unseen_classes`).
    Used by :func:`weighted_minimizer` (chapter 7) and
    :func:`~fedlib.experiments.acceleration.logistic_optimum` (chapter 10).
    """
    check_instance("problem", problem, LogisticProblem)
    w = check_probability_vector("weights", weights, size=problem.num_clients)
    tol = check_positive("tol", tol)
    max_steps = check_int("max_steps", max_steps, minimum=1)
    _refuse_unseen_classes(problem, w, what)
    shape = pack_params(problem.init_params()).shape
    flat = flat_directions(problem)
    Q = np.linalg.svd(np.eye(flat.shape[0]) - flat @ flat.T)[0][:, :flat.shape[0] - flat.shape[1]]
    grad_fn = full_batch_grad_fn(problem)

    def unpack(v):
        return unpack_params(v.reshape(shape))

    if loss is None:
        def loss(params):
            return float(sum(w_i * problem.client_loss(params, i) for i, w_i in enumerate(w) if w_i > 0))

    theta = pack_params(problem.init_params()).ravel()
    G = client_gradients(problem, unpack(theta), grad_fn)
    stop = tol * float(w @ np.linalg.norm(G, axis=1))
    for step in range(max_steps + 1):
        g = w @ G
        if np.linalg.norm(g) <= stop:
            break
        if step == max_steps:
            raise RuntimeError(f"{what}: |grad| = {np.linalg.norm(g):.3g} > {stop:.3g} (tol {tol:g} relative to "
                               f"the client gradients at the start) after {max_steps} Newton steps")
        # Newton's step needs only the weighted Hessian: sum before projecting (one projection, not m)
        params = unpack(theta)
        H = sum(w_i * problem.client_hessian(params, i) for i, w_i in enumerate(w) if w_i > 0)
        direction = -Q @ np.linalg.solve(Q.T @ H @ Q, Q.T @ g)
        f0, t = loss(params), 1.0
        # Near the minimiser the decrease t g.d (~1e-20) is far below the rounding of the loss itself:
        # a comparison of two equal-up-to-rounding losses must not refuse the Newton step (it did: t
        # shrank to ~1e-7 and the iteration stalled until max_steps), hence a few ulps of slack.
        slack = 64 * np.finfo(np.float64).eps * abs(f0)
        while loss(unpack(theta + t * direction)) > f0 + 1e-4 * t * (g @ direction) + slack and t > 1e-10:
            t /= 2
        theta = theta + t * direction
        G = client_gradients(problem, unpack(theta), grad_fn)
    # the canonical representative; the gradients do not change along flat directions
    theta = theta - flat @ (flat.T @ theta)
    return theta, G, Q, step


def weighted_minimizer(problem: LogisticProblem, weights: Any, tol: float = 1e-11) -> tuple[dict, float]:
    r""":math:`\arg\min_x \sum_i w_i F_i(x)` (unique with an L2 penalty, up to the flat bias
    direction; returned with the bias centred) and the norm of the weighted gradient there;
    ``weights = problem.p`` gives the minimiser of :math:`F`. Newton's method with exact
    Hessians (:func:`newton_minimize`; ``tol`` is relative to the client gradients at the start),
    so it converges for features in any units (an ill-conditioned :math:`\sum_i w_i\nabla^2 F_i`
    included, where a Newton-Krylov solve stalls)."""
    check_instance("problem", problem, LogisticProblem)
    w = check_probability_vector("weights", weights, size=problem.num_clients)
    theta, G, _, _ = newton_minimize(problem, w, tol=tol, what="weighted minimiser")
    shape = pack_params(problem.init_params()).shape
    return unpack_params(theta.reshape(shape)), float(np.linalg.norm(w @ G))


class SurrogatePoint(NamedTuple):
    r"""One algorithm's limit at one step size: the fixed-point residual, its distances to
    :math:`\arg\min F` and :math:`\arg\min\widetilde F` (:func:`canonical`), and the norms of
    :math:`\nabla F` and :math:`\nabla\widetilde F` there.

    Fields: ``algorithm`` and ``lr`` (:math:`\eta`) of the run; ``residual``
    :math:`\|\Phi(\tilde x) - \tilde x\|_2`; ``dist_to_F_min`` and ``dist_to_surrogate_min``, the Euclidean distances
    from the canonical :math:`\tilde x` to those of :math:`\arg\min F` and :math:`\arg\min\widetilde F`; ``grad_F``
    :math:`\|\sum_i p_i\nabla F_i(\tilde x)\|_2` and ``grad_surrogate`` :math:`\|\sum_i w_i\nabla F_i(\tilde x)\|_2`,
    :math:`w` FedAvg's weights for either algorithm."""

    algorithm: str
    lr: float
    residual: float
    dist_to_F_min: float
    dist_to_surrogate_min: float
    grad_F: float
    grad_surrogate: float


def surrogate_sweep(problem: LogisticProblem, local_steps: Sequence[int], lrs: Sequence[float],
                    algorithms: Sequence[str] = ALGORITHMS, tol: float = 1e-13) -> tuple[List[SurrogatePoint], dict]:
    r"""Every algorithm's limit for every ``lr``, against the two minimisers. Returns the
    points and ``{"w", "p", "F_min", "surrogate_min", "gap"}`` (FedAvg's weights
    :math:`w_i = p_i\tau_i/\sum_j p_j\tau_j`, the two minimisers and their distance).
    ``lrs``: one or more step sizes > 0 (chapter 7 fits a slope over them; none gave no point
    and a failed fit later), refused by name before any solve. Each fixed point is solved for from the
    minimiser its limit approaches as :math:`\eta \to 0` (:func:`fixed_point_of_round`'s ``start``: FedNova
    from :math:`\arg\min F`, FedAvg from :math:`\arg\min\widetilde F`), not from zeros, where the solve
    can run away.

    ``problem`` is a :class:`~fedlib.problems.logistic.LogisticProblem`, ``local_steps`` the :math:`\tau_i` (one whole
    number :math:`\ge 1` per client) and ``algorithms`` names from ``"fedavg"`` and ``"fednova"`` (default both; any
    other is a ``ValueError``). ``tol`` is :func:`fixed_point_of_round`'s, relative to the first round's step,
    which shrinks with :math:`\eta` while the rounding of a round (:math:`\varepsilon\|x\|_\infty`) does not:
    below some :math:`\eta` the default is no longer resolvable and the solve is refused (a ``RuntimeError``
    that says so). The error it leaves in :math:`x` is about the residual over the round map's contraction
    :math:`1 - \rho \propto \eta`, so the same ``tol`` means the same accuracy at every :math:`\eta`; chapter 7
    takes ``1e-11`` for its smallest step sizes (at seeds 1 and 2, :math:`\eta = 0.003125`, the default's
    tolerance is below the rounding of a round, and at seed 11, :math:`\eta = 0.00078125`, ``1e-12`` is)."""
    check_instance("problem", problem, LogisticProblem)
    tol = check_positive("tol", tol)
    tau = check_local_steps("local_steps", local_steps, size=problem.num_clients)
    lrs = [check_positive("lrs", lr) for lr in check_sequence("lrs", lrs, "step sizes")]
    if not lrs:
        raise ValueError("lrs must name at least one step size, got none")
    for name in algorithms:
        check_choice("algorithms", name, ALGORITHMS)
    _, w = fedavg_weights(problem.p, tau.astype(np.float64))
    x_f, _ = weighted_minimizer(problem, problem.p)
    x_s, _ = weighted_minimizer(problem, w)
    vf, vs = canonical(x_f), canonical(x_s)
    points = []
    for lr in lrs:
        for name in algorithms:
            # from the minimiser the limit approaches as lr -> 0 (from zeros it can run away: seed 17 of chapter 7)
            x, res = fixed_point_of_round(problem, name, lr, tau, tol=tol, start=x_f if name == "fednova" else x_s)
            v = canonical(x)
            G = client_gradients(problem, x)
            points.append(SurrogatePoint(name, float(lr), res, float(np.linalg.norm(v - vf)),
                                         float(np.linalg.norm(v - vs)), float(np.linalg.norm(problem.p @ G)),
                                         float(np.linalg.norm(w @ G))))
    info = {"w": w, "p": problem.p.copy(), "F_min": x_f, "surrogate_min": x_s, "gap": float(np.linalg.norm(vf - vs))}
    return points, info
