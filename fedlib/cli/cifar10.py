"""``python -m fedlib run cifar10``, ``python -m fedlib bench cifar10`` and ``python -m fedlib table1``.

VGG-11 (no BatchNorm, :func:`fedlib.models.vgg11`) on CIFAR-10 split over 16 clients by
the official Dir(0.1) partition (seed 2020), trained by the stacked-client engine
(:mod:`fedlib.engines.stacked`). Defaults are the paper's setup (the official code, github.com/JYWa/FedNova).

Example::

    python -m fedlib run cifar10 --data-root /data --algorithm fednova --epochs 2-5 --out fednova.json
    python -m fedlib run cifar10 --sample --width 0.03 --rounds 2 --out tiny.json      # CPU, seconds
    python -m fedlib table1 --results data/results/cifar10 --budget-seconds 600 --data-root /data \\
        --precision bf16 --cuda-graph
    python -m fedlib bench cifar10 --width 0.03 --steps 6 --json bench.json
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Optional

from ..results import RunClock, _command, _utc, make_result, write_result
from .common import (check_torch_device, emit_bench, write_bench, ALGORITHM_FLAGS, SCHEDULE_FLAGS, CLIError, HelpFormatter, add_algorithm_args, add_device_arg,
                     add_checkpoint_args, add_output_args, add_schedule_args, build_algorithm, check_fresh_checkpoint,
                     check_output_path, check_participation, config_from_args, info, int_at_least, int_between,
                     positive_float, progress_bar, resolve_checkpoint, resolve_epochs, resolve_tau_eff, same_file,
                     user_path)

__all__ = ["add_run_parser", "add_bench_parser", "add_table1_parser", "run_cifar10", "bench_cifar10_command",
           "table1_command", "load_data_from_args"]

DESCRIPTION = """\
Train VGG-11 (no BatchNorm; --width scales its channels) on CIFAR-10 split over --num-clients
clients by the official Dirichlet(--partition-alpha) partition (seed --partition-seed, fixed
whatever the run seed), with one federated algorithm, and write the per-round history
(training loss, test loss and accuracy on all test images, tau_eff, chi^2(p||w), the round's
clients and their local steps tau_i, client lr) to --out. The training loss (train_loss, and
the final training loss printed and in the summary) is the clients' mean mini-batch loss
during the round, weighted by their participation weights (local models, augmented images,
dropout on), not the loss of the new global model that run synthetic records: a pass over the
training set would cost as much as the round. Defaults are the paper's setup: 16 clients, Dir(0.1), batch 32, 100
rounds, client lr /10 after 50% and /100 after 75% of the rounds, weight decay 1e-4,
lr 0.05 for local SGD (use 0.02 with --solver momentum)."""


def _add_data_args(p: argparse.ArgumentParser, *, clients: bool = True, unless: str = "--sample",
                   without: "str | None" = None):
    """The data flags; returns their argument group (for command-specific additions). ``unless``: the flags that
    make ``--data-root`` optional; ``without``: what the command does without it, where it is optional anyway
    (``bench cifar10`` runs on the sample)."""
    g = p.add_argument_group("data")
    needed = without or f"required unless {unless}"
    g.add_argument("--data-root", type=user_path, default=None,
                   help=f"folder containing cifar-10-batches-py (or that folder itself); {needed}")
    g.add_argument("--download", action="store_true",
                   help="download the official archive into --data-root if the batch folder is missing")
    g.add_argument("--sample", action="store_true",
                   help="use the shipped 2,000/500-image sample data/cifar10-sample (CPU demos, tests)")
    if clients:
        g.add_argument("--num-clients", type=int_at_least(1), default=16, help="number of clients")
        g.add_argument("--partition-alpha", type=positive_float, default=0.1, help="Dirichlet concentration of the split")
        g.add_argument("--partition-seed", type=int_between(0, 2 ** 32 - 1), default=2020,
                       help="seed of the split, 0 .. 2**32 - 1 (numpy legacy generator; the official code's 2020)")
    return g


def _add_engine_args(p: argparse.ArgumentParser, *, precisions=("fp32", "bf16", "fp64"),
                     width_default: Optional[float] = 1.0,
                     width_help: str = "e.g. 0.03 for CPU tests") -> None:
    g = p.add_argument_group("engine")
    g.add_argument("--width", type=positive_float, default=width_default,
                   help=f"VGG-11 width multiplier (1 = the paper's 9.75 M parameters; {width_help})")
    g.add_argument("--precision", choices=list(precisions), default="fp32",
                   help="fp32; bf16 = autocast with float32 master weights (meant for GPUs; slow but correct on a CPU)"
                        + ("; fp64 (exactness checks)" if "fp64" in precisions else ""))
    g.add_argument("--path", choices=["grouped", "vmap"], default="grouped",
                   help="grouped: clients as one network of grouped convolutions; vmap: torch.func.vmap")
    g.add_argument("--cuda-graph", action="store_true", help="capture the local steps in CUDA graphs (CUDA only)")
    g.add_argument("--conv", choices=["cudnn", "gemm"], default="cudnn",
                   help="grouped path's convolutions: cudnn = one grouped conv2d per layer; gemm = im2col + batched "
                        "matrix products (fedlib.engines.im2col; same results up to rounding); recorded in the "
                        "output when gemm")
    g.add_argument("--cudnn-benchmark", action="store_true",
                   help="let cuDNN time its convolution algorithms for every new shape and keep the fastest "
                        "(torch.backends.cudnn.benchmark) instead of choosing by heuristics; recorded in the output")
    add_device_arg(g)


def load_data_from_args(args: argparse.Namespace):
    """The data named by ``--sample`` / ``--data-root`` (``--download``), errors as CLIError."""
    from ..experiments.cifar10 import load_data

    if args.sample and args.data_root is not None:
        raise CLIError("--sample and --data-root exclude each other")
    if args.sample and args.download:
        raise CLIError("--download fetches the full data set into --data-root; the shipped --sample needs none")
    if not args.sample and args.data_root is None:
        raise CLIError("no data: pass --data-root DIR (the folder containing cifar-10-batches-py; add --download "
                       "to fetch it) or --sample for the shipped sample")
    try:
        return load_data(args.data_root, sample=args.sample, download=args.download)
    except FileNotFoundError as exc:
        flag = "--sample" if args.sample else "--data-root"
        raise CLIError(f"{flag}: {exc}") from None
    except ValueError as exc:
        raise CLIError(f"{'--sample' if args.sample else '--data-root'}: {exc}") from None


def check_out_not_data(args: argparse.Namespace, flag: str = "--out") -> None:
    """Refuse an output file (``--out``, or the output flag ``flag``, e.g. ``--json``) that
    would replace the input: a file of the shipped ``--sample`` folder (which also holds the
    labels of ``--random-images``), or a path inside the ``--data-root`` batch folder
    (``cifar-10-batches-py``)."""
    from ..data.cifar10 import DEFAULT_SAMPLE_PATH, _resolve_folder

    out = getattr(args, flag.lstrip("-").replace("-", "_"), None)
    if out is None:
        return
    if args.sample or getattr(args, "random_images", False):
        folder, what = DEFAULT_SAMPLE_PATH.parent, "the shipped --sample folder"
    elif args.data_root is not None:
        folder, what = _resolve_folder(Path(args.data_root).expanduser()), "the --data-root batch folder"
    else:
        return
    if Path(os.path.realpath(out)).is_relative_to(os.path.realpath(folder)):
        raise CLIError(f"{flag} {out}: lies inside {what} {folder}; the result would replace or sit among the data "
                       "files, give it a path outside")


def _check_device(args: argparse.Namespace) -> str:
    import torch

    from ..experiments.cifar10 import resolve_device

    device = resolve_device(args.device)
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise CLIError(f"--device: not a torch device: {device!r} ({exc})") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise CLIError(f"--device {device}: torch sees no CUDA GPU on this machine; use --device cpu")
    check_torch_device(device)
    if args.cuda_graph and dev.type != "cuda":
        raise CLIError(f"--cuda-graph needs a CUDA GPU, but the device is {device}; drop --cuda-graph")
    if getattr(args, "conv", "cudnn") != "cudnn" and args.path != "grouped":
        raise CLIError(f"--conv {args.conv} is a setting of --path grouped (the vmap path convolves with vmap)")
    return device


# ============================================================================ run cifar10
def add_run_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("cifar10", help="VGG-11 on CIFAR-10 split over 16 clients (Table 1 setup)",
                       description=DESCRIPTION, formatter_class=HelpFormatter)
    _add_data_args(p)
    add_algorithm_args(p, algorithm="fednova", lr=0.05, lr_decay="step", weight_decay=1e-4)
    add_schedule_args(p, rounds=100, epochs="2", batch_size=32,
                      seed_help="run seed: the initial model (the same for every algorithm), mini-batches, "
                                "augmentation, dropout, sampling, random epochs")
    _add_engine_args(p)
    add_output_args(p)
    add_checkpoint_args(p, more_rounds=False)
    p.set_defaults(handler=run_cifar10)
    return p


def _checkpoint_plan(args: argparse.Namespace):
    """``(path, every, resumed_round, checkpoint)`` of ``--checkpoint-every`` / ``--checkpoint`` / ``--resume``
    (``(None, 0, 0, None)`` without them): a fresh run refuses to replace an unfinished run's checkpoint and deletes
    a finished one's (:func:`fedlib.experiments.cifar10.train_runs` resumes any file it finds); ``--resume`` needs the
    file, with this run's ``--rounds`` (:func:`fedlib.cli.common.resolve_checkpoint` refuses a missing one), and
    without ``--checkpoint-every`` writes the last round's checkpoint only. ``checkpoint`` is the file's contents
    as read here for ``--resume`` (``None`` for a fresh run), handed to train_runs, which then does not read the file
    again (it is ~40 MB at full width)."""
    from ..checkpoint import load_checkpoint

    path = resolve_checkpoint(args)
    if path is None:
        return None, 0, 0, None
    if not args.resume:
        check_fresh_checkpoint(path, "table1")  # refuses an unfinished run's file, or a file of anything else
        path.unlink(missing_ok=True)  # a finished run's: train_runs would resume it and train nothing
        return path, args.checkpoint_every, 0, None
    doc = load_checkpoint(path, kind="table1", who="--checkpoint")
    total = (doc.get("config") or {}).get("rounds")
    if total != args.rounds:  # the step decay of the learning rate is laid out over the run's rounds
        raise CLIError(f"--resume: checkpoint {path} is of a run of {total} rounds; give --rounds {total} to "
                       "continue it")
    return path, args.checkpoint_every or args.rounds, int(doc["round"]), doc


def run_cifar10(args: argparse.Namespace) -> int:
    from ..experiments.cifar10 import cudnn_benchmark, data_fingerprint, train_runs

    check_output_path(args.out)
    check_out_not_data(args)
    check_out_not_data(args, "--checkpoint")  # not "exists and is no checkpoint: delete the file" about a data file
    algorithm = build_algorithm(args)
    lo, hi = resolve_epochs(args)
    device = _check_device(args)
    check_participation(args, args.num_clients)
    data = load_data_from_args(args)
    try:
        from ..data.partition import dirichlet_partition

        parts = dirichlet_partition(data.train_labels, args.num_clients, args.partition_alpha, args.partition_seed)
    except ValueError as exc:
        hint = ""
        if "min_size" in str(exc):  # the partition's advice names an argument the command line does not have
            hint = (" (the command line keeps the official min_size = 10 images per client: use fewer "
                    "--num-clients, a larger --partition-alpha or more data)")
        raise CLIError(f"--num-clients / --partition-alpha: {exc}{hint}") from None
    largest = max(len(c) for c in parts)
    if args.batch_size > largest:  # the engine pads every batch to B: beyond n_i that is only wasted work
        raise CLIError(f"--batch-size {args.batch_size} is larger than the largest client ({largest} images); "
                       f"--batch-size {largest} already trains every client on all its images per step")
    algorithm, tau_eff_value = resolve_tau_eff(args, algorithm, [len(c) for c in parts], args.batch_size, (lo, hi))
    ckpt, every, done, resume_from = _checkpoint_plan(args)
    name = f"{args.algorithm} seed {args.seed}"
    bar = progress_bar(args, args.rounds, args.algorithm, initial=done)

    # an interrupted run names the checkpoint it keeps (fedlib.cli._kept_checkpoints): any file at ckpt is now this
    # run's (a fresh run deleted a finished run's; the first write may be interrupted right after it is made)
    args.checkpoint_saved = ckpt is not None

    def on_round(t, records, elapsed):
        if bar is not None:
            bar.set_postfix(loss=f"{records[0].train_loss:.4f}", acc=f"{records[0].test_accuracy:.3f}", refresh=False)
            bar.update(1)

    try:
        with RunClock() as clock, cudnn_benchmark(args.cudnn_benchmark):
            res = train_runs([{"algorithm": algorithm, "epochs": (lo, hi), "seed": args.seed, "name": name,
                               "sampling": args.sampling, "clients_per_round": args.clients_per_round}],
                             data, parts, rounds=args.rounds, width=args.width, device=device,
                             precision=args.precision, path=args.path, cuda_graph=args.cuda_graph, conv=args.conv,
                             batch_size=args.batch_size, lr_decay=args.lr_decay, callback=on_round,
                             checkpoint=ckpt, checkpoint_every=every, who="--checkpoint", resume_from=resume_from,
                             call_info={"git_commit": clock.git_start[0], "git_dirty": clock.git_start[1],
                                        "command": _command(), "started_utc": _utc(clock.started)})
    except FloatingPointError as exc:
        kept = (f"no result written; checkpoint {ckpt} of the rounds before it kept" if ckpt is not None
                and ckpt.is_file() else "nothing written")
        raise CLIError(f"run cifar10 ({name}): {exc}; {kept}") from None
    finally:
        if bar is not None:
            bar.close()
    history = res["histories"][0]
    config = {"problem": "cifar10-vgg11",
              "data": {"source": data.source, "num_train": int(len(data.train_labels)),
                       "num_test": int(len(data.test_labels)), "num_clients": args.num_clients,
                       "partition_alpha": args.partition_alpha, "partition_seed": args.partition_seed,
                       "num_samples": [len(c) for c in parts],
                       **{k: v for k, v in data_fingerprint(data, parts).items() if k in ("sha256", "split_sha256")}},
              **config_from_args(args, ALGORITHM_FLAGS + SCHEDULE_FLAGS),
              "width": args.width, "precision": args.precision, "path": args.path, "cuda_graph": args.cuda_graph,
              "device": device}
    if tau_eff_value is not None:
        config["tau_eff_value"] = tau_eff_value
    if args.cudnn_benchmark:
        config["cudnn_benchmark"] = True
    if args.conv != "cudnn":
        config["conv"] = args.conv
    last = history[-1]
    resumed_from, seconds_before = res.get("resumed_from", 0), res.get("seconds_before", 0.0)
    summary = {"final_train_loss": last["train_loss"], "final_test_accuracy": last["test_accuracy"],
               "rounds": len(history), "seconds_per_round": (res["seconds"] + seconds_before) / len(history)}
    provenance = clock.provenance(device)
    if resumed_from:  # wall_time_s is this call's; the earlier calls' training time and commands, as table1's
        provenance["resumed"] = {"from_round": int(resumed_from), "first_started_utc": _utc(res["started"]),
                                 "training_seconds_before": float(seconds_before),
                                 "earlier_calls": list(res.get("calls_before", []))}
        summary["resumed_after_round"] = int(resumed_from)
    result = make_result(config, history, provenance, summary=summary)
    if args.out is not None:
        write_result(args.out, result)
    info(args, f"{args.algorithm}: final training loss {last['train_loss']:.4f}, test accuracy "
               f"{last['test_accuracy']:.4f} after {len(history)} round{'' if len(history) == 1 else 's'} "
               f"({result['provenance']['wall_time_s']:.1f} s)"
               + (f"; wrote {args.out}" if args.out else ""))
    return 0


# ============================================================================ bench cifar10
BENCH_DESCRIPTION = """\
Images per second, in one process on one device, of (a) the per-client eager loop common
simulators use (one VGG-11, torch.optim.SGD, clients one after another, batch 32) and (b)
the stacked engine, on the same round: the official Dir(0.1) split (seed 2020) of the
available labels over 16 clients, E = 2, the clients' tau_i scaled so that the longest one
runs --steps local steps (the shrinking-prefix structure kept; --full-round for the whole
round). One warm-up round per side, then --repeat timed rounds (median); evaluation
excluded. Without --data-root the shipped sample is used; --random-images times the real
50,000-image split (all labels ship with the repository) with random pixels, for a machine
that does not hold the images. On a CPU use a tiny --width (the default: 0.03 when --device
is the CPU, 1 on a GPU)."""

def add_bench_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("cifar10", help="stacked engine vs the per-client eager loop on VGG-11",
                       description=BENCH_DESCRIPTION,
                       formatter_class=HelpFormatter)
    _add_data_args(p, clients=False, without="without it the shipped sample is used (as --sample), or with "
                   "--random-images the full split's labels").add_argument(
        "--random-images", action="store_true",
        help="the real labels of all 50,000 training images (shipped) with random pixels: the Table 1 split's "
             "work without the images")
    g = p.add_argument_group("benchmark")
    g.add_argument("--steps", type=int_at_least(1), default=None,
                   help="local steps of the longest client (the round's tau_i scaled to it; default 20)")
    g.add_argument("--full-round", action="store_true", help="time the whole E = 2 round instead of --steps")
    g.add_argument("--repeat", type=int_at_least(1), default=2, help="timed rounds per side (after one warm-up)")
    g.add_argument("--runs", type=int_at_least(1), default=1,
                   help="federated runs stacked in the engine (Table 1 stacks several: `table1 --stack`)")
    _add_engine_args(p, precisions=("fp32", "bf16"), width_default=None,
                     width_help="default 0.03 when --device is the CPU, 1 on a GPU")
    g.add_argument("--json", type=user_path, default=None, help="write the measurements (with provenance) to this file")
    g.add_argument("--profile", type=user_path, default=None,
                   help="also profile one engine round (torch.profiler) and write its operator table to this file")
    g.add_argument("--compare", nargs="+", default=[], metavar="VARIANT",
                   help="speed candidates, each timed as another engine after the base one in this run, on the "
                        "same round, with its gain in images/s over the base: cudnn-benchmark (cuDNN's "
                        "algorithm search), channels-first (NCHW grouped convolutions), eager, cuda-graph, "
                        "runs=N, precision=fp32|bf16, conv=gemm|cudnn; several changes in one variant joined with '+'; "
                        "base = the base engine again (the comparison's own spread) "
                        "(e.g. --compare cudnn-benchmark runs=8 cudnn-benchmark+runs=8 base)")
    g.add_argument("--quiet", action="store_true", help="print nothing but errors")
    # the --width default follows the device, resolved by the command: deciding it here imported torch (3 s)
    # for every --help, and gave 1.0 to --device cpu on a GPU machine
    p.set_defaults(handler=bench_cifar10_command)
    return p


def bench_cifar10_command(args: argparse.Namespace) -> int:
    from ..experiments.cifar10 import bench_cifar10, format_bench, parse_bench_variants

    check_output_path(args.json, "--json")
    check_output_path(args.profile, "--profile")
    if args.json is not None and args.profile is not None and same_file(args.json, args.profile):
        raise CLIError(f"--profile {args.profile}: is the --json file; give the profile its own name")
    device = _check_device(args)
    if args.width is None:
        args.width = 1.0 if device.startswith("cuda") else 0.03
    try:  # before the data is read
        parse_bench_variants(args.compare, runs=args.runs, precision=args.precision, cuda_graph=args.cuda_graph,
                             path=args.path, cudnn_bench=args.cudnn_benchmark, cuda=device.startswith("cuda"),
                             conv=args.conv)
    except ValueError as exc:
        raise CLIError(f"--compare: {exc}") from None
    if args.full_round and args.steps is not None:  # --steps was ignored
        raise CLIError("--steps: --full-round times the whole round; give one of the two")
    steps = None if args.full_round else (20 if args.steps is None else args.steps)
    if args.random_images and args.download:  # was told to add --data-root, which --random-images refuses
        raise CLIError("--random-images makes its images and reads no data set; --download is not used with it")
    if args.download and args.data_root is None and not args.sample:  # was ignored, or blamed on --sample
        raise CLIError("--download fetches the full data set into --data-root; pass --data-root DIR with it")
    if args.random_images:
        from ..data.cifar10 import cifar10_random_images

        if args.sample or args.data_root is not None:
            raise CLIError("--random-images excludes --sample and --data-root")
        try:
            data = cifar10_random_images()
        except (FileNotFoundError, ValueError) as exc:
            raise CLIError(f"--random-images: {exc}") from None
    else:
        if not args.sample and args.data_root is None:
            args.sample = True  # the benchmark needs only the labels' split and some images
        data = load_data_from_args(args)
    for flag in ("--json", "--profile"):  # written at the end (or as variants finish): not over the data read
        check_out_not_data(args, flag)
    say = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    partial_written = []
    with RunClock() as clock:
        def write_partial(partial):  # a call cut short keeps what it finished
            partial["config"]["data"] = data.source
            write_bench(args.json, partial, clock.provenance(device))
            partial_written.append(len(partial["results"]["variants"]))

        try:
            out = bench_cifar10(data, width=args.width, steps=steps,
                                device=device, precision=args.precision, cuda_graph=args.cuda_graph, path=args.path,
                                repeat=args.repeat, runs=args.runs, profile=args.profile is not None,
                                cudnn_bench=args.cudnn_benchmark, conv=args.conv, compare=args.compare,
                                progress=say, on_partial=write_partial if args.json is not None else None)
        except KeyboardInterrupt:
            if not partial_written:
                raise
            print(f"python -m fedlib bench cifar10: interrupted; {args.json} keeps the base engine and the "
                  f"{partial_written[-1]} variant(s) finished before", file=sys.stderr)
            return 130
    out["config"]["data"] = data.source
    if args.profile is not None:
        from .._io import atomic_write

        atomic_write(args.profile, out.pop("profile") + "\n")
        if not args.quiet:
            print(f"wrote {args.profile}")
    return emit_bench(args, out, clock.provenance(device), format_bench)


# ============================================================================ table1
TABLE1_DESCRIPTION = """\
Run the Table 1 cells (paper Section 6) that are missing from --results, one result file
{cell_id}__seed{s}.json per cell and seed, in this order: every cell with the first seed,
then every cell with the next seed. Cells: E=2 and E~U(2,5) (inclusive) x local SGD,
momentum, proximal (FedAvg/FedProx vs FedNova); SCAFFOLD, FedNova-VR and momentum + VR
(U(2,5)); hybrid momentum (local + server momentum 0.9) and server momentum 0.9 alone
(FedNova, U(2,5)). lr 0.02 with momentum (local or server), else 0.05; mu 0.005 (E=2),
0.001 (U(2,5)). Time is estimated in training images (a U(2,5) run does 1.75x the work of
an E=2 run) at a rate taken from the groups already measured in this call, else from
earlier results with the same engine settings (those stacked as this call stacks first),
else from --images-per-second; a run whose estimate does not fit in the remaining
--budget-seconds is not started, and a group whose projected finish passes the budget while
training is stopped and writes nothing. A group killed or paused (--checkpoint-every,
--continue-later) resumes from its checkpoint in --results only with the same cells, rounds,
data and engine settings (--width, --precision, --path, --conv, --cudnn-benchmark: other
convolution algorithms round differently); --cuda-graph may change (graphs replay the same
kernels), and the result's provenance.resumed then says so. A checkpoint of other cells, rounds,
--width, --precision, --path or --conv is refused (exit 2, naming the differing keys) as soon as
it is found, before the group is announced or trained, by --dry-run too; one of other data or
--cudnn-benchmark when the group is resumed, after the data is read (not by --dry-run)."""


def add_table1_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("table1", help="run the missing Table 1 cells within a time budget",
                       description=TABLE1_DESCRIPTION, formatter_class=HelpFormatter)
    p.add_argument("--results", type=user_path, default=Path("data/results/cifar10"),
                   help="folder of the result files (created if missing)")
    p.add_argument("--budget-seconds", type=float, default=None,
                   help="wall-clock budget in seconds, finite (required; no default); no run is started that is "
                        "not expected to finish within it")
    p.add_argument("--seeds", default="0,1,2", help="comma-separated run seeds")
    p.add_argument("--cells", default=None, help="comma-separated cell ids (default: all, in table order)")
    p.add_argument("--rounds", type=int_at_least(1), default=100, help="rounds per run (100 in the paper)")
    p.add_argument("--stack", type=int_at_least(1), default=None,
                   help="runs trained together in one engine (default: 6 on CUDA, 2 on the CPU)")
    p.add_argument("--images-per-second", type=positive_float, default=None,
                   help="throughput hint for the first time estimate (e.g. the engine rate that `bench cifar10` "
                        "measured on this device); used only when --results holds no earlier result with the "
                        "same engine settings, until a group has been measured (default: none: the first group "
                        "starts unestimated and is measured while it trains)")
    p.add_argument("--checkpoint-every", type=int_at_least(0), default=1,
                   help="checkpoint each group every N rounds so a killed call resumes it (0: never; each "
                        "checkpoint copies every stacked model to the host)")
    p.add_argument("--continue-later", type=float, default=0.0, metavar="SECONDS",
                   help="another call on this machine follows with about SECONDS more: size groups to the budget "
                        "plus SECONDS, and pause a group at this call's budget (checkpoint in --results) for the "
                        "next call to resume (a GPU session's calls share /tmp; the last call passes 0)")
    p.add_argument("--dry-run", action="store_true",
                   help="list what would run, run nothing: the runs this call would start and those beyond the "
                        "budget, estimated and grouped as the call would (rate from earlier results with the same "
                        "engine settings, else --images-per-second), and where the rate comes from")
    p.add_argument("--summary", action="store_true",
                   help="print the table of the results present in --results (final and best accuracy, seeds, "
                        "minutes per run, the paper's values), FedNova's lead over its baseline per pair and the "
                        "rounds FedNova needs to reach FedAvg's final accuracy; run nothing (takes only --results)")
    p.add_argument("--list-cells", action="store_true",
                   help="print the cells and their hyper-parameters (takes no other flag)")
    _add_data_args(p, clients=False)
    _add_engine_args(p)
    # each flag's default, to tell --summary / --list-cells apart from flags they would ignore
    p.set_defaults(handler=table1_command,
                   table1_flags={a.dest: (a.option_strings[-1], a.default) for a in p._actions
                                 if a.option_strings and a.dest != "help"})
    return p


#: The flags each read-only mode of ``table1`` uses (besides itself); any other flag given is refused.
_MODE_FLAGS = {"summary": ("results",), "list_cells": ()}


def _refuse_unused_flags(args: argparse.Namespace, mode: str) -> None:
    """Refuse flags that ``table1 --summary`` / ``--list-cells`` would ignore: ``--summary --seeds 0``
    printed every seed's results, as if the filter had been applied."""
    unused = [flag for dest, (flag, default) in args.table1_flags.items()
              if dest != mode and dest not in _MODE_FLAGS[mode] and getattr(args, dest) != default]
    if unused:
        used = ", ".join(f"--{d.replace('_', '-')}" for d in _MODE_FLAGS[mode])
        raise CLIError(f"--{mode.replace('_', '-')} takes {'only ' + used if used else 'no other flag'}; "
                       f"{', '.join(unused)} {'is' if len(unused) == 1 else 'are'} not used by it")


