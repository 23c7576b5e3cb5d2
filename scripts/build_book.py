#!/usr/bin/env python3
"""Execute the book's chapters with papermill, then render them with jupyter-book.

Usage (paths are resolved against the repository root, whatever the cwd)::

    .venv/bin/python scripts/build_book.py --profile ci      # what `make book` runs
    .venv/bin/python scripts/build_book.py --profile full    # PROFILE=full make book
    .venv/bin/python scripts/build_book.py --render-only     # re-render, no execution
                                                             # (after editing intro.md, ...)
    .venv/bin/python scripts/build_book.py --chapters 02 10  # re-execute chapters 2 and 10, keep the
                                                             # others' last executed copies, render

How the build tree works
------------------------
The sources (``_config.yml``, ``_toc.yml``, ``book/``) never contain outputs.
This script

1. reads ``_toc.yml`` and collects every page it lists (root first);
2. recreates ``_build/executed/`` as a mirror of the book sources: the two
   configuration files and every non-notebook file under ``book/``
   (``intro.md``, ``_static/`` with the vendored MathJax, images, ...);
3. executes each notebook listed in the TOC with papermill into the same
   relative path of the mirror (``book/01_update_rule.ipynb`` ->
   ``_build/executed/book/01_update_rule.ipynb``), with kernel ``python3`` of
   the running interpreter (the venv), the working directory set to the
   **repository root**, and ``profile`` (plus ``seed`` when ``--seed`` is
   given) injected after the cell tagged ``parameters``; the kernel's sockets
   are CurveZMQ-encrypted (:func:`kernel_config`);
4. copies ``figures/`` (written by the chapters) to ``_build/executed/figures``
   so that Markdown references such as ``../figures/x.png`` resolve in the
   mirror exactly as in the sources;
5. joins each cell's consecutive prints into one output (:func:`merge_adjacent_streams`)
   and renders the mirror with ``jupyter-book build _build/executed --path-output
   <root> --all -n -W --keep-going`` (execution is off in ``_config.yml``),
   which writes ``_build/html``.

A chapter that raises (e.g. a failing ``assert``) makes papermill raise
``PapermillExecutionError``: the remaining chapters are still executed (unless
``--fail-fast``) so that every failure is reported at once, nothing is
rendered (a previous ``_build/html`` is removed first), and the exit status
is 1. Any Sphinx warning fails the render (``-W``) with a non-zero status.

Chapters are independent (each writes its own ``figures/chNN_*`` files), so
``--jobs N`` (default: 2 where there are 2 or more cores, ``$BOOK_JOBS`` overrides)
executes N at a time, longest first when an earlier ``_build/chapter_times.json``
of the same parameters says which are long (else the TOC order reversed: the later
chapters are the longer ones, so a fresh build does not start its longest chapter last). With N > 1, each
kernel gets ``cores // N`` BLAS/OpenMP threads unless ``OMP_NUM_THREADS`` is set.

Per-chapter wall times are printed and written to ``_build/chapter_times.json``.

``--chapters`` (after editing a chapter) executes only the chapters it names and keeps the other
chapters' executed copies in the mirror (step 2 refreshes the non-notebook sources without removing
them): they must all be there, from a build of the same parameters (``--profile``, ``--seed``) in which
they passed, as ``chapter_times.json`` records, so that the rendered book never mixes profiles or shows
a chapter that failed. The timings file is updated for the chapters executed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import yaml

from fedlib._io import atomic_write  # temporary file + rename: a killed build leaves the old file

REPO_ROOT = Path(__file__).resolve().parents[1]

#: Files at the book root that belong to the book tree (globs; *.bib for
#: sphinxcontrib-bibtex, should a chapter cite with {cite}).
ROOT_FILES = ("_config.yml", "_toc.yml", "*.bib")
#: Directories at the book root copied into the mirror *after* execution,
#: so that they hold what the chapters wrote.
ROOT_DIRS_AFTER_EXECUTION = ("figures",)
#: The chapters' profiles (their ``parameters`` cells size the runs for these two).
PROFILES = ("ci", "full")
#: Directory names never copied into the mirror.
IGNORED_DIR_NAMES = {".ipynb_checkpoints", "__pycache__"}


@dataclass(frozen=True)
class Layout:
    """Where the sources are and where the build writes, for a book rooted at ``root``."""

    root: Path

    @property
    def build(self) -> Path:
        return self.root / "_build"

    @property
    def executed(self) -> Path:
        """Mirror of the book sources holding the executed notebooks."""
        return self.build / "executed"

    @property
    def times_json(self) -> Path:
        return self.build / "chapter_times.json"

    def rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()


def toc_docnames(toc_path: Path) -> list[str]:
    """Return every ``file:`` entry of a jb-book ``_toc.yml``, root first, in order."""
    toc = yaml.safe_load(toc_path.read_text(encoding="utf8"))
    names = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                names.append(entry["file"])
            for key in ("parts", "chapters", "sections"):
                walk(entry.get(key))

    walk([toc])
    return names


def resolve_page(root: Path, docname: str) -> Path:
    """Map a TOC docname (path without extension) to its source file."""
    for suffix in (".ipynb", ".md"):
        path = root / f"{docname}{suffix}"
        if path.is_file():
            return path
    raise FileNotFoundError(f"_toc.yml lists {docname!r} but neither .ipynb nor .md exists")


def prepare_mirror(layout: Layout) -> None:
    """Recreate the mirror with the configuration and every non-notebook source file."""
    if layout.executed.exists():
        shutil.rmtree(layout.executed)
    copy_sources_into_mirror(layout)


def copy_sources_into_mirror(layout: Layout) -> None:
    """Copy (overwrite) the configuration and every non-notebook file under book/."""
    layout.executed.mkdir(parents=True, exist_ok=True)
    for pattern in ROOT_FILES:
        for src in layout.root.glob(pattern):
            shutil.copy2(src, layout.executed / src.name)
    for src in sorted((layout.root / "book").rglob("*")):
        rel = src.relative_to(layout.root)
        if src.is_dir() or src.suffix == ".ipynb" or IGNORED_DIR_NAMES & set(rel.parts):
            continue  # notebooks of the TOC are written by papermill; others are not built
        dst = layout.executed / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)


def copy_outputs_into_mirror(layout: Layout) -> None:
    """Copy what the chapters wrote at the book root (figures/) into the mirror."""
    for name in ROOT_DIRS_AFTER_EXECUTION:
        src = layout.root / name
        if src.is_dir():
            shutil.copytree(src, layout.executed / name, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns(*IGNORED_DIR_NAMES))


def use_venv_kernel() -> str:
    """Make kernel ``python3`` resolve to this interpreter; return the executable it runs.

    Kernel specs in the user's data dir (``~/.local/share/jupyter``) shadow the
    venv's; putting ``sys.prefix/share/jupyter`` first on ``JUPYTER_PATH``
    makes the venv's spec (or ipykernel's built-in one) win.
    """
    venv_data = str(Path(sys.prefix) / "share" / "jupyter")
    paths = [venv_data, *filter(None, os.environ.get("JUPYTER_PATH", "").split(os.pathsep))]
    os.environ["JUPYTER_PATH"] = os.pathsep.join(dict.fromkeys(paths))

    from jupyter_client.kernelspec import KernelSpecManager

    argv0 = KernelSpecManager().get_kernel_spec("python3").argv[0]
    # jupyter_client substitutes sys.executable for a bare "python"/"python3".
    if argv0 in {"python", f"python{sys.version_info[0]}",
                 f"python{sys.version_info[0]}.{sys.version_info[1]}"}:
        argv0 = sys.executable
    return argv0


#: Folders under the home folder that the build's kernels write (``(variable, name under _build/home)``):
#: IPython's profile, Jupyter's connection files, Matplotlib's configuration and font cache.
HOME_FOLDERS = (("IPYTHONDIR", "ipython"), ("JUPYTER_RUNTIME_DIR", "jupyter-runtime"), ("MPLCONFIGDIR", "matplotlib"))


def _default_home_folder(variable: str) -> Path:
    """Where the folder of ``variable`` (one of :data:`HOME_FOLDERS`) lies while the variable is not set."""
    if variable == "JUPYTER_RUNTIME_DIR":
        from jupyter_core.paths import jupyter_runtime_dir

        return Path(jupyter_runtime_dir())
    if variable == "MPLCONFIGDIR":
        return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "matplotlib"
    return Path.home() / ".ipython"


def _writable_folder(path: Path) -> bool:
    import tempfile

    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            return True
    except OSError:
        return False


def use_build_home_folders(layout: Layout) -> list[str]:
    """Point each of :data:`HOME_FOLDERS` that is not set and cannot be written where it defaults to (a home
    folder that does not exist or is read-only: ``HOME=/nonexistent`` in a container, a read-only home of a batch
    job) at ``_build/home/<name>``; return the variables set. The kernels inherit them. Before, Matplotlib
    printed its "created a temporary cache directory" warning into every chapter's output (the rendered pages),
    IPython its "not a writable location" into the log, and a home that looks writable but is not (``HOME=/proc``
    as root) stopped the build before the first chapter with IPython's ``FileNotFoundError: ... '/proc/.ipython'``."""
    moved = []
    for variable, name in HOME_FOLDERS:
        if os.environ.get(variable):
            continue
        try:
            writable = _writable_folder(_default_home_folder(variable))
        except (RuntimeError, KeyError):  # Path.home(): no home folder to be found
            writable = False
        if not writable:
            folder = layout.build / "home" / name
            folder.mkdir(parents=True, exist_ok=True)
            os.environ[variable] = str(folder)
            moved.append(variable)
    if moved:
        log(f"note: the home folder ({os.environ.get('HOME', 'unset')}) cannot be written: "
            f"{', '.join(f'{v}={os.environ[v]}' for v in moved)}", sys.stderr)
    return moved


