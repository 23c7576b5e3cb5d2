"""The measurement scripts quoted in the notes run (tiny sizes) and print what the notes quote."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*argv):
    out = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_bench_client_optimizer_prints_a_ratio():
    text = _run("scripts/bench_client_optimizer.py", "--width", "0.03", "--steps", "3", "--repeat", "1", "--threads", "1")
    assert "ClientOptimizer.step" in text and "ratio" in text


def test_measure_host_planning_prints_each_round():
    text = _run("scripts/measure_host_planning.py", "--runs", "1", "--rounds", "2", "--steps", "5")
    assert "round 0: plan" in text and "round 1: plan" in text and "load" in text
