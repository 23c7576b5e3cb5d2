#!/usr/bin/env python3
"""File what ``scripts/gpu_run.sh`` brought back from a GPU machine into the repository.

    python scripts/import_gpu_results.py FOLDER [--repo .] [--tag h200] [--force] [--smoke]

FOLDER holds the script's output (``log.txt``, ``bench_cifar10.json``,
``bench_cifar10_eager.json`` and/or ``bench_cifar10_compare.json``, ``cifar10-results.tar.gz``). Every file is checked before
anything is written:

* each Table 1 result in the archive must be named ``<cell>__seed<s>.json``, pass the
  result schema (:func:`fedlib.results.validate_result`), name the same cell and seed in
  its config, carry a device in its provenance, and be a run of the paper's setup (100
  rounds, width 1, all 50,000 training and 10,000 test images, on a GPU) — ``table1`` refuses
  to count a result of another setup as done, so one filed by mistake would block its cell;
  its recorded cell, batch size, weight decay, lr schedule, clients and partition must be the
  ones :data:`fedlib.experiments.cifar10.CELLS` / ``PAPER`` define now; it must name a commit
  (not ``unknown``) that this repository holds (asked of ``git`` where ``--repo`` has ``.git``: no ``git`` on
  ``PATH``, or a checkout it cannot read, is a failed check), from a clean checkout unchanged during the run;
  ``--smoke`` lifts the setup and commit checks for the CPU tests of the scripts; it goes to
  ``data/results/cifar10/`` (an existing file is kept unless ``--force``);
* a benchmark must be a ``bench`` result; it goes to
  ``data/results/bench/cifar10_<tag>_<precision>[_graph]_r<runs>.json``;
* a profile table ``profile_<x>.txt`` goes to ``data/results/bench/profile_<x>_<tag>.txt``;
* the log goes to ``data/results/gpu-logs/<UTC date-time>_<tag>.log``.

Prints what it filed; exits 2 (writing nothing) if any file fails its check.
"""
from __future__ import annotations

import argparse
import re
import sys
import tarfile
import tempfile
import time
import zlib
from pathlib import Path

NAME = re.compile(r"^(?P<cell>[a-z0-9-]+)__seed(?P<seed>\d+)\.json$")


class ImportErrorList(Exception):
    pass


def _load(path: Path, where: str) -> dict:
    from fedlib.results import read_result

    try:
        doc = read_result(path)
    except ValueError as exc:
        raise ImportErrorList(f"{where}: {exc}") from None
    if not str(doc["provenance"].get("device") or "").strip():
        raise ImportErrorList(f"{where}: provenance names no device")
    return doc


#: what a Table 1 result must be to be filed (``--smoke`` lifts it): the paper's setup, on a GPU
PAPER_SETUP = {"rounds": 100, "width": 1.0, "num_train": 50000, "num_test": 10000}


def _paper_setup_problems(doc: dict) -> list:
    cfg = doc["config"]
    found = {"rounds": cfg.get("rounds"), "width": (cfg.get("engine") or {}).get("width"),
             "num_train": (cfg.get("data") or {}).get("num_train"), "num_test": (cfg.get("data") or {}).get("num_test")}
    out = [f"{k} {found[k]!r} (the paper's: {v!r})" for k, v in PAPER_SETUP.items() if found[k] != v]
    if str(doc["provenance"].get("device", "")).strip().lower() == "cpu":
        out.append("device cpu (Table 1 results come from a GPU)")
    return out


def _commit_problems(doc: dict, repo: Path) -> list:
    """A result must name the commit that made it, from a clean checkout that did not change
    during the run, and (where ``repo`` is a git checkout) one this repository holds."""
    import subprocess

    prov = doc["provenance"]
    sha = str(prov.get("git_commit"))
    out = []
    if sha == "unknown":
        out.append("provenance names no commit (git_commit 'unknown'; pass FEDLIB_GIT_COMMIT on the device)")
    elif (repo / ".git").exists():
        from fedlib.results import _git_failure

        try:  # git must read the checkout first: else "not in this repository" would hide why it failed
            subprocess.run(["git", "-C", str(repo), "rev-parse", "--git-dir"], capture_output=True, text=True,
                           timeout=30, check=True)
            known = subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{sha}^{{commit}}"],
                                   capture_output=True, timeout=30).returncode == 0
        except (OSError, subprocess.SubprocessError) as exc:  # no git on PATH was a FileNotFoundError traceback
            out.append(f"commit {sha} cannot be checked against this repository ({_git_failure(exc)})")
        else:
            if not known:
                out.append(f"commit {sha} is not in this repository")
    if prov.get("git_dirty"):
        out.append("the checkout had uncommitted changes (git_dirty)")
    if prov.get("git_changed_during_run"):
        out.append(f"the commit changed during the run ({sha} -> {prov.get('git_commit_end')})")
    return out