def kernel_config():
    """The traitlets config of the chapters' kernel managers: CurveZMQ-encrypted sockets.

    ipykernel 7.4 warns once per kernel "Kernel is running over TCP without encryption"
    (once per chapter in the build's log) unless its manager provisions CurveZMQ keys: jupyter_client
    8.10's ``KernelManager.transport_encryption = "auto"`` does so when the kernelspec declares
    ``"supported_encryption": ["curve"]`` (ipykernel 7.4's does) and otherwise launches the kernel
    as before. Set only where jupyter_client has that option and pyzmq has CurveZMQ (``"auto"``
    without it is a TraitError): older versions run unencrypted, as they did. The ``ipc``
    transport the warning also offers puts the kernels' sockets at ``kernel-ipc-<n>`` in the
    working directory (the repository root), shared by the kernels of ``--jobs 2``.
    """
    import zmq
    from jupyter_client.manager import KernelManager
    from traitlets.config import Config

    config = Config()
    if KernelManager.class_traits().get("transport_encryption") is not None and zmq.has("curve"):
        config.KernelManager.transport_encryption = "auto"
    return config


def execute(layout: Layout, notebook: Path, parameters: dict, timeout: int | None,
            seconds: dict[str, float]) -> None:
    """Execute one chapter into the mirror; record its wall time in ``seconds``.

    Raises whatever papermill raises (``PapermillExecutionError`` for an
    exception in a cell); the partially executed notebook is still written.
    """
    import papermill as pm

    out = layout.executed / notebook.relative_to(layout.root)
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    try:
        pm.execute_notebook(
            str(notebook),
            str(out),
            parameters=parameters,
            kernel_name="python3",
            cwd=str(layout.root),
            progress_bar=False,
            execution_timeout=timeout,
            config=kernel_config(),  # to nbclient's NotebookClient, which hands it to the kernel manager
        )
    finally:
        seconds[layout.rel(notebook)] = time.perf_counter() - start


