"""``python -m fedlib rerun RESULT.json [--out NEW.json]``: rerun a result from its config and compare.

Every ``run synthetic`` result records its resolved configuration (``config``), seed,
git commit and command line (``provenance``). ``rerun`` turns the config back into
flags, runs it again (one process, whatever ``world_size`` the original used) and
compares the two results: ``config``, ``initial``, ``history`` (round by round) and
``summary``; numbers to ``--tol`` (default 1e-12: relative above 1 in magnitude, absolute
below), everything else exactly. Ignored:
what differs between two runs of the same config — the wall-clock and speed fields
(history ``time_s``; summary seconds and images per second),
``config.world_size`` (the number of processes) and ``config.data.name`` (a LEAF
path as typed). Before the run it notes what may make the code differ: another commit than the
result's, uncommitted changes when the result was made (``provenance.git_dirty``) or in this
checkout. Exit status 0 when they match; 1 (MISMATCH) with the first
difference of each part that differs, config first, then initial, history, summary (a ``--data``
file whose contents are not the result's, ``config.data.sha256``, is a MISMATCH found before the run, and nothing
runs);
2 for a bad input (unreadable result, a kind of result it cannot rerun, a recorded
config that lacks a key or holds an invalid value, --out naming the result itself, a GPU
result where torch sees no GPU); 130 when interrupted (Ctrl-C), said once, as rerun's: with nothing written, or
naming the --out file where the run had written it before the comparison was done.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import math
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

from .common import CLIError, HelpFormatter, check_output_path, nonneg_float, same_file, user_path
from .synthetic import _by_contents

__all__ = ["add_rerun_parser", "rerun_command", "argv_from_config", "compare_histories", "compare_results",
           "CONFIG_IGNORED", "SUMMARY_IGNORED", "HISTORY_IGNORED"]

RERUNNABLE = ("synthetic-logistic", "leaf-logistic")
_FLAGS = ("algorithm", "solver", "lr", "lr_decay", "mu", "momentum", "weight_decay", "tau_eff", "server",
          "server_momentum", "server_lr", "rounds", "epochs", "batch_size", "sampling", "clients_per_round", "seed",
          "engine", "backend", "l2")
#: the ``_FLAGS`` that ``run synthetic`` records as null when the flag is unused (any other null is invalid).
_NULLABLE = ("mu", "momentum", "tau_eff", "server_momentum", "server_lr", "clients_per_round")
#: ``config.data`` keys turned into flags, per problem: (key, flag).
_DATA_FLAGS = {
    "synthetic-logistic": (("alpha", "alpha"), ("beta", "beta"), ("num_clients", "num-clients"),
                           ("data_seed", "data-seed"), ("num_classes", "num-classes")),
    "leaf-logistic": (("source", "data"), ("num_classes", "num-classes")),
}

#: ``config`` keys (dotted paths) not compared, as they describe how the run was started, not
#: what it computed: ``world_size``, the number of torch.distributed processes (the rerun uses
#: one); ``data.name``, a LEAF data set's label, the ``--data`` path as typed (the rerun passes
#: ``config.data.source``). ``data.source`` itself is compared as a resolved path (an older
#: result may record it relative to the folder it was run from, which is where rerun reads it).
CONFIG_IGNORED = ("world_size", "data.name")
#: top-level ``summary`` keys not compared: wall-clock and speed measurements (and how many
#: runs shared the timed group), which differ between two runs of the same config.
SUMMARY_IGNORED = ("seconds_per_round", "seconds_per_run", "seconds_per_run_round", "group_seconds",
                   "images_per_second", "runs_in_group")
#: per-round ``history`` fields not compared: the round's wall-clock time.
HISTORY_IGNORED = ("time_s",)


def add_rerun_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("rerun", help="rerun a result file from its config and check the result matches",
                       description=__doc__.split("\n\n", 1)[1], formatter_class=HelpFormatter)
    p.add_argument("result", type=user_path, help="a result JSON written by python -m fedlib run synthetic")
    p.add_argument("--out", type=user_path, default=None,
                   help="keep the new result here (default: not kept); must not be the result being checked")
    p.add_argument("--tol", type=nonneg_float, default=1e-12,
                   help="largest allowed difference of two numbers a, b relative to max(1, |a|, |b|) "
                        "(relative above 1, absolute below; a finite number >= 0)")
    p.add_argument("--data", type=user_path, default=None,
                   help="a LEAF result's data read from here instead of its config.data.source (the file moved, or "
                        "this machine keeps it elsewhere); its contents must be the result's (config.data.sha256, "
                        "compared with the rest of the config)")
    p.add_argument("--quiet", action="store_true", help="print only the verdict")
    p.add_argument("--progress", action="store_true",
                   help="show the rerun's progress bar even when stderr is not a terminal (never with --quiet)")
    p.set_defaults(handler=rerun_command)
    return p


# ----------------------------------------------------------------------------- config -> flags
def _flag_value(value: Any, path: str) -> str:
    """``value`` (a recorded config value at ``path``) as a flag's text; floats by ``repr``
    so that they round-trip exactly. Raises :class:`CLIError` for a non-scalar."""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return str(value)
    raise CLIError(f"the recorded config is invalid: {path} must be a string or a number, "
                   f"got {value!r}")


def _flags_from_config(config: dict) -> list:
    """``[(flag, text, config path)]`` of the ``run synthetic`` flags reproducing ``config``.

    Raises :class:`CLIError` naming the config key when the problem is not rerunnable, when
    a key rerun needs is missing, or when its value is null (where null is not allowed) or
    not a string or number."""
    problem = config.get("problem")
    if problem not in RERUNNABLE:
        raise CLIError(f"config.problem is {problem!r}; rerun supports {list(RERUNNABLE)} results "
                       "(CIFAR-10: rerun the cell with python -m fedlib table1 / run cifar10)")
    data = config.get("data")
    if "data" not in config:
        raise CLIError("the recorded config lacks config.data, which rerun needs")
    if not isinstance(data, dict):
        got = "null" if data is None else repr(data)
        raise CLIError(f"the recorded config is invalid: config.data must be an object, got {got}")
    flags = []
    for key, flag in _DATA_FLAGS[problem]:
        path = f"config.data.{key}"
        if key not in data:
            raise CLIError(f"the recorded config lacks {path}, which rerun needs for a {problem} result")
        if data[key] is None:
            raise CLIError(f"the recorded config is invalid: {path} is null")
        flags.append((flag, _flag_value(data[key], path), path))
    for name in _FLAGS:
        path = f"config.{name}"
        if name not in config:
            raise CLIError(f"the recorded config lacks {path}, which rerun needs "
                           "(run synthetic records every flag, null when unused)")
        value = config[name]
        if value is None:
            if name not in _NULLABLE:
                raise CLIError(f"the recorded config is invalid: {path} is null")
            continue
        flags.append((name.replace("_", "-"), _flag_value(value, path), path))
    if config.get("backend") == "torch":
        if config.get("device") is None:
            raise CLIError("the recorded config lacks config.device, which rerun needs for --backend torch")
        flags.append(("device", _flag_value(config["device"], "config.device"), "config.device"))
    return flags


def argv_from_config(config: dict) -> list:
    """``run synthetic`` arguments reproducing ``config`` (a result's ``config``), each flag
    as ``--name=value`` (so that a value starting with ``-`` stays the flag's value).

    Raises :class:`CLIError` naming the config key when a key rerun needs is missing or
    invalid (see ``_flags_from_config``); values are checked by the parser later."""
    return _argv(_flags_from_config(config))


def _argv(flags: list) -> list:
    return ["run", "synthetic"] + [f"--{flag}={text}" for flag, text, _ in flags]


def _check_argv(argv: list, paths: dict) -> None:
    """Parse ``argv`` with the ``run synthetic`` parser; a value it refuses raises
    :class:`CLIError` ("the recorded config is invalid: config.KEY (--flag): why") instead
    of argparse's usage message and ``SystemExit``. ``paths``: flag -> config path."""
    from . import build_parser

    parser = build_parser(("run", "synthetic"))
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(argv)
    except SystemExit:
        lines = [ln for ln in err.getvalue().splitlines() if ": error: " in ln]
        why = lines[-1].split(": error: ", 1)[1] if lines else err.getvalue().strip() or "refused by run synthetic"
        m = re.match(r"argument (--[\w-]+)(?:/[^:]*)?: (.*)", why)
        if m and m.group(1) in paths:
            why = f"{paths[m.group(1)]} ({m.group(1)}): {m.group(2)}"
        raise CLIError(f"the recorded config is invalid: {why}") from None


def _data_mismatch(argv: list, config: dict) -> Optional[str]:
    """``"config.data.sha256: 'OLD' != 'NEW'"`` when the ``--data`` file that ``argv`` (the rerun's ``run synthetic``
    arguments) reads holds other contents than the result's, else ``None``; checked before anything runs (the
    rerun would take as long as the recorded run, only to report this). Data the run cannot read are left to the
    run, whose error says why; a result of generated data, or one that records no SHA-256, gives ``None``."""
    data = config.get("data")
    if not (isinstance(data, dict) and isinstance(data.get("sha256"), str)):
        return None
    from . import build_parser
    from .synthetic import load_dataset

    try:
        contents = load_dataset(build_parser(("run", "synthetic")).parse_args(argv)).sha256()
    except (CLIError, ValueError, OSError):
        return None
    return None if contents == data["sha256"] else f"config.data.sha256: {data['sha256']!r} != {contents!r}"


# ----------------------------------------------------------------------------- comparison
def _first_difference(a: Any, b: Any, tol: float, path: str) -> Optional[str]:
    r"""``None`` when ``a`` (recorded) and ``b`` (rerun) match, else ``"PATH: why"`` for the
    first difference in key order / list order. Numbers (int or float, not bool) match when
    :math:`|a - b| \le` ``tol`` :math:`\cdot\max(1, |a|, |b|)` (relative for large numbers, where
    summing in another order moves the last digits: 25000.000000000004 against 25000.0 is one
    ulp; absolute near 0, where a relative test would fail on rounding noise); anything else
    (strings, bools, null, types) exactly."""
    num_a = isinstance(a, (int, float)) and not isinstance(a, bool)
    num_b = isinstance(b, (int, float)) and not isinstance(b, bool)
    if num_a and num_b:
        if a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= tol * max(1.0, abs(a), abs(b))):
            return None
        return f"{path}: {a!r} != {b!r} (difference {abs(a - b):.3g})"
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            d = _first_difference(x, y, tol, f"{path}[{i}]")
            if d is not None:
                return d
        return None
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            sub = f"{path}.{key}" if path else str(key)
            if key not in b:
                return f"{sub}: only in the recorded result ({a[key]!r})"
            if key not in a:
                return f"{sub}: only in the rerun ({b[key]!r})"
            d = _first_difference(a[key], b[key], tol, sub)
            if d is not None:
                return d
        return None
    if type(a) is not type(b) or a != b:
        return f"{path}: {a!r} != {b!r}"
    return None


def compare_histories(old: list, new: list, tol: float = 1e-12, ignore=HISTORY_IGNORED) -> Optional[str]:
    """``None`` when the histories match, else ``"round R, field F (history[i].F...): ..."``
    (the first difference; fields in ``ignore`` are skipped)."""
    if len(old) != len(new):
        return f"history: {len(old)} rounds recorded, the rerun has {len(new)}"
    for i, (a, b) in enumerate(zip(old, new)):
        for key in [k for k in a if k not in ignore] + [k for k in b if k not in a and k not in ignore]:
            where = f"round {a.get('round')}, field {key}"
            if key not in b:
                return f"{where} (history[{i}].{key}): only in the recorded history"
            if key not in a:
                return f"{where} (history[{i}].{key}): only in the rerun's history"
            d = _first_difference(a[key], b[key], tol, f"history[{i}].{key}")
            if d is not None:
                at, why = d.split(": ", 1)
                return f"{where} ({at}): {why}"
    return None


def _without(value: Any, ignore) -> Any:
    """``value`` without the dotted paths ``ignore`` (``"a.b"``: key ``b`` of the object under ``a``)."""
    if not isinstance(value, dict):
        return value
    out = {k: v for k, v in value.items() if k not in ignore}
    for path in ignore:
        head, _, rest = path.partition(".")
        if rest and isinstance(out.get(head), dict):
            out[head] = _without(out[head], (rest,))
    return out


def _comparable_config(config: Any) -> Any:
    """``config`` without :data:`CONFIG_IGNORED`, with ``data.source`` resolved to an absolute path."""
    out = _without(config, CONFIG_IGNORED)
    data = out.get("data") if isinstance(out, dict) else None
    if isinstance(data, dict) and isinstance(data.get("source"), str):
        out["data"] = {**data, "source": os.fspath(Path(data["source"]).expanduser().resolve())}
    return out


def _data_source_flags(flags: list, config: dict, data: Optional[Path], result: Path) -> list:
    """``flags`` with ``--data`` at ``data`` when given; refused (:class:`CLIError`) where that cannot be checked or
    the recorded ``config.data.source`` is missing on this machine (the run's own error named a ``--data`` flag that
    the user never typed)."""
    at = [i for i, (flag, _, _) in enumerate(flags) if flag == "data"]
    if data is not None:
        if not at:
            raise CLIError(f"--data: {result} trained on generated data (config.problem {config.get('problem')!r}), "
                           "read from no file; drop --data")
        if not Path(data).exists():  # before anything runs (the run's own error came after 'rerunning ...')
            raise CLIError(f"--data {data}: no such file or folder")
        if "sha256" not in config["data"]:
            raise CLIError(f"--data: {result} records no config.data.sha256 (an older result), so the contents of "
                           f"{data} cannot be checked against its data; rerun it with the file at its "
                           f"config.data.source")
        flag, _, path = flags[at[0]]
        return flags[:at[0]] + [(flag, os.fspath(data), path)] + flags[at[0] + 1:]
    if at:
        source = Path(flags[at[0]][1]).expanduser()
        if not source.exists():
            raise CLIError(f"{result} read its data from {source} (config.data.source), which does not exist on "
                           "this machine; give the file's copy with --data PATH (its contents are checked against "
                           "config.data.sha256)")
    return flags


def compare_results(old: dict, new: dict, tol: float = 1e-12, data_elsewhere: bool = False) -> list:
    """The first difference of each part that differs, in the order config, initial,
    history, summary (empty when the results match): ``config.data.num_samples[0]: 999 != 55``,
    ``initial.train_loss: ...``, ``round R, field F (history[i].F): ...``,
    ``summary.final_test_accuracy: ...``. Numbers match to ``tol``, the rest exactly;
    :data:`CONFIG_IGNORED`, :data:`SUMMARY_IGNORED` and :data:`HISTORY_IGNORED` are skipped
    (``config.data.source`` is compared resolved; with ``data_elsewhere``, ``rerun --data``, it is skipped and the
    data compared by its ``sha256``)."""
    diffs = []
    for name in ("config", "initial", "history", "summary"):
        if name not in old or name not in new:
            if (name in old) != (name in new):
                diffs.append(f"{name}: only in the {'recorded result' if name in old else 'rerun'}")
            continue
        if name == "history":
            d = compare_histories(old["history"], new["history"], tol)
        elif name == "config":
            o, n = _comparable_config(old[name]), _comparable_config(new[name])
            if data_elsewhere and isinstance(o.get("data"), dict) and isinstance(n.get("data"), dict):
                o, n = _by_contents(o), _by_contents(n)  # the data by its SHA-256, as --resume compares it
            d = _first_difference(o, n, tol, name)
        else:
            ignore = SUMMARY_IGNORED if name == "summary" else ()
            d = _first_difference(_without(old[name], ignore), _without(new[name], ignore), tol, name)
        if d is not None:
            diffs.append(d)
    return diffs


def _file_state(path: Optional[Path]) -> Optional[tuple]:
    """What tells a file written since (atomic_write replaces it: another inode, time or size), ``None`` where there is
    none."""
    try:
        st = os.stat(path)
    except (OSError, TypeError):
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size


# ----------------------------------------------------------------------------- command
def rerun_command(args: argparse.Namespace) -> int:
    from ..results import git_commit, read_result
    from . import _nested, main

    if args.out is not None:
        if same_file(args.out, args.result):
            raise CLIError(f"--out {args.out}: is the result being checked ({args.result}); "
                           "give another file name (the rerun would overwrite it)")
        check_output_path(args.out)
    old = read_result(args.result)
    if old.get("kind") != "run" or not old.get("history"):
        raise CLIError(f"{args.result} is not a run result with a history")
    flags = _data_source_flags(_flags_from_config(old["config"]), old["config"], args.data, args.result)
    argv = _argv(flags)
    _check_argv(argv, {"--" + flag: path for flag, _, path in flags})
    differ = _data_mismatch(argv, old["config"])
    if differ is not None:
        print(f"MISMATCH: {differ} (the data file's contents are not the result's, so nothing was rerun"
              + (f" and nothing written to {args.out})" if args.out is not None else ")"))
        return 1
    sha, dirty = git_commit()
    prov = old["provenance"]
    device = str(old["config"].get("device"))
    if old["config"].get("backend") == "torch" and device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():  # the run's own error named a --device flag that rerun does not have
            raise CLIError(f"{args.result} ran on the GPU (config.device {device}, {prov.get('device')}), but torch "
                           "sees no GPU on this machine; rerun it where torch sees a CUDA GPU")
    if not args.quiet:
        print(f"rerunning {args.result} (seed {old['config'].get('seed')}, commit {prov.get('git_commit')}, "
              f"command: {prov.get('command')})", flush=True)
        if prov.get("git_commit") not in (None, "unknown", sha):
            print(f"note: the result was made at commit {prov.get('git_commit')}, this checkout is {sha}", flush=True)
        # a mismatch may come from code that no commit holds: say so before the verdict, on either side
        if prov.get("git_dirty") is True:
            print("note: the result was made with uncommitted changes to tracked files (provenance git_dirty), so its "
                  "code is not exactly its commit's", flush=True)
        if dirty is True:
            print(f"note: this checkout has uncommitted changes to tracked files (git status), so the rerun's code is "
                  f"not exactly commit {sha}", flush=True)
    before = _file_state(args.out)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out = args.out if args.out is not None else Path(tmp) / "rerun.json"
            # the run's own progress bar (stderr) on a terminal or with --progress; its other lines are not
            # the rerun's to print
            show_bar = not args.quiet and (args.progress or sys.stderr.isatty())
            # --quiet prints only the verdict: the run's warnings (stderr) are kept back, shown only if it fails
            held = io.StringIO()
            # a Ctrl-C goes through the run (_nested) to fedlib.cli.main's report for rerun: "interrupted", 130
            try:
                with contextlib.redirect_stdout(io.StringIO()) if show_bar else contextlib.nullcontext(), \
                        contextlib.redirect_stderr(held) if args.quiet else contextlib.nullcontext(), _nested():
                    status = main(argv + ["--out", str(out), "--progress" if show_bar else "--quiet"])
            except SystemExit as exc:  # argparse: _check_argv accepted these flags, so this is not expected
                sys.stderr.write(held.getvalue())
                raise CLIError(f"the recorded config is invalid: run synthetic refused its flags "
                               f"(exit status {exc.code}): {' '.join(argv[2:])}") from None
            if status != 0:
                sys.stderr.write(held.getvalue())
                print(f"rerun: the rerun of the recorded config failed (exit status {status}; see the error above)",
                      file=sys.stderr)
                return status
            new = read_result(out)
        diffs = compare_results(old, new, args.tol, data_elsewhere=args.data is not None)
    except KeyboardInterrupt:  # said by fedlib.cli.main, naming the --out file if the run had written it
        if args.out is not None and _file_state(args.out) != before:
            args.written = args.out
        raise
    wrote = f"; wrote {args.out}" if args.out is not None else ""
    if not diffs:
        n = len(new["history"])
        print(f"match: {n} round{'' if n == 1 else 's'}, initial, summary and config equal to {args.tol:g}" + wrote)
        return 0
    print("MISMATCH: " + "; ".join(diffs) + wrote)
    return 1
