"""Minimal pytree helpers: the same arithmetic on numpy arrays, torch tensors and
nested ``dict`` / ``list`` / ``tuple`` / ``NamedTuple`` containers of them.

The update rule (eq. 4) only ever needs *linear* operations on models — weighted sums
of client changes, scaling, adding — so :mod:`fedlib` never flattens a model or copies it
per client: :func:`tree_weighted_sum` accumulates ``sum_i c_i * tree_i`` leaf by leaf
with one output buffer per leaf.

Leaves are ``numpy.ndarray``, numpy scalars, Python numbers or ``torch.Tensor``.
"""
from __future__ import annotations

import copy
import sys
from typing import Any, Callable, Sequence

import numpy as np

from ._validate import a_type, check_agree, is_bool, plain

__all__ = [
    "leaf_kind",
    "tree_kind_mismatch",
    "tree_map",
    "tree_leaves",
    "tree_structure_equal",
    "tree_add",
    "tree_sub",
    "tree_scale",
    "tree_axpy",
    "tree_zeros_like",
    "tree_weighted_sum",
    "tree_vdot",
    "tree_norm",
    "tree_all_finite",
    "tree_copy",
]


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def _is_leaf(x: Any) -> bool:
    return not isinstance(x, (dict, list, tuple))


def tree_map(fn: Callable, tree: Any, *rest: Any) -> Any:
    """Apply ``fn`` leaf-wise to ``tree`` and the trees in ``rest`` (same structure: dicts with the
    same keys, sequences of the same length; a ``ValueError`` otherwise). Containers keep their type
    (a ``NamedTuple`` stays one); every other tree function here is built on it.

    Example
    -------
    >>> import numpy as np
    >>> a = {"w": np.array([1.0, 2.0]), "b": 3.0}
    >>> b = {"w": np.array([3.0, -1.0]), "b": 1.0}
    >>> tree_map(lambda x, y: x * y, a, b)
    {'w': array([ 3., -2.]), 'b': 3.0}
    >>> tree_map(lambda x, y: x + y, a, {"w": np.zeros(2)})
    Traceback (most recent call last):
    ...
    ValueError: tree structures differ: dict keys ['w', 'b'] vs ['w']
    """
    if isinstance(tree, dict):
        for r in rest:
            if not isinstance(r, dict):  # printing r would show its leaves (a whole model's arrays)
                raise ValueError(f"tree structures differ: {a_type(tree)} (keys {list(tree)}) is paired "
                                 f"with {a_type(r)}, not a dict")
            if r.keys() != tree.keys():
                raise ValueError(f"tree structures differ: dict keys {list(tree)} vs {list(r)}")
        items = {k: tree_map(fn, tree[k], *(r[k] for r in rest)) for k in tree}
        if type(tree) is dict:
            return items
        out = copy.copy(tree)  # a dict subclass (OrderedDict, defaultdict, ...) keeps its type and attributes
        out.clear()
        out.update(items)
        return out
    if isinstance(tree, (list, tuple)):
        for r in rest:
            if not isinstance(r, (list, tuple)):
                raise ValueError(f"tree structures differ: {a_type(tree)} is paired with {a_type(r)}, not a list or tuple")
            if len(r) != len(tree):
                raise ValueError(f"tree structures differ: sequences of length {len(tree)} and {len(r)}")
        items = [tree_map(fn, *xs) for xs in zip(tree, *rest)]
        if _is_namedtuple(tree):
            return type(tree)(*items)
        return type(tree)(items)
    return fn(tree, *rest)


def tree_leaves(tree: Any) -> list:
    """The leaves of ``tree`` in a fixed (insertion) order.

    Example
    -------
    >>> import numpy as np
    >>> tree_leaves({"w": [np.array([1.0]), 2.0], "b": (3.0,)})
    [array([1.]), 2.0, 3.0]
    """
    out: list = []
    tree_map(lambda x: out.append(x), tree)
    return out


