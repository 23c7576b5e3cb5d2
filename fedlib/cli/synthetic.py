"""``python -m fedlib run synthetic`` and ``python -m fedlib bench synthetic``.

Multinomial logistic regression (:mod:`fedlib.problems.logistic`) on Synthetic(alpha,
beta) generated on the fly (FedProx's generator, :func:`fedlib.data.synthetic`) or on a
LEAF / FedProx JSON file or folder (``--data``), trained by the batched engine
(:mod:`fedlib.engines.batched`) or the per-client loop (``--engine reference``).

Example::

    python -m fedlib run synthetic --algorithm fednova --epochs 1-5 --rounds 100 --out fednova.json
    python -m fedlib run synthetic --algorithm fedprox --mu 1 --sampling with-replacement \\
        --clients-per-round 10 --out fedprox.json
    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 python -m fedlib bench synthetic --json bench.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ..results import RunClock, make_result, write_result
from .common import (check_torch_device, emit_bench, ALGORITHM_FLAGS, SCHEDULE_FLAGS, CLIError, HelpFormatter, add_algorithm_args,
                     add_checkpoint_args, add_device_arg, add_output_args, add_schedule_args, build_algorithm,
                     check_not_input, check_output_path, check_participation, config_from_args, info, lr_schedule,
                     progress_bar, int_at_least, nonneg_float, resolve_checkpoint, resolve_epochs, resolve_tau_eff,
                     check_fresh_checkpoint, user_path)

__all__ = ["add_run_parser", "add_bench_parser", "run_synthetic", "bench_synthetic_command", "load_dataset"]

DESCRIPTION = """\
Train multinomial logistic regression (d -> C, FedNova paper Section 6) with one federated
algorithm and write the per-round history (global training loss F(x) = sum_i p_i F_i(x),
test accuracy on the union of the client test sets, tau_eff, chi^2(p||w), the local steps
tau_i) to --out. Data: Synthetic(--alpha, --beta) with --num-clients clients (FedProx's
generator, seed --data-seed), or a LEAF / FedProx JSON file or folder (--data).
Paper settings: batch 20, lr 0.02, E = 2 or E_i ~ U{1..5}."""


#: Defaults of the flags that describe the generated Synthetic data (meaningless with --data). The
#: parser's default is None, so that such a flag given with --data is refused even at this value;
#: :func:`load_dataset` fills these in when the data are generated.
SYNTHETIC_DEFAULTS = {"alpha": 1.0, "beta": 1.0, "num_clients": 30, "data_seed": 0}


def _add_data_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("data")
    d = SYNTHETIC_DEFAULTS
    g.add_argument("--data", type=user_path, default=None,
                   help="a LEAF / FedProx JSON file (training data only) or folder (train/ and test/ subfolders); "
                        "default: generate Synthetic(--alpha, --beta)")
    g.add_argument("--alpha", type=nonneg_float, default=None, help="Synthetic: std of the client models' mean (as in FedProx's generator it shifts all class "
                        f"scores alike, so the labels do not depend on it; at most 2**26, above which float64 rounding would change "
                        f"them) (default: {d['alpha']})")
    g.add_argument("--beta", type=nonneg_float, default=None,
                   help=f"Synthetic: spread of the client inputs (std) (default: {d['beta']})")
    g.add_argument("--num-clients", type=int_at_least(1), default=None,
                   help=f"Synthetic: number of clients (default: {d['num_clients']})")
    g.add_argument("--data-seed", type=int_at_least(0), default=None,
                   help="Synthetic: seed of the data set (fixed across run seeds, like the paper's one data set) "
                        f"(default: {d['data_seed']})")
    g.add_argument("--num-classes", type=int_at_least(2), default=None,
                   help="number of classes (default: 10 for Synthetic; largest label + 1 for --data)")
    g.add_argument("--l2", type=nonneg_float, default=0.0,
                   help="L2 penalty l2/2 ||W||^2 (FedProx's model declares 0.001 but never adds it to its loss)")


def add_run_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("synthetic", help="logistic regression on Synthetic(alpha, beta) or LEAF data",
                       description=DESCRIPTION, formatter_class=HelpFormatter)
    _add_data_args(p)
    add_algorithm_args(p, algorithm="fednova", lr=0.02)
    add_schedule_args(p, rounds=100, epochs="2", batch_size=20)
    g = p.add_argument_group("engine")
    g.add_argument("--engine", choices=["batched", "reference"], default="batched",
                   help="batched: all clients of a round as array operations; reference: one client after "
                        "another (the same numbers, slower)")
    g.add_argument("--backend", choices=["numpy", "torch"], default="numpy",
                   help="array library of the batched engine (torch runs on --device)")
    add_device_arg(g)
    add_output_args(p)
    add_checkpoint_args(p, distributed=True)
    p.set_defaults(handler=run_synthetic)
    return p


def load_dataset(args: argparse.Namespace):
    """The federated data set named by ``--data`` or the Synthetic flags (whose unset values
    it fills in from :data:`SYNTHETIC_DEFAULTS`; given with ``--data``, even at those values,
    they are refused)."""
    from ..data import load_leaf, synthetic

    if args.data is not None:
        ignored = [k for k in SYNTHETIC_DEFAULTS if getattr(args, k) is not None]
        if ignored:
            flags = ", ".join("--" + k.replace("_", "-") for k in ignored)
            one = len(ignored) == 1
            raise CLIError(f"{flags}: {'describes' if one else 'describe'} the generated Synthetic data, not "
                           f"--data {args.data}; drop {'it' if one else 'them'}")
        try:
            return load_leaf(args.data, num_classes=args.num_classes)
        except ValueError as exc:
            raise CLIError(f"--data: {exc}") from None
    for key, value in SYNTHETIC_DEFAULTS.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    _check_run_memory(args.num_clients, args.data_seed)
    try:
        return synthetic(args.alpha, args.beta, num_clients=args.num_clients, seed=args.data_seed,
                         num_classes=args.num_classes or 10)
    except ValueError as exc:  # e.g. --alpha above ALPHA_MAX: name the flag, not synthetic()'s argument
        name, _, rest = str(exc).partition(" ")
        if name in _SYNTHETIC_FLAGS:
            raise CLIError(f"{_SYNTHETIC_FLAGS[name]} {rest}") from None
        raise


#: Copies of the generated features a run holds at once: the data set, LogisticProblem's concatenation and the
#: batched engine's features with a column of ones (measured: peak memory 3.4-3.6 times the data set's, 2,000 and
#: 6,000 clients, with ~0.3 GB of imports besides).
RUN_DATA_COPIES = 3


def _check_run_memory(num_clients: int, data_seed: int) -> None:
    """``MemoryError`` (exit 2, "out of memory") before a run whose Synthetic data would not fit
    :data:`RUN_DATA_COPIES` times: ``--num-clients 100000`` generated data for minutes and was then killed by the
    operating system (exit 137, no message). The sizes are the ones :func:`fedlib.data.synthetic` draws."""
    import inspect

    from .._validate import check_memory
    from ..data.synthetic import _client_sizes, synthetic

    if num_clients < 1:
        return  # synthetic() names the flag
    dim = inspect.signature(synthetic).parameters["dim"].default  # the CLI's data: synthetic()'s d
    total = int(_client_sizes(data_seed, num_clients, None).sum())
    check_memory(RUN_DATA_COPIES * total * (dim + 1) * 8,
                 f"--num-clients {num_clients}: the Synthetic data ({total:,} samples), held {RUN_DATA_COPIES} times "
                 "(the data set, the problem's copy, the engine's),")


#: synthetic()'s argument names -> the flags that set them.
_SYNTHETIC_FLAGS = {"alpha": "--alpha", "beta": "--beta", "num_clients": "--num-clients", "seed": "--data-seed",
                    "num_classes": "--num-classes"}


def _data_config(args, ds) -> dict:
    base = {"num_clients": ds.num_clients, "num_features": ds.num_features, "num_classes": ds.num_classes,
            "num_samples": ds.num_samples.tolist()}
    if args.data is not None:  # absolute: a rerun from another folder finds it; sha256: the same contents
        return {"source": os.fspath(Path(args.data).expanduser().resolve()), "name": ds.name, **base,
                "sha256": ds.sha256()}
    return {"generator": "synthetic", "alpha": args.alpha, "beta": args.beta, "data_seed": args.data_seed, **base}


def _without_data_name(config) -> dict:
    config = dict(config)
    if isinstance(config.get("data"), dict):
        config["data"] = {k: v for k, v in config["data"].items() if k != "name"}
    return config


def _by_contents(config: dict) -> dict:
    """``config`` without ``data.source`` when it names a ``--data`` file by its SHA-256 (the contents, still
    compared): the ranks of a distributed run may keep the file at other paths."""
    data = config.get("data")
    if not (isinstance(data, dict) and "sha256" in data):
        return config
    return {**config, "data": {k: v for k, v in data.items() if k != "source"}}


def _data_by_contents(saved: dict, current: dict) -> tuple:
    """``(saved, current)`` compared by their ``--data`` contents (:func:`_by_contents`) when both name a file by
    its SHA-256: the file may have moved since the checkpoint, and a distributed run's checkpoint records rank 0's
    path."""
    if not all(isinstance(c.get("data"), dict) and "sha256" in c["data"] for c in (saved, current)):
        return saved, current
    return _by_contents(saved), _by_contents(current)


def _world_size_from_env() -> int:
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise CLIError(f"--distributed: WORLD_SIZE={os.environ.get('WORLD_SIZE')!r} is not an integer") from None


def rank0_of(distributed: bool) -> bool:
    """Whether this process prints (rank 0, or not distributed): ``RANK`` from torchrun's environment."""
    return not distributed or os.environ.get("RANK", "0") == "0"


