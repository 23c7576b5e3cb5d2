"""Review and hand mutation testing (helper B) of the code changed on December 4 (f37e303..6eb7195):
``fedlib.report.plus_minus`` / ``transposed_markdown_table``, ``fedlib.engines.grouped.registered_hooks`` /
``_refuse_hooks``, the backward-hook refusal of the vmap path, ``fedlib.experiments.run_seeds``,
``speedup.sampling_summary``'s ``_summary_population`` and the plain floats of ``theory.theorem1_bound`` /
``theorem1_explicit_bound``.

Part 1 (review): each test fails on the code before its fix. Part 2: each test's docstring names the mutant
it kills, a mutant that survived tests/test_leftovers_dec4d.py, tests/test_report_tables.py,
tests/test_bounds.py and tests/test_api_page.py.

73 mutants (the list: ids P*, T*, R*, H*, S*, RS*, C*, SG*, SB*, SS*, TH* in the docstrings below and in the
helper's report): 46 killed by the suite, 20 by this file, 7 equivalent:

- SS3 (``len(populations) != 1`` -> ``> 1``) and SS8 (``populations[0]`` -> ``populations[-1]``): the empty
  list is refused one line before, so ``populations`` has at least one entry, and after the check exactly one.
- TH3, TH4 (``float()`` dropped from theorem1_bound's last two terms) and TH6, TH7, TH8 (from
  theorem1_explicit_bound's last three): every factor is already a Python float or int there
  (check_positive / check_nonnegative / check_int return ``float`` / ``int``, theorem1_constants returns
  floats), so ``float()`` is a guard for a future change, not an observable difference. The first terms'
  ``float()`` (TH1, TH2, TH5) are needed (``np.sqrt``, an unchecked numpy ``tau_eff``) and are killed by
  tests/test_bounds.py::test_theorem1_terms_are_plain_floats.
"""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.engines.grouped import registered_hooks
from fedlib.report import plus_minus, transposed_markdown_table


# --------------------------------------------------------------------------- part 1: review findings
@pytest.mark.parametrize("error", [torch.tensor(-0.1), np.array(-0.1), torch.tensor(float("nan")), True, np.True_])
def test_plus_minus_refuses_negative_errors_of_any_number_type(error):
    """``isinstance(error, numbers.Real)`` let a 0-d torch tensor or numpy array through, which fmt then
    printed as a number: ``plus_minus(0.5, torch.tensor(-0.1))`` gave '0.5 ± -0.1'; a bool gave '1 ± True'."""
    with pytest.raises(ValueError, match="standard error or deviation"):
        plus_minus(0.5, error)


def test_plus_minus_keeps_strings_and_formats_tensors():
    """A guard: a string error is a label, printed as it is (even one that reads as a negative number);
    a 0-d tensor is formatted as the number it holds."""
    assert plus_minus(0.5, "n/a") == "0.5 ± n/a"
    assert plus_minus(0.5, "-1") == "0.5 ± -1"
    assert plus_minus(torch.tensor(0.25), torch.tensor(0.0125)) == "0.25 ± 0.0125"


def _hooked_sequential():
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    model[0].register_forward_hook(lambda module, inputs, output: output)
    model[2].register_full_backward_hook(lambda module, grad_in, grad_out: None)
    return model


def test_grouped_path_names_a_backward_hook_before_a_forward_hook():
    """With a forward hook on layer 0 and a backward hook on layer 2, the grouped path named the forward
    hook and sent the user to path='vmap', which then refused the backward hook."""
    from fedlib.engines.grouped import GroupedNetwork

    with pytest.raises(ValueError, match=r"^layer '2' \(Linear\) has a backward hook .* run no backward hooks"):
        GroupedNetwork(_hooked_sequential(), 2, device="cpu", dtype=torch.float64)


def _srow(m, q, value, eff, scheme="with-replacement", rounds=1024):
    from fedlib.experiments import speedup as S

    return S.SamplingRow("fednova", scheme, m, q, rounds, 6.5, 0.01, value, 0.01, eff)


def test_sampling_summary_names_the_bad_q_eff_among_several_rows():
    """Two rows at q = 16 (two values of T), the second without q_eff: the message printed the first row's
    good value ('has effective_clients 15.1, not a number > 0')."""
    from fedlib.experiments import speedup as S

    big = [_srow(256, 4, 0.2, 3.95), _srow(256, 16, 0.1, 15.1), _srow(256, 16, 0.1, float("nan"), rounds=4096)]
    small = [_srow(4, 4, 0.3, 2.29), _srow(4, 16, 0.25, 3.4)]
    with pytest.raises(ValueError, match=r"^big: the row with q = 16 has effective_clients nan, not a number > 0"):
        S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16)


# --------------------------------------------------------------------------- part 2: mutants that survived
def test_plus_minus_default_spec_is_3g():
    """Kills P8: the default spec '.3g' -> '.4g' (every test of the suite passed an explicit spec or
    numbers with three digits)."""
    assert plus_minus(1 / 3, 1 / 30) == "0.333 ± 0.0333"


def test_plus_minus_leaves_an_error_float_rejects_with_valueerror_to_fmt():
    """Kills P9: ``except (TypeError, ValueError)`` -> ``except TypeError`` around ``float(error)``: an
    object whose ``float()`` raises ValueError is printed as ``str`` by fmt, not a crash of plus_minus."""
    class Label:
        def __float__(self):
            raise ValueError("not a number")

        def __str__(self):
            return "see text"

    assert plus_minus(0.5, Label()) == "0.5 ± see text"


def test_transposed_table_of_one_column():
    """Kills T1: ``len(header) == 0`` -> ``len(header) <= 1``: a header of one entry is a table of one
    row, the first column's values as its column heads."""
    assert transposed_markdown_table(["T"], [[100], [400]]).splitlines() == ["| T | 100 | 400 |", "|---|---|---|"]


