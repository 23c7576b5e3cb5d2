"""Input checks shared by every public function of :mod:`fedlib`.

Each helper raises :class:`ValueError` whose message starts with the name of the
offending parameter, so a user sees *which* argument was wrong, never a bare
numpy broadcasting error twenty frames deep.
"""
from __future__ import annotations

import inspect
import math
import numbers
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "check_positive",
    "check_nonnegative",
    "check_in_range",
    "check_probability_vector",
    "check_weights",
    "check_local_steps",
    "check_finite_array",
    "check_choice",
    "check_int",
    "check_path",
    "check_sequence",
    "round_lr",
]


def a_type(x: Any) -> str:
    """``x``'s type name with its article, for messages: "a dict", "an OrderedDict", "an int"."""
    name = type(x).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"

def plain(x: Any) -> Any:
    """A numpy scalar as the Python number it holds (``np.float64(0.5)`` -> ``0.5``), anything else
    unchanged: messages then show ``0.5``, not numpy 2's ``np.float64(0.5)``."""
    return x.item() if isinstance(x, np.generic) else x


def _is_number(x: Any) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def is_bool(x: Any) -> bool:
    """``x`` is a bool: Python's, numpy's, or an array or tensor of bool dtype (``float`` of each is 1.0 or 0.0,
    and ``x[True]`` adds an axis, so a bool passed as a number or an index would silently mean something)."""
    return isinstance(x, (bool, np.bool_)) or "bool" in str(getattr(x, "dtype", ""))


def bool_entry(values: Any) -> Any:
    """The first bool among the entries of ``values`` (a list or tuple, nested ones flattened; an array or tensor is
    not searched, its dtype tells), else ``None``: ``np.asarray([0, True])`` is the integer array ``[0, 1]``, where
    the bool has become the number 1. An array or tensor among the entries is judged by its dtype too (a bool one
    gives its first entry), so that a list of large arrays (``H`` as ``[H_1, H_2]``) costs one step per array, not
    one per number."""
    if hasattr(values, "dtype"):
        return None
    if not isinstance(values, (list, tuple)):  # another iterable: as numpy reads it
        return next((v for v in np.asarray(values, dtype=object).reshape(-1).tolist()
                     if isinstance(v, (bool, np.bool_))), None)
    for v in values:
        # the common entries first, by type identity, then C-level type checks (an ABC such as numbers.Number
        # costs ~10x): a float or numpy number (np.bool_ is none), an int that is no bool
        kind = type(v)
        if kind is float or kind is int or kind is np.float64 or isinstance(v, (float, np.number)) or \
                isinstance(v, int) and not isinstance(v, bool):
            continue
        if isinstance(v, (bool, np.bool_)):
            return v
        if isinstance(v, (list, tuple)):
            found = bool_entry(v)
            if found is not None:
                return found
        elif hasattr(v, "reshape") and is_bool(v):  # a bool array or tensor among numbers
            flat = v.reshape(-1)
            if len(flat):
                return flat[0].item()
    return None


def _is_int_at_least(x: Any, minimum: int) -> bool:
    """``x`` is a Python or numpy integer (never a bool) >= ``minimum``: a check of Python numbers alone, for the
    per-step helpers of the stacked engine (no tensor is read, so no device waits)."""
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool) and x >= minimum


def _past_int64(low: Any, high: Any) -> bool:
    """Whole numbers from ``low`` to ``high`` reach past int64 (``high >= 2**63`` or ``low < -2**63``), where the
    step counts of the engines live: the rule of ``check_count`` (``low`` and ``high`` the one number) and
    ``check_int_array`` (its min and max). Compared with the ints ``2**63`` and ``-2**63``, never the float
    ``2.0**63`` (which ``2**63 - 1`` rounds to): Python's ints and floats compare exactly (``check_int_array`` passes
    its min and max as Python numbers, ``.item()``: a float16 scalar would turn ``2**63`` into inf, with numpy's
    overflow warning)."""
    return high >= 2 ** 63 or low < -(2 ** 63)