def _segment_start(first_round: int) -> dict:
    """What a checkpoint records of the process computing rounds ``first_round..``: its
    start, code and versions (a resumed run's provenance lists every earlier segment)."""
    import time

    from .. import __version__
    from ..results import _utc, git_commit

    sha, dirty = git_commit()
    return {"rounds": [first_round, first_round], "started_utc": _utc(time.time()), "_t0": time.perf_counter(),
            "git_commit": sha, "git_dirty": dirty, "fedlib": __version__}


def _different_code(codes: list) -> bool:
    """Whether the ranks' ``(git commit, dirty, fedlib version)`` show other code: two known commits
    differ, a known checkout has uncommitted changes on one rank and none on another, or the versions
    differ (a checkout without ``.git`` reads ``"unknown"``, which agrees with any commit)."""
    commits = {c for c, _, _ in codes if c != "unknown"}
    dirty = {d for _, d, _ in codes if d is not None}
    return len(commits) > 1 or len(dirty) > 1 or len({v for _, _, v in codes}) > 1


def _segment_end(segment: dict, done: int) -> dict:
    import time

    out = {k: v for k, v in segment.items() if not k.startswith("_")}
    out["rounds"] = [segment["rounds"][0], done]
    out["seconds"] = round(time.perf_counter() - segment["_t0"], 6)
    return out


