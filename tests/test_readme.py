"""The README (and the book's introduction) as a user follows it: its Python runs, its
``python -m fedlib`` lines parse, its papermill lines name real chapters and parameters, the
files it names exist; and the GPU notes' commands parse. Documentation that drifts from the code
fails here."""
from __future__ import annotations

import ast
import json
import re
import shlex
from pathlib import Path

import pytest

from fedlib.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "book" / "intro.md"]


def _blocks(path: Path, language: str) -> list:
    return re.findall(rf"```{language}\n(.*?)```", path.read_text(), flags=re.S)


def _command_lines(path: Path) -> list:
    """Shell lines of the ```bash blocks: continuations joined, comments dropped."""
    lines = []
    for block in _blocks(path, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def test_the_readme_python_runs(tmp_path, monkeypatch):
    blocks = _blocks(ROOT / "README.md", "python")
    assert blocks, "the README's Python example is gone"
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})


def test_the_readme_example_prints_the_distances_its_comment_states(monkeypatch, capsys):
    """The first Python example's comment quotes FedNova's distance to x* and FedAvg's: both are measured here by
    running the block as written and with "fedavg" in place of "fednova" (3 significant digits)."""
    code = _blocks(ROOT / "README.md", "python")[0]
    stated = re.search(r"# ([\d.]+): FedNova's O\(lr\) term; FedAvg's is ([\d.]+)", code)
    assert stated, "the README example's comment no longer quotes the two distances"
    assert code.count('make_algorithm("fednova"') == 1
    for algorithm, value in (("fednova", stated.group(1)), ("fedavg", stated.group(2))):
        exec(compile(code.replace('make_algorithm("fednova"', f'make_algorithm("{algorithm}"'), "README.md", "exec"),
             {"__name__": "readme"})
        printed = float(capsys.readouterr().out.split()[-1])
        assert f"{printed:.3g}" == value, (algorithm, printed, value)


def _fedlib_commands():
    out = []
    for path in DOCS:
        for line in _command_lines(path):
            tokens = shlex.split(line)
            if "<command>" in tokens:  # `python -m fedlib <command> --help`: a placeholder
                continue
            if "fedlib" in tokens and "-m" in tokens[:tokens.index("fedlib")]:
                out.append(pytest.param(tokens[tokens.index("fedlib") + 1:], id=f"{path.name}: {line[:70]}"))
    return out


@pytest.mark.parametrize("argv", _fedlib_commands())
def test_the_documented_commands_parse(argv):
    """Every ``python -m fedlib`` / ``torchrun -m fedlib`` line: its command and flags exist
    and its values pass the parser's checks (nothing is run)."""
    build_parser().parse_args(argv)


def test_there_are_documented_commands():
    assert len(_fedlib_commands()) >= 10


def _parameters(notebook: Path) -> set:
    nb = json.loads(notebook.read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))
    tree = ast.parse("".join(cell["source"]))
    return {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
            if isinstance(t, ast.Name)}


def test_the_papermill_lines_name_chapters_and_their_parameters():
    seen = 0
    for path in DOCS:
        for line in _command_lines(path):
            tokens = shlex.split(line)
            if not tokens[0].endswith("papermill"):
                continue
            seen += 1
            notebook = ROOT / tokens[1]
            assert notebook.is_file(), f"{path.name}: {tokens[1]} does not exist"
            names = {tokens[k + 1] for k, t in enumerate(tokens) if t == "-p"}
            assert names <= _parameters(notebook), (path.name, names - _parameters(notebook))
    assert seen >= 2


def test_the_make_targets_exist():
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.M))
    for line in _command_lines(ROOT / "README.md"):
        if line.startswith("make ") or " make " in line:
            assert line.split("make ", 1)[1].split()[0] in targets, line


def test_the_files_the_readme_names_exist():
    text = (ROOT / "README.md").read_text()
    named = set(re.findall(r"`((?:scripts|tests|data|book|fedlib|\.ci)/[\w./-]+\.(?:py|sh|md|json|npz|yml|ipynb))`",
                           text))
    named |= {m for m in re.findall(r"`((?:scripts|tests|data|book|\.ci)/[\w./-]+)`", text) if "." not in Path(m).name}
    assert len(named) >= 8
    missing = sorted(n for n in named if not (ROOT / n).exists())
    assert not missing, f"the README names files that do not exist: {missing}"


