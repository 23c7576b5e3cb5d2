"""``python -m fedlib``: the command line.

::

    python -m fedlib run synthetic [flags]      # one run on Synthetic(alpha, beta) or a LEAF file
    python -m fedlib bench synthetic [flags]    # batched engine vs the per-client loop
    python -m fedlib <command> --help           # every flag, with its default

Commands are registered in :data:`COMMANDS` as ``"module:function"`` strings; the
function receives the ``argparse`` sub-parsers object of its group, adds its parser
(flags from :mod:`fedlib.cli.common`) and sets ``handler=`` (``args -> exit status``).
A module that does not exist (yet) is skipped, so new commands — ``run cifar10``,
``bench cifar10``, ``table1``, ``rerun`` — plug in by adding their module.

Exit status: 0 on success; 2 for bad input — an unknown or malformed flag, an impossible
flag combination (:class:`fedlib.cli.common.CLIError`), a missing or malformed data
file (``ValueError`` naming the file), a diverged run
(:class:`fedlib.engines.batched.DivergenceError`, naming the round), values too large for
this machine (its memory, or a container's or batch job's smaller limit, the message names which, or the
process's own, ``ulimit -v``; or 64-bit integers), an output flag whose folder takes no new file (checked before
the run by creating one) — with the message on stderr and no output file; 1 for an unexpected internal error
(traceback); 130 when interrupted (Ctrl-C) — the message names the run's checkpoint file when one exists
(``--checkpoint-every``), to continue with ``--resume``; ``rerun``'s, said once, names its ``--out``
file where its run had written it.

Under ``torchrun`` with more than one process only ``run synthetic`` runs (its clients split across the
ranks, :mod:`fedlib.distributed`); any other command is refused with status 2 on every rank, which would each
run it whole and write the same files.

Warnings of fedlib's own (e.g. the git checkout changed during a run) print as one line, ``warning: ...``;
other libraries' warnings as Python prints them.

Provenance: a result records the command ``python -m fedlib <argv>`` when :func:`main`
is given ``argv`` (a script, a test, ``rerun``), else the process's ``sys.argv``.
"""
from __future__ import annotations

import argparse
import contextlib
import contextvars
import difflib
import importlib
import os
import sys
import warnings
from pathlib import Path
from typing import Optional, Sequence

__all__ = ["COMMANDS", "build_parser", "main"]

#: True while a command runs another through :func:`fedlib.cli.main` (``rerun``'s ``run synthetic``, in
#: ``_nested()``): the inner one lets a Ctrl-C through, for the outer one to say once, as its own, that it was
#: interrupted.
_NESTED: contextvars.ContextVar = contextvars.ContextVar("fedlib_cli_nested", default=False)


@contextlib.contextmanager
def _nested():
    """Within it, :func:`fedlib.cli.main` raises ``KeyboardInterrupt`` on instead of printing "interrupted" and
    returning 130."""
    token = _NESTED.set(True)
    try:
        yield
    finally:
        _NESTED.reset(token)


#: group -> {name: "module:function adding the parser"}; "" is the top level.
COMMANDS = {
    "run": {
        "synthetic": "fedlib.cli.synthetic:add_run_parser",
        "cifar10": "fedlib.cli.cifar10:add_run_parser",
    },
    "bench": {
        "synthetic": "fedlib.cli.synthetic:add_bench_parser",
        "cifar10": "fedlib.cli.cifar10:add_bench_parser",
    },
    "": {
        "table1": "fedlib.cli.cifar10:add_table1_parser",
        "rerun": "fedlib.cli.rerun:add_rerun_parser",
    },
}

_GROUP_HELP = {
    "run": "train one configuration and write its per-round history",
    "bench": "measure the speed of the engines",
}


def _load(spec: str):
    module_name, func = spec.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name == module_name:  # not written yet: skip; a broken import inside it still raises
            return None
        raise
    return getattr(module, func, None)


def _subparsers_of(parser: argparse.ArgumentParser):
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _value_names(action: argparse.Action) -> list:
    """The names of the values a positional argument takes, as its usage shows them: its
    ``metavar`` (a tuple names each of ``nargs`` values), its choices (``{a,b}``) or ``dest``, once
    per value. A positional of no fixed count (``nargs`` ``'?'``, ``'*'``, ``'+'``) is one entry, as
    its usage writes it (``[x]``, ``x [x ...]``)."""
    usage = argparse.HelpFormatter("")
    low, high = _value_range(action)
    if low == high:
        return list(usage._metavar_formatter(action, action.dest)(low))
    return [usage._format_args(action, action.dest)]


