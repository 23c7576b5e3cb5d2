"""What executing the chapters under other seeds and parameters showed (chapters 1-10, profile ci,
seeds 1-3): each test fails on the code before its fix."""
from __future__ import annotations

import numpy as np
import pytest


# --------------------------------------------------------------------------- chapter 4's parameters
@pytest.fixture(scope="module")
def small_synthetic():
    from fedlib.experiments import synthetic as S

    return S.make_problem(num_clients=3, dim=4, num_classes=3, num_samples=[30, 50, 80])


@pytest.mark.parametrize("seeds, message", [
    ((), r"^seeds must name at least one run seed, got none$"),
    ((0, 0, 0), r"^seeds must be distinct \(a repeated seed repeats the same run\), got \(0, 0, 0\)$"),
    ((0, -1), r"^seeds must be an integer >= 0, got -1$"),
])
def test_chapter4_seeds_without_runs_are_refused(small_synthetic, seeds, message):
    """Chapter 4 with seeds=() ran nothing and failed later with an IndexError in final_losses; with
    seeds=(0, 0, 0) its 'for every seed' claims were one run counted three times."""
    from fedlib.experiments import synthetic as S

    with pytest.raises(ValueError, match=message):
        S.run_grid(small_synthetic, [S.SETTINGS[0]], {"FedAvg": S.fedavg_sgd}, seeds, 1)
    with pytest.raises(TypeError, match="^seeds must be a sequence of integer run seeds, got int$"):
        S.run_setting(small_synthetic, S.SETTINGS[0], S.fedavg_sgd, 3, 1)


def test_chapter4_zero_rounds_and_no_learning_rates_are_refused(small_synthetic):
    """rounds=0 ran no round, so chapter 4's claim 'FedNova ends below FedAvg' failed (both at the
    initial loss log 3) as if the paper were wrong; lr_sweep with lrs=() returned {} (then an
    IndexError in the chapter) and with rounds=0 ran 1 round (max(1, 0))."""
    from fedlib.experiments import synthetic as S

    with pytest.raises(ValueError, match=r"^rounds must be an integer >= 1, got 0$"):
        S.run_grid(small_synthetic, [S.SETTINGS[0]], {"FedAvg": S.fedavg_sgd}, (0,), 0)
    with pytest.raises(ValueError, match=r"^lrs must name at least one learning rate, got none$"):
        S.lr_sweep(small_synthetic, S.SETTINGS[0], {"FedAvg": S.fedavg_sgd}, (), (0,), 2)
    with pytest.raises(ValueError, match=r"^rounds must be an integer >= 1, got 0$"):
        S.lr_sweep(small_synthetic, S.SETTINGS[0], {"FedAvg": S.fedavg_sgd}, (0.02,), (0,), 0)