def test_transposed_table_refuses_a_row_longer_than_the_header():
    """Kills T4: ``len(r) != len(header)`` -> ``len(r) < len(header)``: the extra cell of a longer row was
    silently dropped."""
    with pytest.raises(ValueError, match="as many cells as the header"):
        transposed_markdown_table(["T", "x"], [[1, 2], [3, 4, 5]])


def test_transposed_table_formats_the_values_with_the_spec():
    """Kills T8: the final ``markdown_table(..., spec)`` without ``spec``: the values (not only the column
    heads) follow the spec."""
    assert transposed_markdown_table(["T", "x"], [[100, 0.123456]], spec=".2g").splitlines()[2] == "| x | 0.12 |"


def test_registered_hooks_lists_every_kind_and_every_name_of_a_shared_module():
    """Kills R1 (``named_modules(remove_duplicate=False)`` -> ``named_modules()``: the second name of a
    shared module and its hooks went missing), R2 (``_backward_pre_hooks`` dropped from the tables:
    ``register_full_backward_pre_hook`` unlisted) and R6 (``__qualname__`` -> ``__name__``: a nested hook
    lost the name of the function that made it)."""
    def make_hook():
        def scale(module, inputs, output):
            return output

        return scale

    shared = nn.Linear(2, 2)
    shared.register_forward_hook(make_hook(), with_kwargs=False, always_call=True)
    shared.register_full_backward_pre_hook(lambda module, grad_output: None)
    model = nn.Sequential(shared, nn.ReLU(), shared)
    assert registered_hooks(model) == [
        ("0", "Linear", "forward hook", "test_registered_hooks_lists_every_kind_and_every_name_of_a_shared_module."
                                        "<locals>.make_hook.<locals>.scale"),
        ("0", "Linear", "backward pre-hook", "test_registered_hooks_lists_every_kind_and_every_name_of_a_shared_module."
                                             "<locals>.<lambda>"),
        ("2", "Linear", "forward hook", "test_registered_hooks_lists_every_kind_and_every_name_of_a_shared_module."
                                        "<locals>.make_hook.<locals>.scale"),
        ("2", "Linear", "backward pre-hook", "test_registered_hooks_lists_every_kind_and_every_name_of_a_shared_module."
                                             "<locals>.<lambda>"),
    ]


def test_vmap_path_refuses_backward_pre_hooks_and_names_the_first_backward_hook():
    """Kills S3 (``backward[0]`` -> ``backward[-1]``: the last of two backward hooks named), S4
    (``startswith("backward")`` -> ``== "backward hook"``: a backward pre-hook passed the check and
    failed only inside torch.func) and S5 (the model itself named ``layer 'model'``)."""
    from fedlib.engines.stacked import _SeededDropoutModule

    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    model.register_full_backward_pre_hook(lambda module, grad_output: None)
    with pytest.raises(ValueError, match=r"^the model \(Sequential\) has a backward pre-hook .* torch\.func"):
        _SeededDropoutModule(model)
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    model[0].register_full_backward_hook(lambda module, grad_in, grad_out: None)
    model[2].register_full_backward_pre_hook(lambda module, grad_output: None)
    with pytest.raises(ValueError, match=r"^layer '0' \(Linear\) has a backward hook "):
        _SeededDropoutModule(model)


def test_engine_against_reference_draws_the_model_and_epochs_of_the_run_seed(monkeypatch):
    """Kills C1 (``RandomEpochs(..., seed=seed + r)``) and C2 (``vgg11(width, seed=seed + r)``): only the
    RunSpec's seed was checked, so chapter seed 1's first run could keep seed 0's second run's initial
    model and epoch draws."""
    import fedlib.engines.stacked as stacked
    from fedlib.experiments import cifar10 as C
    from fedlib.models import vgg11

    class Captured(Exception):
        pass

    def capture(model, train, run, **kwargs):
        raise Captured(run)

    monkeypatch.setattr(stacked, "reference_run", capture)
    with pytest.raises(Captured) as info:
        C.engine_against_reference(width=1 / 32, rounds=1, clients=2, samples_per_client=8, batch_size=4, seed=1)
    run = info.value.args[0]
    assert run.seed == 3 and run.schedule.seed == 3
    expected = {n: p.detach().double() for n, p in vgg11(width=1 / 32, seed=3).named_parameters()}
    assert run.params.keys() == expected.keys()
    assert all(torch.equal(run.params[n], expected[n]) for n in expected)


@pytest.mark.parametrize("big, message", [
    ([(256, 4), (256, 16)], r"^big must be a non-empty sequence of SamplingRow \(sampling_grid's rows\)$"),
    ([_srow(256, 4, 0.2, 3.95), _srow(256, 16, 0.1, 0.0)], r"^big: the row with q = 16 has effective_clients 0\.0"),
    ([_srow(256, 4, 0.2, math.inf), _srow(256, 16, 0.1, 15.1)], r"^big: the row with q = 4 has effective_clients inf"),
])
def test_sampling_summary_refuses_other_rows_and_q_eff_zero_or_infinite(big, message):
    """Kills SS2 (the ``isinstance(r, SamplingRow)`` check dropped: plain tuples failed with an
    AttributeError), SS6 (``effective_clients > 0`` -> ``>= 0``: 'q_eff 3.95 → 0') and SS7 (``isfinite``
    dropped: 'q_eff inf → 15.1')."""
    from fedlib.experiments import speedup as S

    small = [_srow(4, 4, 0.3, 2.29), _srow(4, 16, 0.25, 3.4)]
    with pytest.raises(ValueError, match=message):
        S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16)