def _value_range(action: argparse.Action) -> tuple:
    """The fewest and the most values a positional argument takes (most ``None``: no limit)."""
    if action.nargs is None or isinstance(action.nargs, int):
        count = 1 if action.nargs is None else action.nargs
        return count, count
    return {"?": (0, 1), "+": (1, None)}.get(action.nargs, (0, None))


def _is_option(arg: str) -> bool:
    """Whether a command-line word is an option (``-x``, ``--name``, ``--name=value``), not a value such as
    ``-1`` or ``-``."""
    if not arg.startswith("-") or arg == "-":
        return False
    try:
        float(arg)
    except ValueError:
        return True
    return False


class _CommandParser(argparse.ArgumentParser):
    """The top-level parser. argparse reports arguments a subcommand does not take from the
    top level ("python -m fedlib: error: unrecognized arguments: b.json" under the top-level
    usage, for ``rerun a.json b.json``); this one reports them from the subcommand that was
    given them, with its usage and what it takes. (``parse_args`` is argparse's own: it calls
    :meth:`parse_known_args`, then :meth:`error` with the leftovers.)"""

    _parsed = None
    _extras: list = []

    def parse_known_args(self, args=None, namespace=None):
        parsed, extras = super().parse_known_args(args, namespace)
        self._parsed, self._extras = parsed, list(extras)
        return parsed, extras

    def error(self, message):
        extras = self._extras
        if self._parsed is None or not extras or message != f"unrecognized arguments: {' '.join(extras)}":
            super().error(message)
        leaf = self
        for dest in ("command", "target"):
            sub = _subparsers_of(leaf)
            name = getattr(self._parsed, dest, None)
            if sub is None or name not in sub.choices:
                break
            leaf = sub.choices[name]
        if leaf is self:
            super().error(message)
        # an extra right after an unknown option is taken as its value (--outt x.json), not as a positional
        # (after --outt=x.json it is one); '-' and a negative number are values, as argparse reads them
        extra_positionals = sum(not _is_option(e) and not (i and _is_option(extras[i - 1])
                                                           and "=" not in extras[i - 1])
                                for i, e in enumerate(extras))
        known = [o for a in leaf._actions for o in a.option_strings if o.startswith("--")]
        unknown = [e.split("=", 1)[0] for e in extras if _is_option(e)]
        # compared without their dashes, which every option shares ('--bogus' is not close to '--out')
        names = {o.lstrip("-"): o for o in known}
        guesses = {o: difflib.get_close_matches(o.lstrip("-"), names, n=1, cutoff=0.75) for o in dict.fromkeys(unknown)}
        guesses = {o: names[m[0]] for o, m in guesses.items() if m}
        if len(guesses) == 1 and len(unknown) == 1:
            message += f"; did you mean {next(iter(guesses.values()))}?"
        elif guesses:
            message += "; did you mean " + ", ".join(f"{m} for {o}" for o, m in guesses.items()) + "?"
        if extra_positionals:
            positionals = [a for a in leaf._actions
                           if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]
            # a positional with nargs=N takes N values (named by a tuple metavar, or its one name N times)
            names = [name for a in positionals for name in _value_names(a)]
            ranges = [_value_range(a) for a in positionals]
            fewest = sum(low for low, _ in ranges)
            most = None if any(high is None for _, high in ranges) else sum(high for _, high in ranges)
            if fewest == most:
                takes = ("no positional arguments" if not names else
                         f"{len(names)} positional argument{'s' if len(names) > 1 else ''} ({', '.join(names)})")
                takes += f", got {len(names) + extra_positionals}"
            else:  # how many values a '?', '*' or '+' positional took is not known: no "got"
                count = (f"{fewest} or more" if most is None else f"at most {most}" if not fewest else
                         f"{fewest} to {most}")
                takes = f"{count} positional argument{'' if count == 'at most 1' else 's'} ({', '.join(names)})"
            message += f"; {leaf.prog} takes {takes} (see --help)"
        leaf.error(message)