def _stop_together(comm, failed: BaseException | None, what: str = "stopped before the first round") -> None:
    """Tell every rank whether one failed (``failed``: its error, else ``None``); raise on every rank if one did: the
    failing rank its own error, the others a :class:`CLIError` that names the rank, ``what`` it failed at and its
    message (one collective: before the ranks compare their settings, and after a checkpoint round's write).
    ``comm`` ``None`` (one process, not distributed) raises ``failed`` alone."""
    if comm is None or comm.world_size == 1:
        if failed is not None:
            raise failed
        return
    from ..distributed import _failure_text, _raise_if_stopped

    text = None if failed is None else _failure_text(failed)
    seen = comm.all_gather_object(text)
    if failed is not None:
        raise failed
    # a rank whose round failed before its record (its metrics) skips on_round_end, and so this collective: it
    # meets it with run_batched's hand-off of that error (fedlib.distributed._stop_round) instead
    _raise_if_stopped(seen)
    stopped = [(r, t) for r, t in enumerate(seen) if t is not None]
    if stopped:
        ranks = "; ".join(f"rank {r}: {t}" for r, t in stopped)
        raise CLIError(f"--distributed: {'a rank' if len(stopped) == 1 else 'ranks'} {what} ({ranks}); every "
                       "rank stops")