def _is_finite_number(x: Any) -> bool:
    """``x`` is a finite int or float (Python's or numpy's, not a bool). ``math.isfinite``, not ``np.isfinite``:
    the latter raised TypeError ("ufunc 'isfinite' not supported for the input types") on an int past int64 and
    on another kind of real number (a ``Fraction``), which is refused here (numpy arrays times a ``Fraction`` are
    object arrays)."""
    if not isinstance(x, (int, float, np.integer, np.floating)) or isinstance(x, (bool, np.bool_)):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:  # an int past float64's range (10**400)
        return False


def _held_in_array(value: Any, *, whole: bool = False) -> bool:
    """``value`` is one real number held in a 0-d array or tensor (``np.array(0.1)``, ``torch.tensor(3)``), which the
    number checks refuse; numpy's scalars (``np.float64(0.1)``) are numbers, a bool array is no number at all, nor is
    a 0-d array of text or a complex number (``float()`` of it fails). ``whole``: and the number is whole, so that
    ``int(value)`` keeps it (``int(np.array(2.5))`` is 2)."""
    if getattr(value, "ndim", None) != 0 or isinstance(value, np.generic) or is_bool(value):
        return False
    try:
        held = value.item()
    except Exception:  # an object without item(): no hint
        return False
    if not _is_number(held):
        return False
    return not whole or isinstance(held, numbers.Integral) or (_is_finite_number(held) and float(held).is_integer())


def _other_real(value: Any) -> str:
    """The end of a message refusing ``value``: a hint where it is a real number of another type."""
    other = _is_number(value) and not isinstance(value, (int, float, np.integer, np.floating))  # a Fraction, say
    if other:
        return " (an int or float: pass float(value))"
    if _held_in_array(value):
        return " (a 0-d array or tensor, not a number: pass float(value))"
    return ""


def _plural(what: str, n: Any) -> str:
    """``what`` ("clients", "entries", "clients (rows)") with its first word singular when ``n`` is 1."""
    if n != 1:
        return what
    head, sep, tail = what.partition(" ")
    head = head[:-3] + "y" if head.endswith("ies") else head[:-1] if head.endswith("s") else head
    return head + sep + tail


def mismatch(name: str, n: Any, ref: str, k: Any, what: str = "clients", *, ref_what: str | None = None,
             count: bool = False) -> str:
    """The message of two arguments that disagree in a size, naming both and their sizes, ``name`` first (the one
    checked against ``ref``): either may be the wrong one, and a message naming one alone ("e must have shape (3, 2)")
    blamed the other's mistake on it. "e has 3 clients (rows) but H has 2"; a shape (a tuple ``n``) reads
    "x has shape (3,) but reference has (2,)"; ``ref_what`` is ``ref``'s own unit ("b has 3 entries but M has 2
    rows"); ``count=True`` for a ``ref`` that is itself the count ("num_samples has 2 entries but num_clients is 3")."""
    size = f"{what} {n}" if isinstance(n, tuple) else f"{n} {_plural(what, n)}"
    other = f"is {k}" if count else f"has {k}" + ("" if ref_what is None else f" {_plural(ref_what, k)}")
    return f"{name} has {size} but {ref} {other}"


def check_agree(name: str, n: Any, ref: str, k: Any, what: str = "clients", *, ref_what: str | None = None,
                count: bool = False) -> None:
    """Refuse ``n != k`` with :func:`mismatch`'s ``ValueError``, which names both arguments and their sizes."""
    if n != k:
        raise ValueError(mismatch(name, n, ref, k, what, ref_what=ref_what, count=count))


