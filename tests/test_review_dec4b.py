"""Review of d562d43..f13f275 (helper A3). The tests of each fix fail on f13f275; the two named "still"
guard that a fix refuses no more than it should (a model, a file) and pass on both."""
from __future__ import annotations

import dataclasses
import tracemalloc

import numpy as np
import pytest
import torch
from torch import nn

import fedlib.checkpoint as ck


# --------------------------------------------------------------------------- TensorEngine's training-mode check
class _Encoder(nn.Module):
    """A small Transformer classifier: (B, S, d) -> (B, K)."""

    def __init__(self, dropout: float):
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(8, 2, 16, dropout=dropout, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        return self.head(self.enc(x).mean(1))


def _clients(dtype=torch.float64):
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(12, 5, 8, generator=g, dtype=dtype) for _ in range(2)]
    ys = [torch.randint(0, 3, (12,), generator=g) for _ in range(2)]
    return xs, ys


@pytest.mark.filterwarnings("ignore:There is a performance drop:UserWarning")  # vmap over CPU attention
def test_a_transformer_without_dropout_is_not_refused_by_the_training_mode_check():
    """The check ran the model under ``torch.no_grad()``, where an eval-mode TransformerEncoderLayer /
    MultiheadAttention takes torch's fused inference path, which rounds differently from the training
    path: a dropout-free Transformer (trained exactly by the engine at d562d43, reference difference
    ~1e-16) was refused as 'computes something else in training mode'. The check now runs with
    gradients on, as the engine does."""
    from fedlib.experiments.custom import reference_differences, train_clients

    torch.manual_seed(0)
    model = _Encoder(dropout=0.0).double()
    xs, ys = _clients()
    result = train_clients(model, xs, ys, rounds=1, epochs="1", batch_size=4, dtype=torch.float64)
    diffs = reference_differences(model, result)
    assert set(diffs) == {"fedavg", "fednova"} and max(diffs.values()) < 1e-10, diffs


def test_a_transformer_with_attention_dropout_is_still_refused():
    """MultiheadAttention's attention dropout is functional (``dropout_p if self.training``), not an
    ``nn.Dropout`` layer: the engine would run it silently off, so the check must still refuse it."""
    from fedlib.experiments.custom import train_clients

    torch.manual_seed(0)
    xs, ys = _clients()
    with pytest.raises(ValueError, match="something else in training mode than in eval mode"):
        train_clients(_Encoder(dropout=0.3).double(), xs, ys, rounds=1, epochs="1", batch_size=4,
                      dtype=torch.float64)


def test_the_training_mode_check_names_a_model_that_does_not_return_a_tensor():
    """A model returning a tuple was told it 'computes something else in training mode than in eval
    mode' (the outputs were equal); the check now says what is wrong: logits must be a tensor."""
    from fedlib.engines.stacked import _check_training_mode

    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x):
            return self.lin(x), x

    with pytest.raises(ValueError, match=r"logits \(B, K\), a tensor; got a tuple"):
        _check_training_mode(Pair(), torch.randn(8, 4))


# --------------------------------------------------------------------------- load_checkpoint reads a file twice
def test_a_checkpoint_rewritten_in_place_between_hashing_and_unpickling_is_refused(tmp_path, monkeypatch):
    """load_checkpoint hashes the file, then unpickles it in a second pass. A file rewritten in place
    in between (``cp`` onto it, a copy tool) was unpickled unchecked: here a damaged copy of the same
    length, which load_checkpoint alone refuses, was returned as the state. The old code read the
    file once; now a file that changed between the passes is refused."""
    path = tmp_path / "c.ckpt"
    n = 300_000  # 2.4 MB: more than the reader's buffer, so the second pass reads the file again
    ck.save_checkpoint(path, config={}, round_done=1, state={"x": np.ones(n)}, history=[], seed=0)
    good = path.read_bytes()
    bad = good.replace(np.ones(n).tobytes(), np.full(n, 7.0).tobytes())
    assert len(bad) == len(good) and bad != good
    real = ck._check_footer

    def hashed_then_rewritten(p, fh, length):
        real(p, fh, length)  # the good bytes pass the footer check
        with open(path, "r+b") as w:  # rewritten in place, same inode and length
            w.write(bad)

    monkeypatch.setattr(ck, "_check_footer", hashed_then_rewritten)
    with pytest.raises(ck.CheckpointError) as info:
        ck.load_checkpoint(path)
    assert info.value.reason == "changed while it was read"
    monkeypatch.undo()
    with pytest.raises(ck.CheckpointError, match="SHA-256"):  # the damaged file on its own is refused
        ck.load_checkpoint(path)
    path.write_bytes(good)
    assert np.array_equal(ck.load_checkpoint(path)["state"]["x"], np.ones(n))


def test_a_checkpoint_replaced_by_an_atomic_save_while_it_is_read_still_loads(tmp_path, monkeypatch):
    """The other side of the check above: a save (atomic_write renames a new file over the path) while a
    load has the old file open leaves the open file's bytes as they were; it loads, the old state."""
    path = tmp_path / "c.ckpt"
    n = 300_000
    ck.save_checkpoint(path, config={}, round_done=1, state={"x": np.ones(n)}, history=[], seed=0)
    real = ck._check_footer

    def hashed_then_replaced(p, fh, length):
        real(p, fh, length)
        real_save(path, config={}, round_done=2, state={"x": np.full(n, 7.0)}, history=[], seed=0)

    real_save = ck.save_checkpoint
    monkeypatch.setattr(ck, "_check_footer", hashed_then_replaced)
    doc = ck.load_checkpoint(path)
    assert doc["round"] == 1 and np.array_equal(doc["state"]["x"], np.ones(n))
    monkeypatch.undo()
    assert ck.load_checkpoint(path)["round"] == 2


# --------------------------------------------------------------------------- an own step's a_vector
def test_an_own_step_a_vector_does_not_build_a_tau_by_tau_identity():
    """a_vector of a solver with its own step probed it with the rows of np.eye(tau): tau^2 floats
    (72 MB at tau = 3000; the same diff removed np.eye from the one-hot labels for that reason). It
    now feeds a fresh e_k per step: memory O(tau), the same a_i (heavy ball's closed form)."""
    from fedlib.solvers import LocalSolver, momentum_sgd

    @dataclasses.dataclass(frozen=True)
    class SameStep(LocalSolver):  # LocalSolver's own step, overridden: a_vector comes from the probe
        def update(self, state, grads):
            return super().update(state, grads)

    tau = 3000
    solver = SameStep(lr=0.1, momentum=0.5)
    assert not solver.builtin_step
    tracemalloc.start()
    try:
        a = solver.a_vector(tau)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < tau * tau * 8 / 8, peak  # an identity alone is tau^2 * 8 bytes
    np.testing.assert_allclose(a, momentum_sgd(0.1, 0.5).a_vector(tau), rtol=1e-12)


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