def _notes_spans():
    """The commands of the GPU notes (the calls a session with a device runs as written)."""
    text = (ROOT / "data" / "results" / "bench" / "NOTES.md").read_text()
    return [" ".join(m.split()) for m in re.findall(r"`([^`]*(?:-m fedlib|gpu_run\.sh)[^`]*)`", text, flags=re.S)]


def test_the_gpu_notes_commands_parse():
    """A flag that no longer exists would cost device time: every `-m fedlib` command of
    data/results/bench/NOTES.md parses, every variable it sets for scripts/gpu_run.sh is read
    by the script, and every --compare variant is valid."""
    script = (ROOT / "scripts" / "gpu_run.sh").read_text()
    spans = _notes_spans()
    assert len(spans) >= 5
    parsed = 0
    for span in spans:
        if "-m fedlib" in span:
            argv = shlex.split(span.split("-m fedlib", 1)[1].replace("$OUT", "/tmp/out"))
            build_parser().parse_args(argv)
            parsed += 1
        if "gpu_run.sh" in span:
            for name in re.findall(r"(?:^|[\s&])([A-Z][A-Z0-9_]+)=", span.split("gpu_run.sh")[0]):
                assert re.search(rf"\b{name}\b", script), f"NOTES.md sets {name} but scripts/gpu_run.sh never reads it"
    assert parsed >= 2
    default = re.search(r'BENCH_COMPARE:-([^}"]+)', script)
    assert default, "gpu_run.sh has no default BENCH_COMPARE"
    from fedlib.experiments.cifar10 import parse_bench_variants

    parse_bench_variants(default.group(1).split(), runs=4, precision="bf16", cuda_graph=True, path="grouped",
                         cudnn_bench=False, cuda=True, conv="cudnn")


# ------------------------------------------------------- names, flags, numbers, CI ---

# Flags of other tools that the README quotes (torchrun, jupyter-book, scripts/vr_spectrum.py).
OTHER_TOOLS_FLAGS = {"--nnodes", "--nproc_per_node", "--rdzv_backend", "--rdzv_endpoint", "--keep-going", "--method"}


def _cli_options() -> set:
    import argparse

    opts = set()

    def walk(parser):
        for action in parser._actions:
            opts.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    walk(sub)

    walk(build_parser())
    return opts


def test_every_flag_the_docs_name_exists():
    """Prose and tables name flags too (``--tau-eff population``, ``--resume``, ``--tol``, the
    Troubleshooting table): each is an option of some ``python -m fedlib`` command, of
    ``scripts/build_book.py``, or one of the other tools' flags listed above."""
    from bookutil import build_script

    book_flags = {flag for action in build_script().build_parser()._actions for flag in action.option_strings}
    known = _cli_options() | OTHER_TOOLS_FLAGS | book_flags
    for path in DOCS:
        flags = set(re.findall(r"(?<![\w-])--[a-z][\w-]*", path.read_text()))
        assert len(flags) >= (20 if path.name == "README.md" else 0)
        assert flags <= known, f"{path.name} names flags no command has: {sorted(flags - known)}"


