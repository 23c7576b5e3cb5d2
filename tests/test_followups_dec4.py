"""Follow-ups of the 2026-12-04 audits: each fix has a test that fails on the code before it."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fedlib import anatomy

BOOK = Path(__file__).resolve().parents[1] / "book"


def _cell_sources(name):
    nb = json.loads((BOOK / name).read_text())
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


# ---------------------------------------------------------------- chapter 1's parameters

GOOD = dict(lr=0.05, momentum=0.9, alpha=0.05, gamma=0.95, weight_decay=1e-3)


@pytest.mark.parametrize("name, value, message", [
    ("lr", 0, "lr must be a finite number > 0, got 0"),          # was ZeroDivisionError at mu = alpha / lr
    ("lr", -0.1, "lr must be a finite number > 0, got -0.1"),
    ("momentum", 1.0, "momentum must lie in [0.0, 1.0), got 1.0"),
    ("alpha", 0.0, "alpha must be a finite number > 0, got 0.0"),
    ("alpha", -0.1, "alpha must be a finite number > 0, got -0.1"),  # was 'mu must be ... >= 0, got -2.0'
    ("alpha", 1.5, "alpha must lie in (0, 1] (alpha = lr * mu), got 1.5"),  # was 'mu: lr*mu must be <= 1'
    ("gamma", 0.0, "gamma must be a finite number > 0, got 0.0"),
    ("gamma", 1.5, "gamma must lie in (0, 1] (a per-step decay), got 1.5"),
    ("weight_decay", -1e-3, "weight_decay must be a finite number >= 0, got -0.001"),
])
def test_chapter1_solver_family_refuses_each_parameter_by_name(name, value, message):
    kwargs = dict(GOOD, **{name: value})
    with pytest.raises(ValueError) as info:
        anatomy.solver_family(**kwargs)
    assert str(info.value) == message


def test_chapter1_solver_family_builds_the_five_solvers():
    s = anatomy.solver_family(**GOOD)
    assert list(s) == ["SGD", "decayed SGD", "proximal", "momentum", "momentum + prox"]
    assert s["proximal"].mu == pytest.approx(1.0, rel=1e-15)  # alpha / lr = 0.05 / 0.05
    assert s["momentum + prox"].mu == pytest.approx(1.0, rel=1e-15) and s["momentum + prox"].momentum == 0.9
    # alpha = lr * mu = 1: one proximal step lands on the anchor, a_i = [0, ..., 0, 1]
    s1 = anatomy.solver_family(0.5, 0.0, 1.0, 0.5)
    assert np.array_equal(anatomy.probe_a_vector(s1["proximal"], 3), [0.0, 0.0, 1.0])
    # gamma = 0.5: a_i = [1, 1/2, 1/4]
    assert np.allclose(anatomy.probe_a_vector(s1["decayed SGD"], 3), [1.0, 0.5, 0.25], rtol=1e-15, atol=0)


def test_chapter1_uses_the_checked_solver_family_and_clients():
    code = "\n".join(_cell_sources("01_update_rule.ipynb"))
    assert "anatomy.solver_family(lr, momentum, alpha, gamma, weight_decay)" in code
    assert "alpha / lr" not in code.replace("# alpha / lr", "")
    assert "anatomy.traced_clients(data, num_traced_clients, batch_size, seed)" in code


class _Data:
    def __init__(self, m):
        rng = np.random.default_rng(0)
        self.train_x = [rng.standard_normal((5, 3)) for _ in range(m)]
        self.train_y = [np.arange(5) % 2 for _ in range(m)]
        self.num_classes = 2


@pytest.mark.parametrize("n, message", [
    (0, "num_traced_clients must be an integer >= 1, got 0"),
    (-1, "num_traced_clients must be an integer >= 1, got -1"),
    (4, "num_traced_clients must be at most the 3 clients of the data set, got 4"),
])
def test_chapter1_traced_clients_refuses_a_bad_count(n, message):
    with pytest.raises(ValueError) as info:
        anatomy.traced_clients(_Data(3), n, 2, 0)
    assert str(info.value) == message


def test_chapter1_traced_clients_are_the_first_clients_with_their_own_streams():
    data = _Data(3)
    clients = anatomy.traced_clients(data, 2, 2, 7)
    assert [c.client for c in clients] == [0, 1]
    assert all(c.seed == 7 and c.batch_size == 2 for c in clients)
    assert np.array_equal(clients[1].x, data.train_x[1])
