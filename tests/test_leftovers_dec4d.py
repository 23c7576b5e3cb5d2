"""Leftovers of the December 4 audit (helper B): chapter seeds whose runs overlapped, user hooks that the
grouped engine path ignored (and backward hooks that the vmap path failed on only at the first step),
and ``nan`` in ``sampling_summary``. Each test fails on the code before its fix, but the guards marked
as such (behaviour that was already right and must stay)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fedlib.experiments import run_seeds

BOOK = Path(__file__).resolve().parents[1] / "book"


# --------------------------------------------------------------------------- 1. chapter seeds
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

def test_measure_sampling_slopes_script_runs_tiny(capsys):
    """scripts/measure_sampling_slopes.py (the numbers of chapter 8's comment on the sampling slopes)."""
    import runpy

    main = runpy.run_path(str(Path(__file__).resolve().parents[1] / "scripts" / "measure_sampling_slopes.py"),
                          run_name="measure_sampling_slopes")["main"]
    main(["--problem-seeds", "0", "--copies", "1", "--clients", "2", "4", "--rounds", "16", "32", "--seeds", "2",
          "--replicas", "1"])
    out = capsys.readouterr().out
    assert out.startswith("problem seed 0: slope -") and "against q_eff tau T" in out
    assert "(flatter than -1/2 at " in out and "of 1); against q_eff tau T: " in out


# --------------------------------------------------------------------------- 2. user hooks in the engines
def _hook_setup(hook: str | None, dropout: bool = False):
    import numpy as np
    import torch
    from torch import nn
    from types import SimpleNamespace

    from fedlib.algorithms import make_algorithm
    from fedlib.engines.stacked import RunSpec
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    torch.manual_seed(0)
    layers = [nn.Conv2d(3, 2, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(32, 8), nn.ReLU(), nn.Linear(8, 3)]
    if dropout:
        layers.insert(4, nn.Dropout(0.5))
    model = nn.Sequential(*layers).double()
    if hook == "forward":
        model[3].register_forward_hook(lambda module, inputs, output: 2 * output)
    elif hook == "pre":
        model[-1].register_forward_pre_hook(lambda module, inputs: (2 * inputs[0],))
    elif hook == "model":
        model.register_forward_hook(lambda module, inputs, output: 2 * output)
    elif hook == "backward":
        model[3].register_full_backward_hook(lambda module, grad_in, grad_out: (2 * grad_in[0],))
    g = torch.Generator().manual_seed(1)
    data = SimpleNamespace(train_images=torch.randint(0, 256, (24, 4, 4, 3), dtype=torch.uint8, generator=g),
                           train_labels=torch.randint(0, 3, (24,), generator=g))
    run = RunSpec(make_algorithm("fedavg", sgd(0.1)), [np.arange(12), np.arange(12, 24)], FixedSteps([2, 3]), seed=0,
                  params={n: p.detach().clone() for n, p in model.named_parameters()})
    return model, data, run


_ENGINE = dict(rounds=1, batch_size=4, padding=0, augment=False)


@pytest.mark.parametrize("hook, where, kind", [("forward", "layer '3' (Linear)", "forward hook"),
                                               ("pre", "layer '5' (Linear)", "forward pre-hook"),
                                               ("model", "the model (Sequential)", "forward hook")])
def test_grouped_path_refuses_a_model_with_forward_hooks(hook, where, kind):
    """The grouped path computes the layers from their weights: a hook doubling a layer's output was
    silently skipped (the trained parameters equal those of the model without the hook, difference 0,
    where the per-client loop and the vmap path differ from them by 12 %)."""
    import torch

    from fedlib.engines.stacked import StackedEngine

    model, data, run = _hook_setup(hook)
    with pytest.raises(ValueError, match=rf"^{re.escape(where)} has a {kind} \(.*<lambda>\): the grouped path "
                                         r"rebuilds the network .* use path='vmap'"):
        StackedEngine(model, data, [run], dtype=torch.float64, **_ENGINE)


@pytest.mark.parametrize("hook", ["forward", "pre", "model"])
def test_vmap_path_runs_forward_hooks_as_the_per_client_loop(hook):
    """A guard (held before): the vmap path, which the grouped path's error points to, calls the hooks
    and ends where the per-client loop ends (3e-16 measured), unlike the model without them."""
    import torch

    from fedlib.engines.stacked import StackedEngine, max_relative_difference, reference_run

    model, data, run = _hook_setup(hook)
    plain, _, plain_run = _hook_setup(None)
    engine = StackedEngine(model, data, [run], dtype=torch.float64, path="vmap", **_ENGINE)
    engine.train()
    ref = reference_run(model, data, run, rounds=1, batch_size=4, augment=False, padding=0)
    unhooked = reference_run(plain, data, plain_run, rounds=1, batch_size=4, augment=False, padding=0)
    assert max_relative_difference(engine.params(0), ref.state.params) < 1e-12
    assert max_relative_difference(ref.state.params, unhooked.state.params) > 1e-2  # the hook changed the training


def test_backward_hooks_are_refused_by_both_paths_when_built():
    """The vmap path failed only at the first local step, inside torch.func ('In order to use an
    autograd.Function with functorch transforms ...'); the grouped path ignored the hook."""
    import torch

    from fedlib.engines.stacked import StackedEngine

    model, data, run = _hook_setup("backward")
    with pytest.raises(ValueError, match=r"^layer '3' \(Linear\) has a backward hook \(.*\): the vmap path "
                                         r"differentiates with torch.func"):
        StackedEngine(model, data, [run], dtype=torch.float64, path="vmap", **_ENGINE)
    with pytest.raises(ValueError, match=r"^layer '3' \(Linear\) has a backward hook \(.*\): the stacked engines run "
                                         r"no backward hooks"):
        StackedEngine(model, data, [run], dtype=torch.float64, **_ENGINE)


def test_models_without_user_hooks_still_train_on_both_paths():
    """The engine's own dropout hooks sit on its private copy: the user's model gains none, and it can
    be handed to the grouped path after the vmap path and the per-client loop used it."""
    import torch

    from fedlib.engines.grouped import registered_hooks
    from fedlib.engines.stacked import StackedEngine, max_relative_difference, reference_run
    from fedlib.models import vgg11

    model, data, run = _hook_setup(None, dropout=True)
    ref = reference_run(model, data, run, rounds=1, batch_size=4, augment=False, padding=0)
    vmap = StackedEngine(model, data, [run], dtype=torch.float64, path="vmap", **_ENGINE)
    assert registered_hooks(model) == []
    grouped = StackedEngine(model, data, [run], dtype=torch.float64, **_ENGINE)
    for engine in (vmap, grouped):
        engine.train()
        assert max_relative_difference(engine.params(0), ref.state.params) < 1e-12
    assert registered_hooks(vgg11(width=1 / 32)) == []
    hooked, _, _ = _hook_setup("pre")
    assert [h[:3] for h in registered_hooks(hooked)] == [("5", "Linear", "forward pre-hook")]


# --------------------------------------------------------------------------- 3. sampling_summary's q_eff
def _srow(m, q, value, eff, scheme="with-replacement"):
    from fedlib.experiments import speedup as S

    return S.SamplingRow("fednova", scheme, m, q, 1024, 6.5, 0.01, value, 0.01, eff)


def test_sampling_summary_states_the_rows_q_eff():
    """A guard (held before): consistent rows keep their sentence, with the rows' q_eff."""
    from fedlib.experiments import speedup as S

    big, small = [_srow(256, 4, 0.2, 3.95), _srow(256, 16, 0.1, 15.1)], [_srow(4, 4, 0.3, 2.29), _srow(4, 16, 0.25, 3.4)]
    text = S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16)
    assert "($q_{\\text{eff}}$ 3.95 → 15.1)" in text and "($q_{\\text{eff}}$ 2.29 → 3.4)" in text
    assert "nan" not in text


@pytest.mark.parametrize("big, small, message", [
    # rows without q_to: the summary printed "q_eff 3.95 → nan" next to a gain it had no cell for
    ([_srow(256, 4, 0.2, 3.95)], [_srow(4, 4, 0.3, 2.29), _srow(4, 16, 0.25, 3.4)],
     r"^big: no row with q = 16 \(it has q = \[4\]\): the summary states q_eff at q_from = 4 and q_to = 16$"),
    ([_srow(256, 4, 0.2, 3.95), _srow(256, 16, 0.1, 15.1)], [_srow(4, 16, 0.25, 3.4)],
     r"^small: no row with q = 4 \(it has q = \[16\]\)"),
    # a row without q_eff (nan): printed as nan
    ([_srow(256, 4, 0.2, 3.95), _srow(256, 16, 0.1, float("nan"))], [_srow(4, 4, 0.3, 2.29), _srow(4, 16, 0.25, 3.4)],
     r"^big: the row with q = 16 has effective_clients nan, not a number > 0"),
    # uniform rows: the text's 'with replacement' and its q_eff formula would be false
    ([_srow(256, 4, 0.2, 4.0, "uniform"), _srow(256, 16, 0.1, 16.0, "uniform")],
     [_srow(4, 4, 0.3, 2.29), _srow(4, 16, 0.25, 3.4)],
     r"^big: the summary describes sampling with replacement .* got rows of scheme 'uniform'$"),
    # two populations in one list: the q_eff of the other m was printed under m = 256
    ([_srow(256, 4, 0.2, 3.95), _srow(64, 16, 0.1, 12.0)], [_srow(4, 4, 0.3, 2.29), _srow(4, 16, 0.25, 3.4)],
     r"^big: rows of one population m, got m = \[64, 256\]$"),
    ([], [_srow(4, 4, 0.3, 2.29)], r"^big must be a non-empty sequence of SamplingRow"),
])
def test_sampling_summary_refuses_rows_that_do_not_fit_its_text(big, small, message):
    from fedlib.experiments import speedup as S

    with pytest.raises(ValueError, match=message):
        S.sampling_summary(big, small, -0.5, [], 2.0, 1.2, 4, 16)