def failure_summary(exc: BaseException) -> str:
    """One line describing why a chapter failed (``AssertionError: ...`` for a cell)."""
    ename, evalue = getattr(exc, "ename", None), getattr(exc, "evalue", None)
    if ename:  # papermill.exceptions.PapermillExecutionError
        cell = getattr(exc, "exec_count", None)
        return f"{ename}: {evalue} (cell In[{cell}])"
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[-1] if lines else ''}"


def merge_adjacent_streams(nb) -> int:
    """Join each run of consecutive stream outputs of one name (``stdout``, ``stderr``) of a code
    cell into one output, in place; return how many outputs went.

    A cell that prints as it goes (a progress line per run) leaves one output per print, and each
    became its own box on the page. MyST-NB's ``nb_merge_streams`` joins *all* of a cell's prints
    into its first output instead, which moves text printed after a table or figure above it."""
    removed = 0
    for cell in nb.cells:
        if cell.get("cell_type") != "code":
            continue
        merged: list = []
        for out in cell.get("outputs", []):
            last = merged[-1] if merged else None
            if (last is not None and out.get("output_type") == "stream" == last.get("output_type")
                    and out.get("name") == last.get("name")):
                last["text"] += out["text"]
                removed += 1
            else:
                merged.append(out)
        cell["outputs"] = merged
    return removed


