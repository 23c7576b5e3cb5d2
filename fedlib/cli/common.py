"""Flags, checks and plumbing shared by every ``python -m fedlib`` command.

A command module (``fedlib/cli/synthetic.py``, ``fedlib/cli/cifar10.py``, ...) builds
its parser from these groups, with its own defaults::

    p = subparsers.add_parser("synthetic", help=..., formatter_class=HelpFormatter)
    add_algorithm_args(p, lr=0.02)
    add_schedule_args(p, rounds=100, epochs="2", batch_size=20)
    add_output_args(p)
    p.set_defaults(handler=my_run)

and, in the handler, turns the parsed flags into library objects:
:func:`build_algorithm` (algorithm + local solver + server optimizer, with every
impossible combination reported as :class:`CLIError` naming the flag),
:func:`check_participation`, :func:`lr_schedule`, :func:`check_output_path`,
:func:`progress_bar`, and finally :func:`fedlib.results.write_result`.
:func:`config_from_args` records the resolved flags in the result's ``config``.

Errors: :class:`CLIError` (and ``ValueError`` from the library, e.g. a malformed data
file, and :class:`~fedlib.engines.batched.DivergenceError`) are printed as
``python -m fedlib <command>: error: ...`` on stderr with exit status 2 by :func:`fedlib.cli.main`; no
output file is written. Output flags are checked before anything runs
(:func:`fedlib.cli.common.check_output_path`, :func:`fedlib.cli.common.resolve_checkpoint`): their folder must
exist and take a new file, tried by creating and removing one.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable, Optional

from ..algorithms import ALGORITHMS, FederatedAlgorithm, make_algorithm
from ..sampling import SAMPLING_SCHEMES
from ..schedules import parse_epochs, step_decay_lr
from ..server import SERVER_OPTIMIZERS, make_server_optimizer
from ..solvers import SOLVERS, make_solver

__all__ = ["CLIError", "HelpFormatter", "add_algorithm_args", "add_schedule_args", "add_output_args", "add_device_arg",
           "build_algorithm", "resolve_epochs", "check_participation", "lr_schedule", "check_output_path",
           "progress_bar", "config_from_args", "ALGORITHM_FLAGS", "SCHEDULE_FLAGS", "add_checkpoint_args",
           "resolve_checkpoint", "check_fresh_checkpoint", "same_file", "user_path", "check_torch_device"]


class CLIError(ValueError):
    """A bad flag or flag combination; the message names the flag."""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows ``(default: X)`` except where the default is ``None``/``False`` (the help says what happens);
    descriptions taken from docstrings lose their reST literal quotes (double backticks)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)

    def _format_text(self, text):
        return super()._format_text(text.replace("``", ""))


def _number(text: str, kind=float):
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {'an integer' if kind is int else 'a number'}, got {text!r}") from None


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    value = _number(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def nonneg_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    value = _number(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def unit_interval(text: str) -> float:
    """argparse type: a number in [0, 1)."""
    value = _number(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must lie in [0, 1), got {text!r}")
    return value


def user_path(text: str) -> Path:
    """argparse type: a path with a leading ``~`` / ``~user`` expanded, as the shell does for a
    separate word but not after ``--flag=`` (``--results=~/t1`` created a folder named ``~``). An empty
    text is refused: ``Path("")`` is the working folder (``--data "$UNSET"`` trained on it)."""
    if not text:
        raise argparse.ArgumentTypeError("must be a file or folder path, got an empty string")
    try:
        return Path(text).expanduser()
    except RuntimeError as exc:  # ~nosuchuser
        raise argparse.ArgumentTypeError(f"cannot expand {text!r}: {exc}") from None


def int_at_least(low: int) -> Callable[[str], int]:
    """argparse type factory: an integer >= ``low``."""
    def parse(text: str) -> int:
        value = _number(text, int)
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    return parse


def int_between(low: int, high: int) -> Callable[[str], int]:
    """argparse type factory: an integer in ``[low, high]``."""
    def parse(text: str) -> int:
        value = _number(text, int)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be an integer in [{low}, {high}], got {value}")
        return value

    return parse


def _tau_eff(text: str):
    if text in ("a_norm", "local_steps", "population"):
        return text
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be 'a_norm', 'local_steps', 'population' or a number > 0, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def _epochs(text: str) -> str:
    """``--epochs`` in one spelling per setting, as configs record it and resumes and ``compare_results`` compare it:
    ``"2"`` for ``2``, ``02`` or ``2-2``; ``"2-5"`` for ``2-5`` or ``02-5`` (as typed, ``2-2`` and ``2`` were two
    configs, and a checkpoint of one was refused under the other)."""
    try:
        low, high = parse_epochs(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return str(low) if low == high else f"{low}-{high}"


#: dest names of the flags added by add_algorithm_args / add_schedule_args (recorded in configs).
ALGORITHM_FLAGS = ("algorithm", "solver", "lr", "lr_decay", "mu", "momentum", "weight_decay", "tau_eff", "server",
                   "server_momentum", "server_lr")
SCHEDULE_FLAGS = ("rounds", "epochs", "batch_size", "clients_per_round", "sampling", "seed")


def add_algorithm_args(parser: argparse.ArgumentParser, *, algorithm: str = "fednova", lr: float = 0.02,
                       lr_decay: str = "constant", weight_decay: float = 0.0) -> argparse._ArgumentGroup:
    """``--algorithm --solver --lr --lr-decay --mu --momentum --weight-decay --tau-eff
    --server --server-momentum --server-lr`` (defaults per command)."""
    g = parser.add_argument_group("algorithm")
    g.add_argument("--algorithm", choices=list(ALGORITHMS), default=algorithm,
                   help="federated algorithm (fedprox = FedAvg aggregation with a proximal local solver)")
    g.add_argument("--solver", choices=list(SOLVERS), default=None,
                   help="local solver (default: prox for fedprox, else sgd)")
    g.add_argument("--lr", type=positive_float, default=lr, help="client learning rate eta")
    g.add_argument("--lr-decay", choices=["constant", "step"], default=lr_decay,
                   help="client lr across rounds: constant, or step = /10 after 50%% and /100 after 75%% "
                        "of the rounds (each at the nearest whole round, halves up: 7 rounds decay at rounds 4 "
                        "and 5, counted from 0)")
    g.add_argument("--mu", type=nonneg_float, default=None,
                   help="proximal coefficient mu (> 0; required by fedprox and the prox solvers, refused by "
                        "the others)")
    g.add_argument("--momentum", type=unit_interval, default=None,
                   help="local heavy-ball factor rho in [0, 1) for the momentum solvers (default: 0.9)")
    g.add_argument("--weight-decay", type=nonneg_float, default=weight_decay,
                   help="weight decay added to every local gradient (not part of a_i)")
    g.add_argument("--tau-eff", type=_tau_eff, default=None,
                   help="FedNova's tau_eff: a_norm (sum p_i ||a_i||_1), local_steps (sum p_i tau_i), population "
                        "(sum over all clients of p_i E||a_i||_1, from the data sizes, --epochs and the solver at the base --lr, "
                        "kept through --lr-decay) or "
                        "a number; only for fednova / fednova-vr (default: a_norm). With client sampling use "
                        "population or a number: a_norm and local_steps then depend on the sample, which adds a "
                        "FedAvg-like term of weight 1/q to the expected update (so does App. H's sum over the "
                        "sample of p_i ||a_i||_1; book, chapter 8)")
    g.add_argument("--server", choices=list(SERVER_OPTIMIZERS), default="plain",
                   help="server optimizer applied to the aggregated update")
    g.add_argument("--server-momentum", type=unit_interval, default=None,
                   help="server momentum factor beta for --server momentum (default: 0.9)")
    g.add_argument("--server-lr", type=positive_float, default=None,
                   help="server learning rate for --server plain (default: 1) or adam (default: 0.01)")
    return g


def add_schedule_args(parser: argparse.ArgumentParser, *, rounds: int = 100, epochs: str = "2",
                      batch_size: int = 20,
                      seed_help: str = "run seed: mini-batches, sampling, random epochs") -> argparse._ArgumentGroup:
    """``--rounds --epochs --batch-size --clients-per-round --sampling --seed`` (``seed_help``:
    what the seed draws in this command)."""
    g = parser.add_argument_group("rounds and clients")
    g.add_argument("--rounds", type=int_at_least(1), default=rounds, help="communication rounds")
    g.add_argument("--epochs", type=_epochs, default=epochs,
                   help="local epochs E: an integer ('2') or an inclusive range ('2-5') drawn per client and round; "
                        "tau_i = E * ceil(n_i / batch size)")
    g.add_argument("--batch-size", type=int_at_least(1), default=batch_size,
                   help="mini-batch size per client")
    g.add_argument("--sampling", choices=list(SAMPLING_SCHEMES), default="full",
                   help="client participation: full, with-replacement (q draws with probability p_i, simple "
                        "average) or uniform (q distinct clients, weights p_i m / q)")
    g.add_argument("--clients-per-round", type=int_at_least(1), default=None,
                   help="q, clients per round (required by --sampling with-replacement / uniform)")
    g.add_argument("--seed", type=int_at_least(0), default=0, help=seed_help)
    return g


def add_device_arg(parser_or_group, *, default: Optional[str] = None) -> None:
    """``--device`` (``cpu``, ``cuda``, ``cuda:1``; default: CUDA when torch sees a GPU)."""
    parser_or_group.add_argument("--device", default=default,
                                 help="torch device (default: cuda when torch sees a GPU, else cpu)")


def add_output_args(parser: argparse.ArgumentParser) -> argparse._ArgumentGroup:
    """``--out --quiet --progress``."""
    g = parser.add_argument_group("output")
    g.add_argument("--out", type=user_path, default=None,
                   help="write the result (config, provenance, per-round history) to this JSON file, atomically "
                        "(default: none; only the summary is printed)")
    g.add_argument("--quiet", action="store_true", help="no progress bar and no summary on stdout")
    g.add_argument("--progress", action="store_true",
                   help="show the progress bar even when stderr is not a terminal")
    return g


def add_checkpoint_args(parser: argparse.ArgumentParser, *, distributed: bool = False,
                        more_rounds: bool = True) -> argparse._ArgumentGroup:
    """``--checkpoint-every --checkpoint --resume`` (and ``--distributed``); ``more_rounds``: whether a resumed run
    may have other ``--rounds`` (with a constant lr)."""
    g = parser.add_argument_group("checkpoints" + (" and processes" if distributed else ""))
    g.add_argument("--checkpoint-every", type=int_at_least(1), default=None, metavar="K",
                   help="write a checkpoint (model, server optimizer, control variates, history, config, round) "
                        "atomically every K rounds and after the last one (default: none)")
    g.add_argument("--checkpoint", type=user_path, default=None, metavar="PATH",
                   help="checkpoint file (default: <out>.ckpt)")
    g.add_argument("--resume", action="store_true",
                   help="continue from the checkpoint (refused if it was written by another configuration; "
                        + ("with --lr-decay constant, --rounds may differ: a finished run continues to more "
                           "rounds, bit for bit as one longer run)" if more_rounds else
                           "--rounds too), as the unbroken run would (bit for bit where its kernels are "
                           "deterministic, as on the CPU)"))
    if distributed:
        g.add_argument("--distributed", action="store_true",
                       help="split the clients across torch.distributed ranks (automatic under torchrun: "
                            "WORLD_SIZE/RANK set); gloo on the CPU, NCCL on GPUs; rank 0 writes --out")
    return g


def same_file(a: os.PathLike, b: os.PathLike) -> bool:
    """Whether two paths name the same file: after ``~`` and symlinks (existing or not), and
    hard links too when both exist."""
    a, b = Path(a).expanduser(), Path(b).expanduser()
    return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))


def check_torch_device(device: str, flag: str = "--device") -> None:
    """Refuse a torch device the engines cannot run on: a type other than ``cpu`` / ``cuda``
    (``mps``, ``meta``, ``xla``...), or ``cuda:N`` for a GPU that torch does not see (``N`` >=
    the number of GPUs). Such a run started and failed at its first tensor with a traceback."""
    if str(device) == "cpu":  # nothing to check (and no torch import for the numpy backend)
        return
    import torch

    dev = torch.device(device)
    if dev.type not in ("cpu", "cuda"):
        raise CLIError(f"{flag} {device}: the engines run on cpu or cuda (cuda:N), not {dev.type}")
    count = torch.cuda.device_count() if dev.type == "cuda" else 0
    if dev.type == "cuda" and dev.index is not None and dev.index >= count:
        raise CLIError(f"{flag} {device}: torch sees {count} GPU(s) on this machine"
                       + ("" if not count else " (cuda:0)" if count == 1 else f" (cuda:0 .. cuda:{count - 1})"))


def check_not_input(out: Optional[os.PathLike], data: Optional[os.PathLike], flag: str = "--out") -> None:
    """Refuse an output path that is the input data file (writing the result would replace it), or
    that the next run would read from the ``--data`` folder as data: a ``.json`` file directly in
    its ``train/`` or ``test/`` subfolder (a folder of that layout), else directly in the folder. Other
    paths inside the folder (``ds/r.json`` next to ``train/``, a checkpoint) are never read, and allowed."""
    from ..data.leaf import _data_folders, _reads_as_data

    if out is None or data is None:
        return
    if same_file(out, data):
        raise CLIError(f"{flag} {out}: is the --data file; writing the result would replace the data")
    folder = Path(data)
    if folder.is_dir() and _reads_as_data(folder, out):
        read = " and ".join(f"{f}{os.sep}" for f in _data_folders(folder))
        raise CLIError(f"{flag} {out}: lies inside the --data folder {data}, among the .json files read from "
                       f"{read}; the next run would read it as data")


def resolve_checkpoint(args: argparse.Namespace, *, for_writing: bool = True) -> Optional[Path]:
    """The checkpoint path of ``--checkpoint-every`` / ``--resume`` (``None`` when unused). With ``for_writing``
    (the default: before a run), ``--checkpoint-every``'s folder must take a new file (a temporary one is created and
    removed); ``False`` only names the path (after a run: what an interrupted one kept, which a folder that has
    since become full or read-only still holds)."""
    from ..checkpoint import default_checkpoint_path

    every, path, resume = getattr(args, "checkpoint_every", None), getattr(args, "checkpoint", None), \
        getattr(args, "resume", False)
    if every is None and not resume:
        if path is not None:
            raise CLIError("--checkpoint needs --checkpoint-every K or --resume")
        return None
    path = path if path is not None else default_checkpoint_path(getattr(args, "out", None))
    if path is None:
        raise CLIError("--checkpoint-every / --resume need --checkpoint PATH or --out (default: <out>.ckpt)")
    for flag in ("out", "data"):  # a checkpoint written over the result or the input destroys it
        other = getattr(args, flag, None)
        if other is not None and same_file(path, other):
            raise CLIError(f"--checkpoint {path}: is the --{flag} file; give the checkpoint its own name")
    check_not_input(path, getattr(args, "data", None), "--checkpoint")  # read as data by the next run
    if path.is_dir():
        raise CLIError(f"--checkpoint {path}: is a folder, give a file name")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise CLIError(f"--checkpoint {path}: folder {folder} " + ("is a file" if folder.exists() else "does not exist"))
    writes = every is not None and for_writing
    if writes and not os.access(folder, os.W_OK):  # found before training, not at the first write
        raise CLIError(f"--checkpoint {path}: folder {folder} is not writable")
    if writes and len(path.name.encode()) > 241:  # as check_output_path: the temporary file must fit
        raise CLIError(f"--checkpoint {path}: the file name is {len(path.name.encode())} bytes long; at most 241 can "
                       "be written atomically (give a shorter --checkpoint or --out)")
    if writes:
        _check_can_create(path, folder, "--checkpoint")
    if resume and not path.is_file():
        raise CLIError(f"--resume: checkpoint {path} not found")
    return path


def check_fresh_checkpoint(path: Optional[Path], kind: str) -> None:
    """A run that starts from round 0 (``--checkpoint-every`` without ``--resume``) replaces
    the file at ``path`` with its first checkpoint: refuse when that file holds an unfinished
    run (whose rounds would be lost: the interrupted run's message says to continue it with
    ``--resume``) or is not a fedlib checkpoint of this command (``kind``) at all. The
    checkpoint of a finished run may be replaced."""
    from ..checkpoint import CheckpointError, kind_name, load_checkpoint

    if path is None or not path.is_file():
        return
    try:
        doc = load_checkpoint(path, kind=kind)
    except CheckpointError as exc:
        raise CLIError(f"--checkpoint {path}: exists and is not a checkpoint of this command, {kind_name(kind)}: "
                       f"it is {exc.reason or exc}. This run starts from round 0 and its first checkpoint would replace "
                       "the file, so nothing was run: delete the file if you do not need it, or give another "
                       "--checkpoint (or --out)") from None
    done, total = doc.get("round"), (doc.get("config") or {}).get("rounds")
    if not (isinstance(done, int) and isinstance(total, int) and done >= total):
        raise CLIError(f"--checkpoint {path}: holds an unfinished run ({done} of {total} rounds done), which this "
                       "run would overwrite from round 0: continue it with --resume (and its flags), or delete the "
                       "file or give another --checkpoint to start over")


# ----------------------------------------------------------------------------- resolution
def build_algorithm(args: argparse.Namespace) -> FederatedAlgorithm:
    """The algorithm, local solver and server optimizer named by the flags.

    Fills ``args.solver`` / ``args.momentum`` / ``args.server_momentum`` /
    ``args.server_lr`` with their resolved defaults; raises :class:`CLIError` naming the
    flag for every impossible combination.
    """
    algo = args.algorithm
    solver = args.solver
    if solver is None:
        solver = "prox" if algo == "fedprox" else "sgd"
    proximal = solver in ("prox", "momentum-prox")
    if algo == "fedprox" and not proximal:
        raise CLIError(f"--solver: fedprox needs a proximal local solver (prox or momentum-prox), got {solver}")
    if proximal and not (args.mu is not None and args.mu > 0):
        what = "fedprox" if algo == "fedprox" else f"--solver {solver}"
        raise CLIError(f"--mu: {what} needs a proximal coefficient --mu > 0"
                       + (f", got {args.mu:g}" if args.mu is not None else ""))
    if not proximal and args.mu is not None:
        raise CLIError(f"--mu is only used by the prox solvers (prox, momentum-prox), not by --solver {solver}")
    uses_momentum = solver in ("momentum", "momentum-prox")
    if not uses_momentum and args.momentum is not None:
        raise CLIError(f"--momentum is only used by the momentum solvers, not by --solver {solver}")
    momentum = (0.9 if args.momentum is None else args.momentum) if uses_momentum else None
    if args.tau_eff is not None and ALGORITHMS[algo][0] != "fednova":
        raise CLIError(f"--tau-eff can only be set for fednova and fednova-vr, not {algo} (its tau_eff is implicit)")
    if args.server_momentum is not None and args.server != "momentum":
        raise CLIError(f"--server-momentum needs --server momentum, got --server {args.server}")
    if args.server_lr is not None and args.server == "momentum":
        raise CLIError("--server-lr is not used by --server momentum (its step is the client lr)")
    server_momentum = (0.9 if args.server_momentum is None else args.server_momentum) \
        if args.server == "momentum" else None
    server_lr = None if args.server == "momentum" else (
        args.server_lr if args.server_lr is not None else (0.01 if args.server == "adam" else 1.0))
    try:
        local = make_solver(solver, args.lr, momentum=momentum, mu=args.mu or 0.0, weight_decay=args.weight_decay)
    except ValueError as exc:
        flag = next((f"--{name}" for name in ("mu", "lr", "momentum") if str(exc).startswith(name)), "--solver")
        raise CLIError(f"{flag}: {exc}") from None
    server = make_server_optimizer(args.server, server_lr=server_lr, beta=server_momentum)  # 0 is a value
    args.solver, args.momentum, args.server_momentum, args.server_lr = solver, momentum, server_momentum, server_lr
    try:  # "population" needs the clients' data sizes: resolve_tau_eff sets it once they are known
        return make_algorithm(algo, local, server, None if args.tau_eff == "population" else args.tau_eff)
    except ValueError as exc:
        raise CLIError(f"--algorithm {algo}: {exc}") from None


def resolve_tau_eff(args: argparse.Namespace, algorithm: FederatedAlgorithm, num_samples, batch_size: int,
                    epochs: tuple[int, int], *, warn: bool = True) -> tuple[FederatedAlgorithm, Optional[float]]:
    r"""``--tau-eff population``: FedNova's sample-independent
    :math:`\tau_{\text{eff}} = \sum_i p_i\,\mathbb E\|a_i\|_1` over all clients
    (:math:`p_i = n_i/n`, :func:`fedlib.schedules.population_tau_eff` of ``--epochs`` and the
    local solver at the base ``--lr``; one value for the whole run, so with ``--lr-decay step``
    a proximal solver's :math:`\alpha = \eta\mu` of later rounds does not change it), set on ``algorithm``; returns it with the value (``None`` for the other
    choices). Warns on stderr when FedNova samples clients with a :math:`\tau_{\text{eff}}`
    taken from the sample (biased: book, chapter 8), unless ``warn`` is false (the other ranks of a
    distributed run)."""
    import dataclasses

    import numpy as np

    from ..schedules import make_epoch_schedule, population_tau_eff

    if args.tau_eff == "population":
        n = np.asarray(num_samples, dtype=np.int64)
        value = population_tau_eff(n / n.sum(), make_epoch_schedule(n, batch_size, tuple(epochs)), algorithm.solver)
        return dataclasses.replace(algorithm, tau_eff=value), value
    everyone = args.sampling == "uniform" and args.clients_per_round == len(num_samples)  # omega_i = p_i, all i
    if (warn and args.sampling != "full" and not everyone and ALGORITHMS[args.algorithm][0] == "fednova"
            and not isinstance(args.tau_eff, float)):
        print(f"warning: {args.algorithm} with --sampling {args.sampling} takes tau_eff from each round's sample "
              f"({args.tau_eff or 'a_norm'}), which biases the expected update towards clients with large "
              "||a_i||_1 (book, chapter 8); pass --tau-eff population for a sample-independent value",
              file=sys.stderr, flush=True)
    return algorithm, None


def resolve_epochs(args: argparse.Namespace) -> tuple[int, int]:
    """``(low, high)`` of ``--epochs`` (inclusive)."""
    try:
        return parse_epochs(args.epochs)
    except ValueError as exc:
        raise CLIError(f"--epochs: {exc}") from None


def check_participation(args: argparse.Namespace, num_clients: int) -> None:
    """``--sampling`` / ``--clients-per-round`` against the number of clients (``--clients-per-round``
    only with ``--sampling with-replacement`` / ``uniform``, even at the number of clients: the
    engines refuse it with full participation)."""
    q = args.clients_per_round
    if args.sampling == "full":
        if q is not None:
            raise CLIError(f"--clients-per-round {q} needs --sampling with-replacement or uniform "
                           f"(with --sampling full all {num_clients} clients take part)")
        return
    if q is None:
        raise CLIError(f"--clients-per-round is required with --sampling {args.sampling}")
    if args.sampling == "uniform" and q > num_clients:
        raise CLIError(f"--clients-per-round {q} is larger than the number of clients ({num_clients}); "
                       "--sampling uniform draws distinct clients")


def lr_schedule(args: argparse.Namespace) -> Optional[Callable[[int], float]]:
    """``round -> client lr`` for ``--lr-decay step`` (``None`` = constant)."""
    if args.lr_decay == "constant":
        return None
    base, total = args.lr, args.rounds
    return lambda t: step_decay_lr(base, t, total)


def check_output_path(path: Optional[Path], flag: str = "--out") -> None:
    """Fail *before* the run if the output file of ``flag`` cannot be written (its folder missing, or taking no new
    file: a temporary one is created and removed there, as the atomic write will), or would replace a checkpoint
    (a result written over ``<out>.ckpt`` destroyed the run that ``--resume`` continues)."""
    if path is None:
        return
    if str(path) == "-":  # the Unix 'stdout' would otherwise become a file named '-' in the current folder
        raise CLIError(f"{flag} -: results are not written to stdout; give a file name like result.json")
    if path.is_symlink():  # the result replaces the link's target (fedlib._io.atomic_write)
        path = Path(os.path.realpath(path))
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise CLIError(f"{flag} {path}: is a folder, give a file name like result.json")
    if path.exists() and not path.is_file():
        raise CLIError(f"{flag} {path}: exists and is not a regular file (a FIFO or device); give a file name")
    if path.is_file() and _is_fedlib_checkpoint(path):  # a run's checkpoint (--resume continues it), not a result
        raise CLIError(f"{flag} {path}: is a fedlib checkpoint (written by --checkpoint-every, continued by --resume); "
                       "writing there would replace it: give another file name, or delete the checkpoint first if "
                       "you no longer need it")
    if not folder.is_dir():
        raise CLIError(f"{flag} {path}: folder {folder} " + ("is a file" if folder.exists() else "does not exist"))
    if not os.access(folder, os.W_OK):
        raise CLIError(f"{flag} {path}: folder {folder} is not writable")
    if len(path.name.encode()) > 241:  # atomic_write's temporary file '.<name>.<8 chars>.tmp' must fit in 255 bytes
        raise CLIError(f"{flag} {path}: the file name is {len(path.name.encode())} bytes long; at most 241 can be "
                       "written atomically (the limit of a name is 255, less the temporary file's affixes)")
    _check_can_create(path, folder, flag)


def _check_can_create(path: Path, folder: Path, flag: str) -> None:
    """Create and remove a temporary file in ``folder`` as the atomic write of the output will (``fedlib._io``: its
    name is ``.<name>.<8 characters>.tmp``), and refuse the flag if that fails: :func:`os.access` says yes to root for
    every folder, and a read-only or virtual file system (``/proc``, ``/sys``) refuses only the write itself, which
    came after the whole run."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise CLIError(f"{flag} {path}: folder {folder} is not writable: creating a file there failed "
                       f"({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(tmp)


