"""Small leftovers of 4 December (b): error messages that name exactly what is wrong, and
``scripts/gpu_run.sh --help`` succeeding."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from cliutil import cli_exit

from fedlib.engines.quadratic import run_replicas
from fedlib.problems import random_quadratic
from fedlib.schedules import RandomLocalWork
from fedlib.solvers import LocalSolver, sgd
from fedlib.tree import tree_map

ROOT = Path(__file__).resolve().parents[1]


def test_tree_map_message_says_what_is_refused():
    """A list paired with a tuple of the same length is accepted; the messages name what is not."""
    assert tree_map(lambda x, y: x + y, [1, 2], (3, 4)) == [4, 6]
    with pytest.raises(ValueError, match=r"sequences of length 2 and 3"):
        tree_map(lambda x, y: x + y, [1, 2], (3, 4, 5))
    with pytest.raises(ValueError, match=r"a list is paired with a dict, not a list or tuple"):
        tree_map(lambda x, y: x + y, [1, 2], {"a": 1})
    with pytest.raises(ValueError, match=r"a tuple is paired with a int, not a list or tuple"):
        tree_map(lambda x, y: x + y, (1, 2), 3)


class _OwnStep(LocalSolver):
    """A subclass with its own ``update`` (the same step): run_replicas' fused step refuses it."""

    def update(self, state, grads):
        return super().update(state, grads)


def test_run_replicas_names_the_index_of_the_bad_solver():
    problem = random_quadratic(3, 2, seed=0)
    work = RandomLocalWork(np.array([1, 2, 3]), np.array([1, 2, 3]), 2, 0)
    with pytest.raises(ValueError, match=r"^solvers\[1\]: _OwnStep overrides LocalSolver's step"):
        run_replicas(problem, "fednova", [sgd(0.05), _OwnStep(lr=0.05)], work, 1)
    with pytest.raises(ValueError, match=r"^solvers\[1\]: weight decay is not supported by run_replicas, got 0.01"):
        run_replicas(problem, "fednova", [sgd(0.05), LocalSolver(0.05, weight_decay=0.01)], work, 1)


def test_cli_alpha_above_alpha_max_names_the_flag():
    rc, _, err = cli_exit(["run", "synthetic", "--alpha", "1e9", "--rounds", "1"])
    assert rc == 2
    assert "error: --alpha must be at most ALPHA_MAX" in err and "error: alpha" not in err


def test_gpu_run_help_exits_0_and_a_bad_argument_2():
    script = str(ROOT / "scripts" / "gpu_run.sh")
    proc = subprocess.run(["bash", script, "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "usage:" in proc.stdout and proc.stderr == ""
    proc = subprocess.run(["bash", script, "--bogus"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "usage:" in proc.stderr