def build_parser(only: Optional[tuple] = None) -> argparse.ArgumentParser:
    """The parser with every registered command, or only ``only = (group, name)`` (the
    one being run: other command modules are then not even imported)."""
    from .common import HelpFormatter

    parser = _CommandParser(
        prog="python -m fedlib", formatter_class=HelpFormatter,
        description="FedNova (Wang et al., NeurIPS 2020) reproduced: run and benchmark federated algorithms.")
    top = parser.add_subparsers(dest="command", metavar="COMMAND")
    top.required = True
    for group, entries in COMMANDS.items():
        if only is not None and group != only[0]:
            continue
        if group == "":
            for name, spec in entries.items():
                add = _load(spec) if only is None or name == only[1] else None
                if add is not None:
                    add(top)
            continue
        adders = [a for a in (_load(s) for n, s in entries.items() if only is None or n == only[1]) if a is not None]
        if not adders:
            continue
        gp = top.add_parser(group, help=_GROUP_HELP.get(group, group), formatter_class=HelpFormatter,
                            description=_GROUP_HELP.get(group, group))
        sub = gp.add_subparsers(dest="target", metavar="TARGET")
        sub.required = True
        for add in adders:
            add(sub)
    return parser


def _requested(argv: Sequence[str]) -> Optional[tuple]:
    """``(group, name)`` when ``argv`` names a registered command, else ``None``."""
    if len(argv) >= 2 and argv[0] in COMMANDS and argv[0] != "" and argv[1] in COMMANDS[argv[0]]:
        return argv[0], argv[1]
    if argv and argv[0] in COMMANDS[""]:
        return "", argv[0]
    return None


def _torchrun_world_size() -> int:
    """``WORLD_SIZE`` when torchrun started this process (:func:`fedlib.distributed.under_torchrun`), else 1 (also
    for a ``WORLD_SIZE`` that is no integer, which ``run synthetic`` names)."""
    from ..distributed import under_torchrun

    if not under_torchrun():
        return 1
    try:
        return int(os.environ["WORLD_SIZE"])
    except ValueError:
        return 1


def _kept_checkpoints(args: argparse.Namespace) -> list:
    """The checkpoint files an interrupted command leaves to continue from: ``table1``'s
    per-group files in its ``--results`` folder (it resumes them when run again; none for
    ``--summary``, ``--list-cells`` and ``--dry-run``, which write nothing), or the
    ``--checkpoint`` / ``<out>.ckpt`` of a run when that run wrote it or resumed from it
    (``[]`` without checkpoint flags, or when the file there is an earlier run's)."""
    from .common import CLIError, resolve_checkpoint

    if getattr(args, "results", None) is not None and not hasattr(args, "out"):  # table1
        if args.summary or args.list_cells or args.dry_run:  # these read; a checkpoint there is not theirs
            return []
        return sorted(Path(args.results).glob(".ckpt__*.pkl"))
    try:  # not for_writing: a folder full or read-only by now still holds what the run saved before
        path = resolve_checkpoint(args, for_writing=False)
    except CLIError:  # impossible checkpoint flags: the run stopped before writing one
        return []
    ours = getattr(args, "resume", False) or getattr(args, "checkpoint_saved", False)
    return [path] if path is not None and ours and path.is_file() else []


def _one_line_warnings(show):
    """A ``warnings.showwarning`` that prints fedlib's own warnings as the CLI's other notices,
    ``warning: MESSAGE`` on one line (they speak to the user, e.g. "the git checkout changed during the run"),
    and passes any other (numpy's, torch's) to ``show``, which prints the file, line and category."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if os.path.abspath(filename).startswith(package):
            print(f"warning: {message}", file=sys.stderr if file is None else file, flush=True)
        else:
            show(message, category, filename, lineno, file, line)
    return showwarning


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Parse ``argv`` (default ``sys.argv[1:]``), run the command, return its exit status.

    With an explicit ``argv``, results record the command ``python -m fedlib <argv>``
    (:func:`fedlib.results.recorded_command`); with ``None``, ``sys.argv``. Called inside another command's
    run (``rerun``'s ``run synthetic``) it lets a ``KeyboardInterrupt`` through instead of returning 130, for the
    outer command to report the interruption once."""
    from ..results import recorded_command

    with _escaping_stdout():
        if argv is None:
            return _main(sys.argv[1:])
        argv = list(argv)
        with recorded_command(["python", "-m", "fedlib", *argv]):
            return _main(argv)


@contextlib.contextmanager
def _escaping_stdout():
    """While a command runs, a stdout of an encoding other than UTF (``PYTHONIOENCODING=ascii``, a Windows code
    page) writes the characters it lacks as escapes (``\\u2014``), as Python's stderr does: the help texts and
    tables hold non-ASCII characters (an em dash, plus-minus signs), on which ``rerun --help`` failed with a
    ``UnicodeEncodeError`` traceback and ``table1 --summary`` with ``error: 'ascii' codec can't encode ...``.
    The stream's error handler is put back afterwards."""
    import codecs

    stream = sys.stdout
    errors = getattr(stream, "errors", None)
    try:
        utf = codecs.lookup(getattr(stream, "encoding", None) or "utf-8").name.startswith("utf")
    except LookupError:
        utf = False
    change = errors == "strict" and not utf and callable(getattr(stream, "reconfigure", None))
    if change:
        try:
            stream.reconfigure(errors="backslashreplace")
        except (OSError, ValueError):  # a closed or detached stream: left as it is
            change = False
    try:
        yield
    finally:
        if change:
            with contextlib.suppress(OSError, ValueError):  # e.g. a pipe closed by then (flushed first)
                stream.reconfigure(errors=errors)


