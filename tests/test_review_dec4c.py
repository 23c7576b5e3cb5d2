"""Review of 7817915..9b903fc (helper A4)."""
from bookutil import autodoc_extension


def _autodoc():
    return autodoc_extension()


def test_chapter_links_never_link_a_prefix_of_a_longer_number():
    """'chapter 10.5' or 'chapter 100' is not chapter 1 or 10 followed by the rest of the number:
    the number's last digits were allowed to be a digit at the end of the text or before a space."""
    mod = _autodoc()
    chapters = {n: f"/book/{n:02d}_x" for n in range(1, 11)}
    for text in ("chapter 10.5", "chapter 100", "chapter 123", "see chapter 100 here"):
        assert mod.chapter_links([text], chapters) == [text], text
    # the numbers it knows are still linked, with what follows them left as it is
    assert mod.chapter_links(["chapter 10."], chapters) == [":doc:`chapter 10 </book/10_x>`."]
    assert mod.chapter_links(["chapter 1's table"], chapters) == [":doc:`chapter 1 </book/01_x>`'s table"]
    assert mod.chapter_links(["chapters 2–4"], chapters) == [":doc:`chapters 2 </book/02_x>`–:doc:`4 </book/04_x>`"]



def _feature_engine_class():
    """A subclass that feeds its own data through the documented input hooks (train_batch /
    test_batches), as the stacked engine's docstring invites, without TensorEngine's private probe."""
    from types import SimpleNamespace

    import torch

    from fedlib.engines.stacked import StackedEngine

    class FeatureEngine(StackedEngine):
        def __init__(self, model, x, y, runs, **kw):
            stub = SimpleNamespace(train_images=torch.zeros((x.shape[0], 1, 1, 1), dtype=torch.uint8), train_labels=y)
            super().__init__(model, stub, runs, path="vmap", augment=False, padding=0, mean=(0.0,), std=(1.0,), **kw)
            self._feat = x.to(self.device, self.dtype)

        def train_batch(self, a):
            idx, mask = self.step_indices(a)
            idx = idx.t()
            return self._feat[idx], self._train_labels[idx], mask

        def test_batches(self):
            return iter(())

    return FeatureEngine


def _feature_problem():
    import torch

    from fedlib.algorithms import make_algorithm
    from fedlib.engines.stacked import RunSpec
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd

    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 6, generator=g)
    y = torch.randint(0, 3, (64,), generator=g)
    parts = [torch.arange(0, 32).numpy(), torch.arange(32, 64).numpy()]
    runs = [RunSpec(make_algorithm("fedavg", sgd(0.1)), parts, FixedSteps([2, 3]), seed=0)]
    return x, y, runs


def test_subclass_with_its_own_data_is_not_refused_for_the_placeholder_images():
    """8f5fb65 ran the vmap path's training-mode check on the stored images at construction: a
    subclass bringing its own data (train_batch) had only placeholders there, and a model for its
    features was refused ('could not be applied'). The check now runs on its first batch."""
    import math

    import pytest
    import torch
    from torch import nn

    FeatureEngine = _feature_engine_class()
    x, y, runs = _feature_problem()
    torch.manual_seed(0)
    engine = FeatureEngine(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)), x, y, runs, rounds=2,
                           batch_size=8)
    engine.train()
    assert len(engine.history) == 2 and all(math.isfinite(rec.train_loss) for r in engine.history for rec in r)

    class NoisyInTraining(nn.Module):  # training-only behaviour the engine would silently drop
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 3)

        def forward(self, z):
            z = self.lin(z)
            return z + torch.randn_like(z) if self.training else z

    engine = FeatureEngine(NoisyInTraining(), x, y, runs, rounds=2, batch_size=8)  # its data is not known yet
    for _ in range(2):  # refused again on the next call, not trained without the check
        with pytest.raises(ValueError, match="training mode than in eval mode"):
            engine.run_round()
    assert engine.round_index == 0 and not engine.history



def test_chapter_links_leave_a_code_block_directive_alone():
    """The body of '.. code-block:: python' is code (its first line does not end in '::', which was
    the only literal block recognised): a 'chapter 6' there would become :doc: markup shown verbatim."""
    mod = _autodoc()
    chapters = {6: "/book/06_x"}
    doc = ["See chapter 6.", "", ".. code-block:: python", "", "    run(chapter 6)", "", "After chapter 6."]
    assert mod.chapter_links(doc, chapters) == [
        "See :doc:`chapter 6 </book/06_x>`.", "", ".. code-block:: python", "", "    run(chapter 6)", "",
        "After :doc:`chapter 6 </book/06_x>`."]