def merge_streams_in_mirror(layout: Layout) -> None:
    """:func:`merge_adjacent_streams` on every executed notebook of the TOC in the mirror."""
    import nbformat

    for docname in toc_docnames(layout.executed / "_toc.yml"):
        path = resolve_page(layout.executed, docname)
        if path.suffix != ".ipynb":
            continue
        nb = nbformat.read(path, as_version=4)
        if merge_adjacent_streams(nb):
            nbformat.write(nb, path)


def render(layout: Layout) -> int:
    """Render the mirror to ``_build/html``; return jupyter-book's exit status."""
    merge_streams_in_mirror(layout)
    jb = Path(sys.executable).parent / "jupyter-book"
    cmd = [
        str(jb) if jb.exists() else "jupyter-book",
        "build", str(layout.executed),
        "--path-output", str(layout.root),  # jupyter-book appends _build/html
        "--builder", "html",
        "--all",                            # fresh environment: every warning is re-emitted
        "-n", "-W", "--keep-going",
    ]
    print("$ " + shlex.join(cmd), flush=True)  # quoted: a line to paste, whatever the checkout's path holds
    start = time.perf_counter()
    status = subprocess.call(cmd, cwd=layout.root)
    print(f"[render] jupyter-book exited {status} in {time.perf_counter() - start:.1f} s",
          flush=True)
    if status == 0:
        broken = unrendered_tables(layout.root / "_build" / "html")
        for page, line in broken:
            log(f"[render] {page}: a Markdown table came out as text: {line}", sys.stderr)
        if broken:
            return 1
    return status


# An HTML paragraph whose first two lines are a Markdown table's header and delimiter row:
# a table that the renderer left as text ("|---|" may have become "|—|" on the way).
_TABLE_AS_TEXT = re.compile(r"^<p>(\|.*\|)[ \t]*\n\|(?:[ \t]*:?[-—–]+:?[ \t]*\|)+[ \t]*$", re.MULTILINE)


def unrendered_tables(html_dir: Path) -> list[tuple[str, str]]:
    """``(page, header row)`` for every Markdown table that the rendered pages show as text.

    A chapter displays its tables as Markdown output; a renderer that does not parse tables there
    (MyST-NB's default CommonMark) shows them as a paragraph of pipes and exits 0."""
    found = []
    for page in sorted(Path(html_dir).rglob("*.html")):
        for match in _TABLE_AS_TEXT.finditer(page.read_text(encoding="utf8", errors="replace")):
            found.append((str(page.relative_to(html_dir)), match.group(1)[:80]))
    return found