def check_positive(name: str, value: Any) -> float:
    """Return ``float(value)`` if it is a finite number > 0, else raise ``ValueError``."""
    if not _is_finite_number(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {plain(value)!r}{_other_real(value)}")
    return float(value)


def check_nonnegative(name: str, value: Any) -> float:
    """Return ``float(value)`` if it is a finite number >= 0, else raise ``ValueError``."""
    if not _is_finite_number(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {plain(value)!r}{_other_real(value)}")
    return float(value)


def check_in_range(name: str, value: Any, low: float, high: float, *, high_inclusive: bool = False) -> float:
    """Return ``float(value)`` if ``low <= value < high`` (or ``<= high``), else raise."""
    ok = _is_finite_number(value) and value >= low and (value <= high if high_inclusive else value < high)
    if not ok:
        bracket = "]" if high_inclusive else ")"
        raise ValueError(f"{name} must lie in [{plain(low)}, {plain(high)}{bracket}, got {plain(value)!r}{_other_real(value)}")
    return float(value)


def check_int(name: str, value: Any, *, minimum: int = 0) -> int:
    """Return ``int(value)`` if it is an integer >= ``minimum``, else raise."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, np.integer)) or value < minimum:
        hint = " (a 0-d array or tensor, not an integer: pass int(value))" if _held_in_array(value, whole=True) else ""
        raise ValueError(f"{name} must be an integer >= {minimum}, got {plain(value)!r}{hint}")
    return int(value)


def check_count(name: str, value: Any, *, minimum: int = 0) -> int:
    """Return ``int(value)`` if it is a whole number >= ``minimum`` (and below ``2**63``, an int64), else raise:
    like :func:`check_int`, but a whole float (``2.0``) is taken as its integer; ``1.5`` and a bool are refused, with
    the message ``"{name} must be a whole number >= {minimum}, got ..."`` (the words of the package's convention: *an
    integer* refuses ``2.0``, *a whole number* takes it)."""
    number = value
    if isinstance(number, (float, np.floating)) and np.isfinite(number) and float(number).is_integer():
        number = int(number)
    if isinstance(number, bool) or not isinstance(number, (numbers.Integral, np.integer)) or number < minimum:
        hint = " (a 0-d array or tensor, not a number: pass int(value))" if _held_in_array(value, whole=True) else ""
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {plain(value)!r}{hint}")
    if _past_int64(number, number):  # as check_int_array: past it, numpy's 'high is out of bounds for int64' inside
        raise ValueError(f"{name} must be a whole number below 2**63 (an int64), got {plain(value)!r}")
    return int(number)


def check_flag(name: str, value: Any) -> bool:
    """``value`` must be ``True`` or ``False`` (Python's or numpy's): a ``ValueError`` naming ``name`` otherwise, as
    ``"no"`` or ``0.5`` is truthy and would silently mean ``True``."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_callable(name: str, value: Any, contract: str, hint: str = "", *, nargs: int | None = None) -> Any:
    """``value`` must be callable: a ``ValueError`` ``"{name} must be a callable {contract}, got <type>{hint}"``
    otherwise, before a run starts rather than as Python's ``'float' object is not callable`` inside it. A caller
    whose argument may be ``None`` checks only a given one. With ``nargs``, the callable must also accept that many
    positional arguments (:func:`positional_mismatch`), as fedlib will call it: a ``ValueError``
    ``"{name} must be a callable {contract}, taking {nargs} positional arguments: {name}{signature} does not (...)"``
    instead of Python's ``<lambda>() takes 2 positional arguments but 4 were given`` from inside the first round."""
    if not callable(value):
        raise ValueError(f"{name} must be a callable {contract}, got {type(value).__name__}{hint}")
    why = None if nargs is None else positional_mismatch(value, nargs)
    if why is not None:
        raise ValueError(f"{name} must be a callable {contract}, taking {nargs} positional argument"
                         f"{'' if nargs == 1 else 's'}: {name}{why[0]} does not ({why[1]})")
    return value


def positional_mismatch(fn: Any, nargs: int) -> tuple | None:
    """``(signature, reason)`` when the signature of the callable ``fn`` cannot bind ``nargs`` positional arguments
    (too many or too few, a required keyword-only one); ``None`` when it can, and whenever the answer is not sure:
    a signature that cannot be read (some builtins), or a wrapper (``functools.wraps``) whose own signature binds
    them even though the function it wraps does not."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        sig.bind(*range(nargs))
        return None
    except TypeError as exc:
        reason = str(exc)
    if hasattr(fn, "__wrapped__"):
        try:
            inspect.signature(fn, follow_wrapped=False).bind(*range(nargs))
            return None
        except (TypeError, ValueError):
            pass
    return str(sig), reason


def check_sequence(name: str, value: Any, what: str, *, empty: str | None = None) -> list:
    """``value`` as a list: one item per entry of a sequence (or other iterable) of ``what``; a
    ``str`` / ``bytes`` (an iterable of characters), a mapping (an iterable of its keys: ``{0: x_0, 1: x_1}``
    would give ``[0, 1]``) and a non-iterable are refused by ``name``, and, with ``empty`` given, so is an
    empty one (``empty`` is then the message)."""
    if isinstance(value, Mapping):
        raise ValueError(f"{name} must be a sequence of {what}, got {a_type(value)} (iterating it gives its "
                         f"keys); pass a list in order, e.g. [{name}[k] for k in sorted({name})]")
    if not isinstance(value, (str, bytes)):
        try:
            items = list(value)
        except TypeError:
            items = None
        if items is not None:
            if empty is not None and not items:
                raise ValueError(empty)
            return items
    raise ValueError(f"{name} must be a sequence of {what}, got {value!r}")


def check_path(name: str, value: Any) -> Path:
    """A non-empty ``str`` or :class:`os.PathLike` path as a :class:`~pathlib.Path`, ``~`` expanded."""
    try:
        text = os.fspath(value)
    except TypeError:
        text = None
    if not isinstance(text, str) or text == "":
        raise ValueError(f"{name} must be a file or folder path (str or os.PathLike), got {value!r}")
    try:
        return Path(text).expanduser()
    except RuntimeError as exc:  # "~user" of no known user
        raise ValueError(f"{name}: cannot expand {text!r} ({exc})") from None


def tensor_as_float64(value: Any) -> Any:
    """A torch tensor (on any device, in bfloat16, requiring grad) as a float64 numpy array, which
    ``np.asarray`` cannot make of it; anything else unchanged."""
    if hasattr(value, "detach") and hasattr(value, "double"):
        return value.detach().double().cpu().numpy()
    return value


def _refuse_mapping(name: str, value: Any, what: str) -> None:
    """A ``ValueError`` for a mapping given where an array is asked for (``{0: 0.5, 1: 0.5}`` for ``p``): numpy made
    it a 0-d object array, refused with a message about its shape or ``float()``, not about the dict."""
    if isinstance(value, Mapping):
        raise ValueError(f"{name} must be an array of {what}, got {a_type(value)}; pass its values as a list "
                         f"in order, e.g. [{name}[k] for k in sorted({name})]")


def _not_real(arr: np.ndarray) -> str | None:
    """What makes ``arr`` no array of real numbers for :func:`check_finite_array` ('strings', 'complex
    numbers'), or ``None``: the dtype says it, except for an object array (rare), whose entries are looked at."""
    kind = arr.dtype.kind
    if kind == "O":
        if any(isinstance(v, (str, bytes)) for v in arr.flat):
            return "strings"
        return "complex numbers" if any(isinstance(v, complex) for v in arr.flat) else None
    return "strings" if kind in "US" else "complex numbers" if kind == "c" else "bools" if kind == "b" else None


def check_finite_array(name: str, value: Any, *, ndim: int | None = None, shape: tuple | None = None) -> np.ndarray:
    """Convert to a float64 array and check that it is finite (and of the given ndim/shape). Strings (which
    numpy would parse: '0.5' as 0.5), complex numbers (whose imaginary part the conversion would drop) and bools
    (an array, tensor or list of them, or a list holding one among numbers: a mask given as weights would count as 1
    and 0) are a ``ValueError`` naming ``name``."""
    if hasattr(value, "detach") and hasattr(value, "is_complex") and value.is_complex():
        raise ValueError(f"{name} must be an array of numbers: got a complex tensor ({value.dtype}), whose imaginary "
                         "part the conversion to float64 would drop")
    _refuse_mapping(name, value, "numbers")
    if is_bool(value) and hasattr(value, "detach"):  # a bool tensor: its dtype says it before the float64 conversion
        raise ValueError(f"{name} must be an array of numbers: got a bool tensor, whose True and False would count "
                         "as 1 and 0 (a mask? pass the numbers it selects)")
    value = tensor_as_float64(value)
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of numbers: {exc}") from None
    what = _not_real(arr)
    if what is not None:
        flat = arr.ravel()
        head = ", ".join(repr(v.item() if hasattr(v, "item") else v) for v in flat[:3])
        why = {"strings": "which numpy would parse as numbers",
               "bools": "whose True and False would count as 1 and 0 (a mask? pass the numbers it selects)"}.get(
            what, "whose imaginary parts the conversion to float64 would drop")
        raise ValueError(f"{name} must be an array of numbers: got {what} ({head}{', ...' if flat.size > 3 else ''}), "
                         + why)
    kind = arr.dtype.kind  # np.asarray([0.5, True]) is [0.5, 1.0]; all bools were dtype bool, refused above
    if kind == "O" or kind in "iuf" and isinstance(value, (list, tuple)):
        flag = (next((v for v in arr.flat if isinstance(v, (bool, np.bool_))), None) if kind == "O"
                else bool_entry(value))
        if flag is not None:
            raise ValueError(f"{name} must be an array of numbers: got a bool ({plain(flag)!r}) among its entries, "
                             "whose True and False would count as 1 and 0 (a mask? pass the numbers it selects)")
    try:
        arr = arr.astype(np.float64, copy=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be an array of numbers: {exc}") from None
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {arr.shape}")
    if shape is not None and arr.shape != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {arr.shape}")
    if not np.isfinite(arr).all():  # the method, not np.all's Python wrapper: these checks run every round
        raise ValueError(f"{name} contains NaN or inf")
    return arr


def check_weights(name: str, value: Any, *, size: int | None = None, size_of: str | None = None) -> np.ndarray:
    """Non-negative finite 1-d weights (need not sum to one). ``size_of`` names the argument that ``size`` is read
    from: a wrong size then names both (:func:`check_agree`: "p has 3 clients but H has 2"), not ``name`` alone."""
    arr = check_finite_array(name, value, ndim=1)
    if arr.size == 0:
        raise ValueError(f"{name} must not be empty")
    if size is not None and size_of is not None:
        check_agree(name, arr.size, size_of, size)
    if size is not None and arr.size != size:
        raise ValueError(f"{name} must have {size} entries (one per client), got {arr.size}")
    if arr.min() < 0:  # finite and non-empty here
        raise ValueError(f"{name} must be non-negative, got min {plain(arr.min())!r}")
    return arr


def _float_eps(dtype: Any) -> float | None:
    """Machine epsilon of a numpy or torch floating dtype (``None`` for anything else)."""
    if dtype is None:
        return None
    if getattr(dtype, "is_floating_point", False):  # a torch.dtype (torch.float32, torch.bfloat16, ...)
        import torch

        return float(torch.finfo(dtype).eps)
    try:
        dtype = np.dtype(dtype)
    except TypeError:
        return None
    return float(np.finfo(dtype).eps) if np.issubdtype(dtype, np.floating) else None


def check_probability_vector(name: str, value: Any, *, size: int | None = None, atol: float = 1e-9,
                             size_of: str | None = None) -> np.ndarray:
    """Weights p_i >= 0 with sum 1 (within ``atol``, or within the rounding of the input's own
    floating-point type when that is coarser: float32 weights of 1/3 sum to 1 + 3e-8), as float64. Weights
    accepted only at their type's precision come back divided by their sum, so that the float64 array sums
    to 1 within ``atol`` and passes this check again (every function that takes ``p`` checks it, and many
    hand the checked array on to another). ``size_of``: as in :func:`check_weights`."""
    given = getattr(value, "dtype", None)
    arr = check_weights(name, value, size=size, size_of=size_of)
    eps = _float_eps(given)
    # each p_i rounded to the type moves the sum by at most eps/2; 16 eps leaves room for computing
    # p = n / n.sum() in that type (float32: 1.9e-6; float64 keeps atol)
    allowed = atol if eps is None else max(atol, 16.0 * eps)
    total = float(arr.sum())
    if abs(total - 1.0) > allowed:
        raise ValueError(f"{name} must sum to 1 (within {allowed:g}), got sum {total!r}: weights are probabilities "
                         f"(p_i = n_i / n); counts such as the clients' sample numbers n give {name} = n / n.sum()")
    if abs(total - 1.0) > atol:  # float32 [0.1, 0.2, 0.3, 0.4] sums to 1 + 2.2e-8 in float64: the next check of the
        arr = arr / total        # returned array refused it (run_sequential, QuadraticProblem.optimum, fedprox_weights)
    return arr


def check_int_array(name: str, value: Any, *, size: int | None = None, minimum: int | None = None,
                    size_of: str | None = None) -> np.ndarray:
    """A non-empty 1-d array of whole numbers (integers, and whole floats taken as theirs), one per client, each >=
    ``minimum``, as int64; the messages say "whole numbers" (``2.0`` is taken), as the package's convention has it.
    ``size_of``: as in :func:`check_weights`."""
    _refuse_mapping(name, value, "whole numbers")
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor: on any device, bfloat16, with grad
        value = value.detach().cpu()
        value = (value.double() if value.is_floating_point() else value).numpy()
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:  # a ragged list: numpy's message named no argument
        raise ValueError(f"{name} must be a 1-d array of whole numbers: {exc}") from None
    if arr.dtype.kind in "iuf" and isinstance(value, (list, tuple)):  # np.asarray([True, 2]) is [1, 2]
        bad = next((i for i, v in enumerate(value) if isinstance(v, (bool, np.bool_))), None)
        if bad is not None:  # a bool is no count (all bools: dtype bool, refused below)
            raise ValueError(f"{name} must hold whole numbers, got the bool {plain(value[bad])!r} at index {bad}")
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-d array of whole numbers, got shape {arr.shape}")
    if size is not None and size_of is not None:
        check_agree(name, arr.size, size_of, size)
    if size is not None and arr.size != size:
        raise ValueError(f"{name} must have {size} entries (one per client), got {arr.size}")
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all() or (arr != np.round(arr)).any():
            raise ValueError(f"{name} must hold whole numbers, got {arr!r}")
    elif arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold whole numbers, got dtype {arr.dtype}")
    # an int64 array cannot wrap; item(): Python's numbers compare exactly, where float16 turned 2**63 into inf with
    # numpy's RuntimeWarning 'overflow encountered in cast'
    if arr.dtype.kind in "uf" and _past_int64(arr.min().item(), arr.max().item()):
        raise ValueError(f"{name} must hold whole numbers below 2**63, got {arr!r}")
    arr = arr.astype(np.int64)
    if minimum is not None and arr.min() < minimum:
        bad = int(np.flatnonzero(arr < minimum)[0])
        raise ValueError(f"{name} must be >= {minimum} for every client (client {bad} has {plain(arr[bad])})")
    return arr


def check_local_steps(name: str, value: Any, *, size: int | None = None, size_of: str | None = None) -> np.ndarray:
    """Local step counts tau_i: whole numbers >= 1, one per client (``size_of``: as in :func:`check_weights`)."""
    return check_int_array(name, value, size=size, minimum=1, size_of=size_of)


def round_lr(name: str, lr_at: Any, round_index: int, default: float) -> float:
    """The client learning rate of round ``round_index``: ``default`` without ``lr_at``, else ``lr_at(round_index)``
    checked to be a finite number > 0 (a ``ValueError`` naming ``name(round_index)``, the user's callable, not
    the solver's ``lr`` it would otherwise surface as)."""
    if lr_at is None:
        return float(default)
    value = lr_at(round_index)
    try:
        # a bool is no rate: True, np.True_ and a 0-d bool array or tensor all convert to 1.0
        lr = float("nan") if is_bool(value) or isinstance(value, (str, bytes)) else float(value)
    except (TypeError, ValueError, RuntimeError):  # None, a list, a tensor of several numbers
        lr = float("nan")
    if not np.isfinite(lr) or lr <= 0:
        raise ValueError(f"{name}({round_index}) must return the round's client learning rate, a finite number > 0, "
                         f"got {plain(value)!r}")
    return lr


def is_choice(value: Any, choices) -> bool:
    """``value in choices``, and ``False`` for an array (``in`` compares one entry by entry: "the truth value of an
    array ... is ambiguous")."""
    try:
        return bool(value in choices)
    except ValueError:
        return False


def check_choice(name: str, value: Any, choices) -> str:
    """``value`` must be one of ``choices`` (strings)."""
    if not is_choice(value, choices):
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


def check_instance(name: str, value: Any, cls: type, hint: str = "") -> Any:
    """``value`` must be an instance of ``cls`` (a subclass counts): a ``ValueError`` naming ``name``, the class by
    its module path (``cls.__module__``) and what was given, where the first attribute read would otherwise fail
    as an ``AttributeError`` deep inside (``'NoneType' object has no attribute 'H'``). ``hint`` (e.g. how to build
    one) follows the class in the message. Returns ``value``."""
    if not isinstance(value, cls):
        raise ValueError(f"{name} must be a {cls.__module__}.{cls.__qualname__}{hint}, got {type(value).__name__}")
    return value


def available_memory() -> int | None:
    """Bytes of memory a new allocation may take: the least of the machine's (``MemAvailable`` of ``/proc/meminfo``
    on Linux, else free pages times the page size, ``os.sysconf``) and the room left under the memory limits of the
    process's control groups (:func:`cgroup_available_memory`: a container's ``--memory``, a batch job's allocation);
    ``None`` where none of them is known (the check below then passes). ``memory_room()`` says which binds."""
    return memory_room()[0]


#: what each binding limit of :func:`memory_room` is called in messages: "more than ...", "the flags ask for more
#: than ..."
MEMORY_LIMITS = {"machine": ("of memory available on this machine", "this machine holds"),
                 "cgroup": ("of memory available to this process under its container's or batch job's limit",
                            "this process's container or batch job allows")}


def memory_room() -> tuple[int | None, str | None]:
    """``(bytes, limit)``: ``available_memory()``'s bytes and the limit that binds, ``"machine"`` (the machine's
    free memory) or ``"cgroup"`` (the room under a control group's limit, where it is no larger); ``(None, None)``
    where neither is known."""
    machine = None
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    machine = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    if machine is None:
        try:
            machine = int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
        except (AttributeError, OSError, ValueError):
            pass
    limited = cgroup_available_memory()
    if limited is not None and (machine is None or limited <= machine):
        return limited, "cgroup"
    return (machine, "machine") if machine is not None else (None, None)


# a cgroup v1 memory.limit_in_bytes this large (the kernel writes 2^63 rounded down to a page) means "no limit"
_NO_LIMIT = 2**62


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    try:
        return int(text)
    except ValueError:  # "max": cgroup v2's "no limit"
        return None


def _inactive_file(folder: Path) -> int:
    """Page cache the kernel reclaims before it kills a process (``inactive_file`` of ``memory.stat``; 0 if
    unknown): counted as free, as the kernel's own OOM accounting and container runtimes do. cgroup v1 lists the
    group's own pages first (``inactive_file``) and then those of the group and its children
    (``total_inactive_file``), the ones its usage counts: the total is taken where there is one (the own count
    alone left a parent's room, a job's limit over its steps, short by the page cache of the groups below it)."""
    found = {}
    try:
        for line in (folder / "memory.stat").read_text(encoding="ascii").splitlines():
            key, _, value = line.partition(" ")
            if key in ("inactive_file", "total_inactive_file"):
                found[key] = max(int(value), 0)
    except (OSError, UnicodeDecodeError, ValueError):
        return 0
    return found.get("total_inactive_file", found.get("inactive_file", 0))


def cgroup_available_memory(proc_cgroup: str | os.PathLike = "/proc/self/cgroup",
                            root: str | os.PathLike = "/sys/fs/cgroup") -> int | None:
    r"""Bytes left under the tightest memory limit of the process's control groups (Linux), ``None`` where no
    limit is set or none can be read.

    For the process's group and each group above it (a limit set on a parent binds its children), with a limit
    :math:`\ell` (cgroup v2 ``memory.max``, v1 ``memory.limit_in_bytes``) and a usage :math:`u` (``memory.current``,
    ``memory.usage_in_bytes``) of which :math:`c` is reclaimable page cache (``inactive_file`` of ``memory.stat``;
    cgroup v1's ``total_inactive_file``, the group's and its children's, where listed), the room is
    :math:`\ell - (u - c)`, at least 0; the result is the least room. The groups are read where
    ``proc_cgroup`` (the ``/proc/self/cgroup`` of the process) says, under ``root``; a container that shows its own
    group as ``/`` is read at ``root`` itself. Without it :func:`available_memory` saw the machine's memory only,
    and a run in a container smaller than the machine was killed by the kernel (exit 137, no message) instead of
    refused."""
    try:
        lines = Path(proc_cgroup).read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    root = Path(root)
    candidates = []  # (folder of the process's group, limit file, usage file)
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, group = parts
        if controllers == "":  # cgroup v2 (the unified hierarchy)
            base, limit_name, usage_name = root, "memory.max", "memory.current"
            if not (root / "cgroup.controllers").exists() and (root / "unified").is_dir():
                base = root / "unified"  # hybrid layout: v1 controllers, v2 mounted at unified/
        elif "memory" in controllers.split(","):
            base, limit_name, usage_name = root / "memory", "memory.limit_in_bytes", "memory.usage_in_bytes"
        else:
            continue
        folder = base / group.lstrip("/")
        if not folder.is_dir():  # a cgroup namespace that hides the path: the mount is the group itself
            folder = base
        candidates.append((base, folder, limit_name, usage_name))
    rooms = []
    for base, folder, limit_name, usage_name in candidates:
        while True:
            limit = _read_int(folder / limit_name)
            if limit is not None and limit < _NO_LIMIT:
                usage = _read_int(folder / usage_name)
                if usage is not None:
                    rooms.append(max(limit - max(usage - _inactive_file(folder), 0), 0))
            if folder == base or base not in folder.parents:
                break
            folder = folder.parent
    return min(rooms) if rooms else None


def check_memory(nbytes: int, what: str) -> None:
    """``MemoryError`` naming ``what`` when ``nbytes`` exceed :func:`available_memory`: an allocation made piece by
    piece (a data set generated client by client) would otherwise grow until the operating system kills the
    process (exit 137, no message, minutes later) instead of failing at once with a message. ``nbytes`` counts the
    arrays named, a lower bound: the interpreter and its libraries (0.6 GiB of resident memory once torch is
    imported) and temporaries come on top, so a run just under the limit may still be killed (``run synthetic
    --num-clients 3000``: 1.8 GiB counted, 2.0 GiB peak resident; in a 2 GiB cgroup it passed and was killed,
    5000 clients, 2.8 GiB counted, are refused). The message names the limit that binds (``memory_room()``): the
    machine's free memory, or the room under a container's or batch job's limit, the error's ``memory_limit``
    (``"machine"`` or ``"cgroup"``, for ``python -m fedlib``'s own line)."""
    available, limit = memory_room()
    if available is not None and nbytes > available:
        err = MemoryError(f"{what} need {nbytes / 2**30:.1f} GiB, more than the {available / 2**30:.1f} GiB "
                          f"{MEMORY_LIMITS[limit][0]}")
        err.memory_limit = limit  # python -m fedlib's message names it: "the flags ask for more than ..."
        raise err