def _parse_seeds(text: str):
    try:
        seeds = [int(s) for s in text.split(",") if s.strip() != ""]
    except ValueError:
        raise CLIError(f"--seeds: expected comma-separated integers like 0,1,2, got {text!r}") from None
    if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise CLIError(f"--seeds: expected distinct integers >= 0, got {text!r}")
    return seeds


def _table1_settings(args: argparse.Namespace, device: str) -> dict:
    """The settings of ``table1`` that its estimates and budget decisions depend on, the same for the real call
    and its ``--dry-run``: the engine settings that select earlier results' rates, the runs stacked, the rate
    hint and the later call's seconds."""
    return {"width": args.width, "rounds": args.rounds, "device": device, "precision": args.precision,
            "path": args.path, "cuda_graph": args.cuda_graph, "cudnn_bench": args.cudnn_benchmark, "conv": args.conv,
            "stack": args.stack or (6 if device.startswith("cuda") else 2),
            "images_per_second": args.images_per_second, "continue_later": args.continue_later}


def table1_command(args: argparse.Namespace) -> int:
    from ..checkpoint import CheckpointError
    from ..experiments.cifar10 import CELL_IDS, CELLS, OtherSetupError, run_table1

    if args.list_cells:
        _refuse_unused_flags(args, "list_cells")
        for c in CELLS:
            print(f"{c.id:26s} {c.algorithm:10s} solver={c.solver:8s} E={c.epochs:3s} lr={c.lr} mu={c.mu} "
                  f"server={c.server}" + (f" beta={c.server_momentum}" if c.server_momentum else "")
                  + (f" tau_eff={c.tau_eff}" if c.tau_eff else ""))
        return 0
    if args.summary:
        from ..experiments.cifar10 import (GAP_HEADERS, MATCH_HEADERS, SUMMARY_HEADERS, fednova_gaps,
                                           format_gap_rows, format_match_rows, format_summary_rows,
                                           load_table1_results, rounds_to_match, table1_summary)
        from ..report import markdown_table

        _refuse_unused_flags(args, "summary")
        if not args.results.is_dir():
            where = ""
            if not args.results.is_absolute():  # e.g. the default data/results/cifar10 outside the repository root
                where = (f" (relative to the current folder {Path.cwd()}: run from the repository root, or give "
                         "--results the folder of the result files)")
            raise CLIError(f"--results {args.results}: "
                           f"{'not a folder' if args.results.exists() else 'no such folder'}{where}")
        try:
            results = load_table1_results(args.results)
        except OtherSetupError as exc:
            raise CLIError(f"--results: {exc}") from None
        print(markdown_table(SUMMARY_HEADERS, format_summary_rows(table1_summary(results)), spec="s"))
        gaps = fednova_gaps(results)
        if gaps:
            print()
            print(markdown_table(GAP_HEADERS, format_gap_rows(gaps), spec="s"))
        match = rounds_to_match(results)
        if match:
            print()
            print(markdown_table(MATCH_HEADERS, format_match_rows(match), spec="s"))
        return 0
    if args.budget_seconds is None:
        raise CLIError("--budget-seconds is required (the wall-clock budget; 0 with --dry-run lists what is missing)")
    if not args.budget_seconds >= 0:
        raise CLIError(f"--budget-seconds must be >= 0, got {args.budget_seconds}")
    if not math.isfinite(args.budget_seconds):  # 'inf' has no documented meaning: not "no limit" by accident
        raise CLIError(f"--budget-seconds must be a finite number of seconds, got {args.budget_seconds}; for no "
                       "practical limit give one longer than the runs (e.g. 1e9)")
    if not args.continue_later >= 0:
        raise CLIError(f"--continue-later must be >= 0 seconds, got {args.continue_later}")
    if not math.isfinite(args.continue_later):
        raise CLIError(f"--continue-later must be a finite number of seconds, got {args.continue_later}")
    seeds = _parse_seeds(args.seeds)
    cells = None
    if args.cells is not None:
        cells = [c.strip() for c in args.cells.split(",") if c.strip()]
        if not cells:  # "" or "," trained nothing (or everything) without a word
            raise CLIError(f"--cells: expected comma-separated cell ids, got {args.cells!r}; omit --cells for all")
        bad = [c for c in cells if c not in CELL_IDS]
        if bad:
            raise CLIError(f"--cells: unknown cell(s) {bad}; known: {', '.join(CELL_IDS)}")
        twice = sorted({c for c in cells if cells.count(c) > 1})
        if twice:
            raise CLIError(f"--cells: {', '.join(twice)} listed twice (the run would be trained twice)")
    if args.results.exists() and not args.results.is_dir():
        raise CLIError(f"--results {args.results}: not a folder")
    if args.dry_run:
        # present results must be of the data the real call would train on, and the estimates at its size: the
        # shipped sample (read: it is small) with --sample, else the full training set (load_cifar10 reads
        # exactly 50,000 images); the device as the real call resolves it, unchecked (a dry run needs no GPU)
        from ..experiments.cifar10 import PAPER, resolve_device

        sample = load_data_from_args(args) if args.sample else None
        try:
            run_table1(args.results, budget_seconds=args.budget_seconds, seeds=seeds, cells=cells, dry_run=True,
                       data=sample, num_train=PAPER["num_train"], **_table1_settings(args, resolve_device(args.device)))
        except OtherSetupError as exc:
            raise CLIError(f"--results: {exc}") from None
        except CheckpointError as exc:  # a paused group's checkpoint that the real call would refuse too
            raise CLIError(str(exc)) from None
        return 0
    device = _check_device(args)
    check_out_not_data(args, "--results")  # result files among the batches or in the shipped sample folder
    made = [p for p in (args.results, *args.results.parents) if not p.exists()]  # deepest first
    try:  # before the data is read and anything trains: the results must have somewhere to go
        args.results.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"--results {args.results}: cannot create the folder ({exc.strerror})") from None
    try:
        check_output_path(args.results / "result.json", "--results")
        data = load_data_from_args(args)
    except CLIError:  # refused before anything ran: leave no folder this call made
        for folder in made:
            try:
                folder.rmdir()
            except OSError:
                break
        raise
    try:
        out = run_table1(args.results, budget_seconds=args.budget_seconds, seeds=seeds, cells=cells, data=data,
                         data_source=data.source, checkpoint_every=args.checkpoint_every,
                         log=lambda s: print(s, flush=True), **_table1_settings(args, device))
    except FloatingPointError as exc:
        raise CLIError(str(exc)) from None
    except OtherSetupError as exc:
        raise CLIError(f"--results: {exc}") from None
    except CheckpointError as exc:  # a paused or killed group's checkpoint of another configuration
        raise CLIError(str(exc)) from None
    print(f"table1: {len(out['written'])} written, {len(out['skipped'])} already present, "
          f"{len(out['not_started'])} not started, {len(out['aborted'])} stopped for the budget"
          + (f", {len(out['paused'])} paused for the next call" if out["paused"] else ""), flush=True)
    return 0