def run_synthetic(args: argparse.Namespace) -> int:
    from ..checkpoint import check_config, load_checkpoint, save_checkpoint
    from ..distributed import RankStopped, init_from_env, under_torchrun
    from ..engines.batched import resolve_device, run_engine
    from ..problems.logistic import LogisticProblem
    from ..schedules import make_epoch_schedule

    distributed = bool(getattr(args, "distributed", False)) or under_torchrun()
    device, failed = None, None
    # what one machine may fail alone (its files, its GPU, its checkpoint): a rank stopping here, before the
    # process group, left the others waiting for it in the rendezvous until the group's timeout (10 minutes);
    # it now joins the group to tell them, and every rank stops with the message (_stop_together)
    try:
        check_output_path(args.out)
        check_not_input(args.out, args.data)
        algorithm = build_algorithm(args)
        if args.engine == "reference" and (args.backend != "numpy" or args.device not in (None, "cpu")):
            raise CLIError("--engine reference runs with numpy on the CPU: drop --backend / --device")
        try:
            device = resolve_device(args.backend, args.device)
        except ValueError as exc:
            raise CLIError("--device: " + str(exc).removeprefix("device: ").replace("backend='torch'", "--backend torch")) \
                from None
        check_torch_device(device)
        lo, hi = resolve_epochs(args)
        ckpt_path = resolve_checkpoint(args)
        if distributed and args.engine != "batched":
            raise CLIError("--distributed runs the batched engine: drop --engine reference")
        if ckpt_path is not None and args.engine != "batched":
            raise CLIError("--checkpoint-every / --resume need --engine batched")
        ds = load_dataset(args)
        check_participation(args, ds.num_clients)
        if distributed:
            world = _world_size_from_env()
            if world > ds.num_clients:
                raise CLIError(f"--distributed: world size {world} is larger than the number of clients "
                               f"({ds.num_clients}); use at most {ds.num_clients} processes")
        problem = LogisticProblem(ds, l2=args.l2, num_classes=args.num_classes)
        schedule = make_epoch_schedule(problem.num_samples, args.batch_size, (lo, hi), seed=args.seed)
        algorithm, tau_eff_value = resolve_tau_eff(args, algorithm, problem.num_samples, args.batch_size, (lo, hi),
                                                   warn=rank0_of(distributed))
        config = {"problem": "synthetic-logistic" if args.data is None else "leaf-logistic",
                  "data": _data_config(args, ds), "l2": args.l2,
                  **config_from_args(args, ALGORITHM_FLAGS + SCHEDULE_FLAGS),
                  "engine": args.engine, "backend": args.backend, "device": device}
        if tau_eff_value is not None:
            config["tau_eff_value"] = tau_eff_value

        resume = None
        earlier: list = []  # the segments of the run that earlier processes computed (resumed runs)
        if args.resume:
            doc = load_checkpoint(ckpt_path, kind="synthetic", who="--resume")
            # data.name is the --data path as typed (the resolved data.source identifies the file): the same
            # file given from another folder, or through a link, resumes
            saved, done = _without_data_name(doc["config"]), len(doc["history"])
            if args.lr_decay == "constant" and saved.get("lr_decay") == "constant" and saved.get("rounds") != args.rounds:
                # a constant-lr run's rounds do not depend on how many follow (every draw is keyed by seed, round and
                # client): a finished or interrupted run continues to more --rounds, or stops earlier, bit for bit
                if args.rounds < done:
                    raise CLIError(f"--resume: checkpoint {ckpt_path} has {done} rounds done; give --rounds {done} or "
                                   f"more (to continue it) or start a new run (another --checkpoint / --out)")
                saved["rounds"] = args.rounds
            hint = ("--lr-decay step divides the lr after 50% and 75% of --rounds, so a step-decay run's rounds depend "
                    "on its total: rerun it from round 0 with the new --rounds" if saved.get("rounds") != args.rounds
                    and "step" in (args.lr_decay, saved.get("lr_decay")) else "")
            current = _without_data_name(config)
            # the --data file by its contents, wherever it is now: moved since the checkpoint, or kept at its own path
            # on each machine of a distributed run (the checkpoint names rank 0's)
            saved, current = _data_by_contents(saved, current)
            check_config(ckpt_path, saved, current, who="--resume", hint=hint)
            resume = {"state": doc["state"], "history": doc["history"], "initial": doc["initial"]}
            earlier = list((doc.get("extra") or {}).get("segments") or [])
        else:
            check_fresh_checkpoint(ckpt_path, "synthetic")
        segment = _segment_start(0 if resume is None else len(resume["history"]))
        if earlier and rank0_of(distributed):
            commits = sorted({e.get("git_commit") for e in earlier} - {segment["git_commit"]})
            if commits:
                print(f"warning: --resume: rounds before {segment['rounds'][0]} were computed by commit(s) "
                      f"{', '.join(map(str, commits))}, this process runs {segment['git_commit']} "
                      "(recorded in the result's provenance.resumed)", file=sys.stderr, flush=True)

    except Exception as exc:  # noqa: BLE001 - raised again on this rank, after the others were told
        if not distributed:
            raise
        failed = exc
    comm = None
    if distributed:
        if device is None:  # this rank stopped before choosing its device: join on the one its flags choose
            try:
                device = resolve_device(args.backend, args.device)
            except ValueError:
                raise failed from None  # no device to join with (a GPU this machine lacks): stop alone
        try:
            comm = init_from_env(device)
        except ValueError as exc:  # not under torchrun: no other rank to tell
            if failed is not None:
                raise failed from None
            raise CLIError(str(exc)) from None
        _stop_together(comm, failed)
    rank0 = comm is None or comm.rank == 0
    segment["world_size"] = 1 if comm is None else comm.world_size
    if comm is not None and comm.world_size > 1:
        # every rank reads its own checkpoint file: they must all resume from the same round of the
        # same run, or ranks at different rounds would train together (a machine without the file
        # stopped with "checkpoint not found", and _stop_together told the others)
        # a rank's own GPU may be named differently; --data: the same contents, wherever each machine keeps the file
        same = _by_contents(_without_data_name({k: v for k, v in config.items() if k != "device"}))
        # a checkpoint round gathers the c_i from every rank (a collective): the ranks must checkpoint alike
        same["checkpoint_every"] = args.checkpoint_every
        code = (segment["git_commit"], segment["git_dirty"], segment["fedlib"])
        seen = comm.all_gather_object((segment["rounds"][0], json.dumps(same, sort_keys=True, default=str), code))
        configs = [json.loads(c) for _, c, _ in seen]
        differ = sorted({k for c in configs for k in c if any(c.get(k) != o.get(k) for o in configs)})
        if differ:  # other flags or data (a fresh run too: no checkpoint to blame)
            raise CLIError(f"--distributed: the ranks were started with different settings (differing keys: "
                           f"{', '.join(differ)}); every rank must run the same command on the same data")
        codes = [tuple(c) for _, _, c in seen]
        if _different_code(codes):  # each rank trains its own clients with its own code; provenance names rank 0's
            ranks = "; ".join(f"rank {r}: commit {c}{' (uncommitted changes)' if d else ''}, fedlib {v}"
                              for r, (c, d, v) in enumerate(codes))
            raise CLIError(f"--distributed: the ranks run different code ({ranks}); every rank must run the same "
                           "fedlib checkout (the result's provenance records rank 0's alone)")
        if len({r for r, _, _ in seen}) > 1:
            raise CLIError(f"--resume: the ranks resumed from different checkpoints (rounds "
                           f"{[r for r, _, _ in seen]}); every rank must read the same checkpoint file, e.g. on a "
                           "shared filesystem")
    # more or fewer processes than before (2 -> 1 as much as 1 -> 2): the sums add in another order
    earlier_sizes = sorted({e.get("world_size") for e in earlier} - {None, segment["world_size"]})
    if earlier_sizes and rank0:
        print(f"warning: --resume: earlier rounds ran on {earlier_sizes} process(es), these on "
              f"{segment['world_size']}: the sums add in another order (differences near 1e-16 relative)",
              file=sys.stderr, flush=True)
    every = args.checkpoint_every
    if every is None and resume is not None:  # write the last round's checkpoint: the file would otherwise stay at
        every = args.rounds                    # its earlier round, an unfinished run that a fresh one may not replace

    def on_round_end(state, history, initial):
        done = len(history)
        if ckpt_path is None or every is None or not (done % every == 0 or done == args.rounds):
            return
        failed = None
        if rank0:  # run_batched hands on_round_end every client's c_i (gathered from the ranks)
            # an interrupted run names the checkpoint (fedlib.cli._kept_checkpoints): set before the write,
            # which is atomic, so that a Ctrl-C right after it still does
            args.checkpoint_saved = True
            try:
                save_checkpoint(ckpt_path, config=config, round_done=done, state=state,
                                history=history, initial=initial, seed=args.seed, kind="synthetic",
                                extra={"segments": earlier + [_segment_end(segment, done)]}, who="--checkpoint")
            except Exception as exc:  # noqa: BLE001 - raised again, on every rank
                failed = exc
        # a write that failed on rank 0 (a full disk) left the others waiting in the next round's collective
        _stop_together(comm, failed, f"could not write the checkpoint of round {done}")

    bar = progress_bar(args, args.rounds, args.algorithm,
                       initial=0 if resume is None else len(resume["history"])) if rank0 else None

    def on_round(rec):
        if bar is not None:
            loss = rec.get("train_loss")
            bar.set_postfix(loss=f"{loss:.4f}" if loss is not None else "-", refresh=False)
            bar.update(1)

    # on_round_end only when it writes: with it, a distributed VR run gathers the c_i after every round
    extra = {} if comm is None and ckpt_path is None else {
        "comm": comm, "resume": resume, "on_round_end": on_round_end if ckpt_path is not None and every is not None
        else None}
    try:
        with RunClock() as clock:
            run = run_engine(args.engine, algorithm, problem, schedule, args.rounds, batch_size=args.batch_size,
                             seed=args.seed, sampling=args.sampling, clients_per_round=args.clients_per_round,
                             lr_at=lr_schedule(args), backend=args.backend, device=device, callback=on_round,
                             **extra)
    except RankStopped as exc:  # another rank's own round failed (its clients' training, its progress bar): it
        # printed its error and stops; so does this rank, naming it, the round and the error (status 2)
        raise CLIError(f"--distributed: {exc}") from None
    finally:
        if bar is not None:
            bar.close()
        if comm is not None:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()

    if comm is not None:
        config["world_size"] = comm.world_size
    last = run.history[-1]
    summary = {"final_train_loss": last["train_loss"], "final_test_accuracy": last["test_accuracy"],
               "rounds": len(run.history)}
    provenance = clock.provenance(device)
    if resume is not None:  # this process computed only the rounds after the checkpoint
        provenance["resumed"] = {"from_round": segment["rounds"][0], "earlier_segments": earlier,
                                 "note": "wall_time_s and the versions above are this process's; earlier_segments "
                                         "lists the processes that computed the rounds before"}
    result = make_result(config, run.history, provenance, initial=run.initial, summary=summary)
    if not rank0:
        return 0
    if args.out is not None:
        write_result(args.out, result)
    acc = last["test_accuracy"]
    info(args, f"{args.algorithm}: final training loss {last['train_loss']:.6f}, test accuracy "
               f"{'-' if acc is None else f'{acc:.4f}'} after {len(run.history)} "
               f"round{'' if len(run.history) == 1 else 's'} ({result['provenance']['wall_time_s']:.1f} s)"
               + (f"; wrote {args.out}" if args.out else ""))
    return 0