def _main(argv: list) -> int:
    from ..engines.batched import DivergenceError
    from .common import CLIError

    only = _requested(argv)
    parser = build_parser(only)
    if only is not None and _load(COMMANDS[only[0]][only[1]]) is None:
        parser = build_parser()  # that command's module is missing: show what exists
    args = parser.parse_args(argv)  # exits with status 2 on unknown / malformed flags
    prog = " ".join([parser.prog, *(name for name in (only or ()) if name)])  # e.g. "python -m fedlib run synthetic"
    several = _torchrun_world_size()
    if several > 1 and only != ("run", "synthetic"):
        # every rank would run the whole command on its own (the same GPU, the same output and checkpoint files)
        print(f"{prog}: error: started by torchrun with WORLD_SIZE={several}, but only 'run synthetic' splits its "
              f"work across processes: each of the {several} would run the whole command and write the same files; "
              "run it as one process, without torchrun",
              file=sys.stderr)
        return 2
    try:
        with warnings.catch_warnings():  # restores warnings.showwarning afterwards
            warnings.showwarning = _one_line_warnings(warnings.showwarning)
            status = int(args.handler(args) or 0)
        sys.stdout.flush()  # a closed pipe fails here, handled below, not in Python's flush at exit
        return status
    except DivergenceError as exc:
        kept = _kept_checkpoints(args)
        if not kept:
            print(f"{prog}: error: {exc} (nothing written)", file=sys.stderr)
        else:  # the rounds before the divergence were checkpointed: say so, and how to start again
            print(f"{prog}: error: {exc} (no result written; checkpoint {kept[0]} of the rounds before it kept: "
                  f"delete it or give another --checkpoint to start again, e.g. with a smaller --lr)", file=sys.stderr)
        return 2
    except (CLIError, ValueError) as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except MemoryError as exc:  # e.g. --epochs 1000000000: billions of local steps to lay out
        from .._validate import MEMORY_LIMITS

        # check_memory's refusal names the limit that binds (the machine's, or a container's or batch job's); any
        # other MemoryError is an allocation that failed, against the machine or a limit on the process (ulimit -v)
        limit = getattr(exc, "memory_limit", None)
        bound = MEMORY_LIMITS[limit][1] if limit in MEMORY_LIMITS else "this process could allocate"
        print(f"{prog}: error: out of memory ({exc}); the flags ask for more than {bound} "
              "(local steps = epochs x ceil(n_i / batch size), clients, classes): use smaller values "
              "(nothing written)", file=sys.stderr)
        return 2
    except OverflowError as exc:  # e.g. --batch-size 10**20: past numpy's 64-bit integers
        print(f"{prog}: error: a value is too large for the 64-bit integers it is computed with ({exc}); use "
              "smaller values (nothing written)", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if _NESTED.get():  # run by another command (rerun), which says it was interrupted
            raise
        kept = _kept_checkpoints(args)
        written = getattr(args, "written", None)  # rerun's --out, written by its run before the comparison was done
        if written is not None:
            print(f"{prog}: interrupted after the run wrote {written} (not compared with the recorded result)",
                  file=sys.stderr)
        elif not kept:
            print(f"{prog}: interrupted (nothing written)", file=sys.stderr)
        elif hasattr(args, "out"):
            print(f"{prog}: interrupted; checkpoint {kept[0]} kept: run the same command with --resume to continue "
                  f"from it", file=sys.stderr)
        else:  # table1 resumes every group it finds a checkpoint of
            print(f"{prog}: interrupted; checkpoint(s) {', '.join(str(k) for k in kept)} kept: run the same command "
                  f"again to continue from them", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`... | head`): stop quietly, as Unix tools do
        try:  # what stdout still buffers would fail again when Python flushes it at exit ("Exception ignored ...
            # BrokenPipeError"): its file descriptor now writes to os.devnull (the recipe of Python's signal docs)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # a stdout without a file descriptor (io.StringIO: UnsupportedOperation)
            pass
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 141
    except OSError as exc:  # a file system failure (disk full, a folder removed or not writable): a one-liner
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
