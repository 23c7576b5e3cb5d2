"""scripts/gpu_run.sh ends on its own within its budget: every step's `timeout` is capped at what is left of the
budget (less a margin), a step with too little left is skipped, and no `timeout` gets 0 (no limit) or less.

The steps are stubs on PATH (``python``, ``nvidia-smi``) that sleep until killed where a call's ``STUB_SLOW`` pattern
matches their arguments, else exit 0 at once. DEVICE=cuda, so the GPU check and the CUDA tests run (as stubs).
The small budgets run on tests/gpu_script.py's virtual clock: ``date +%s`` reads $CLOCK, and its ``timeout`` stub
records each limit and moves the clock by a hanging step's limit plus the kill grace (the most the real ``timeout
-k`` lets it run) instead of waiting; a step the script ran without ``timeout`` still sleeps for real, and is caught by
the wall-clock bound. The normal budget's stubs exit at once, under a ``timeout`` wrapper that records each limit
before running the real one. Only upper bounds on time are asserted, with several seconds to spare (the header
promises BUDGET_SECONDS plus a few seconds)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from gpu_script import gpu_run_call, stub_timeouts, write_clock_stubs

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


#: the virtual clock's ``date +%s``: the seconds in $CLOCK, which move only when a step spends time (a frozen clock: the
#: limits below do not depend on how loaded the machine is)
_FROZEN_DATE = '#!/bin/bash\nif [ "$*" = +%s ]; then cat "$CLOCK"; else exec REAL_DATE "$@"; fi\n'
_T0 = 1000000  # the clock's second when a call starts


def _start_on_the_clock(tmp, budget, slow, **extra):
    """Start gpu_run.sh (DEVICE=cuda) on the virtual clock: every ``timeout`` whose command matches the glob ``slow``
    hangs (the clock moves by its limit plus its grace, exit 124); python and nvidia-smi run outside a ``timeout``
    sleep for real where :func:`stubs`' would. (process, its start on the wall clock)."""
    tmp.mkdir()
    stubs = write_clock_stubs(tmp / "stubs", _FROZEN_DATE)
    for name, text in {"python": '#!/bin/bash\ncase "$*" in $STUB_SLOW) exec sleep 200;; esac\nexit 0\n',
                       "nvidia-smi": '#!/bin/bash\n[ "${STUB_SLOW_SMI:-0}" = 1 ] && exec sleep 200\nexit 0\n'}.items():
        (stubs / name).write_text(text)
    (tmp / "clock").write_text(f"{_T0}\n")
    (tmp / "start").write_text(f"{_T0}\n")
    (tmp / "timeouts.txt").write_text("")
    env = dict(DEVICE="cuda", PYTHON=str(stubs / "python"), PATH=f"{stubs}{os.pathsep}{os.environ['PATH']}",
               STUB_SLOW=slow, STUB_STEPS=f"{slow}=hang", CLOCK=str(tmp / "clock"), START_FILE=str(tmp / "start"),
               STUB_TIMEOUTS=str(tmp / "timeouts.txt"), **extra)
    cmd, env = gpu_run_call(tmp / "out", tmp / "results", budget=budget, **env)
    started = time.time()
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True), started


def test_small_budgets_end_on_time_with_capped_or_skipped_steps(tmp_path):
    """Before the caps, each step took its own limit whatever was left: the GPU check 30 s (nvidia-smi) + 120 s
    (torch), the CUDA tests 90 + 5 s and ClientOptimizer's 30 + 5 s, each bench step BENCH_LIMIT. Here a 30-s call
    whose GPU check hangs took ~150 s, a 40-s call whose CUDA tests hang ~130 s, a 45-s call with four 20-s bench
    steps that hang ~80 s. On the virtual clock (a hanging step costs its limit plus the 5-s grace, no real
    waiting: ~30 s of sleeping before), which also pins each call's steps and limits."""
    calls = {
        "gpu": (30, "*", dict(STUB_SLOW_SMI="1")),
        "tests": (40, "*-m pytest*", dict(SKIP_BENCH="1", SKIP_TABLE1="1")),
        "bench": (45, "*fedlib bench*", dict(RUN_CUDA_TESTS="0", SKIP_TABLE1="1", BENCH_LIMIT="20",
                                            BENCH_MODES="graph eager profile compare")),
    }
    smi, torch_check = "nvidia-smi", "python -c import torch,"
    # (second, limit, command) of each ``timeout``: what is left less 10 s where that is under the step's own limit;
    # a hanging step moves the clock by its limit plus 5 s, and what is then left is under every floor
    expected = {"gpu": [(0, 20, smi)],
                "tests": [(0, 30, smi), (0, 30, torch_check), (0, 30, "python -c import pytest"),
                          (0, 30, "python -m pytest -q")],
                "bench": [(0, 30, smi), (0, 35, torch_check), (0, 20, "python -m fedlib bench")]}
    running = {name: (budget, *_start_on_the_clock(tmp_path / name, budget, slow, **extra))
               for name, (budget, slow, extra) in calls.items()}
    done = {name: _finish(proc, started, budget) for name, (budget, proc, started) in running.items()}
    assert all(status is not None for status, _ in done.values()), done
    for name, (status, out) in done.items():
        budget = running[name][0]
        tmp = tmp_path / name
        limits = [(at, limit, " ".join(os.path.basename(w) for w in words[:4]))
                  for at, _, limit, words in stub_timeouts(tmp / "timeouts.txt")]
        assert limits and all(limit >= 1 for _, limit, _ in limits), (name, limits, out)
        assert limits == expected[name], (name, limits, out)
        # every step, killed at its limit plus the 5-s grace, ends within the budget (a second or two of slack for
        # the seconds the script counts in whole numbers from after its checks)
        late = [(at, limit, command) for at, limit, command in limits if at + limit + 5 > budget + 2]
        assert not late, (name, late, out)
        assert status == (3 if name == "gpu" else 0), (name, out)
        # the call ends on its own within its budget on the virtual clock too
        assert int((tmp / "clock").read_text()) - _T0 <= budget + SLACK, (name, limits, out)
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