# ----------------------------------------------------------------------------- bench
def add_bench_parser(sub) -> argparse.ArgumentParser:
    from ..bench import __doc__ as bench_doc

    p = sub.add_parser("synthetic", help="batched engine vs the per-client loop on Synthetic(1,1)",
                       description=bench_doc.split("\n\n")[0] + "\n\nRun with 2 threads: OMP_NUM_THREADS=2 "
                       "OPENBLAS_NUM_THREADS=2 MKL_NUM_THREADS=2 python -m fedlib bench synthetic",
                       formatter_class=HelpFormatter)
    p.add_argument("--rounds", type=int_at_least(1), default=5, help="rounds timed per engine and repetition")
    p.add_argument("--repeat", type=int_at_least(1), default=3, help="repetitions (the median is reported)")
    p.add_argument("--epochs", default="2", help="local epochs: '2' or an inclusive range like '2-5'")
    p.add_argument("--algorithm", choices=["fedavg", "fednova", "scaffold", "vrlsgd", "fednova-vr"],
                   default="fednova", help="algorithm (local SGD, lr 0.02, batch 20)")
    p.add_argument("--data-seed", type=int_at_least(0), default=0, help="seed of the Synthetic(1,1) data set")
    p.add_argument("--equal-sizes", action="store_true",
                   help="split the same total number of samples equally over the clients (no critical path)")
    p.add_argument("--with-eval", action="store_true", help="also evaluate F(x) after every round (both engines)")
    p.add_argument("--json", type=user_path, default=None, help="write the measurements (with provenance) to this file")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    p.set_defaults(handler=bench_synthetic_command)
    return p


def bench_synthetic_command(args: argparse.Namespace) -> int:
    from ..bench import bench_synthetic, format_bench

    check_output_path(args.json, "--json")
    resolve_epochs(args)
    with RunClock() as clock:
        out = bench_synthetic(rounds=args.rounds, repeat=args.repeat, epochs=args.epochs, algorithm=args.algorithm,
                              data_seed=args.data_seed, equal_sizes=args.equal_sizes, evaluate=args.with_eval,
                              progress=None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True)))
    return emit_bench(args, out, clock.provenance("cpu"), format_bench)