def log(line: str, stream=None) -> None:
    """One whole line in one write (the chapters' threads print concurrently)."""
    stream = stream or sys.stdout
    stream.write(line + "\n")
    stream.flush()


def default_jobs() -> int:
    """``$BOOK_JOBS`` if set, else 2 on a machine with 2 or more cores, else 1 (``ValueError``
    naming ``BOOK_JOBS`` for a value that is not a whole number)."""
    value = os.environ.get("BOOK_JOBS")
    if value:
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"$BOOK_JOBS must be a whole number of chapters at a time, got {value!r}") from None
    return 2 if (os.cpu_count() or 1) >= 2 else 1


def execution_order(layout: Layout, notebooks: list[str], parameters: dict) -> list[str]:
    """Longest first by an earlier run with the same parameters, else the TOC order reversed
    (the later chapters are the longer ones)."""
    try:
        previous = json.loads(layout.times_json.read_text(encoding="utf8"))
    except (OSError, ValueError, RecursionError):
        return notebooks[::-1]
    if not isinstance(previous, dict) or previous.get("parameters") != parameters:
        return notebooks[::-1]
    seconds = previous.get("seconds")
    # only a hint for the order: a file edited by hand or written by another version is ignored
    if not isinstance(seconds, dict) or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) for t in seconds.values()):
        return notebooks[::-1]
    return sorted(notebooks, key=lambda n: -float(seconds.get(n, 0.0)))


