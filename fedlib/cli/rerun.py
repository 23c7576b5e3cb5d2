"""``python -m fedlib rerun RESULT.json [--out NEW.json]``: rerun a result from its config and compare.

Every ``run synthetic`` result records its resolved configuration (``config``), seed,
git commit and command line (``provenance``). ``rerun`` turns the config back into
flags, runs it again (one process, whatever ``world_size`` the original used) and
compares the two histories round by round (every field but ``time_s``; numbers to
``--tol``, default 1e-12): exit status 0 when they match, 1 with the first differing
round and field, 2 for a bad input (unreadable result, a kind of result it cannot rerun).
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

from .common import CLIError, HelpFormatter

__all__ = ["add_rerun_parser", "rerun_command", "argv_from_config", "compare_histories"]

RERUNNABLE = ("synthetic-logistic", "leaf-logistic")
_FLAGS = ("algorithm", "solver", "lr", "lr_decay", "mu", "momentum", "weight_decay", "tau_eff", "server",
          "server_momentum", "server_lr", "rounds", "epochs", "batch_size", "sampling", "clients_per_round", "seed",
          "engine", "backend", "l2")


def add_rerun_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("rerun", help="rerun a result file from its config and check the history matches",
                       description=__doc__.split("\n\n", 1)[1], formatter_class=HelpFormatter)
    p.add_argument("result", type=Path, help="a result JSON written by python -m fedlib run synthetic")
    p.add_argument("--out", type=Path, default=None, help="keep the new result here (default: not kept)")
    p.add_argument("--tol", type=float, default=1e-12, help="largest allowed absolute difference of a number")
    p.add_argument("--quiet", action="store_true", help="print only the verdict")
    p.set_defaults(handler=rerun_command)
    return p


def argv_from_config(config: dict) -> list:
    """``run synthetic`` flags reproducing ``config`` (a result's ``config``)."""
    problem = config.get("problem")
    if problem not in RERUNNABLE:
        raise CLIError(f"rerun: config.problem is {problem!r}; rerun supports {list(RERUNNABLE)} results "
                       "(CIFAR-10: rerun the cell with python -m fedlib table1 / run cifar10)")
    data = config.get("data") or {}
    argv = ["run", "synthetic"]
    if problem == "leaf-logistic":
        argv += ["--data", str(data["source"]), "--num-classes", str(data["num_classes"])]
    else:
        argv += ["--alpha", repr(data["alpha"]), "--beta", repr(data["beta"]), "--num-clients",
                 str(data["num_clients"]), "--data-seed", str(data["data_seed"]), "--num-classes",
                 str(data["num_classes"])]
    for name in _FLAGS:
        value = config.get(name)
        if value is None:
            continue
        argv += ["--" + name.replace("_", "-"), repr(value) if isinstance(value, float) else str(value)]
    if config.get("backend") == "torch" and config.get("device"):
        argv += ["--device", str(config["device"])]
    return argv


def _diff(a: Any, b: Any, tol: float) -> Optional[str]:
    if isinstance(a, bool) or isinstance(b, bool) or a is None or b is None or isinstance(a, str):
        return None if a == b else f"{a!r} != {b!r}"
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= tol):
            return None
        return f"{a!r} != {b!r} (difference {abs(a - b):.3g})"
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"lengths {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = _diff(x, y, tol)
            if d is not None:
                return f"[{i}]: {d}"
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"key {k!r} only in one"
            d = _diff(a[k], b[k], tol)
            if d is not None:
                return f".{k}{d if d.startswith('[') else ': ' + d}"
        return None
    return None if a == b else f"{a!r} != {b!r}"


def compare_histories(old: list, new: list, tol: float = 1e-12, ignore=("time_s",)) -> Optional[str]:
    """``None`` when the histories match, else ``"round R, field F: ..."`` (the first difference)."""
    if len(old) != len(new):
        return f"{len(old)} rounds recorded, the rerun has {len(new)}"
    for a, b in zip(old, new):
        for key in [k for k in a if k not in ignore] + [k for k in b if k not in a and k not in ignore]:
            if key not in a or key not in b:
                return f"round {a.get('round')}, field {key}: only in one history"
            d = _diff(a[key], b[key], tol)
            if d is not None:
                return f"round {a.get('round')}, field {key}: {d}"
    return None


def rerun_command(args: argparse.Namespace) -> int:
    from ..results import git_commit, read_result
    from . import main

    old = read_result(args.result)
    if old.get("kind") != "run" or not old.get("history"):
        raise CLIError(f"rerun: {args.result} is not a run result with a history")
    argv = argv_from_config(old["config"])
    sha, _ = git_commit()
    prov = old["provenance"]
    if not args.quiet:
        print(f"rerunning {args.result} (seed {old['config'].get('seed')}, commit {prov.get('git_commit')}, "
              f"command: {prov.get('command')})", flush=True)
        if prov.get("git_commit") not in (None, "unknown", sha):
            print(f"note: the result was made at commit {prov.get('git_commit')}, this checkout is {sha}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out if args.out is not None else Path(tmp) / "rerun.json"
        status = main(argv + ["--out", str(out), "--quiet"])
        if status != 0:
            print(f"rerun: the rerun failed (exit status {status})", file=sys.stderr)
            return status
        new = read_result(out)
    diff = compare_histories(old["history"], new["history"], args.tol)
    if diff is None:
        print(f"match: {len(new['history'])} rounds equal to {args.tol:g}"
              + (f"; wrote {args.out}" if args.out is not None else ""))
        return 0
    print(f"MISMATCH: {diff}" + (f"; wrote {args.out}" if args.out is not None else ""))
    return 1
