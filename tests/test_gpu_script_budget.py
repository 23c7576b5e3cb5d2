"""scripts/gpu_run.sh ends on its own within its budget: every step's `timeout` is capped at what is left of the
budget (less a margin), a step with too little left is skipped, and no `timeout` gets 0 (no limit) or less.

The steps are stubs on PATH (``python``, ``nvidia-smi``) that sleep until killed where a call's ``STUB_SLOW`` pattern
matches their arguments, else exit 0 at once; a ``timeout`` wrapper records each limit before running the real one.
DEVICE=cuda, so the GPU check and the CUDA tests run (as stubs). The calls of a test run side by side: they sleep,
they do not compute. Only upper bounds on wall time are asserted, with several seconds to spare (the header promises
BUDGET_SECONDS plus a few seconds); a shared CI machine can only make a call slower, never make it look faster."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from gpu_script import gpu_run_call

pytestmark = pytest.mark.slow

#: what the script may take beyond its budget (the header's "a few seconds"), plus room for a loaded machine
SLACK = 12


@pytest.fixture
def stubs(tmp_path):
    """A folder of stubs to put first on PATH: python and nvidia-smi sleep (200 s, until killed) when their
    arguments match the glob STUB_SLOW (resp. STUB_SLOW_SMI=1); timeout appends the time and its arguments to
    STUB_TIMEOUTS."""
    folder = tmp_path / "stubs"
    folder.mkdir()
    real = shutil.which("timeout")
    scripts = {"python": '#!/bin/bash\ncase "$*" in $STUB_SLOW) exec sleep 200;; esac\nexit 0\n',
               "nvidia-smi": '#!/bin/bash\n[ "${STUB_SLOW_SMI:-0}" = 1 ] && exec sleep 200\nexit 0\n',
               "timeout": r"""#!/bin/bash
{ date +%s.%N | tr '\n' ' '; echo "$*" | tr '\n' ' '; echo; } >> "$STUB_TIMEOUTS"  # one line a call
exec REAL "$@"
""".replace("REAL", real)}
    for name, text in scripts.items():
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


def _start(stubs, tmp, budget, slow, **extra):
    tmp.mkdir()
    env = dict(DEVICE="cuda", PYTHON=str(stubs / "python"), PATH=f"{stubs}{os.pathsep}{os.environ['PATH']}",
               STUB_SLOW=slow, STUB_TIMEOUTS=str(tmp / "timeouts.txt"), **extra)
    cmd, env = gpu_run_call(tmp / "out", tmp / "results", budget=budget, **env)
    started = time.time()
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True), started


def _kill_session(sid):
    """SIGKILL every process of the call's session: the script's group, and each `timeout`'s own (Linux /proc)."""
    os.killpg(sid, signal.SIGKILL)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            if int(stat.read_text().rsplit(")", 1)[1].split()[3]) == sid:
                os.kill(int(stat.parent.name), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass


def _finish(proc, started, budget):
    """(exit status, output); a call still running at budget + SLACK is killed: status None."""
    try:
        out, _ = proc.communicate(timeout=max(0.0, started + budget + SLACK - time.time()))
    except subprocess.TimeoutExpired:
        _kill_session(proc.pid)
        out, _ = proc.communicate()
        return None, f"still running {budget + SLACK} s after a {budget}-s budget:\n{out}"
    return proc.returncode, out


def _limits(tmp, started):
    """(seconds into the call, limit, command) of every `timeout [-k GRACE] LIMIT COMMAND ...` the call ran."""
    found = []
    for line in (tmp / "timeouts.txt").read_text().splitlines():
        when, *words = line.split()
        if words[0] == "-k":
            words = words[2:]
        found.append((float(when) - started, float(words[0]), " ".join(os.path.basename(w) for w in words[1:5])))
    return found


def test_small_budgets_end_on_time_with_capped_or_skipped_steps(tmp_path, stubs):
    """Before the caps, each step took its own limit whatever was left: the GPU check 30 s (nvidia-smi) + 120 s
    (torch), the CUDA tests 90 + 5 s and ClientOptimizer's 30 + 5 s, each bench step BENCH_LIMIT. Here a 30-s call
    whose GPU check hangs took ~150 s, a 40-s call whose CUDA tests hang ~130 s, a 45-s call with four 20-s bench
    steps that hang ~80 s."""
    calls = {
        "gpu": (30, "*", dict(STUB_SLOW_SMI="1")),
        "tests": (40, "*-m pytest*", dict(SKIP_BENCH="1", SKIP_TABLE1="1")),
        "bench": (45, "*fedlib bench*", dict(RUN_CUDA_TESTS="0", SKIP_TABLE1="1", BENCH_LIMIT="20",
                                            BENCH_MODES="graph eager profile compare")),
    }
    running = {name: (budget, *_start(stubs, tmp_path / name, budget, slow, **extra))
               for name, (budget, slow, extra) in calls.items()}
    done = {name: _finish(proc, started, budget) for name, (budget, proc, started) in running.items()}
    assert all(status is not None for status, _ in done.values()), done
    for name, (status, out) in done.items():
        budget, _, started = running[name]
        limits = _limits(tmp_path / name, started)
        assert limits and all(limit >= 1 for _, limit, _ in limits), (name, limits, out)
        # every step, killed at its limit plus the 5-s grace, ends within the budget (a second or two of slack for
        # the seconds the script counts in whole numbers from after its checks)
        late = [(round(at), limit, command) for at, limit, command in limits if at + limit + 5 > budget + 2]
        assert not late, (name, late, out)
        assert status == (3 if name == "gpu" else 0), (name, out)
    assert "no time for the GPU check, stopping" in done["gpu"][1]
    assert "CUDA tests of ClientOptimizer skipped" in done["tests"][1]
    bench_log = done["bench"][1]
    assert "bench cifar10 with CUDA graphs, limit 20s" in bench_log
    assert "the profile skipped" in bench_log and "the compare bench skipped" in bench_log, bench_log


def test_a_normal_budget_keeps_every_limit(tmp_path, stubs):
    """With a 555-s budget (NOTES.md's Table 1 call) nothing is capped: nvidia-smi 30 s, torch's check 120 s, the
    CUDA tests 90 s and 30 s, each of the four bench steps a sixth of the budget (92 s), Table 1 what is left less
    10 s. The stubs exit at once."""
    proc, started = _start(stubs, tmp_path / "call", 555, "", BENCH_MODES="graph eager profile compare")
    status, out = _finish(proc, started, 555)
    assert status == 0, out
    limits = _limits(tmp_path / "call", started)
    # (the two short checks, pytest's import and the rate read from the bench's file, got 30 s each)
    short = [limit for _, limit, command in limits if re.search(r"-c import (pytest|json)", command)]
    steps = [limit for _, limit, command in limits if not re.search(r"-c import (pytest|json)", command)]
    assert all(limit == 30 for limit in short) and steps[:8] == [30, 120, 90, 30, 92, 92, 92, 92], limits
    assert len(steps) == 9 and 555 - 10 - 5 <= steps[8] <= 555 - 10, limits  # Table 1's hard limit
    assert re.search(r"table1 --budget-seconds \d+ ", out)
