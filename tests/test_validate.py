"""fedlib._validate's checks and the messages they give: sequences listed and refused by name, plain
numbers in messages, a bool is no count, a whole float is one."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedlib._validate import check_finite_array
from fedlib.schedules import FixedSteps


# --------------------------------------------------------------------------- check_sequence
def test_check_sequence_lists_iterables_and_refuses_text_scalars_and_empty_by_name():
    """``_validate.check_sequence`` (one helper for theory's ``a_vectors`` and speedup's counts)."""
    from fedlib._validate import check_sequence

    assert check_sequence("x", (1, 2), "integers") == [1, 2]
    assert check_sequence("x", (k for k in range(3)), "integers") == [0, 1, 2]
    assert check_sequence("x", [], "integers") == []
    for bad in ("ab", b"ab", 3, None):
        with pytest.raises(ValueError, match=r"^x must be a sequence of integers, got"):
            check_sequence("x", bad, "integers")
    with pytest.raises(ValueError, match=r"^x is empty$"):
        check_sequence("x", [], "integers", empty="x is empty")


def test_check_sequence_refuses_a_mapping_by_name_rather_than_taking_its_keys():
    """A dict keyed by client (``{0: x_0, 1: x_1}``) is refused by name, saying that iterating it gives its keys and
    how to pass a list. Before: it was taken as the list of its keys, so ``train_clients(model, {0: x_0, 1: x_1},
    ...)`` blamed the user's tensors ('client_x[0] must be (n_i, *feature_shape), samples first, got shape ()') and
    ``algo.apply(..., {0: update_0}, ...)`` said 'updates[0] must be a ClientUpdate ..., got int'. Other iterables
    are listed as before."""
    from collections import OrderedDict

    import torch

    from fedlib._validate import check_sequence
    from fedlib.experiments.custom import train_clients

    for mapping, kind in (({0: 1.0, 1: 2.0}, "a dict"), (OrderedDict(a=1), "an OrderedDict"), ({}, "a dict")):
        with pytest.raises(ValueError, match=rf"^x must be a sequence of integers, got {kind} "
                                             r"\(iterating it gives its keys\); pass a list in order, e\.g\. "
                                             r"\[x\[k\] for k in sorted\(x\)\]$"):
            check_sequence("x", mapping, "integers")
    assert check_sequence("x", {0: 1.0}.values(), "integers") == [1.0]
    assert check_sequence("x", range(2), "integers") == [0, 1]
    xs = {0: torch.zeros(4, 3), 1: torch.zeros(5, 3)}
    ys = [torch.zeros(4, dtype=torch.int64), torch.zeros(5, dtype=torch.int64)]
    with pytest.raises(ValueError, match=r"^client_x must be a sequence of feature tensors .*, got a dict"):
        train_clients(torch.nn.Linear(3, 2), xs, ys, rounds=1)


# ----------------------------------------------------------------- plain numbers in messages, a bool is no step count
def test_messages_show_plain_numbers_and_a_bool_is_no_step_count():
    from fedlib._validate import check_int, check_positive
    from fedlib.rule import aggregate, fednova_weights

    deltas = [np.ones(1), np.ones(1)]
    with pytest.raises(ValueError) as info:
        aggregate(deltas, [0.5, 0.5], np.array([1.0, 0.0]))
    assert str(info.value) == "a_norms must be > 0 for every client (client 1 has 0.0)"
    with pytest.raises(ValueError) as info:
        aggregate(deltas, [0.5, 0.5], np.array([1.0, -2.0]))
    assert str(info.value) == "a_norms must be non-negative, got min -2.0"
    with pytest.raises(ValueError) as info:
        check_positive("lr", np.float64(-0.5))
    assert str(info.value) == "lr must be a finite number > 0, got -0.5"
    with pytest.raises(ValueError) as info:
        check_int("rounds", np.int64(-3))
    assert str(info.value) == "rounds must be an integer >= 0, got -3"
    for bad in ([True, 2], (3, np.bool_(True))):
        with pytest.raises(ValueError, match=r"^steps must hold whole numbers, got the bool True at index [01]"):
            FixedSteps(bad)
        with pytest.raises(ValueError, match=r"^local_steps must hold whole numbers, got the bool True"):
            fednova_weights([0.5, 0.5], [2.0, 6.0], tau_eff="local_steps", local_steps=bad)
    with pytest.raises(ValueError, match="^local_steps must hold whole numbers, got dtype bool"):  # as before
        fednova_weights([0.5, 0.5], [2.0, 6.0], tau_eff="local_steps", local_steps=[True, True])
    for bad in (True, np.bool_(True)):
        with pytest.raises(ValueError, match="^rounds must be an integer >= 1, got True"):
            check_int("rounds", bad, minimum=1)
    assert FixedSteps([1, 2]).steps == (1, 2) and FixedSteps(np.array([2, 3])).steps == (2, 3)


def test_check_count_takes_a_whole_float_as_its_integer():
    from fedlib._validate import check_count

    assert check_count("n", 2.0) == 2 and type(check_count("n", np.float32(3.0))) is int
    assert check_count("n", np.int64(4), minimum=4) == 4
    with pytest.raises(ValueError, match="n must be a whole number >= 1, got 0"):
        check_count("n", 0.0, minimum=1)


def test_count_messages_say_whole_numbers_as_the_convention():
    """check_count and check_int_array take 2.0 as 2, so they refuse in the words of the convention (fedlib's
    docstring: *a whole number* takes 2.0, *an integer* refuses it). Before: "tau must be an integer >= 1, got 1.5"
    and "steps must hold integers, got array([1.5, 2. ])", though 2.0 was taken. check_int, which refuses 2.0, still
    says "an integer"."""
    from fedlib._validate import check_count, check_int, check_int_array

    with pytest.raises(ValueError) as info:
        check_count("tau", 1.5, minimum=1)
    assert str(info.value) == "tau must be a whole number >= 1, got 1.5"
    with pytest.raises(ValueError) as info:
        check_int_array("steps", [1.5, 2.0])
    assert str(info.value) == "steps must hold whole numbers, got array([1.5, 2. ])"
    with pytest.raises(ValueError) as info:
        check_int("rounds", 2.0)
    assert str(info.value) == "rounds must be an integer >= 0, got 2.0"


# ------------------------------------------------------------------ check_int_array: torch tensors, ragged lists
def test_check_int_array_takes_any_torch_tensor_and_names_a_ragged_list():
    """Step counts as a float tensor requiring grad or a bfloat16 one raised RuntimeError ("Can't call numpy() on
    Tensor that requires grad") or TypeError ("Got unsupported ScalarType BFloat16") from np.asarray, in FixedSteps,
    slowdown, fedprox_weights, steps_per_epoch, ... (check_finite_array already took them); a ragged list raised
    numpy's 'inhomogeneous shape' ValueError without the argument's name."""
    import torch

    from fedlib.theory import slowdown

    for steps in (torch.tensor([2.0, 3.0], requires_grad=True), torch.tensor([2.0, 3.0], dtype=torch.bfloat16)):
        assert FixedSteps(steps).steps == (2, 3)
        assert slowdown(steps, 2.0) == 1.25   # mean(2, 3) / 2
    with pytest.raises(ValueError, match="steps must hold whole numbers"):
        FixedSteps(torch.tensor([2.5, 3.0], requires_grad=True))
    with pytest.raises(ValueError, match="^steps must be a 1-d array of whole numbers: "):
        FixedSteps([[1, 2], [3]])


# ------------------------------------------------------------------ check_positive & co.: any int, another real
def test_number_checks_take_any_int_and_refuse_another_real_by_name():
    """np.isfinite raised TypeError ("ufunc 'isfinite' not supported for the input types") on an int past int64
    (sgd(10**30), check_tau_eff(10**30)) and on a Fraction (sgd(Fraction(1, 10))), naming no argument. A big int
    is a number like any other now; a Fraction is refused by name (numpy arrays times it would be object arrays)."""
    from fractions import Fraction

    from fedlib._validate import check_in_range, check_nonnegative, check_positive

    assert check_positive("tau_eff", 10 ** 30) == 1e30 and check_nonnegative("mu", 10 ** 30) == 1e30
    for check in (check_positive, check_nonnegative, lambda name, v: check_in_range(name, v, 0.0, 1.0)):
        with pytest.raises(ValueError, match=r"^lr must .*, got Fraction\(1, 10\) \(an int or float: pass float\(value\)\)$"):
            check("lr", Fraction(1, 10))
        with pytest.raises(ValueError, match="^lr must "):
            check("lr", 10 ** 400)  # past float64's range


def test_number_checks_say_a_0d_array_or_tensor_is_not_a_number():
    """A learning rate computed with numpy or torch often arrives as a 0-d array or tensor; it is refused (a tensor may
    carry grad), and the message said only "got tensor(0.1000)". It now says how to pass it; a bool array still gets
    no such hint (it is no number either way)."""
    import torch

    from fedlib._validate import check_in_range, check_nonnegative, check_positive
    from fedlib.solvers import sgd

    hint = r" \(a 0-d array or tensor, not a number: pass float\(value\)\)$"
    for check in (check_positive, check_nonnegative, lambda name, v: check_in_range(name, v, 0.0, 1.0)):
        for value in (np.array(0.1), torch.tensor(0.1), torch.tensor(1)):
            with pytest.raises(ValueError, match=r"^lr must .*, got .*" + hint):
                check("lr", value)
        with pytest.raises(ValueError, match=r"got array\(True\)$"):
            check("lr", np.array(True))
    with pytest.raises(ValueError, match=r"^lr must .*" + hint):
        sgd(lr=torch.tensor(0.05))
    from fedlib._validate import check_int

    for value in (np.array(3), torch.tensor(3)):
        with pytest.raises(ValueError, match=r"^rounds must be an integer >= 0, got .* \(a 0-d array or tensor, not an "
                                             r"integer: pass int\(value\)\)$"):
            check_int("rounds", value)



def test_0d_hints_only_where_the_conversion_keeps_the_value():
    """The 0-d hints (7279c7a, c6ef49c) said 'pass int(value)' for np.array(2.5) and torch.tensor(3.7), which int()
    cuts to 2 and 3 without a word, and 'pass float(value)' for a 0-d array of text or a complex number, which float()
    refuses. Now check_int hints int() only for a whole number held, the number checks float() only for a real one."""
    import torch

    from fedlib._validate import check_count, check_int, check_positive

    for value in (np.array(2.5), torch.tensor(3.7)):
        with pytest.raises(ValueError, match=r"^rounds must be an integer >= 0, got [^(]*\(([0-9.]+)\)$"):
            check_int("rounds", value)
    for value in (np.array(2.0), torch.tensor(4)):
        with pytest.raises(ValueError, match=r"not a number: pass int\(value\)\)$"):
            check_count("rounds", value)
    for value in (np.array("0.1"), np.array(1 + 2j), torch.tensor(1 + 2j)):
        with pytest.raises(ValueError, match=r"^lr must be a finite number > 0, got .*[^)]\)$") as info:
            check_positive("lr", value)
        assert "pass float" not in str(info.value)


def test_array_checks_refuse_bools_by_name():
    """A participation mask passed as p ([True, False, True]) was taken as the weights (1, 0, 1) -- then refused only for
    its sum, or, as [True, False], accepted as p = (1, 0); a bool tensor likewise. Every array check refuses bools by
    name now, a list holding a bool among numbers too (test_check_finite_array_refuses_a_bool_among_numbers)."""
    import torch

    from fedlib._validate import check_probability_vector
    from fedlib.rule import aggregate

    for value in ([True, False], np.array([True, False]), torch.tensor([True, False]), np.array(True)):
        with pytest.raises(ValueError, match=r"^p must be an array of numbers: got (bools \(True|a bool tensor).*"
                                             r"would count as 1 and 0 \(a mask\? pass the numbers it selects\)$"):
            check_probability_vector("p", value)
    with pytest.raises(ValueError, match="^a_norms must be an array of numbers: got bools"):
        aggregate([np.ones(2), np.ones(2)], [0.5, 0.5], [True, True])
    assert check_finite_array("x", [1, 0]).tolist() == [1.0, 0.0]  # integers are numbers


def test_check_choice_refuses_an_array_by_name():
    """An array given for a choice (algorithm=np.zeros(2), kind=np.zeros((2, 2))) raised numpy's "The truth value of an
    array with more than one element is ambiguous" from `value in choices`, naming no argument."""
    from fedlib.theory import quadratic_fixed_point
    from fedlib.variance import init_control_variates

    H, e = np.array([np.eye(2), 2 * np.eye(2)]), np.ones((2, 2))
    with pytest.raises(ValueError, match=r"^algorithm must be one of \['fedavg', 'fednova', 'fedprox'\], got array"):
        quadratic_fixed_point(H, e, [0.5, 0.5], [1, 3], 0.1, np.zeros(2))
    with pytest.raises(ValueError, match=r"^kind must be one of \['scaffold', 'vrlsgd'\]"):
        init_control_variates(np.zeros(2), 2, kind=np.zeros((2, 2)))


@pytest.mark.parametrize("value, what", [("0.5", "strings"), (["1", "2"], "strings"), (b"1", "strings"),
                                         (np.array(["1"], dtype=object), "strings"),
                                         (np.array([1 + 2j]), "complex numbers"), (1 + 2j, "complex numbers"),
                                         (np.array([1, 1j], dtype=object), "complex numbers")])
def test_check_finite_array_refuses_strings_and_complex_numbers(value, what):
    """Strings and complex numbers are a ValueError naming the argument and what it holds. Before: numpy parsed a
    string ('0.5' came back as 0.5: spectrum_summary('0.5'), quadratic weights p=['0.5', '0.5'] and every other
    array argument took text as numbers), and a complex array lost its imaginary part with only a ComplexWarning
    (spectral_radius of [[0, 1j], [1j, 0]] gave the radius of the zero matrix)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=rf"^x must be an array of numbers: got {what} \("):
            check_finite_array("x", value)


def test_check_finite_array_refuses_a_complex_tensor_and_keeps_real_input():
    import warnings

    import torch

    from fedlib.theory import spectral_radius

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=r"^x must be an array of numbers: got a complex tensor \(torch.complex64\)"):
            check_finite_array("x", torch.tensor([1 + 2j]))
        with pytest.raises(ValueError, match=r"^M must be an array of numbers: got complex numbers"):
            spectral_radius(np.array([[0, 1j], [1j, 0]]))
    for value, want in (([0.5, 1], [0.5, 1.0]), (np.arange(3), [0.0, 1.0, 2.0]), (np.float32(0.25), 0.25),
                        (2 ** 70, float(2 ** 70)), (torch.tensor([0.5], dtype=torch.bfloat16), [0.5])):
        got = check_finite_array("x", value)
        assert got.dtype == np.float64 and got.tolist() == want


def test_array_checks_refuse_a_mapping_by_name():
    """``p``, weights, ``a_norms``, step counts given as a dict keyed by client are refused as a dict, naming the
    argument and the list that was meant. Before: numpy made the dict a 0-d object array, refused with a message about
    something else: ``FixedSteps({0: 2, 1: 4})`` and ``slowdown({0: 2, 1: 4}, 3.0)`` said 'must be a non-empty 1-d
    array of integers, got shape ()', ``chi_square({0: 0.5, 1: 0.5}, w)`` and ``aggregate(..., a_norms={...})``
    'must be an array of numbers: float() argument must be a string or a real number, not 'dict''. Arrays and lists
    pass as before."""
    from fedlib._validate import check_finite_array, check_int_array, check_probability_vector
    from fedlib.rule import aggregate
    from fedlib.schedules import FixedSteps
    from fedlib.theory import chi_square, slowdown

    cases = [(lambda: FixedSteps({0: 2, 1: 4}), "steps", "whole numbers"),
             (lambda: slowdown({0: 2, 1: 4}, 3.0), "local_steps", "whole numbers"),
             (lambda: chi_square({0: 0.5, 1: 0.5}, [0.5, 0.5]), "p", "numbers"),
             (lambda: aggregate([np.ones(1), np.ones(1)], [0.5, 0.5], {0: 1.0, 1: 2.0}), "a_norms", "numbers"),
             (lambda: check_probability_vector("p", {1: 1.0}), "p", "numbers")]
    for call, name, what in cases:
        with pytest.raises(ValueError, match=rf"^{name} must be an array of {what}, got a dict; pass its values as a "
                                             rf"list in order, e.g\. \[{name}\[k\] for k in sorted\({name}\)\]$"):
            call()
    assert check_int_array("steps", [2, 4]).tolist() == [2, 4]
    assert check_finite_array("x", np.array([1.0])).tolist() == [1.0]
    assert FixedSteps([2, 4]).local_steps(0).tolist() == [2, 4]


def test_array_checks_refuse_numbers_given_as_text():
    """``p``, client weights and ``a_norms`` given as strings (``["0.5", "0.5"]``, read from a text file, say) are
    refused, naming the argument and the text, as a string learning rate is ('lr must be a finite number > 0, got
    '0.1''). Before: numpy read each string as its number, so ``full_participation(["0.5", "0.5"])`` and
    ``aggregate(..., a_norms=["1", 2])`` went on without a word. Numbers, numpy and torch arrays pass as before."""
    from fedlib._validate import check_finite_array
    from fedlib.rule import aggregate
    from fedlib.sampling import full_participation

    with pytest.raises(ValueError, match=r"^p must be an array of numbers: got strings \('0\.5', '0\.5'\), which numpy would parse"):
        full_participation(["0.5", "0.5"])
    with pytest.raises(ValueError, match=r"^p must be an array of numbers: got strings \('0\.5'"):
        full_participation(np.array(["0.5", "0.5"]))
    with pytest.raises(ValueError, match=r"^a_norms must be an array of numbers: got strings \('1'"):
        aggregate([np.ones(1), np.ones(1)], [0.5, 0.5], ["1", 2])
    with pytest.raises(ValueError, match=r"^x must be an array of numbers: got strings \(b'1'"):
        check_finite_array("x", [b"1"])
    assert full_participation([0.5, 0.5]).weights.tolist() == [0.5, 0.5]
    assert check_finite_array("x", np.array([[1, 2]], dtype=np.int64)).dtype == np.float64
    assert check_finite_array("x", 3.0).tolist() == 3.0


def test_positional_mismatch_refuses_only_a_signature_that_surely_cannot_bind():
    """check_callable(..., nargs=) (run_sequential's hooks, a server optimizer's init and update) refuses a callable
    only when its signature is read and cannot take the arguments: a builtin without a readable signature (max), *args
    and a functools.wraps wrapper of another signature pass. Before: nothing was checked, and a wrong one failed as
    Python's "<lambda>() takes 2 positional arguments but 4 were given" in the first round."""
    import functools

    import pytest

    from fedlib._validate import check_callable, positional_mismatch

    assert positional_mismatch(max, 4) is None
    assert positional_mismatch(lambda *a: 0, 4) is None
    assert positional_mismatch(functools.wraps(lambda x: x)(lambda *a: 0), 4) is None
    assert positional_mismatch(lambda a, b: 0, 4) == ("(a, b)", "too many positional arguments")
    with pytest.raises(ValueError, match=r"^f must be a callable x -> y, taking 1 positional argument: f\(\) does not"):
        check_callable("f", lambda: 0, "x -> y", nargs=1)
    assert check_callable("f", len, "x -> y", nargs=1) is len


def test_messages_give_a_type_with_its_article():
    """Messages said 'got a OrderedDict', 'got a int', 'got a ndarray' (ten sites wrote ``got a {type(x).__name__}``).
    They now go through ``a_type``, which picks the article from the name; no message in fedlib builds the article by
    hand any more."""
    import re
    from collections import OrderedDict
    from pathlib import Path

    from fedlib._validate import a_type

    assert [a_type(x) for x in ({}, OrderedDict(), 1, np.zeros(1), [], 1.0)] == [
        "a dict", "an OrderedDict", "an int", "a ndarray", "a list", "a float"]
    root = Path(__file__).resolve().parents[1] / "fedlib"
    # on one line, or split across two f-strings: 'got a "' then 'f"{type(x).__name__}' on the next line
    pattern = re.compile(r'\ban? (?:"\s*\n\s*f")?\{type\([^)]*\)\.__name__\}')
    by_hand = [f"{path.relative_to(root)}:{text[:m.start()].count(chr(10)) + 1}" for path in sorted(root.rglob("*.py"))
               for text in [path.read_text()] for m in pattern.finditer(text)]
    assert by_hand == []


# --------------------------------------------------------------------------- check_probability_vector
def test_float32_weights_accepted_once_are_accepted_again_downstream():
    """float32 (numpy or torch) p = (0.1, 0.2, 0.3, 0.4) sums to 1 + 2.2e-8 in float64: check_probability_vector takes it
    at float32 precision, but returned the float64 array unchanged, and the next check of that array (at 1e-9) refused
    it: run_sequential, QuadraticProblem.optimum, fedprox_weights, quadratic_round_map('fednova') all raised 'p must sum
    to 1 (within 1e-09)'. It comes back divided by its sum now (float64 inputs unchanged), and the runs agree with the
    float64 p to float32's precision."""
    import torch

    from fedlib._validate import check_probability_vector
    from fedlib.algorithms import make_algorithm
    from fedlib.engines.reference import run_sequential
    from fedlib.problems import QuadraticProblem, random_quadratic
    from fedlib.solvers import sgd
    from fedlib.theory import fedprox_weights, quadratic_round_map

    p64 = np.array([0.1, 0.2, 0.3, 0.4])
    assert check_probability_vector("p", p64).tolist() == p64.tolist()  # float64: unchanged
    base = random_quadratic(4, 3, seed=0, p=p64)
    want = run_sequential(make_algorithm("fednova", sgd(0.05)), np.zeros(3), base.grad_fn(), p64,
                          FixedSteps([1, 3, 7, 9]), rounds=5).state.params
    for p in (p64.astype(np.float32), torch.tensor(p64.tolist())):
        assert abs(check_probability_vector("p", p).sum() - 1.0) <= 1e-15
        check_probability_vector("p", check_probability_vector("p", p))
        got = run_sequential(make_algorithm("fednova", sgd(0.05)), np.zeros(3), base.grad_fn(), p,
                             FixedSteps([1, 3, 7, 9]), rounds=5).state.params
        np.testing.assert_allclose(got, want, rtol=1e-6)
        np.testing.assert_allclose(QuadraticProblem(base.H, base.e, p).optimum(), base.optimum(), rtol=1e-6)
        np.testing.assert_allclose(fedprox_weights(p, [1, 3, 7, 9], 0.3)[1], fedprox_weights(p64, [1, 3, 7, 9], 0.3)[1],
                                   rtol=1e-6)
        quadratic_round_map(base.H, base.e, p, [1, 3, 7, 9], 0.05, "fednova")


def test_scalar_counts_past_int64_are_refused_by_name_as_array_counts_are():
    """check_count had no cap: RandomSteps(2, 1, 2**63) was built and its first draw raised numpy's 'high is out of
    bounds for int64', sgd(0.1).a_norm(2**63) Python's 'int too large to convert to C long', naming no argument;
    check_int_array refused such counts as 'must hold whole numbers below 2**63'. Both apply one rule now."""
    from fedlib._validate import check_count, check_int_array
    from fedlib.schedules import RandomSteps
    from fedlib.solvers import sgd

    for call, name in ((lambda v: RandomSteps(2, 1, v), "high"), (lambda v: sgd(0.1).a_norm(v), "tau"),
                       (lambda v: check_count("epochs", v, minimum=1), "epochs")):
        for big in (2 ** 63, np.uint64(2 ** 63), 2.0 ** 63, 1e300, 10 ** 30):
            with pytest.raises(ValueError, match=rf"^{name} must be a whole number below 2\*\*63 \(an int64\), got "):
                call(big)
    assert check_count("n", 2 ** 63 - 1) == 2 ** 63 - 1 == check_count("n", np.uint64(2 ** 63 - 1))
    assert check_int_array("n", np.array([2 ** 63 - 1], dtype=np.uint64)).tolist() == [2 ** 63 - 1]
    for big in ([2 ** 63], [2.0 ** 63], [-(2.0 ** 63) - 2048.0]):
        with pytest.raises(ValueError, match=r"^n must hold whole numbers below 2\*\*63, got "):
            check_int_array("n", big)


def test_check_finite_array_refuses_a_bool_among_numbers():
    """A list of bools was refused ('got bools (True, False), whose True and False would count as 1 and 0'), but a
    list holding one among numbers was the float array numpy makes of it: check_finite_array("w", [0.0, True]) gave
    [0.0, 1.0], so p=[0.5, True] failed only for its sum and a_norms=[2.0, True] ran with 1.0. Any bool in a list
    (Python's or numpy's, nested lists and object arrays searched, a bool array among the entries by its dtype) is
    refused alike now, by name; lists of numbers and of float arrays pass as before."""
    import torch

    from fedlib._validate import check_finite_array, check_probability_vector
    from fedlib.rule import aggregate

    for value, flag in (([0.0, True], True), ([0, np.True_], True), ((0.5, np.False_), False),
                        ([[1.0, 2.0], [np.False_, 3.0]], False), (np.array([0.5, True], dtype=object), True),
                        ([np.array([1.0]), np.array([True])], True), ([0.5, torch.tensor(False)], False)):
        with pytest.raises(ValueError) as info:
            check_finite_array("w", value)
        assert str(info.value) == (f"w must be an array of numbers: got a bool ({flag}) among its entries, whose True "
                                   "and False would count as 1 and 0 (a mask? pass the numbers it selects)")
    with pytest.raises(ValueError, match=r"^p must be an array of numbers: got a bool \(True\) among its entries"):
        check_probability_vector("p", [0.0, True])
    with pytest.raises(ValueError, match=r"^a_norms must be an array of numbers: got a bool \(True\) among"):
        aggregate([np.ones(2), np.ones(2)], [0.5, 0.5], [2.0, True])
    assert check_finite_array("x", [0.5, 1, np.float64(2.0), np.int64(3)]).tolist() == [0.5, 1.0, 2.0, 3.0]
    assert check_finite_array("H", [np.eye(2), 2 * np.eye(2)], ndim=3).shape == (2, 2, 2)


def test_bool_entry_passes_numbers_without_the_array_probe(monkeypatch):
    """A list of numpy numbers (``list(np.array(...))``, common for weights) is passed over by type checks: before,
    each ``np.float64`` went through ``hasattr(v, 'reshape') and is_bool(v)`` (~3 us an entry: 320 us for 100
    weights, where the check took 5 us before bools among numbers were looked for). The probe is now reached only
    by arrays and tensors among the entries."""
    import fedlib._validate as V

    calls = []
    real = V.is_bool
    monkeypatch.setattr(V, "is_bool", lambda x: calls.append(type(x)) or real(x))
    numbers = list(np.linspace(0.1, 1.0, 10)) + [np.int64(3), np.float32(0.5), 2, 0.5]
    assert V.bool_entry(numbers) is None and calls == []
    assert V.bool_entry(numbers + [np.array([True, False])]) is True  # its first entry, as a Python bool
    assert calls  # the array went through the probe
    assert V.bool_entry(numbers + [np.True_]) is np.True_ and V.bool_entry([1, 2, True]) is True


def test_float16_counts_are_taken_without_an_overflow_warning():
    """A float16 array of whole step counts is taken as its integers, and so is a float16 scalar count, with no
    warning. Before, check_int_array compared the array's max with 2**63 in float16 (numpy 2 casts the Python number
    to the array's type): 'RuntimeWarning: overflow encountered in cast' on every call, an error where warnings are
    (the bound held: float16's inf is above every count)."""
    import warnings

    from fedlib._validate import check_count, check_int_array

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_int_array("steps", np.array([1.0, 2.0, 65504.0], dtype=np.float16)).tolist() == [1, 2, 65504]
        assert check_int_array("steps", np.array([1.0, 2.0], dtype=np.float32), minimum=1).tolist() == [1, 2]
        assert check_count("tau", np.float16(4.0), minimum=1) == 4
        with pytest.raises(ValueError, match=r"^steps must hold whole numbers below 2\*\*63"):
            check_int_array("steps", np.array([1.0, 2.0 ** 63], dtype=np.float32))


def _cgroup_tree(tmp_path, files: dict, proc: str):
    """A fake ``/sys/fs/cgroup`` under ``tmp_path/cg`` (``files``: relative path -> text) and a fake
    ``/proc/self/cgroup`` holding ``proc``."""
    root = tmp_path / "cg"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (tmp_path / "proc").write_text(proc)
    return tmp_path / "proc", root


def test_cgroup_memory_is_the_least_room_under_the_limits_of_the_group_and_its_parents(tmp_path):
    """cgroup v2: room = memory.max - (memory.current - inactive_file), the least over the group and its parents
    (a job's limit on the parent binds the step below it); "max" is no limit."""
    from fedlib._validate import cgroup_available_memory

    G = 2**30
    files = {"cgroup.controllers": "memory\n",
             "job/memory.max": f"{8 * G}\n", "job/memory.current": f"{5 * G}\n",
             "job/memory.stat": f"anon 1\ninactive_file {1 * G}\n",
             "job/step/memory.max": "max\n", "job/step/memory.current": f"{1 * G}\n"}
    proc, root = _cgroup_tree(tmp_path, files, "0::/job/step\n")
    assert cgroup_available_memory(proc, root) == 8 * G - (5 * G - 1 * G)
    (root / "job/step/memory.max").write_text(f"{2 * G}\n")  # the step's own limit is tighter
    assert cgroup_available_memory(proc, root) == 2 * G - 1 * G
    (root / "job/step/memory.current").write_text(f"{3 * G}\n")  # over its limit: no room, never negative
    assert cgroup_available_memory(proc, root) == 0
    for f in ("job/memory.max", "job/step/memory.max"):
        (root / f).write_text("max\n")
    assert cgroup_available_memory(proc, root) is None  # no limit anywhere


def test_cgroup_memory_reads_v1_hybrid_and_namespaced_layouts_and_unreadable_ones_as_unknown(tmp_path):
    from fedlib._validate import cgroup_available_memory

    G = 2**30
    v1 = {"memory/memory.limit_in_bytes": "9223372036854771712\n", "memory/memory.usage_in_bytes": f"{9 * G}\n",
          "memory/box/memory.limit_in_bytes": f"{4 * G}\n", "memory/box/memory.usage_in_bytes": f"{3 * G}\n",
          "memory/box/memory.stat": f"cache 5\ntotal_inactive_file {G // 2}\n",
          "unified/cgroup.procs": ""}  # the hybrid layout: v2 mounted at unified/, no memory controller there
    proc, root = _cgroup_tree(tmp_path, v1, "4:memory:/box\n1:cpu:/\n0::/\n")
    assert cgroup_available_memory(proc, root) == 4 * G - (3 * G - G // 2)
    # a cgroup namespace: the process sees its group as "/", the mount is the group itself
    ns = {"cgroup.controllers": "memory\n", "memory.max": f"{3 * G}\n", "memory.current": f"{G}\n"}
    proc, root = _cgroup_tree(tmp_path / "ns", ns, "0::/\n")
    assert cgroup_available_memory(proc, root) == 2 * G
    proc, root = _cgroup_tree(tmp_path / "hidden", ns, "0::/somewhere/not/mounted\n")
    assert cgroup_available_memory(proc, root) == 2 * G
    assert cgroup_available_memory(tmp_path / "no-such-file", root) is None
    proc, root = _cgroup_tree(tmp_path / "bad", {"cgroup.controllers": "", "memory.max": "lots\n"}, "0::/\n")
    assert cgroup_available_memory(proc, root) is None


def test_available_memory_is_the_least_of_the_machine_and_the_cgroup_limit(monkeypatch):
    """A run in a container smaller than the machine was refused by nothing and killed by the kernel: the check now
    takes the container's room when it is the smaller."""
    from fedlib import _validate

    meminfo = Path("/proc/meminfo")
    if not meminfo.exists():
        pytest.skip("no /proc/meminfo (not Linux)")
    # the machine's MemAvailable, read here (the real available_memory() may be a container's smaller room)
    machine = next(int(line.split()[1]) * 1024 for line in meminfo.read_text().splitlines()
                   if line.startswith("MemAvailable:"))
    monkeypatch.setattr(_validate, "cgroup_available_memory", lambda: None)
    assert _validate.available_memory() == pytest.approx(machine, rel=0.2)  # moves as other processes run
    monkeypatch.setattr(_validate, "cgroup_available_memory", lambda: 12345)
    assert _validate.available_memory() == 12345
    assert _validate.memory_room() == (12345, "cgroup")
    with pytest.raises(MemoryError, match=r"^the thing need 0\.0 GiB, more than the 0\.0 GiB of memory available to "
                                          r"this process under its container's or batch job's limit$") as info:
        _validate.check_memory(12346, "the thing")
    assert info.value.memory_limit == "cgroup"
    _validate.check_memory(12345, "the thing")
    monkeypatch.setattr(_validate, "cgroup_available_memory", lambda: 10 * machine)
    assert _validate.available_memory() == pytest.approx(machine, rel=0.2)
    assert _validate.memory_room()[1] == "machine"
    with pytest.raises(MemoryError, match=r"GiB of memory available on this machine$") as info:
        _validate.check_memory(100 * machine, "the thing")
    assert info.value.memory_limit == "machine"


def test_cgroup_v1_memory_of_a_parent_counts_the_page_cache_of_its_children(tmp_path):
    """cgroup v1's memory.stat lists a group's own inactive_file before total_inactive_file (its children's too, as
    memory.usage_in_bytes counts them): a limit on a parent group (a batch job's, over the step the process runs in)
    leaves room limit - (usage - total_inactive_file). Before, the first of the two was taken, the parent's own page
    cache (200 KiB where the total was 7 GiB on a real v1 machine): room 6 - 5 = 1 GiB here instead of 6 - (5 - 3)."""
    from fedlib._validate import cgroup_available_memory

    G = 2**30
    v1 = {"memory/job/memory.limit_in_bytes": f"{6 * G}\n", "memory/job/memory.usage_in_bytes": f"{5 * G}\n",
          "memory/job/memory.stat": f"cache 7\ninactive_file 0\nactive_file 0\ntotal_inactive_file {3 * G}\n",
          "memory/job/step/memory.limit_in_bytes": "9223372036854771712\n",
          "memory/job/step/memory.usage_in_bytes": f"{5 * G}\n",
          "memory/job/step/memory.stat": f"inactive_file {3 * G}\ntotal_inactive_file {3 * G}\n"}
    proc, root = _cgroup_tree(tmp_path, v1, "4:memory:/job/step\n0::/\n")
    assert cgroup_available_memory(proc, root) == 6 * G - (5 * G - 3 * G)
    # a v1 memory.stat without the totals (or cgroup v2's, which has no total_ keys): inactive_file
    (root / "memory/job/memory.stat").write_text(f"inactive_file {G}\n")
    assert cgroup_available_memory(proc, root) == 6 * G - (5 * G - G)
