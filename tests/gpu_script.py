"""Run scripts/gpu_run.sh and scripts/import_gpu_results.py on the CPU for the tests
(tests/test_gpu_script.py, tests/test_gpu_script_resume.py): DEVICE=cpu, the shipped sample,
a tiny width, one BLAS thread.

The script's steps run under wall-clock budgets. The budgets these tests give are ceilings
with room for a slow CI machine whose two cores are shared with a second test process
(``make test`` runs two): only the paused-group test depends on time, and it is built so that
a slower machine makes its pause more certain, not less (see that test)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CELLS = ["sgd-e2-fedavg", "sgd-e2-fednova", "sgd-u25-fedavg"]
#: what every call of the script gets: CPU, tiny model, one round, seed 0, two stacked runs
CPU_ENV = dict(DEVICE="cpu", WIDTH="0.03", TABLE1_ROUNDS="1", TABLE1_SEEDS="0", TABLE1_CELLS=",".join(CELLS),
               BENCH_STEPS="2", BENCH_RUNS="2", OMP_NUM_THREADS="1", PROFILE_STEPS="2")


def gpu_run_call(out, results, budget=100, data="sample", **extra):
    """The command line and environment of ``bash scripts/gpu_run.sh OUT DATA BUDGET`` with
    :data:`CPU_ENV` (``extra`` overrides) and results in ``results``."""
    env = dict(os.environ, **CPU_ENV, RESULTS=str(results), PYTHON=sys.executable)
    env.update(extra)
    return ["bash", str(ROOT / "scripts" / "gpu_run.sh"), str(out), data, str(budget)], env


def gpu_run(out, results, budget=100, data="sample", **extra):
    """Run :func:`gpu_run_call`'s command to its end; the completed process (text output captured)."""
    cmd, env = gpu_run_call(out, results, budget, data, **extra)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=int(budget) + 120)


def import_results(folder, repo, *extra, smoke=True):
    """``scripts/import_gpu_results.py FOLDER --repo REPO --tag cpu-smoke [--smoke]``; the completed
    process (``--smoke``: the CPU runs of these tests are not the paper's setup). REPO is made first if missing
    (the script refuses a --repo that is no folder)."""
    Path(repo).mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "import_gpu_results.py"), str(folder),
                           "--repo", str(repo), "--tag", "cpu-smoke", *(["--smoke"] if smoke else []), *extra],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
