r"""Multinomial logistic regression on in-memory federated data (Synthetic, LEAF).

The model of the paper's Synthetic(1,1) experiment (§6, Figure 5; the model of FedProx's code):
:math:`d \to C` (60 → 10) softmax regression with parameters
``{"W": (d, C), "b": (C,)}``. Client :math:`i` minimises the mean cross-entropy over its
training samples plus an optional L2 penalty on ``W``,

.. math::

    F_i(W, b) = \frac{1}{n_i}\sum_{s=1}^{n_i} \Bigl[\log\sum_c e^{z_{sc}} - z_{s y_s}\Bigr]
        + \frac{\lambda}{2}\|W\|_F^2, \qquad z_s = x_s^\top W + b,

and the global objective is :math:`F = \sum_i p_i F_i` with :math:`p_i = n_i/n`, i.e.
the mean loss over *all* training samples (plus the same penalty).

``l2`` (:math:`\lambda`) defaults to **0**. FedProx's ``mclr`` model declares
``kernel_regularizer=l2_regularizer(0.001)`` on ``W`` but its training loss is
``tf.losses.sparse_softmax_cross_entropy`` alone, so the penalty is collected and never
added (read in the FedProx repository): what it actually optimises is ``l2=0``.
``l2=0.001`` gives the declared penalty (TensorFlow's ``l2_regularizer(s)`` is
:math:`s\|W\|^2/2`); the bias is never penalised.

Gradients, with :math:`P = \mathrm{softmax}(Z)` and :math:`Y` one-hot, per batch of
weights :math:`\omega_s` (:math:`1/|\text{batch}|` for real samples, 0 for padding):

.. math::

    \nabla_W = X^\top \bigl(\omega \odot (P - Y)\bigr) + \lambda W, \qquad
    \nabla_b = \mathbf 1^\top \bigl(\omega \odot (P - Y)\bigr).

Three forms, all float64 numpy (the packed kernel also takes torch tensors):

* :meth:`LogisticRegression.loss_and_grad` — one client's batch, the plain way
  (used by the per-client reference loop);
* :meth:`LogisticRegression.loss_and_grad_stacked` — many clients at once, parameters
  ``{"W": (q, d, C), "b": (q, C)}`` and batches ``(q, B, d)`` with a 0/1 mask, by batched
  matmul (padding rows of a short last batch are masked out, so the loss is the mean
  over the real samples);
* :func:`packed_grad_` — the in-place kernel of :mod:`fedlib.engines.batched` on
  *packed* parameters :math:`\Theta = [W; b]` of shape ``(..., d+1, C)`` and features
  augmented with a constant 1 (so the bias is one more row).

:class:`LogisticProblem` binds the model to a :class:`~fedlib.data.clients.FederatedDataset`:
global training loss :math:`F(x)`, test accuracy on the union of the clients' test sets,
and the per-client mini-batch gradient function of the reference loop.

Used by chapters 7 and 10; through :func:`fedlib.experiments.synthetic.make_problem` also by
chapter 4 ("Synthetic(1,1) logistic regression (Figure 5)") and chapter 9, and by
``python -m fedlib run synthetic``.

Example
-------
>>> import numpy as np
>>> from fedlib.data import synthetic
>>> prob = LogisticProblem(synthetic(num_clients=3, seed=0))
>>> x0 = prob.init_params()
>>> bool(abs(prob.loss(x0) - np.log(10)) < 1e-12)   # zero weights: uniform softmax
True
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from .._validate import (bool_entry, check_agree, check_int, check_memory, check_nonnegative, plain,
                         tensor_as_float64)
from ..data.clients import FederatedDataset

__all__ = ["LogisticRegression", "LogisticProblem", "pack_params", "unpack_params", "packed_grad_"]


def _is_torch(x: Any) -> bool:
    return hasattr(x, "detach") and hasattr(x, "new_zeros")


def _real_array(name: str, value: Any) -> np.ndarray:
    """``value`` as a float64 array (a torch tensor with grad, in bfloat16 or on any device too); ``ValueError`` naming
    ``name`` for complex numbers (float64 kept their real part with only a ComplexWarning) or other things."""
    if type(value) is np.ndarray and value.dtype == np.float64:  # the common case, unchanged
        return value
    if _is_torch(value):
        if value.is_complex():
            raise ValueError(f"{name} must hold real numbers, got a {value.dtype} tensor")
        value = tensor_as_float64(value)
    if np.iscomplexobj(value):
        raise ValueError(f"{name} must hold real numbers, got complex ones")
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of real numbers: {exc}") from None


def pack_params(params: dict) -> Any:
    r"""``{"W": (..., d, C), "b": (..., C)}`` -> :math:`\Theta = [W; b]` of shape ``(..., d+1, C)``
    (a torch tensor when ``W`` is one, else a numpy array).

    ``params`` must be a dict with exactly the keys ``"W"`` and ``"b"`` of matching shapes (``ValueError`` otherwise).
    ``W`` and ``b`` must be of one kind, both torch tensors or neither (numpy arrays, lists): a torch ``W`` beside a
    numpy ``b``, or a numpy ``W`` beside a torch ``b``, is a ``ValueError`` naming ``params`` (``np.asarray`` would
    fail on a CUDA ``b`` or one that requires grad).

    Example
    -------
    The bias becomes the last row, and :func:`unpack_params` takes it back:

    >>> theta = pack_params({"W": np.arange(6.0).reshape(2, 3), "b": np.array([10.0, 20.0, 30.0])})
    >>> theta.tolist()
    [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [10.0, 20.0, 30.0]]
    >>> unpack_params(theta)["b"].tolist(), unpack_params(theta)["W"].shape
    ([10.0, 20.0, 30.0], (2, 3))
    """
    if not isinstance(params, dict) or set(params) != {"W", "b"}:
        keys = sorted(map(str, params)) if isinstance(params, dict) else type(params).__name__
        raise ValueError(f"params must be a dict with keys 'W' and 'b', got {keys}")
    W, b = params["W"], params["b"]
    w_shape, b_shape = tuple(np.shape(W)), tuple(np.shape(b))
    if len(w_shape) < 2 or b_shape != w_shape[:-2] + w_shape[-1:]:
        raise ValueError(f"params: W must have shape (..., d, C) and b (..., C), got W {w_shape} and b {b_shape}")
    if _is_torch(W):
        import torch

        if not _is_torch(b):  # b.unsqueeze raised AttributeError ('numpy.ndarray' object has no attribute ...)
            raise ValueError(f"params: W is a torch tensor, so b must be one too, got {type(b).__name__}")
        return torch.cat([W, b.unsqueeze(-2)], dim=-2)
    if _is_torch(b):  # np.asarray converted a CPU tensor, failed on a CUDA one ("can't convert cuda:0 ...")
        raise ValueError(f"params: b is a torch tensor, so W must be one too, got {type(W).__name__}")
    return np.concatenate([np.asarray(W), np.asarray(b)[..., None, :]], axis=-2)


def unpack_params(theta) -> dict:
    r""":math:`\Theta` ``(..., d+1, C)`` -> ``{"W": (..., d, C), "b": (..., C)}`` (views).

    Example
    -------
    Views, not copies: writing into the unpacked bias writes :math:`\Theta`'s last row:

    >>> theta = np.zeros((3, 2))
    >>> unpack_params(theta)["b"][:] = 7.0
    >>> theta.tolist()
    [[0.0, 0.0], [0.0, 0.0], [7.0, 7.0]]
    """
    if not (isinstance(theta, np.ndarray) or _is_torch(theta)):  # a list failed as "list indices must be integers"
        raise ValueError(f"theta must be a numpy array or torch tensor (W and b are views of it), got "
                         f"{type(theta).__name__}")
    shape = tuple(np.shape(theta))
    if len(shape) < 2 or shape[-2] < 2:
        raise ValueError(f"theta must have shape (..., d+1, C) with d >= 1 (rows of W, then the bias), got {shape}")
    return {"W": theta[..., :-1, :], "b": theta[..., -1, :]}


def packed_grad_(theta, X, Yw, w, Z, G, l2: float = 0.0) -> None:
    r"""In place: ``G`` :math:`\leftarrow \nabla_\Theta` of the weighted batch loss.

    Shapes (a leading client axis ``q`` is optional, the same on all arguments):
    ``theta`` ``(q, D, C)`` with :math:`D = d+1` (last row the bias), ``X`` ``(q, B, D)``
    (features with a trailing 1), ``Yw`` ``(q, B, C)`` the one-hot labels times the
    sample weights, ``w`` ``(q, B, 1)`` the sample weights (:math:`1/\text{batch size}`
    for real samples, 0 for padding), ``Z`` ``(q, B, C)`` scratch, ``G`` ``(q, D, C)``
    output. numpy arrays or torch tensors (all of one kind).

    ``l2`` is the penalty :math:`\lambda \ge 0` on the rows of :math:`W` (default 0; the bias row is never penalised).

    Example
    -------
    One client, :math:`d = 1`, :math:`C = 2`, :math:`\Theta = 0`, samples :math:`x = 1` (label 0)
    and :math:`x = -1` (label 1) of weight :math:`1/2` each: :math:`P - Y = (-\tfrac12, \tfrac12)`
    and :math:`(\tfrac12, -\tfrac12)`, so :math:`\nabla_W = \tfrac12(-\tfrac12, \tfrac12) -
    \tfrac12(\tfrac12, -\tfrac12) = (-\tfrac12, \tfrac12)` and :math:`\nabla_b = 0`, the gradient of
    :meth:`LogisticRegression.grad` packed:

    >>> X = np.array([[1.0, 1.0], [-1.0, 1.0]])            # features with the trailing 1
    >>> w = np.array([[0.5], [0.5]])
    >>> Yw = np.array([[1.0, 0.0], [0.0, 1.0]]) * w        # one-hot labels 0, 1 times the weights
    >>> G = np.empty((2, 2))
    >>> packed_grad_(np.zeros((2, 2)), X, Yw, w, np.empty((2, 2)), G)
    >>> G.tolist()
    [[-0.5, 0.5], [0.0, 0.0]]
    """
    (_packed_grad_torch if _is_torch(theta) else _packed_grad_numpy)(theta, X, Yw, w, Z, G, l2)


#: Below this, a softmax row sum may have underflowed after the per-client shift.
_UNDERFLOW = 1e-200
_ONES: dict = {}
#: ``np.dot`` itself, without the ``__array_function__`` dispatch of its Python wrapper (numpy >= 1.25: about half a
#: microsecond of the ~2 a small product costs; the same C function, hence the same bits): the single-client kernels
#: call it three times per local step.
_DOT = getattr(np.dot, "_implementation", np.dot)


def _packed_grad_numpy(theta, X, Yw, w, Z, G, l2, _matmul=np.matmul, _exp=np.exp, _div=np.divide,
                       _sub=np.subtract, _mul=np.multiply, _max=np.maximum.reduce, _min=np.minimum.reduce):
    # Shift the logits by each *client's* batch maximum (one fast contiguous reduction
    # instead of one per row); softmax is shift-invariant, nothing overflows, and the
    # rare row pushed to underflow (sum < 1e-200) is redone with its own maximum.
    _matmul(X, theta, out=Z)
    C = Z.shape[-1]
    flat = Z.reshape(-1, Z.shape[-2] * C)
    _sub(flat, _max(flat, 1, None, None, True), flat)  # flat -= flat.max(axis=1, keepdims=True)
    _exp(Z, Z)
    ones = _ONES.get(C)
    if ones is None:
        ones = _ones(C)
    s = (Z.reshape(-1, C) @ ones).reshape(Z.shape[:-1] + (1,))  # row sums by one BLAS call
    if _min(s, None) < _UNDERFLOW:
        _matmul(X, theta, out=Z)
        Z -= Z.max(axis=-1, keepdims=True)
        _exp(Z, Z)
        s = Z.sum(axis=-1, keepdims=True)
    _div(w, s, s)
    _mul(Z, s, Z)
    _sub(Z, Yw, Z)
    _matmul(X.swapaxes(-1, -2), Z, out=G)
    if l2:
        G[..., :-1, :] += l2 * theta[..., :-1, :]


def _ones(C: int) -> np.ndarray:
    ones = _ONES.get(C)
    if ones is None:
        ones = _ONES[C] = np.ones(C)
    return ones


def _packed_grad_numpy_one(theta, X, XT, Yw, w, Z, G, s, s_col, m, l2, sums=None, S=None, _dot=_DOT, _exp=np.exp,
                           _div=np.divide, _sub=np.subtract, _mul=np.multiply, _max=np.maximum.reduce,
                           _min=np.minimum.reduce):
    """:func:`_packed_grad_numpy` for a single client on 2-d arrays (a batched step with
    one active client): the same operations in the same order, hence the same bits, with
    plain 2-d BLAS calls (cheaper than ``matmul`` on stacks of one) and positional
    ``out`` arguments (the per-call overhead dominates at these sizes).

    ``theta`` ``(D, C)``, ``X`` ``(B, D)`` and ``XT`` its transpose (a view), ``Yw``
    ``(B, C)``, ``w`` ``(B,)`` (flat weights), ``Z`` ``(B, C)`` scratch, ``G`` ``(D, C)``
    output, ``s`` ``(B,)`` scratch and ``s_col`` its ``(B, 1)`` view, ``m`` a 0-d scratch.

    ``sums`` (optional, ``(B,)``): write the softmax row sums there and skip the underflow
    check — the caller checks them later (``min(sums) < _UNDERFLOW``) and redoes the steps
    with the check if any underflowed.

    ``S`` (optional, ``(B, C)`` scratch): ``Z * s_col`` is taken as ``S[...] = s_col; Z * S`` — the same products
    (a copy is exact) without a broadcasting multiply, several times slower than a copy and a plain multiply at
    these sizes.
    """
    _dot(X, theta, Z)
    _sub(Z, _max(Z, None, None, m), Z)  # Z -= Z.max(): the client's batch maximum (as the stacked kernel)
    _exp(Z, Z)
    if sums is None:
        _dot(Z, _ONES[Z.shape[1]], s)  # row sums: the same BLAS matrix-vector product
        if _min(s, None) < _UNDERFLOW:
            _dot(X, theta, Z)
            Z -= Z.max(axis=-1, keepdims=True)
            _exp(Z, Z)
            Z.sum(axis=-1, out=s)
        _div(w, s, s)
    else:
        _dot(Z, _ONES[Z.shape[1]], sums)
        _div(w, sums, s)
    if S is None:
        _mul(Z, s_col, Z)
    else:
        S[...] = s_col
        _mul(Z, S, Z)
    _sub(Z, Yw, Z)
    _dot(XT, Z, G)
    if l2:
        G[:-1] += l2 * theta[:-1]


def _packed_sgd_steps_numpy_one(theta, X, Yw, w, lrs, Z, G, s, s_col, l2, sums, S, _dot=_DOT, _exp=np.exp,
                                _div=np.divide, _sub=np.subtract, _mul=np.multiply):
    r"""Plain SGD steps :math:`\Theta \leftarrow \Theta - \eta_k g_k` of a single client, ``k = 0..K-1``, in one
    loop: each step is :func:`_packed_grad_numpy_one` with ``sums=sums[k]`` followed by ``G *= lrs[k]``,
    ``theta -= G``, with the bits of those calls and without a Python call per step (the batched engine's
    critical path on skewed data: one client left, hundreds of steps).

    ``theta`` ``(D, C)`` (updated in place), ``X`` ``(K, B, D)``, ``Yw`` ``(K, B, C)``, ``w`` ``(K, B)``,
    ``lrs`` ``K`` step sizes (0-d float64 arrays are cheapest), ``l2`` the penalty on ``W``; ``sums`` ``(K, B)``
    receives the softmax row sums of every step, which the caller checks (``min(sums) < _UNDERFLOW``: redo the
    steps with the check at every step); ``Z``, ``G``, ``s``, ``s_col`` are the scratch of
    :func:`_packed_grad_numpy_one` (``G`` ends as the last step's ``lr * grad``) and ``S`` a ``(B, C)`` one.

    Two calls differ from :func:`_packed_grad_numpy_one`'s, not their results:

    * ``Z * s_col`` is taken as ``S[...] = s_col; Z * S``: the same products (a copy is exact) without a
      broadcasting multiply, several times slower than a copy and a plain multiply at these sizes;
    * the batch maximum is read at ``argmax`` instead of reduced with ``np.maximum`` (one cheap call instead of a
      reduction): the same value, NaN included (argmax stops at the first NaN); the two may differ only in the
      sign of a maximum of zero, which changes ``Z - max`` at most in the sign of a zero, and ``exp`` maps either
      zero to 1.0: from ``exp`` on, the bits are the same.
    """
    ones = _ONES[Z.shape[1]]
    flat = Z.reshape(-1)  # a view: Z is contiguous
    argmax = flat.argmax
    for X1, XT1, Y1, w1, lr, sums1 in zip(X, X.swapaxes(1, 2), Yw, w, lrs, sums):
        _dot(X1, theta, Z)
        _sub(Z, flat[argmax()], Z)  # the batch maximum (see above)
        _exp(Z, Z)
        _dot(Z, ones, sums1)
        _div(w1, sums1, s)
        S[...] = s_col
        _mul(Z, S, Z)
        _sub(Z, Y1, Z)
        _dot(XT1, Z, G)
        if l2:
            G[:-1] += l2 * theta[:-1]
        _mul(G, lr, G)
        _sub(theta, G, theta)


def _packed_grad_torch(theta, X, Yw, w, Z, G, l2):
    import torch

    torch.matmul(X, theta, out=Z)
    Z -= Z.amax(dim=-1, keepdim=True)
    Z.exp_()
    s = Z.sum(dim=-1, keepdim=True)
    torch.div(w, s, out=s)
    Z *= s
    Z -= Yw
    torch.matmul(X.transpose(-1, -2), Z, out=G)
    if l2:
        G[..., :-1, :] += l2 * theta[..., :-1, :]


def _log_softmax_loss(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per-sample cross-entropy for logits ``z`` (..., C) and labels ``y`` (...)."""
    m = z.max(axis=-1, keepdims=True)
    lse = np.log(np.exp(z - m).sum(axis=-1)) + m[..., 0]
    return lse - np.take_along_axis(z, y[..., None], axis=-1)[..., 0]


def _mean_log_softmax_loss(x: np.ndarray, W: np.ndarray, b: np.ndarray, y: np.ndarray) -> float:
    """``_log_softmax_loss(x @ W + b, y).mean()`` for 2-d ``x`` (the training loss every engine evaluates after
    every round), bit for bit: the same operations, with the logits' bias added in place, one buffer for the
    exponentials (four temporaries fewer) and, from :data:`_COLUMN_MAX_FROM` rows, the row maxima taken column by
    column as :func:`_grad` does (a maximum is exact in any order)."""
    n = y.shape[0]
    z, top = _logits_and_row_max(x, W, b)
    exps = np.subtract(z, top[:, None])
    np.exp(exps, out=exps)
    lse = exps.sum(axis=-1)
    np.log(lse, out=lse)
    lse += top
    lse -= z[np.arange(n), y]
    return float(lse.mean())


def _one_hot(y: np.ndarray, C: int) -> np.ndarray:
    """``np.eye(C)[y]`` (float64, shape ``y.shape + (C,)``) without the ``C x C`` identity: the same
    array in ``y.size x C`` memory (``np.eye(C)`` alone is 800 MB at 10,000 classes)."""
    out = np.zeros(y.shape + (C,))
    np.put_along_axis(out, y[..., None], 1.0, axis=-1)
    return out


#: Batch size from which :func:`_grad` takes its row maxima column by column.
_COLUMN_MAX_FROM = 512


def _logits_and_row_max(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> tuple:
    """The logits ``z = x @ W + b`` (bias added in place) and their row maxima: for ``n >=``
    :data:`_COLUMN_MAX_FROM` rows as ``C - 1`` elementwise ``np.maximum`` over the columns (a reduction over a
    short axis is several times slower per row; a maximum is exact in any order, so the values are those of
    ``z.max(axis=1)``)."""
    z = x @ W
    z += b
    if z.shape[0] >= _COLUMN_MAX_FROM:
        top = z[:, 0].copy()
        for c in range(1, z.shape[1]):
            np.maximum(top, z[:, c], out=top)
    else:
        top = z.max(axis=1)
    return z, top


def _grad(W, b, x, y, l2):
    """The plain one-batch gradient (no checks): softmax(xW + b) - onehot(y), averaged.

    In place on one ``(n, C)`` buffer, and for large batches (``n >=`` :data:`_COLUMN_MAX_FROM`)
    the row maxima as ``C - 1`` elementwise ``np.maximum`` over the columns instead of
    ``z.max(axis=1)`` (a reduction over a short axis, several times slower per row; for small
    batches the ``C - 1`` calls cost more than they save): a maximum is exact in any order, so
    the result is bit for bit that of the plain form (``_grad_reference`` in ``tests/test_speed_equivalence.py``)."""
    n = y.shape[0]
    z, top = _logits_and_row_max(x, W, b)
    z -= top[:, None]
    np.exp(z, out=z)
    z /= z.sum(axis=1, keepdims=True)
    z[np.arange(n), y] -= 1.0
    z /= n
    gW = x.T @ z
    if l2:
        gW += l2 * W
    return {"W": gW, "b": z.sum(axis=0)}


class LogisticRegression:
    r"""Softmax regression :math:`d \to C` with an optional L2 penalty ``l2`` on ``W``
    (default 0; see the module docstring for FedProx's 0.001).

    Example
    -------
    :math:`d = 1`, :math:`C = 2`, at the all-zero start: the softmax is uniform, so the loss is
    :math:`\log 2 = 0.6931` and (the same batch as :func:`packed_grad_`)
    :math:`\nabla_W = (-\tfrac12, \tfrac12)`, :math:`\nabla_b = 0`; every :math:`\arg\max` is class 0,
    right for one sample of two:

    >>> model = LogisticRegression(num_features=1, num_classes=2)
    >>> params = model.init_params()
    >>> x, y = np.array([[1.0], [-1.0]]), np.array([0, 1])
    >>> loss, grads = model.loss_and_grad(params, x, y)
    >>> round(loss, 4), grads["W"].tolist(), grads["b"].tolist(), model.accuracy(params, x, y)
    (0.6931, [[-0.5, 0.5]], [0.0, 0.0], 0.5)

    The stacked form gives the same for a batch padded with a third sample of mask 0:

    >>> losses, stacked = model.loss_and_grad_stacked({"W": params["W"][None], "b": params["b"][None]},
    ...                                               np.array([[[1.0], [-1.0], [5.0]]]), np.array([[0, 1, 1]]),
    ...                                               mask=np.array([[1, 1, 0]]))
    >>> losses.round(4).tolist(), stacked["W"].tolist()
    ([0.6931], [[[-0.5, 0.5]]])
    """

    def __init__(self, num_features: int = 60, num_classes: int = 10, l2: float = 0.0):
        self.num_features = check_int("num_features", num_features, minimum=1)
        self.num_classes = check_int("num_classes", num_classes, minimum=2)
        self.l2 = check_nonnegative("l2", l2)

    def __repr__(self) -> str:
        return f"LogisticRegression(num_features={self.num_features}, num_classes={self.num_classes}, l2={self.l2})"

    # ------------------------------------------------------------------ params
    def init_params(self) -> dict:
        """All-zero parameters (the objective is convex; every run starts from the same point)."""
        return {"W": np.zeros((self.num_features, self.num_classes)), "b": np.zeros(self.num_classes)}

    def _check_params(self, params: Any, stacked: bool) -> tuple[np.ndarray, np.ndarray]:
        if not isinstance(params, dict) or set(params) != {"W", "b"}:
            raise ValueError(f"params must be a dict with keys 'W' and 'b', got {type(params).__name__}")
        W, b = _real_array("params['W']", params["W"]), _real_array("params['b']", params["b"])
        lead = W.shape[:1] if stacked else ()
        if W.shape != lead + (self.num_features, self.num_classes) or b.shape != lead + (self.num_classes,):
            raise ValueError(f"params: W has shape {W.shape} and b {b.shape}, expected "
                             f"{lead + (self.num_features, self.num_classes)} and {lead + (self.num_classes,)}")
        return W, b

    def _check_batch(self, x, y, lead: tuple) -> tuple[np.ndarray, np.ndarray]:
        x = _real_array("x", x)
        if isinstance(y, (list, tuple)) and (flag := bool_entry(y)) is not None:  # np.asarray([0, True]) is [0, 1]
            raise ValueError(f"y must be integer labels, got the bool {plain(flag)!r} among them")
        try:
            y = np.asarray(y.detach().cpu() if _is_torch(y) else y)
        except (TypeError, ValueError) as exc:  # a ragged list: numpy's "setting an array element with a sequence"
            raise ValueError(f"y must be an array of integer labels: {exc}") from None
        if x.ndim != len(lead) + 2 or x.shape[-1] != self.num_features:
            raise ValueError(f"x must have shape {lead + ('B', self.num_features)}, got {x.shape}")
        # the sizes that must agree name both sides: 'x must have shape (3, 'B', 2)' blamed x for params' clients,
        # 'y must be integer labels of shape (5,)' blamed y for x's extra row
        per = ""
        if lead:  # stacked: params hold one model per client (axis 0), x and y one batch per client
            check_agree("x", x.shape[0], "params", lead[0], "clients (axis 0)")
            per = " per client"
        if y.ndim != x.ndim - 1 or y.dtype.kind not in "iu":
            raise ValueError(f"y must be integer labels of shape {x.shape[:-1]}, got {y.shape} {y.dtype}")
        if lead:
            check_agree("y", y.shape[0], "x", x.shape[0], "clients (axis 0)")
        check_agree("y", y.shape[-1], "x", x.shape[-2], "labels" + per, ref_what="rows" + per)
        if y.size and (y.min() < 0 or y.max() >= self.num_classes):
            raise ValueError(f"y: labels must lie in [0, {self.num_classes})")
        return x, y.astype(np.int64)

    # ------------------------------------------------------------ one client
    def logits(self, params: dict, x) -> np.ndarray:
        """:math:`z = x W + b`, shape ``(n, C)``.

        ``params`` is ``{"W": (d, C), "b": (C,)}`` (another structure or shape is a ``ValueError``); ``x`` is
        ``(n, d)``."""
        W, b = self._check_params(params, stacked=False)
        x = _real_array("x", x)
        if x.ndim != 2 or x.shape[1] != self.num_features:
            raise ValueError(f"x must have shape ('n', {self.num_features}), got {x.shape}")
        return x @ W + b

    def grad(self, params: dict, x, y) -> dict:
        """Gradient ``{"W", "b"}`` of the mean cross-entropy (+ penalty) of one batch.

        ``params`` is ``{"W": (d, C), "b": (C,)}`` (another structure or shape is a ``ValueError``); ``x`` is the
        ``(n, d)`` batch of features and ``y`` its ``(n,)`` integer labels in ``[0, C)`` (an empty batch is a
        ``ValueError``)."""
        W, b = self._check_params(params, stacked=False)
        x, y = self._check_batch(x, y, ())
        if y.shape[0] == 0:
            raise ValueError("x: the batch is empty")
        return _grad(W, b, x, y, self.l2)

    def loss_and_grad(self, params: dict, x, y) -> tuple[float, dict]:
        """Mean cross-entropy (+ penalty) of one batch and its gradient ``{"W", "b"}``.

        ``params`` is ``{"W": (d, C), "b": (C,)}`` (another structure or shape is a ``ValueError``); ``x`` is the
        ``(n, d)`` batch of features and ``y`` its ``(n,)`` integer labels in ``[0, C)``."""
        grads = self.grad(params, x, y)
        return self.loss(params, x, y), grads

    def hessian(self, params: dict, x, y) -> np.ndarray:
        r"""Hessian of the mean cross-entropy (+ penalty) of one batch, ``(P, P)`` with
        :math:`P = (d+1)C`, in the order of ``pack_params(params).ravel()``
        (:math:`\Theta_{jc}` at index :math:`jC + c`, the bias as row :math:`d`):

        .. math::

            \nabla^2 F = \frac1n\sum_{s=1}^n \tilde x_s\tilde x_s^\top \otimes
                \bigl(\mathrm{diag}(P_s) - P_sP_s^\top\bigr) + \lambda\,(I_d \oplus 0)\otimes I_C,

        :math:`\tilde x_s = (x_s, 1)`, :math:`P_s = \mathrm{softmax}(z_s)`. Singular: adding one
        vector to every class's column of :math:`\Theta` leaves every softmax unchanged, so
        those :math:`d+1` directions are flat (:math:`\lambda = 0`; with :math:`\lambda > 0` only
        the bias one). Used by chapter 10 (the linearised VR rounds at :math:`x^*`).

        ``params`` is ``{"W": (d, C), "b": (C,)}`` (another structure or shape is a ``ValueError``); ``x`` is the
        ``(n, d)`` batch of features and ``y`` its ``(n,)`` integer labels in ``[0, C)`` (an empty batch is a
        ``ValueError``)."""
        W, b = self._check_params(params, stacked=False)
        x, y = self._check_batch(x, y, ())
        n = y.shape[0]
        if n == 0:
            raise ValueError("x: the batch is empty")
        C = self.num_classes
        xa = np.concatenate([x, np.ones((n, 1))], axis=1)
        z = xa[:, :-1] @ W + b
        z -= z.max(axis=1, keepdims=True)
        prob = np.exp(z)
        prob /= prob.sum(axis=1, keepdims=True)
        D = xa.shape[1]
        H = np.zeros((D, C, D, C))
        for c in range(C):
            H[:, c, :, c] = (xa * prob[:, c:c + 1]).T @ xa
        M = (xa[:, :, None] * prob[:, None, :]).reshape(n, D * C)
        H = H.reshape(D * C, D * C) - M.T @ M
        H = (H + H.T) / (2 * n)   # exactly symmetric (the two products round differently)
        if self.l2:
            idx = np.arange((D - 1) * C)
            H[idx, idx] += self.l2
        return H

    # ------------------------------------------------------------ many clients
    def loss_and_grad_stacked(self, params: dict, x, y, mask=None) -> tuple[np.ndarray, dict]:
        r"""Losses ``(q,)`` and gradients ``{"W": (q, d, C), "b": (q, C)}`` of ``q`` clients at once.

        ``x`` ``(q, B, d)``, ``y`` ``(q, B)``, ``mask`` ``(q, B)`` (1 for real samples,
        0 for padding; default all real). Client ``j``'s loss is the mean over its
        real samples, exactly :meth:`loss_and_grad` on them.

        ``params`` is ``{"W": (q, d, C), "b": (q, C)}``, one model per client.
        """
        W, b = self._check_params(params, stacked=True)
        q = W.shape[0]
        x, y = self._check_batch(x, y, (q,))
        mask = np.ones(y.shape) if mask is None else _real_array("mask", mask)
        if mask.shape != y.shape:
            raise ValueError(f"mask must have shape {y.shape}, got {mask.shape}")
        if not np.all((mask == 0) | (mask == 1)):  # any other value would weight the mean (or make it NaN)
            raise ValueError("mask must hold only 0 (padding) and 1 (real samples)")
        count = mask.sum(axis=1)
        if np.any(count <= 0):
            raise ValueError(f"mask: client {int(np.flatnonzero(count <= 0)[0])} has an empty batch")
        w = mask / count[:, None]
        z = np.matmul(x, W) + b[:, None, :]
        loss = np.einsum("qb,qb->q", w, _log_softmax_loss(z, y))
        onehot = _one_hot(y, self.num_classes)
        theta = pack_params({"W": W, "b": b})
        xa = np.concatenate([x, np.ones(x.shape[:-1] + (1,))], axis=-1)
        G = np.empty_like(theta)
        packed_grad_(theta, xa, onehot * w[..., None], w[..., None], np.empty(z.shape), G, self.l2)
        if self.l2:
            loss = loss + 0.5 * self.l2 * np.einsum("qdc,qdc->q", W, W)
        return loss, unpack_params(G)

    # ------------------------------------------------------------ evaluation
    def loss(self, params: dict, x, y) -> float:
        """Mean cross-entropy (+ penalty) over ``(x, y)``.

        ``params`` is ``{"W": (d, C), "b": (C,)}`` (another structure or shape is a ``ValueError``); ``x`` is the
        ``(n, d)`` batch of features and ``y`` its ``(n,)`` integer labels in ``[0, C)``."""
        W, b = self._check_params(params, stacked=False)
        x, y = self._check_batch(x, y, ())
        if y.size == 0:
            raise ValueError("x: no samples")
        val = _mean_log_softmax_loss(x, W, b, y)
        return val + (0.5 * self.l2 * float(np.sum(W * W)) if self.l2 else 0.0)

    def accuracy(self, params: dict, x, y) -> float:
        """Fraction of ``argmax`` predictions equal to ``y`` (NaN without samples).

        ``params`` is ``{"W": (d, C), "b": (C,)}`` (another structure or shape is a ``ValueError``); ``x`` is the
        ``(n, d)`` batch of features and ``y`` its ``(n,)`` integer labels in ``[0, C)``."""
        x, y = self._check_batch(x, y, ())
        if y.size == 0:
            return float("nan")
        return float(np.mean(np.argmax(self.logits(params, x), axis=1) == y))


class LogisticProblem:
    r"""A :class:`LogisticRegression` model on a :class:`~fedlib.data.clients.FederatedDataset`.

    Holds the concatenated training data (for :math:`F(x) = \sum_i p_i F_i(x)`, the
    mean over all training samples) and test data (union of the client test sets).
    ``num_classes`` defaults to the data set's.

    ``dataset`` is a :class:`~fedlib.data.clients.FederatedDataset` (anything else is a ``ValueError``); ``l2`` is the
    penalty :math:`\lambda \ge 0` of the module docstring (default 0); ``num_classes``, if given, is at least 2 and at
    least the data set's.

    Example
    -------
    Two clients of 2 and 1 training samples (:math:`p = (2/3, 1/3)`) and one test sample, of label
    1, on client 1. At zero every loss is :math:`\log 2` and the prediction is class 0, so the test
    accuracy is 0; client 1's only sample :math:`x = 2`, label 1, has :math:`P - Y = (\tfrac12, -\tfrac12)`
    and gradient :math:`\nabla_W = 2(\tfrac12, -\tfrac12) = (1, -1)` (one batch of at most 8 holds it):

    >>> from fedlib.data import FederatedDataset
    >>> data = FederatedDataset([np.array([[1.0], [-1.0]]), np.array([[2.0]])], [np.array([0, 1]), np.array([1])],
    ...                         [np.zeros((0, 1)), np.array([[3.0]])], [np.zeros(0, dtype=int), np.array([1])],
    ...                         num_classes=2)
    >>> problem = LogisticProblem(data)
    >>> x0 = problem.init_params()
    >>> problem.p.round(4).tolist(), round(problem.loss(x0), 4), round(problem.client_loss(x0, 1), 4)
    ([0.6667, 0.3333], 0.6931, 0.6931)
    >>> problem.test_accuracy(x0)
    0.0
    >>> grads = problem.grad_fn(seed=0, batch_size=8)(x0, 1, 0, 0)     # (params, client, round, step)
    >>> grads["W"].tolist(), grads["b"].tolist()
    ([[1.0, -1.0]], [0.5, -0.5])

    Weights that score class 1 by :math:`x` classify the test sample :math:`x = 3` right:

    >>> problem.test_accuracy({"W": np.array([[0.0, 1.0]]), "b": np.zeros(2)})
    1.0
    """

    def __init__(self, dataset: FederatedDataset, l2: float = 0.0, num_classes: Optional[int] = None):
        if not isinstance(dataset, FederatedDataset):
            raise ValueError(f"dataset must be a FederatedDataset, got {type(dataset).__name__}")
        c = dataset.num_classes if num_classes is None else check_int("num_classes", num_classes, minimum=2)
        if c < dataset.num_classes:
            raise ValueError(f"num_classes: {dataset.name} has labels up to {dataset.num_classes - 1}, got {c}")
        self.dataset = dataset
        self.model = LogisticRegression(dataset.num_features, c, l2)
        self.num_samples = dataset.num_samples
        self.p = dataset.weights
        self.offsets = np.concatenate([[0], np.cumsum(self.num_samples)]).astype(np.int64)
        rows = int(self.num_samples.sum()) + sum(len(y) for y in dataset.test_y)
        check_memory(rows * (dataset.num_features + 1) * 8, f"LogisticProblem's copy of {dataset.name}'s features and "
                     f"labels ({rows:,} samples)")
        self.train_x = np.ascontiguousarray(np.concatenate([np.asarray(x, dtype=np.float64) for x in dataset.train_x]))
        self.train_y = np.concatenate([np.asarray(y, dtype=np.int64) for y in dataset.train_y])
        tx = [np.asarray(x, dtype=np.float64).reshape(-1, dataset.num_features) for x in dataset.test_x]
        self.test_x = np.concatenate(tx) if tx else np.zeros((0, dataset.num_features))
        self.test_y = np.concatenate([np.asarray(y, dtype=np.int64) for y in dataset.test_y])

    @property
    def num_clients(self) -> int:
        """Number of clients :math:`m` of the data set."""
        return self.dataset.num_clients

    @property
    def l2(self) -> float:
        r"""The L2 penalty :math:`\lambda` on ``W`` (0 unless given)."""
        return self.model.l2

    def init_params(self) -> dict:
        """All-zero ``{"W": (d, C), "b": (C,)}``, the start of every run (:meth:`LogisticRegression.init_params`)."""
        return self.model.init_params()

    def loss(self, params: dict) -> float:
        r"""Global training loss :math:`F(x) = \sum_i p_i F_i(x)` on all training data.

        ``params`` is ``{"W": (d, C), "b": (C,)}``."""
        return self.model.loss(params, self.train_x, self.train_y)

    def _client_index(self, client: int) -> int:
        """``client`` as an index in ``[0, m)`` (a negative one would pick a client from the end)."""
        i = check_int("client", client, minimum=0)
        if i >= self.num_clients:
            raise ValueError(f"client must be in [0, {self.num_clients}), got {client!r}")
        return i

    def client_loss(self, params: dict, client: int) -> float:
        """:math:`F_i(x)` on client ``client``'s training data.

        ``params`` is ``{"W": (d, C), "b": (C,)}``."""
        i = self._client_index(client)
        return self.model.loss(params, self.dataset.train_x[i], self.dataset.train_y[i])

    def client_hessian(self, params: dict, client: int) -> np.ndarray:
        r""":math:`\nabla^2 F_i(x)` on client ``client``'s training data
        (:meth:`LogisticRegression.hessian`, packed order).

        ``params`` is ``{"W": (d, C), "b": (C,)}``."""
        i = self._client_index(client)
        return self.model.hessian(params, self.dataset.train_x[i], self.dataset.train_y[i])

    def test_accuracy(self, params: dict) -> float:
        """Accuracy on the union of the client test sets (NaN when there is none).

        ``params`` is ``{"W": (d, C), "b": (C,)}``."""
        return self.model.accuracy(params, self.test_x, self.test_y)

    def grad_fn(self, seed: int, batch_size: int):
        r"""``grad_fn(params, client, round, step)`` for
        :func:`fedlib.engines.reference.run_sequential`: the gradient of client's
        mini-batch ``step``, with the batches of :func:`fedlib.engines.batched.minibatch_indices`
        (a fresh permutation of its samples each epoch from
        ``generator(seed, "batches", round, client)``, last partial batch kept).

        Like a data loader, each client's permutations are drawn lazily, one per epoch.

        ``seed`` is the run seed and ``batch_size`` :math:`B \ge 1`.
        """
        from ..engines.batched import EpochBatcher

        batcher = EpochBatcher(self.num_samples, batch_size, seed)
        l2 = self.l2
        xs = [np.asarray(x, dtype=np.float64) for x in self.dataset.train_x]
        ys = [np.asarray(y, dtype=np.int64) for y in self.dataset.train_y]

        def grad(params, client, round_index, step):
            idx = batcher.batch(round_index, client, step)
            return _grad(params["W"], params["b"], xs[client][idx], ys[client][idx], l2)

        return grad

    def metrics(self, params: dict) -> dict:
        """``{"train_loss": F(x), "test_accuracy": ...}`` (test accuracy ``None`` without test data).

        ``params`` is ``{"W": (d, C), "b": (C,)}``."""
        acc = self.test_accuracy(params)
        return {"train_loss": self.loss(params), "test_accuracy": None if np.isnan(acc) else acc}