def tree_structure_equal(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` have the same nesting and leaf shapes: dicts with the same
    keys, sequences of the same length (a list and a tuple of equal length match, as in
    :func:`tree_map`), leaves of the same shape (a leaf never matches a container). The algorithms use
    it to refuse a client update shaped unlike the model.

    Example
    -------
    >>> import numpy as np
    >>> a = {"w": np.array([1.0, 2.0]), "b": 3.0}
    >>> b = {"w": np.array([3.0, -1.0]), "b": 1.0}
    >>> tree_structure_equal(a, b), tree_structure_equal(a, {"w": np.zeros(3), "b": 0.0})
    (True, False)
    >>> tree_structure_equal([1.0, 2.0], (1.0, 2.0))
    True
    """
    try:
        tree_map(lambda x, y: None if _is_leaf(y) and np.shape(x) == np.shape(y) else (_ for _ in ()).throw(ValueError()),
                 a, b)
    except ValueError:
        return False
    return True


def tree_add(a: Any, b: Any) -> Any:
    """Leaf-wise ``a + b``.

    Example
    -------
    >>> import numpy as np
    >>> a = {"w": np.array([1.0, 2.0]), "b": 3.0}
    >>> b = {"w": np.array([3.0, -1.0]), "b": 1.0}
    >>> tree_add(a, b)
    {'w': array([4., 1.]), 'b': 4.0}
    """
    return _leafwise(lambda x, y: x + y, a, b)


def _leafwise(op: Callable, a: Any, b: Any, names: tuple[str, str] = ("a", "b")) -> Any:
    """``tree_map(op, a, b)`` whose leaf of another shape is a ``ValueError`` naming both trees and the two shapes
    ("a has a leaf of shape (3,) but b has (2,)"), not numpy's "operands could not be broadcast together with shapes
    (3,) (2,)" or torch's "The size of tensor a (3) must match ...", which name neither argument. Only a failing
    operation is looked at (no cost on the way through; a leaf that broadcasts is taken, as before)."""
    def leaf(x, y):
        try:
            return op(x, y)
        except (ValueError, RuntimeError):
            check_agree(names[0], tuple(np.shape(x)), names[1], tuple(np.shape(y)), "a leaf of shape")
            raise

    return tree_map(leaf, a, b)


def tree_sub(a: Any, b: Any) -> Any:
    r"""Leaf-wise ``a - b`` (e.g. a client's change :math:`\Delta_i = x_i^{(t,\tau_i)} - x^{(t,0)}`).

    Example
    -------
    >>> import numpy as np
    >>> a = {"w": np.array([1.0, 2.0]), "b": 3.0}
    >>> b = {"w": np.array([3.0, -1.0]), "b": 1.0}
    >>> tree_sub(a, b)
    {'w': array([-2.,  3.]), 'b': 2.0}
    """
    return _leafwise(lambda x, y: x - y, a, b)


def tree_scale(a: Any, s: float) -> Any:
    """Leaf-wise ``s * a``.

    Example
    -------
    >>> import numpy as np
    >>> a = {"w": np.array([1.0, 2.0]), "b": 3.0}
    >>> b = {"w": np.array([3.0, -1.0]), "b": 1.0}
    >>> tree_scale(a, 0.5)
    {'w': array([0.5, 1. ]), 'b': 1.5}
    """
    return tree_map(lambda x: x * s, a)


def tree_axpy(alpha: float, x: Any, y: Any) -> Any:
    r"""Leaf-wise ``alpha * x + y``: :math:`2(1, 2) + (3, -1) = (5, 3)`, :math:`2 \cdot 3 + 1 = 7`.

    Example
    -------
    >>> import numpy as np
    >>> a = {"w": np.array([1.0, 2.0]), "b": 3.0}
    >>> b = {"w": np.array([3.0, -1.0]), "b": 1.0}
    >>> tree_axpy(2.0, a, b)
    {'w': array([5., 3.]), 'b': 7.0}
    """
    return _leafwise(lambda u, v: alpha * u + v, x, y, ("x", "y"))


def tree_zeros_like(a: Any) -> Any:
    """A tree of zeros with the leaves' shapes, dtypes and devices (a Python number becomes a 0-d
    array). The server optimizers and control variates start from it.

    Example
    -------
    >>> import numpy as np
    >>> tree_zeros_like({"w": np.array([1.0, 2.0]), "step": np.array([3], dtype=np.int64)})
    {'w': array([0., 0.]), 'step': array([0])}
    """
    def zeros(x):
        if hasattr(x, "new_zeros"):  # torch.Tensor
            return x.new_zeros(x.shape)
        return np.zeros_like(x)

    return tree_map(zeros, a)


def tree_copy(a: Any) -> Any:
    """A deep copy of the leaves (``clone`` for tensors, ``copy`` for arrays): writing into the copy
    leaves the original alone.

    Example
    -------
    >>> import numpy as np
    >>> a = {"w": np.array([1.0, 2.0])}
    >>> c = tree_copy(a)
    >>> c["w"][0] = 9.0
    >>> a["w"], c["w"]
    (array([1., 2.]), array([9., 2.]))
    """
    return tree_map(lambda x: x.clone() if hasattr(x, "clone") else np.array(x, copy=True), a)


def tree_weighted_sum(trees: Sequence[Any], coefficients: Sequence[float]) -> Any:
    r"""Return :math:`\sum_i c_i\, \mathrm{tree}_i` leaf by leaf.

    One output buffer per leaf is allocated; the inputs are read once and never
    copied. ``coefficients`` are Python/numpy floats (one per tree). A tree whose
    coefficient is 0 is left out of the sum (a client of weight 0 holding NaN or inf
    does not reach the result), as in :func:`tree_stacked_weighted_sum`. Eq. (4)'s aggregation
    :math:`\sum_i c_i\Delta_i` (:func:`fedlib.rule.aggregate`) is this sum.

    ``trees`` is a non-empty sequence of trees of one structure, leaf shapes and kind (numpy or torch); a leaf of
    another shape or kind is a ``ValueError`` naming ``trees`` and the tree, another structure one from
    :func:`tree_map` (``tree structures differ: ...``, naming neither).

    Example
    -------
    >>> import numpy as np
    >>> a = {"w": np.array([1.0, 2.0]), "b": 3.0}
    >>> b = {"w": np.array([3.0, -1.0]), "b": 1.0}
    >>> tree_weighted_sum([a, b], [0.25, 0.75])     # (0.25 + 2.25, 0.5 - 0.75), 0.75 + 0.75
    {'w': array([ 2.5 , -0.25]), 'b': 1.5}
    >>> tree_weighted_sum([a, {"w": np.array([np.nan, 0.0]), "b": np.inf}], [1.0, 0.0])
    {'w': array([1., 2.]), 'b': 3.0}
    """
    trees = list(trees)
    coefficients = [float(c) for c in np.asarray(coefficients, dtype=np.float64).ravel()]
    if len(trees) == 0:
        raise ValueError("trees must not be empty")
    if len(trees) != len(coefficients):
        raise ValueError(f"coefficients has {len(coefficients)} entries but there are {len(trees)} trees")

    kinds = {True: "a torch tensor", False: "a numpy array"}
    # a zero coefficient drops its tree wherever it sits: 0 * NaN would otherwise be NaN
    terms = [i for i, c in enumerate(coefficients) if c != 0.0]

    def acc(*leaves):
        shape, torch_leaf = np.shape(leaves[0]), hasattr(leaves[0], "add_")
        for i, leaf in enumerate(leaves[1:], 1):
            if np.shape(leaf) != shape:  # in-place += would broadcast a smaller leaf silently
                raise ValueError(f"trees: leaf of tree {i} has shape {tuple(np.shape(leaf))}, tree 0 has {tuple(shape)}")
            if hasattr(leaf, "add_") != torch_leaf:
                raise ValueError(f"trees: leaf of tree {i} is {kinds[not torch_leaf]}, tree 0's is "
                                 f"{kinds[torch_leaf]} (use one kind for every client)")
        if not terms:  # every coefficient 0: zeros (not 0 * leaf, which keeps a NaN)
            x = leaves[0]
            if torch_leaf:
                import torch

                return x.new_zeros(x.shape, dtype=torch.result_type(x, 0.0))
            return np.zeros(np.shape(x), dtype=np.result_type(x, 0.0))
        first, rest = terms[0], terms[1:]
        out = leaves[first] * coefficients[first]
        # clients in different precisions: the sum takes the widest, whichever client comes first
        # (in-place += / add_ would otherwise cast every later client to the first one's dtype), and so does
        # every product c_i * leaf_i (a float32 client's product was rounded to float32 before joining a
        # float64 sum: 1e-8 relative off, and with torch only when that client came first)
        if torch_leaf:
            target = out.dtype
            for i in rest:
                target = _torch_promote(target, leaves[i].dtype)
            if target != out.dtype:
                out = leaves[first].to(target) * coefficients[first]
        elif isinstance(out, (np.ndarray, np.generic)):
            target = np.result_type(out, *(leaves[i] for i in rest))
            if target != out.dtype:
                out = np.asarray(leaves[first], dtype=target) * coefficients[first]
        for i in rest:
            c, leaf = coefficients[i], leaves[i]
            if hasattr(out, "add_"):
                out.add_(leaf, alpha=c)  # computed in out's dtype
            elif isinstance(out, (np.ndarray, np.generic)):
                out += c * np.asarray(leaf, dtype=out.dtype)
            else:
                out += c * leaf
        return out

    return tree_map(acc, *trees)


def leaf_kind(x: Any) -> str:
    """``"torch tensors"`` or ``"numpy arrays"``: the kind of a leaf, as the error messages name it.

    ``x`` is any leaf; one with an ``add_`` method counts as a torch tensor.

    Example
    -------
    >>> import numpy as np, torch
    >>> leaf_kind(np.zeros(1)), leaf_kind(torch.zeros(1))
    ('numpy arrays', 'torch tensors')
    """
    return "torch tensors" if hasattr(x, "add_") else "numpy arrays"


def _promoted_dtype(a: Any, b: Any) -> Any:
    """The dtype of ``x + d`` for leaves of the dtypes ``a`` and ``b`` (both numpy, or both torch), else ``None``
    (mixed kinds, no common type): what a step or a server update would turn a leaf into."""
    try:
        if isinstance(a, np.dtype) and isinstance(b, np.dtype):
            return np.result_type(a, b)
        torch = sys.modules.get("torch")  # a torch dtype means torch is imported
        if torch is not None and isinstance(a, torch.dtype) and isinstance(b, torch.dtype):
            return torch.promote_types(a, b)
    except (TypeError, ValueError):
        pass
    return None


def tree_kind_mismatch(a: Any, b: Any):
    """The index of the first pair of leaves of ``a`` and ``b`` where one is a torch tensor and the
    other is not (numpy + torch fails deep inside an update), or ``None``. The algorithms name that
    leaf in their error instead.

    Example
    -------
    >>> import numpy as np, torch
    >>> model = {"w": np.zeros(1), "b": np.zeros(1)}
    >>> tree_kind_mismatch(model, {"w": np.ones(1), "b": torch.ones(1)}), tree_kind_mismatch(model, model)
    (1, None)
    """
    for k, (x, y) in enumerate(zip(tree_leaves(a), tree_leaves(b))):
        if hasattr(x, "add_") != hasattr(y, "add_"):
            return k
    return None


def _torch_promote(a, b):
    """``torch.promote_types(a, b)`` (torch imported only when tensors are summed)."""
    import torch

    return torch.promote_types(a, b)


def tree_vdot(a: Any, b: Any) -> float:
    r"""Sum over leaves of the inner products ``<a, b>``; leaves are paired as by
    :func:`tree_map` (dicts by key) and must have the same shapes. Real leaves are
    accumulated in float64 whatever their dtype (a float16 sum overflows past 65504); for complex
    leaves it is the real part of :math:`\sum \bar a b` (so :func:`tree_norm` is the 2-norm), accumulated
    in complex128. A torch leaf may be paired with a numpy array or a number, either way round.

    Example
    -------
    >>> import numpy as np
    >>> a = {"w": np.array([1.0, 2.0]), "b": 3.0}
    >>> b = {"w": np.array([3.0, -1.0]), "b": 1.0}
    >>> tree_vdot(a, b)        # 1*3 + 2*(-1) + 3*1
    4.0
    """
    total = 0.0

    def dot(x, y):
        nonlocal total
        # was 'tree_vdot: leaf shapes differ: (3,) vs (2,)', naming neither argument
        check_agree("a", tuple(np.shape(x)), "b", tuple(np.shape(y)), "a leaf of shape")
        if hasattr(x, "detach") or hasattr(y, "detach"):
            import torch

            # a tensor paired with a numpy array or a number (either way round): the other on its device
            # (np.asarray first: a Python float is float64 there, float32 as torch.as_tensor(0.1))
            device = (x if hasattr(x, "detach") else y).device
            x, y = (t if hasattr(t, "detach") else torch.as_tensor(np.asarray(t), device=device) for t in (x, y))
            if x.is_complex() or y.is_complex():  # Re <x, y> with x conjugated, as np.vdot below
                x, y = x.to(torch.complex128).reshape(-1), y.to(torch.complex128).reshape(-1)
                total += float(x.conj().dot(y).real.item())
                return
            # accumulate in float64: float16 overflows past 65504, int8 products wrap
            total += float((x.double() * y.double()).sum().item())
        else:
            xa, ya = np.asarray(x).ravel(), np.asarray(y).ravel()
            if xa.dtype.kind == "c" or ya.dtype.kind == "c":  # complex64 sums in single precision
                xa, ya = xa.astype(np.complex128), ya.astype(np.complex128)
            elif xa.dtype.kind in "fiub":
                xa, ya = xa.astype(np.float64), ya.astype(np.float64)
            total += float(np.vdot(xa, ya).real)

    tree_map(dot, a, b)
    return total


def tree_norm(a: Any) -> float:
    r"""Euclidean norm of all leaves concatenated, :math:`\sqrt{\text{tree\_vdot}(a, a)}`.

    Example
    -------
    >>> import numpy as np
    >>> tree_norm({"w": np.array([3.0, 4.0]), "b": 12.0})     # sqrt(9 + 16 + 144)
    13.0
    """
    return float(np.sqrt(tree_vdot(a, a)))


def _scaled_norm(x: np.ndarray, axis: int | None = None) -> Any:
    r"""The 2-norm :math:`\|x\|_2` of a real float64 array (``axis=None``: all entries; an ``int``: along that
    axis), as ``np.linalg.norm(x, axis=axis)`` gives it, but without its overflow for finite entries.

    ``np.linalg.norm`` forms :math:`\sqrt{x \cdot x}`: :math:`x \cdot x` passes the float64 maximum
    (:math:`\approx 1.8\cdot10^{308}`) once :math:`\|x\|_2 > \approx 1.3\cdot10^{154}`, and the norm comes out
    inf although it is finite (a diverging run's distance to its fixed point, long before the iterate overflows).
    Its value is kept wherever it is finite (bit for bit: ordinary values do not change); where it is inf and the
    entries are finite it is redone as :math:`2^k\|2^{-k}x\|_2`, :math:`2^k` the power of two of
    :math:`\max_i|x_i|`: an exact scaling, so the same few-ulp accuracy, and inf only where :math:`\|x\|_2` itself
    is past the float64 maximum. NaN or inf entries give ``np.linalg.norm``'s NaN or inf. No overflow warning.

    :math:`x = 2^{600}(3, -4)`, :math:`\|x\|_2 = 5\cdot2^{600} \approx 2.1\cdot10^{181}`; row by row too:

    >>> x = np.ldexp([3.0, -4.0], 600)
    >>> with np.errstate(over="ignore"):
    ...     float(np.linalg.norm(x))
    inf
    >>> float(_scaled_norm(x)) == 5 * 2.0 ** 600, _scaled_norm(np.array([[3.0, 4.0], x]), axis=1).tolist()
    (True, [5.0, 2.0747577844404965e+181])
    """
    with np.errstate(over="ignore"):
        n = np.linalg.norm(x, axis=axis)
        if axis is None:  # n a scalar: compared in Python (np.isinf(n).any() took 2.4 us, the norm 1.3)
            if n != np.inf or not np.isfinite(x).all():
                return n
            k = np.frexp(np.max(np.abs(x)))[1]
            return np.ldexp(np.linalg.norm(np.ldexp(x, -k)), k)
        redo = n == np.inf
        if redo.any():
            redo &= np.isfinite(x).all(axis=axis)
            rows = np.moveaxis(x, axis, -1)[redo]  # (rows to redo, length along axis)
            k = np.frexp(np.max(np.abs(rows), axis=-1))[1]
            n[redo] = np.ldexp(np.linalg.norm(np.ldexp(rows, -k[:, None]), axis=-1), k)
        return n


def tree_all_finite(a: Any) -> bool:
    """True when no leaf holds NaN or inf (the algorithms' divergence check on an aggregated update).

    ``a`` is a tree of numpy arrays, tensors or numbers.

    Example
    -------
    >>> import numpy as np
    >>> tree_all_finite({"w": np.array([1.0, 2.0])}), tree_all_finite({"w": np.array([1.0, np.inf])})
    (True, False)
    """
    for x in tree_leaves(a):
        if hasattr(x, "isfinite"):
            if not bool(x.isfinite().all()):
                return False
        elif not np.all(np.isfinite(x)):
            return False
    return True


def tree_stacked_weighted_sum(stacked: Any, coefficients: Sequence[float]) -> Any:
    r"""Return :math:`\sum_i c_i\, \mathrm{stacked}[i]` for a tree whose leaves carry a
    leading client axis of length ``len(coefficients)`` (numpy or torch).

    Every leaf must be an array or tensor with that axis (a number or 0-d leaf is refused with
    ``ValueError``). Rows whose coefficient is 0 are left out (as in :func:`tree_weighted_sum`); floating
    leaves keep their dtype, integer leaves give floating results (numpy: float64; torch:
    the default float dtype). The batched engine's clients are such a stack; :func:`fedlib.rule.aggregate_stacked`
    sums them with it.

    Example
    -------
    Same result as :func:`tree_weighted_sum` of the rows:

    >>> import numpy as np
    >>> stacked = tree_stack([{"w": np.array([1.0, 2.0]), "b": np.array([3.0])},
    ...                       {"w": np.array([3.0, -1.0]), "b": np.array([1.0])}])
    >>> tree_stacked_weighted_sum(stacked, [0.25, 0.75])
    {'w': array([ 2.5 , -0.25]), 'b': array([1.5])}
    """
    c = np.asarray(coefficients, dtype=np.float64).ravel()
    keep = np.flatnonzero(c != 0.0)
    every_row = keep.size == c.size

    def contract(x):
        if np.ndim(x) == 0:  # a number or 0-d array has no client axis (x.shape[0] raised IndexError/AttributeError)
            raise ValueError(f"stacked leaf must have a leading axis of {c.size} clients, got {a_type(x)} "
                             f"of shape ()")
        if x.shape[0] != c.size:
            raise ValueError(f"stacked leaf has leading size {x.shape[0]} but there are {c.size} coefficients")
        if hasattr(x, "new_tensor"):
            import torch

            rows = x if every_row else x[torch.as_tensor(keep, device=x.device)]
            if not (rows.is_floating_point() or rows.is_complex()):  # new_tensor(c) would truncate c to ints
                rows = rows.to(torch.get_default_dtype())
            return (rows.new_tensor(c[keep]).reshape((-1,) + (1,) * (x.ndim - 1)) * rows).sum(0)
        out = np.tensordot(c[keep], x if every_row else x[keep], axes=(0, 0))
        # float64 coefficients would promote a float32 stack (tree_weighted_sum and torch keep its dtype)
        return out.astype(x.dtype, copy=False) if x.dtype.kind in "fc" else out

    return tree_map(contract, stacked)


def tree_stack(trees: Sequence[Any]) -> Any:
    """Stack a sequence of same-structure trees along a new leading axis (``np.stack`` or
    ``torch.stack`` per leaf); :func:`tree_index` takes a row back.

    Example
    -------
    >>> import numpy as np
    >>> stacked = tree_stack([{"w": np.array([1.0, 2.0]), "b": np.array([3.0])},
    ...                       {"w": np.array([3.0, -1.0]), "b": np.array([1.0])}])
    >>> stacked
    {'w': array([[ 1.,  2.],
           [ 3., -1.]]), 'b': array([[3.],
           [1.]])}
    """
    trees = list(trees)
    if not trees:
        raise ValueError("trees must not be empty")

    def stack(*xs):
        if hasattr(xs[0], "detach"):
            import torch

            return torch.stack(list(xs))
        return np.stack(xs)

    return tree_map(stack, *trees)


def tree_index(stacked: Any, i) -> Any:
    """Row ``i`` (an int, slice or index array) of every leaf of a stacked tree.

    Example
    -------
    >>> import numpy as np
    >>> stacked = tree_stack([{"w": np.array([1.0, 2.0]), "b": np.array([3.0])},
    ...                       {"w": np.array([3.0, -1.0]), "b": np.array([1.0])}])
    >>> tree_index(stacked, 1)
    {'w': array([ 3., -1.]), 'b': array([1.])}

    A bool is refused (``x[True]`` would add an axis, not pick a row), and so is a float:

    >>> tree_index(stacked, 1.0)
    Traceback (most recent call last):
    ...
    ValueError: i must be a row index (an int, slice or index array), got 1.0

    >>> tree_index(stacked, True)
    Traceback (most recent call last):
    ...
    ValueError: i must be a row index (an int, slice or index array), got the bool True

    A tuple indexes one axis per entry (``x[1, 0]`` is row 1's first entry), not rows 1 and 0; a list or an
    index array picks rows:

    >>> tree_index(stacked, (1, 0))
    Traceback (most recent call last):
    ...
    ValueError: i must be a row index (an int, slice or index array), got the tuple (1, 0) (one axis per entry): give rows as a list or an index array
    """
    if isinstance(i, tuple):
        raise ValueError(f"i must be a row index (an int, slice or index array), got the tuple {i!r} (one axis per "
                         "entry): give rows as a list or an index array")
    if np.ndim(i) == 0 and is_bool(i):
        # a 0-d bool array or tensor indexes as a bool too (np.array(True) added an axis, torch.tensor(True) picked row 1)
        raise ValueError(f"i must be a row index (an int, slice or index array), got the bool {i!r}")
    if not isinstance(i, (int, np.integer, slice)):  # 1.0, nan, None, a float array: numpy/torch's own IndexError
        if hasattr(i, "detach"):  # a torch tensor: torch.int64, torch.uint8, torch.bool
            is_index = "int" in str(i.dtype) or "bool" in str(i.dtype)
        else:
            # [] is numpy's empty index list (float64 by np.asarray): no rows, as before
            is_index = i is not None and (np.asarray(i).dtype.kind in ("i", "u", "b") or (isinstance(i, list) and not i))
        if not is_index:
            raise ValueError(f"i must be a row index (an int, slice or index array), got {plain(i)!r}")
    return tree_map(lambda x: x[i], stacked)


__all__ += ["tree_stacked_weighted_sum", "tree_stack", "tree_index"]