def limit_threads(jobs: int) -> None:
    """Give each of ``jobs`` kernels its share of the cores (kernels inherit the environment)."""
    if jobs > 1 and "OMP_NUM_THREADS" not in os.environ:
        share = str(max(1, (os.cpu_count() or 1) // jobs))
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, share)


def toc_notebooks(layout: Layout) -> list[str]:
    """The notebooks of the TOC, in its order, relative to the root (``book/01_update_rule.ipynb``)."""
    pages = [resolve_page(layout.root, d) for d in toc_docnames(layout.root / "_toc.yml")]
    return [layout.rel(p) for p in pages if p.suffix == ".ipynb"]


def select_chapters(notebooks: list[str], wanted: list[str]) -> list[str]:
    """The notebooks named by ``wanted``, in TOC order: each entry is a notebook's path
    (``book/02_quadratic_inconsistency.ipynb``), its file name, its stem or its leading number (``02``, ``2``).
    ``ValueError`` for an entry that names no notebook, or more than one."""
    chosen = []
    for token in wanted:
        key = token.strip()
        matches = [n for n in notebooks
                   if key in (n, Path(n).name, Path(n).stem)
                   or (key.isdigit() and Path(n).stem.split("_", 1)[0].isdigit()
                       and int(Path(n).stem.split("_", 1)[0]) == int(key))]
        if len(matches) != 1:
            listed = ", ".join(Path(n).stem for n in notebooks)
            what = "no chapter" if not matches else f"{len(matches)} chapters ({', '.join(matches)})"
            raise ValueError(f"--chapters {token!r} names {what}; the chapters are: {listed}")
        if matches[0] not in chosen:
            chosen.append(matches[0])
    return [n for n in notebooks if n in chosen]


def kept_chapters_problem(layout: Layout, notebooks: list[str], chosen: list[str], parameters: dict) -> str | None:
    """Why the chapters that ``--chapters`` does not execute cannot be kept (``None`` if they can): each must
    have its executed copy in the mirror, from the last build's timings of the same ``parameters``, and not
    have failed there."""
    kept = [n for n in notebooks if n not in chosen]
    try:
        previous = json.loads(layout.times_json.read_text(encoding="utf8"))
    except (OSError, ValueError, RecursionError):
        previous = None
    if not kept:
        return None
    if not isinstance(previous, dict):
        return f"{layout.rel(layout.times_json)} is missing or unreadable: no earlier build to keep chapters from"
    if previous.get("parameters") != parameters:
        return (f"the executed chapters are of {previous.get('parameters')}, not {parameters}: the book would mix "
                "them")
    missing = [n for n in kept if not (layout.executed / n).is_file()]
    if missing:
        return f"no executed copy of {', '.join(missing)} in {layout.rel(layout.executed)}"
    failed = previous.get("failed")
    failed = [n for n in kept if n in failed] if isinstance(failed, list) else kept
    if failed:
        return f"{', '.join(failed)} failed in the last build (or its timings do not say)"
    return None


def execute_all(layout: Layout, parameters: dict, timeout: int | None,
                fail_fast: bool, jobs: int = 1, chapters: list[str] | None = None) -> bool:
    """Execute every notebook of the TOC (or only ``chapters``, keeping the others' executed copies:
    :func:`kept_chapters_problem` must have said they can be kept), ``jobs`` at a time; write and print
    the timings; True if all passed."""
    notebooks = toc_notebooks(layout)
    selected = notebooks if chapters is None else chapters
    order = [n for n in execution_order(layout, notebooks, parameters) if n in selected]
    limit_threads(jobs)
    # the kernels inherit it: fedlib.plotting.save_figure writes the committed figures/ only in the full build
    os.environ["FEDLIB_BOOK_BUILD"] = str(parameters.get("profile"))
    print(f"parameters={parameters}  kernel python3 -> {use_venv_kernel()}  "
          f"cwd={layout.root}  jobs={jobs}", flush=True)

    # A stale book must not survive a failed execution (the browser tests read it).
    shutil.rmtree(layout.build / "html", ignore_errors=True)
    previous: dict = {}
    if chapters is None:
        prepare_mirror(layout)
    else:  # the other chapters' executed copies stay; fresh configuration and non-notebook sources
        copy_sources_into_mirror(layout)
        previous = json.loads(layout.times_json.read_text(encoding="utf8")) if layout.times_json.is_file() else {}
    times: dict[str, float] = {}
    failures: dict[str, str] = {}
    start = time.perf_counter()

    def run(name: str) -> None:
        log(f"[execute] {name} ...")
        execute(layout, layout.root / name, parameters, timeout, times)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        pending = {pool.submit(run, name): name for name in order}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                name = pending.pop(future)
                exc = future.exception()
                if exc is None:
                    log(f"[execute] {name}: ok in {times[name]:.1f} s")
                    continue
                # PapermillExecutionError, dead kernel, timeout, ...
                failures[name] = failure_summary(exc)
                print(f"[execute] {name}: FAILED after {times.get(name, 0.0):.1f} s\n{exc}",
                      file=sys.stderr, flush=True)
                if fail_fast:
                    for other in pending:
                        other.cancel()
    wall = time.perf_counter() - start
    copy_outputs_into_mirror(layout)

    # with --chapters, the kept chapters' entries stay as the last build wrote them
    seconds = {n: t for n, t in previous.get("seconds", {}).items() if n in notebooks and n not in selected}
    seconds.update({name: round(t, 3) for name, t in times.items()})
    atomic_write(layout.times_json, json.dumps({
        "parameters": parameters,
        "seconds": {n: seconds[n] for n in notebooks if n in seconds},
        "total_seconds": round(sum(times.values()), 3),
        "wall_seconds": round(wall, 3),
        "jobs": jobs,
        "failed": sorted(failures),
        **({"executed": list(selected)} if chapters is not None else {}),
    }, indent=2) + "\n")

    print(f"\nchapter execution times ({parameters}):")
    for name in notebooks:
        status = (f"{times[name]:8.1f} s" if name in times else "   skipped" if name in selected
                  else "   kept   ")
        print(f"  {status}  {name}{'  FAILED' if name in failures else ''}")
    print(f"  {sum(times.values()):8.1f} s  total, {wall:.1f} s wall with {jobs} job(s)  "
          f"(-> {layout.rel(layout.times_json)})", flush=True)
    if failures:
        print(f"\n{len(failures)} chapter(s) failed, the book is not rendered:",
              file=sys.stderr)
        for name, msg in failures.items():
            print(f"  {name}: {msg}", file=sys.stderr)
    return not failures


def build_parser() -> argparse.ArgumentParser:
    """The command line of this script (``--help``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--profile", default=os.environ.get("PROFILE", "ci"),
                        help="value injected as `profile` into every chapter: ci or full (default: $PROFILE, else ci)")
    parser.add_argument("--seed", type=int, default=None,
                        help="also inject `seed` (default: each chapter keeps its own)")
    parser.add_argument("--timeout", type=int, default=None,
                        help="per-cell execution timeout in seconds (default: none)")
    parser.add_argument("--fail-fast", action="store_true",
                        help="stop at the first chapter that fails")
    parser.add_argument("--jobs", type=int, default=None,
                        help="chapters executed at a time (default: $BOOK_JOBS, else 2 with 2+ cores)")
    parser.add_argument("--root", type=Path, default=REPO_ROOT,
                        help="book root holding _config.yml and _toc.yml (default: this repo)")
    parser.add_argument("--chapters", nargs="+", metavar="CHAPTER", default=None,
                        help="execute only these chapters (a notebook's number, stem, file name or path: 02, "
                             "02_quadratic_inconsistency); the others keep their executed copies from the last "
                             "build, which must have had the same --profile and --seed and passed")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--no-render", action="store_true", help="execute only")
    mode.add_argument("--render-only", action="store_true",
                      help="render the last executed notebooks (with fresh non-notebook "
                           "sources) without executing")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    # refused before anything runs: each of these failed only inside the chapters, one by one,
    # after a mirror had been made (a profile other than ci / full is a KeyError in chapters 2, 8
    # and 9; a negative seed a ValueError of fedlib.rng), or as a traceback
    if args.profile not in PROFILES:
        parser.error(f"--profile (default $PROFILE, else ci) must be one of {', '.join(PROFILES)}, got "
                     f"{args.profile!r}")
    if args.seed is not None and args.seed < 0:
        parser.error(f"--seed must be >= 0 (fedlib.rng's seeds), got {args.seed}")
    if args.timeout is not None and args.timeout < 1:
        parser.error(f"--timeout must be >= 1 second (omit it for no timeout), got {args.timeout}")
    try:
        jobs = default_jobs() if args.jobs is None else args.jobs
    except ValueError as exc:
        parser.error(str(exc))
    if jobs < 1:
        parser.error(f"--jobs must be >= 1, got {jobs}")
    if not (args.root / "_toc.yml").is_file() or not (args.root / "_config.yml").is_file():
        parser.error(f"--root {args.root}: holds no _toc.yml and _config.yml (not a book root)")
    layout = Layout(args.root.resolve())
    if args.chapters is not None and args.render_only:
        parser.error("--chapters executes chapters: it does not go with --render-only")
    use_build_home_folders(layout)  # the kernels' and the renderer's folders, where the home folder cannot take them

    if args.render_only:
        if not layout.executed.is_dir():
            print(f"error: {layout.executed} does not exist; execute first", file=sys.stderr)
            return 2
        # Pick up edits of intro.md, _config.yml, _toc.yml, _static/ and figures/;
        # the notebooks stay as last executed.
        copy_sources_into_mirror(layout)
        copy_outputs_into_mirror(layout)
        return render(layout)

    parameters: dict = {"profile": args.profile}
    if args.seed is not None:
        parameters["seed"] = args.seed
    chapters = None
    if args.chapters is not None:
        try:
            chapters = select_chapters(toc_notebooks(layout), args.chapters)
        except ValueError as exc:
            parser.error(str(exc))
        problem = kept_chapters_problem(layout, toc_notebooks(layout), chapters, parameters)
        if problem is not None:
            print(f"error: --chapters keeps the other chapters' executed copies, but {problem}; build the whole "
                  "book with these parameters first (without --chapters)", file=sys.stderr)
            return 2
    if not execute_all(layout, parameters, args.timeout, args.fail_fast, jobs, chapters):
        return 1
    return 0 if args.no_render else render(layout)


if __name__ == "__main__":
    sys.exit(main())
