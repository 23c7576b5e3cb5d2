"""Run scripts/gpu_run.sh and scripts/import_gpu_results.py on the CPU for the tests
(tests/test_gpu_script.py, tests/test_gpu_script_resume.py): DEVICE=cpu, the shipped sample,
a tiny width, one BLAS thread.

The script's steps run under wall-clock budgets. The budgets these tests give are ceilings
with room for a slow CI machine whose two cores are shared with a second test process
(``make test`` runs two): only the paused-group test depends on time, and it is built so that
a slower machine makes its pause more certain, not less (see that test)."""
from __future__ import annotations

import os
import shutil
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


#: A stub ``timeout`` for runs of gpu_run.sh on a virtual clock (tests/test_gpu_rehearsal.py,
#: tests/test_mutation_gpu_run.py, tests/test_gpu_script_budget.py's small budgets): it records "SECOND ARGS" (one
#: line a call; SECOND is ``date +%s`` less the number in $START_FILE, 0 without it) in $STUB_TIMEOUTS, then moves
#: the clock $CLOCK by the seconds the first matching glob of $STUB_STEPS ("GLOB=SECONDS;...") gives its command
#: (``hang``: the limit plus the kill grace, exit 124) and runs it.
TIMEOUT_STUB = r"""#!/bin/bash
start=0
if [ -n "${START_FILE:-}" ]; then start=$(cat "$START_FILE"); fi
echo "$(( $(date +%s) - start )) $*" | tr '\n' ' ' >> "$STUB_TIMEOUTS"
echo >> "$STUB_TIMEOUTS"
grace=0
if [ "$1" = -k ]; then grace=$2; shift 2; fi
limit=$1
shift
spent=0
IFS=';' read -r -a rules <<< "${STUB_STEPS:-}"
for rule in "${rules[@]}"; do
    if [[ "$*" == ${rule%=*} ]]; then spent=${rule##*=}; break; fi
done
if [ "$spent" = hang ]; then echo $(( $(cat "$CLOCK") + limit + grace )) > "$CLOCK"; exit 124; fi
echo $(( $(cat "$CLOCK") + spent )) > "$CLOCK"
exec "$@"
"""


def write_clock_stubs(folder: Path, date_script: str) -> Path:
    """Write the virtual clock's stubs into ``folder`` (made here; put it first on PATH): ``date`` (``date_script``,
    in which REAL_DATE stands for the real ``date``), :data:`TIMEOUT_STUB`, and ``python`` and ``nvidia-smi`` that
    exit 0 at once; ``folder``."""
    folder.mkdir()
    for name, text in {"date": date_script, "timeout": TIMEOUT_STUB, "python": "#!/bin/bash\nexit 0\n",
                       "nvidia-smi": "#!/bin/bash\nexit 0\n"}.items():
        (folder / name).write_text(text.replace("REAL_DATE", shutil.which("date")))
        (folder / name).chmod(0o755)
    return folder


def stub_timeouts(path: Path) -> list:
    """The calls :data:`TIMEOUT_STUB` recorded in ``path``: ``(second, grace or None, limit, [command words])``."""
    calls = []
    for line in Path(path).read_text().splitlines():
        at, *words = line.split()
        grace = None
        if words[0] == "-k":
            grace, words = int(words[1]), words[2:]
        calls.append((int(at), grace, int(words[0]), words[1:]))
    return calls