def _resolves(dotted: str) -> bool:
    import importlib

    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ImportError:
            continue
        for name in parts[k:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_every_fedlib_name_the_docs_give_exists():
    """``fedlib.rule.aggregate``, ``fedlib.optim.ClientOptimizer``, ... : a module, or an
    attribute of one."""
    for path in DOCS:
        names = set(re.findall(r"\bfedlib(?:\.[A-Za-z_]\w*)+", path.read_text()))
        missing = sorted(n for n in names if not _resolves(n))
        assert not missing, f"{path.name} names what fedlib does not have: {missing}"
    assert len(set(re.findall(r"\bfedlib(?:\.[A-Za-z_]\w*)+", (ROOT / "README.md").read_text()))) >= 25


def _architecture_rows() -> list:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Architecture", 1)[1].split("\nScripts:", 1)[0]
    # (first cell, whole row): the other cells hold math with escaped bars, so only the first is split off
    return [(line.split("|")[1], line) for line in section.splitlines() if line.startswith("| `fedlib")]


def test_the_architecture_table_lists_every_module_and_only_those():
    import importlib
    import pkgutil

    import fedlib

    rows = _architecture_rows()
    listed = {name for row in rows for name in re.findall(r"`(fedlib\.\w+)`", row[0])}
    actual = {f"fedlib.{m.name}" for m in pkgutil.iter_modules(fedlib.__path__) if m.name != "__main__"}
    assert listed == actual, (f"missing from the table: {sorted(actual - listed)}; "
                              f"in the table but not in fedlib: {sorted(listed - actual)}")
    # the rows of the subpackages whose modules the table names one by one
    for package in ("engines", "experiments"):
        row = next(r for r in rows if f"`fedlib.{package}`" in r[0])
        modules = {m.name for m in pkgutil.iter_modules(importlib.import_module(f"fedlib.{package}").__path__)}
        named = set(re.findall(r"`(\w+)`", row[1]))
        assert modules <= named, f"fedlib.{package}: the table's row does not name {sorted(modules - named)}"


def _number(pattern: str) -> list:
    match = re.search(pattern, (ROOT / "README.md").read_text(), flags=re.S)
    assert match, f"the README no longer says {pattern!r}: update this test with it"
    return [float(g.replace(",", "")) for g in match.groups()]


def test_the_readme_numbers_match_their_sources():
    """The numbers the README states come from the code or a committed file, not from memory."""
    import numpy as np

    from fedlib.experiments import cifar10 as C
    from fedlib.models import VGG11_NUM_PARAMETERS

    assert _number(r"VGG-11 \(no BatchNorm, ([\d,]+) parameters\)") == [VGG11_NUM_PARAMETERS]
    n_train, n_test = _number(r"([\d,]+) training and ([\d,]+) test CIFAR-10\s+images")
    with np.load(ROOT / "data" / "cifar10-sample" / "cifar10-sample.npz") as sample:
        assert (n_train, n_test) == (len(sample["train_labels"]), len(sample["test_labels"]))
    (n_labels,) = _number(r"all ([\d,]+) labels ship")
    with np.load(ROOT / "data" / "cifar10-sample" / "cifar10-labels.npz") as labels:
        assert n_labels == len(labels["train_labels"])
    cells, seeds, rounds = _number(r"\((\d+) cells × (\d+) seeds × (\d+) rounds of VGG-11\)")
    assert (cells, seeds, rounds) == (len(C.CELLS), 3, C.PAPER["rounds"])
    (rows,) = _number(r"linearised SCAFFOLD\s+and FedNova-VR rounds, ([\d,]+) rows")
    for name in ("scaffold", "fednova-vr"):
        doc = json.loads((ROOT / "data" / "results" / "linearised" / f"{name}-count.json").read_text())
        assert doc["config"]["rows"] == rows, name
    rate, ratio = _number(r"engine ([\d.]+)k images/s, ([\d.]+)× the per-client loop")
    measured = [json.loads(p.read_text())["summary"] for p in (ROOT / "data" / "results" / "bench").glob("*h200*.json")]
    assert any(round(s["engine_images_per_s"] / 1000, 1) == rate and round(s["ratio"], 1) == ratio
               for s in measured), (rate, ratio, measured)


def test_ci_the_makefile_and_environment_yml_do_what_the_readme_says():
    """README: `.ci/run` runs `make book` and then `make test`; `make test` runs the suite in
    TEST_JOBS (2) processes, then the `serial` (browser) tests alone; environment.yml installs
    the same extras as `make env`, on the Python of constraints.txt."""
    ci = (ROOT / ".ci" / "run").read_text()
    stages = re.findall(r'^stage "[^"]*" (.+)$', ci, flags=re.M)
    assert "make book" in stages and "make test" in stages, stages
    assert stages.index("make book") < stages.index("make test")
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^TEST_JOBS \?= 2$", make, flags=re.M)
    recipe = make.split("\ntest: env\n", 1)[1].split("\n\n", 1)[0]
    assert '-n $(TEST_JOBS)' in recipe and '-m "not serial"' in recipe and "-m serial" in recipe, recipe
    extras = re.search(r"-e '(\.\[[\w,]+\])'", make).group(1)
    env = (ROOT / "environment.yml").read_text()
    assert f"- -e {extras}" in env, f"environment.yml does not install {extras} as `make env` does"
    python = re.search(r"\(Python (3\.\d+), Linux", (ROOT / "constraints.txt").read_text()).group(1)
    assert f"- python={python}" in env, f"environment.yml's Python is not the {python} that constraints.txt pins"


def _troubleshooting_cli_rows() -> list:
    """Rows of the README's Troubleshooting table whose input is one flag with its value and
    nothing else (``--lr -0.1``, ``--epochs 0``, ``--data nope.json``, ...), with the message
    up to its first elided part."""
    text = (ROOT / "README.md").read_text().split("## Troubleshooting", 1)[1]
    rows = []
    for line in text.splitlines():
        cells = line.split(" | ")
        if not line.startswith("| `--") or len(cells) != 2 or " with" in cells[0]:
            continue
        argv = shlex.split(re.search(r"`([^`]+)`", cells[0]).group(1))
        message = re.search(r"`([^`]+)`", cells[1]).group(1)
        message = re.split(r"\.\.\.|\(\.\.\.\)|\(choose", message)[0].strip()
        if len(argv) == 2:
            rows.append(pytest.param(argv, message, id=" ".join(argv)))
    return rows


def test_there_are_troubleshooting_rows():
    assert len(_troubleshooting_cli_rows()) >= 6


@pytest.mark.parametrize("argv,message", _troubleshooting_cli_rows())
def test_the_troubleshooting_messages_are_the_command_lines(argv, message, tmp_path, monkeypatch, capsys):
    """Such a row, run as `run synthetic`: exit status 2, the README's message, no result file."""
    from fedlib.cli import main

    monkeypatch.chdir(tmp_path)
    try:
        status = main(["run", "synthetic", "--rounds", "1", "--quiet", *argv, "--out", "r.json"])
    except SystemExit as exc:  # argparse's own errors
        status = exc.code
    assert status == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def test_make_book_hands_chapters_to_the_build_script():
    """``CHAPTERS="02 10" make book`` runs ``build_book.py --chapters 02 10`` (README's 'Re-executing a chapter');
    without CHAPTERS, or with a blank one, the whole book."""
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("no make")

    import os

    env = {k: v for k, v in os.environ.items() if k not in ("PROFILE", "CHAPTERS")}

    def recipe(*assignments):
        out = subprocess.run(["make", "-n", "book", *assignments], cwd=ROOT, capture_output=True, text=True,
                             timeout=60, env=env)
        assert out.returncode == 0, out.stderr
        return [line for line in out.stdout.splitlines() if "build_book.py" in line][-1].split()

    assert recipe("CHAPTERS=02 10")[-4:] == ["ci", "--chapters", "02", "10"]
    assert recipe()[-2:] == recipe("CHAPTERS= ")[-2:] == ["--profile", "ci"]


def test_the_readme_says_which_results_hold_initial_and_how_rounds_count(tmp_path):
    """The README listed ``initial`` ("before round 1") among the parts of every result file, but ``run cifar10``
    and ``table1`` write none, and ``history`` counts rounds from 0 (a run's first record is ``round`` 0)."""
    from fedlib.cli import main

    text = " ".join((ROOT / "README.md").read_text().split("A result file holds", 1)[1]
                    .split("written atomically", 1)[0].split())
    table1 = sorted((ROOT / "data" / "results" / "cifar10").glob("*__seed*.json"))
    assert table1 and all("initial" not in json.loads(f.read_text()) for f in table1)
    out = tmp_path / "r.json"
    assert main(["run", "synthetic", "--num-clients", "2", "--rounds", "2", "--quiet", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert "initial" in doc and [h["round"] for h in doc["history"]] == [0, 1]
    assert "`initial` (`run synthetic` only:" in text and "round 1" not in text
    assert "`round`, counted from 0," in text