def plan_import(folder: Path, repo: Path, tag: str, force: bool, scratch: Path, smoke: bool = False) -> list:
    """``[(source, destination, what)]`` after checking every file (raises ImportErrorList)."""
    from fedlib.experiments.cifar10 import CELL_IDS, cell_setup_problems

    moves = []
    archive = folder / "cifar10-results.tar.gz"
    if archive.is_file():
        try:  # a copy cut short (a full disk, a killed transfer) ends the gzip stream early: EOFError
            with tarfile.open(archive, "r:gz") as tar:
                members = tar.getmembers()
                for m in members:
                    if not m.isfile() or "/" in m.name or not NAME.match(m.name):
                        raise ImportErrorList(f"{archive.name}: unexpected member {m.name!r}")
                tar.extractall(scratch, filter="data")
        except (tarfile.TarError, EOFError, zlib.error) as exc:
            raise ImportErrorList(f"{archive.name}: cannot read the archive ({exc})") from None
        for m in members:
            match = NAME.match(m.name)
            src = scratch / m.name
            doc = _load(src, f"{archive.name}:{m.name}")
            cfg = doc["config"]
            if match["cell"] not in CELL_IDS:
                raise ImportErrorList(f"{m.name}: unknown Table 1 cell {match['cell']!r}")
            if cfg.get("cell_id") != match["cell"] or int(cfg.get("seed", -1)) != int(match["seed"]):
                raise ImportErrorList(f"{m.name}: its config says cell {cfg.get('cell_id')!r} seed {cfg.get('seed')!r}")
            problems = cell_setup_problems(doc)
            final = (doc.get("history") or [{}])[-1].get("test_accuracy")
            if not isinstance(final, (int, float)) or isinstance(final, bool):
                problems.append(f"no final test accuracy ({final!r})")
            if problems:
                raise ImportErrorList(f"{m.name}: not a run of its Table 1 cell: {', '.join(problems)}")
            problems = [] if smoke else _paper_setup_problems(doc)
            if problems:
                raise ImportErrorList(f"{m.name}: not a run of the paper's setup: {', '.join(problems)} "
                                      "(--smoke files it anyway, for tests of the scripts)")
            problems = [] if smoke else _commit_problems(doc, repo)
            if problems:
                raise ImportErrorList(f"{m.name}: provenance: {', '.join(problems)}")
            dest = repo / "data" / "results" / "cifar10" / m.name
            if dest.exists() and not force:
                print(f"kept existing {dest.relative_to(repo)} (use --force to replace it)")
                continue
            moves.append((src, dest, f"Table 1 {match['cell']} seed {match['seed']}: final test accuracy "
                                     f"{final:.4f}, {doc['provenance']['device']}"))
    for name in ("bench_cifar10.json", "bench_cifar10_eager.json", "bench_cifar10_compare.json"):
        src = folder / name
        if not src.is_file():
            continue
        doc = _load(src, name)
        if doc.get("kind") != "bench":
            raise ImportErrorList(f"{name}: not a benchmark result (kind {doc.get('kind')!r})")
        cfg = doc["config"]
        stem = f"cifar10_{tag}_{cfg.get('precision', 'fp32')}{'_graph' if cfg.get('cuda_graph') else ''}" \
               f"_r{cfg.get('runs', 1)}{'_compare' if cfg.get('compare') else ''}"
        dest = repo / "data" / "results" / "bench" / f"{stem}.json"
        if dest.exists() and not force:
            print(f"kept existing {dest.relative_to(repo)} (use --force to replace it)")
            continue
        s = doc["summary"]
        gains = "".join(f", {v['variant']} " + ("failed" if "error" in v else f"{v['gain']:.3f}x")
                        for v in s.get("variants", ()))
        moves.append((src, dest, f"benchmark: engine {s['engine_images_per_s']:.0f} images/s, sequential "
                                 f"{s['sequential_images_per_s']:.0f} images/s, ratio {s['ratio']:.2f}x{gains}"))
    for prof in sorted(folder.glob("profile_*.txt")):
        moves.append((prof, repo / "data" / "results" / "bench" / f"{prof.stem}_{tag}.txt", "profile"))
    log = folder / "log.txt"
    if log.is_file():
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(log.stat().st_mtime))
        moves.append((log, repo / "data" / "results" / "gpu-logs" / f"{stamp}_{tag}.log", "log"))
    if not moves:
        raise ImportErrorList(f"{folder}: nothing to import")
    return moves


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", type=Path, help="the folder gpu_run.sh wrote (the device call's files)")
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parents[1],
                    help="repository root (an existing folder)")
    ap.add_argument("--tag", default="h200", help="device tag used in file names (letters, digits, -)")
    ap.add_argument("--force", action="store_true", help="replace files that exist already")
    ap.add_argument("--smoke", action="store_true",
                    help="file Table 1 results of another setup too (the CPU tests of the scripts)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's fedlib
    if not re.fullmatch(r"[A-Za-z0-9-]+", args.tag):
        print(f"--tag must be letters, digits and '-', got {args.tag!r}", file=sys.stderr)
        return 2
    if not args.folder.is_dir():
        print(f"{args.folder}: not a folder", file=sys.stderr)
        return 2
    if not args.repo.is_dir():  # else "nothing to import", or a mistyped --repo made and filled without a word
        ap.error(f"--repo {args.repo}: not a folder (the repository the results are filed into)")
    with tempfile.TemporaryDirectory() as scratch:
        try:
            moves = plan_import(args.folder, args.repo, args.tag, args.force, Path(scratch), smoke=args.smoke)
        except ImportErrorList as exc:  # the archive's own errors: plan_import (3d171b1)
            print(f"import_gpu_results: {exc} (nothing written)", file=sys.stderr)
            return 2
        from fedlib._io import atomic_write

        for src, dest, what in moves:  # every file was checked by plan_import; each lands whole or not at all
            dest.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(dest, src.read_bytes())
            print(f"{dest.relative_to(args.repo)}  <- {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
