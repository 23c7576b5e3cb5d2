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