def _is_fedlib_checkpoint(path: Path) -> bool:
    """Whether the file ``path`` is a fedlib checkpoint by its footer alone (``fedlib.checkpoint._has_footer``:
    a pickle without one, e.g. a CIFAR-10 batch file, is not)."""
    from ..checkpoint import _has_footer

    return _has_footer(path)


def progress_bar(args: argparse.Namespace, total: int, desc: str, initial: int = 0):
    """A tqdm bar on stderr (round, loss, ETA) when stderr is a terminal (or ``--progress``),
    never with ``--quiet``; returns ``None`` when disabled. ``initial``: rounds already done
    (a resumed run), shown as done without counting towards the rate."""
    if args.quiet or not (args.progress or sys.stderr.isatty()):
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit="round", file=sys.stderr, dynamic_ncols=True)


def config_from_args(args: argparse.Namespace, names) -> dict:
    """``{name: value}`` of the resolved flags ``names`` (paths as strings)."""
    out = {}
    for name in names:
        value = getattr(args, name, None)
        out[name] = os.fspath(value) if isinstance(value, os.PathLike) else value
    return out


def info(args: argparse.Namespace, message: str) -> None:
    """Print ``message`` on stdout unless ``--quiet``."""
    if not args.quiet:
        print(message, flush=True)


__all__ += ["info", "resolve_tau_eff", "int_between"]


def write_bench(path, out: dict, provenance: dict) -> None:
    """A benchmark's ``{"config", "results"}`` as a result file (kind ``bench``, atomically)."""
    from ..results import make_result, write_result

    write_result(path, make_result(out["config"], None, provenance, kind="bench", summary=out["results"]))


def emit_bench(args: argparse.Namespace, out: dict, provenance: dict, format_fn) -> int:
    """Write a benchmark's result (``--json``, atomically, with provenance) and print it."""
    if args.json is not None:
        write_bench(args.json, out, provenance)
    if not args.quiet:
        print(format_fn(out["results"]))
        if args.json is not None:
            print(f"wrote {args.json}")
    return 0
