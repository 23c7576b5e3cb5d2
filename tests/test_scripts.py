"""The scripts under scripts/, imported as modules or run in a scratch tree: bad arguments refused
before anything runs (exit 2, one line), what they write, what they measure (the
median step), and the seeded streams they draw from."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from fedlib.rng import generator


# --------------------------------------------------------------------------- scripts/*.py and vendor_mathjax.sh
def _script(name: str):
    """A script under scripts/ imported as a module (its main() not run)."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / name
    spec = importlib.util.spec_from_file_location(f"_script_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _exit_code_and_stderr(main, argv, capsys) -> tuple:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return exc.value.code, capsys.readouterr().err


def _assert_usage_error(script_name, flags, message, capsys) -> None:
    """scripts/<script_name>'s main(flags) exits 2 with ``message`` after argparse's ': error: '."""
    code, err = _exit_code_and_stderr(_script(script_name).main, flags, capsys)
    assert code == 2 and err.splitlines()[-1].split(": error: ", 1)[1] == message, err


@pytest.mark.parametrize("flags, env, message", [
    (["--profile", "ful"], {}, "--profile (default $PROFILE, else ci) must be one of ci, full, got 'ful'"),
    ([], {"PROFILE": "smoke"}, "--profile (default $PROFILE, else ci) must be one of ci, full, got 'smoke'"),
    (["--seed", "-1"], {}, "--seed must be >= 0 (fedlib.rng's seeds), got -1"),
    (["--timeout", "0"], {}, "--timeout must be >= 1 second (omit it for no timeout), got 0"),
    ([], {"BOOK_JOBS": "two"}, "$BOOK_JOBS must be a whole number of chapters at a time, got 'two'"),
    ([], {}, "holds no _toc.yml and _config.yml (not a book root)"),
])
def test_build_book_refuses_bad_arguments_before_anything_runs(tmp_path, monkeypatch, capsys, flags, env, message):
    """Before: a profile other than ci / full or a negative seed failed inside every chapter that
    reads them (a KeyError in chapters 2, 8, 9; fedlib.rng's ValueError), after the mirror was
    made; --timeout 0 reached papermill; BOOK_JOBS=two and a --root without _toc.yml were
    tracebacks (ValueError, FileNotFoundError)."""
    build_book = _script("build_book.py")
    monkeypatch.delenv("PROFILE", raising=False)
    monkeypatch.delenv("BOOK_JOBS", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    root = tmp_path / "book"
    root.mkdir()
    code, err = _exit_code_and_stderr(build_book.main, ["--root", str(root), "--no-render", *flags], capsys)
    assert code == 2 and ": error: " in err.splitlines()[-1], err
    assert message in err.splitlines()[-1].split(": error: ", 1)[1], err
    assert list(root.iterdir()) == []  # no _build mirror


@pytest.mark.parametrize("flags, message", [
    (["--only", "quadratic", "--lr", "-1"], "argument --lr: must be a finite number > 0, got '-1'"),
    (["--only", "quadratic", "--lr", "nan"], "argument --lr: must be a finite number > 0, got 'nan'"),
    (["--only", "steps", "--rounds", "0"], "argument --rounds: must be >= 1, got 0"),
    (["--only", "steps", "--seeds", "0", "-1"], "argument --seeds: must be >= 0, got -1"),
    (["--only", "full-batch", "--full-batch-rounds", "0"], "argument --full-batch-rounds: must be >= 1, got 0"),
])
def test_probe_scaffold_synthetic_refuses_bad_arguments(capsys, flags, message):
    """Before: --lr -1 and nan ran (the quadratic probe printed its table), --rounds 0 and --seeds -1
    were ValueError tracebacks from the library, --full-batch-rounds 0 printed a 'run' of no rounds."""
    _assert_usage_error("probe_scaffold_synthetic.py", flags, message, capsys)


@pytest.mark.parametrize("flags, message", [
    (["--seeds", "1"], "argument --seeds: must be >= 2, got 1"),
    (["--problem-seeds", "0", "-1"], "argument --problem-seeds: must be >= 0, got -1"),
    (["--rounds", "0", "3"], "argument --rounds: must be >= 1, got 0"),
    (["--lr-scale", "nan"], "argument --lr-scale: must be a finite number > 0, got 'nan'"),
    (["--lr-scale", "-1"], "argument --lr-scale: must be a finite number > 0, got '-1'"),
])
def test_measure_bias_limit_refuses_bad_arguments(capsys, flags, message):
    """Before: each was a ValueError traceback (exit 1) from fedlib.experiments.speedup after the
    first problem had been set up ('seeds must be an integer >= 2, got 1', 'seed must be an integer
    >= 0, got -1', 'rounds_list[0] must be ...', 'lr_scale must be a finite number > 0, got nan')."""
    _assert_usage_error("measure_bias_limit.py", flags, message, capsys)


@pytest.mark.parametrize("flags, message", [
    (["--copies", "0"], "argument --copies: must be >= 1, got 0"),
    (["--clients", "4", "0"], "argument --clients: must be >= 1, got 0"),
    (["--rounds", "0", "16"], "argument --rounds: must be >= 1, got 0"),
    (["--seeds", "1"], "argument --seeds: must be >= 2, got 1"),
    (["--replicas", "0"], "argument --replicas: must be >= 1, got 0"),
    (["--problem-seeds", "-1"], "argument --problem-seeds: must be >= 0, got -1"),
    (["--min-rounds-per-client", "-1"], "argument --min-rounds-per-client: must be a finite number >= 0, got '-1'"),
    (["--clients", "2", "--rounds", "16"],
     "--clients 2 and --rounds 16: give two different q or two different T (a slope needs two budgets)"),
    (["--clients", "2", "2", "--rounds", "16", "16"],
     "--clients 2 2 and --rounds 16 16: give two different q or two different T (a slope needs two budgets)"),
])
def test_measure_sampling_slopes_refuses_bad_arguments(capsys, flags, message):
    """Before: each was a ValueError traceback (exit 1) after the first problem's cells had run or
    been set up: 'copies_list[0] must be an integer >= 1, got 0', 'seeds must be an integer >= 2,
    got 1', ..., and one budget 'loglog_slope needs two finite, positive 1-d arrays of the same
    length >= 2' / 'needs at least two distinct x values'."""
    _assert_usage_error("measure_sampling_slopes.py", flags, message, capsys)


def test_import_gpu_results_refuses_a_repo_that_is_no_folder(capsys, tmp_path):
    """Before: --repo /nonexist said only 'FOLDER: nothing to import (nothing written)' for an empty FOLDER, and for a
    FOLDER with results made the mistyped path and filed them there, without a word."""
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / "profile_eager.txt").write_text("Self CPU\n")
    missing = tmp_path / "nonexist"
    _assert_usage_error("import_gpu_results.py", [str(folder), "--repo", str(missing)],
                        f"--repo {missing}: not a folder (the repository the results are filed into)", capsys)
    assert not missing.exists()
    (tmp_path / "repo").mkdir()
    assert _script("import_gpu_results.py").main([str(folder), "--repo", str(tmp_path / "repo"), "--tag", "t"]) == 0
    assert (tmp_path / "repo/data/results/bench/profile_eager_t.txt").read_text() == "Self CPU\n"

def test_import_gpu_results_says_why_it_cannot_check_a_commit(tmp_path):
    """A --repo with .git, but no git on PATH (here PATH holds only python): before, a FileNotFoundError traceback
    (exit 1); now exit 2, one line naming the cause, nothing written. A .git that git cannot read is named the same
    way (it was 'commit ... is not in this repository')."""
    import os
    import shutil
    import tarfile

    root = Path(__file__).resolve().parents[1]
    name = "momentum-e2-fednova__seed0.json"
    folder, repo, bin_ = tmp_path / "out", tmp_path / "repo", tmp_path / "bin"
    for d in (folder, repo / ".git", bin_):
        d.mkdir(parents=True)
    (bin_ / "python").symlink_to(sys.executable)
    with tarfile.open(folder / "cifar10-results.tar.gz", "w:gz") as tar:
        tar.add(root / "data/results/cifar10" / name, arcname=name)
    cmd = [sys.executable, str(root / "scripts/import_gpu_results.py"), str(folder), "--repo", str(repo)]
    for path, cause in ((str(bin_), "(no git command on PATH)"), (os.environ["PATH"], "(git exited 128: fatal: ")):
        if "git exited" in cause and shutil.which("git") is None:
            continue
        proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, PATH=path, LC_ALL="C"))
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert "cannot be checked against this repository " + cause in proc.stderr, proc.stderr
        assert "(nothing written)" in proc.stderr and not (repo / "data").exists()


def _vendor_mathjax(tmp_path, *args):
    """Run a copy of scripts/vendor_mathjax.sh in a scratch tree (it writes <tree>/book/_static/mathjax)
    with a fake npm first on PATH that logs its calls and packs a two-file MathJax 3.2.2."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    shutil.copy(Path(__file__).resolve().parents[1] / "scripts" / "vendor_mathjax.sh", tree / "scripts")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "npm.log"
    (bin_dir / "npm").write_text(
        "#!/usr/bin/env bash\n"
        f'echo "$*" >> {log}\n'
        '[ "$*" = "pack --silent mathjax@3.2.2" ] || exit 1\n'
        "mkdir -p package/es5 && printf 'svg' > package/es5/tex-svg-full.js && printf 'Apache' > package/LICENSE\n"
        "tar czf mathjax-3.2.2.tgz package && rm -r package && echo mathjax-3.2.2.tgz\n")
    (bin_dir / "npm").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(tree / "scripts" / "vendor_mathjax.sh"), *args], capture_output=True,
                          text=True, env=env, timeout=60)
    return proc, (log.read_text().splitlines() if log.exists() else []), tree / "book" / "_static" / "mathjax"


@pytest.mark.parametrize("args, rc, stream, text", [
    (["--help"], 0, "stdout", "usage: scripts/vendor_mathjax.sh [VERSION]"),
    (["latest"], 2, "stderr", "vendor_mathjax.sh: error: VERSION must be a MathJax 3 release like 3.2.2"),
    (["3.2.2", "3.2.1"], 2, "stderr", "vendor_mathjax.sh: error: takes at most one VERSION, got 2: 3.2.2 3.2.1"),
])
def test_vendor_mathjax_checks_its_argument_before_calling_npm(tmp_path, args, rc, stream, text):
    """Before: '--help' ran 'npm pack mathjax@--help' against the registry, 'latest' fetched
    whatever is newest (MathJax 4 has no es5/tex-svg-full.js), a second argument was ignored."""
    proc, npm_calls, dest = _vendor_mathjax(tmp_path, *args)
    assert proc.returncode == rc, proc.stdout + proc.stderr
    assert text in getattr(proc, stream)
    assert npm_calls == [] and not dest.exists()


def test_vendor_mathjax_writes_the_files_and_their_checksum(tmp_path):
    import hashlib

    proc, npm_calls, dest = _vendor_mathjax(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert npm_calls == ["pack --silent mathjax@3.2.2"]
    assert sorted(p.name for p in dest.iterdir()) == ["LICENSE", "VENDORED.txt", "tex-svg-full.js"]  # no .tmp left
    assert (dest / "tex-svg-full.js").read_text() == "svg" and (dest / "LICENSE").read_text() == "Apache"
    assert f"es5/tex-svg-full.js  sha256 {hashlib.sha256(b'svg').hexdigest()}" in (dest / "VENDORED.txt").read_text()


def test_make_cifar_sample_records_the_command_that_rebuilds_it(tmp_path, monkeypatch, capsys):
    """The README's command left out the per-class counts when they were 400 and 100 (compared with
    400 / 100 instead of the defaults 200 / 50): the README of a 400 + 100 sample named a command that
    builds 200 + 50. Fake data: 4,010 training images (label i mod 10, 401 per class) and 1,010 test
    images: the first 400 / 100 of each class are indices 0..3999 / 0..999."""
    from fedlib.data.cifar10 import Cifar10Arrays

    make = _script("make_cifar_sample.py")
    fake = Cifar10Arrays(np.zeros((4010, 32, 32, 3), np.uint8), np.arange(4010) % 10,
                         np.zeros((1010, 32, 32, 3), np.uint8), np.arange(1010) % 10, "fake")
    monkeypatch.setattr(make, "load_cifar10", lambda root, download=False: fake)
    out = tmp_path / "sample"
    assert make.main(["--root", "/data/x", "--out", str(out), "--train-per-class", "400",
                      "--test-per-class", "100"]) == 0
    readme = (out / "README.md").read_text()
    assert (f"python scripts/make_cifar_sample.py --root /data/x --train-per-class 400 --test-per-class 100 "
            f"--out {out}\n") in readme
    with np.load(out / "cifar10-sample.npz") as z:
        np.testing.assert_array_equal(z["train_index"], np.arange(4000))
        np.testing.assert_array_equal(z["test_index"], np.arange(1000))


@pytest.mark.parametrize("flags, message", [
    ([], "CIFAR-10 not found: looked for the CIFAR-10 batch folder"),
    (["--train-per-class", "402"], "class 0 has only 401 images, fewer than per_class=402"),
])
def test_make_cifar_sample_refuses_missing_or_short_data(tmp_path, monkeypatch, capsys, flags, message):
    """Both were tracebacks (FileNotFoundError, ValueError); now exit 2 naming --root, nothing written."""
    from fedlib.data.cifar10 import Cifar10Arrays

    make = _script("make_cifar_sample.py")
    if flags:
        fake = Cifar10Arrays(np.zeros((4010, 32, 32, 3), np.uint8), np.arange(4010) % 10,
                             np.zeros((1010, 32, 32, 3), np.uint8), np.arange(1010) % 10, "fake")
        monkeypatch.setattr(make, "load_cifar10", lambda root, download=False: fake)
    out = tmp_path / "sample"
    code, err = _exit_code_and_stderr(make.main, ["--root", str(tmp_path / "none"), "--out", str(out), *flags],
                                      capsys)
    assert code == 2 and err.splitlines()[-1].split(": error: ", 1)[1].startswith(
        f"--root {tmp_path / 'none'}: {message}"), err
    assert not out.exists()


def test_count_outside_accuracy_draws_its_cases_from_a_fedlib_rng_stream():
    """The script drew from numpy.random.default_rng(seed), outside fedlib.rng's streams; case s now
    comes from generator(s, "count_outside_cases"): the quadratic's seed, p, the local steps and the
    lr, in that order. Its documented count (fedlib.theory.quadratic_vr_count_outside: seeds 0..199,
    12,800 circles, 2 wrong at phase step 0.8, none at 0.4 or 0.2, none where two steps agreed) is
    the same with the new draws."""
    from fedlib.problems import random_quadratic

    script = _script("count_outside_accuracy.py")
    g = generator(7, "count_outside_cases")
    q_seed, p = int(g.integers(2 ** 63)), g.dirichlet(np.ones(4))
    steps, lr = g.integers(1, 30, size=4), float(g.choice([0.04, 0.3]))
    q, got_steps, got_lr = script.draw_case(7)
    expected = random_quadratic(4, 5, seed=q_seed, p=p)
    np.testing.assert_array_equal(q.H, expected.H)
    np.testing.assert_array_equal(q.p, p)
    np.testing.assert_array_equal(got_steps, steps)
    assert got_lr == lr


def test_vr_spectrum_refuses_an_out_that_is_a_file(tmp_path, capsys):
    """--out naming a file was a FileExistsError traceback from mkdir, after the optimum was computed."""
    spectrum = _script("vr_spectrum.py")
    out = tmp_path / "notes.txt"
    out.write_text("keep")
    code, err = _exit_code_and_stderr(spectrum.main, ["--smoke", "--out", str(out)], capsys)
    assert code == 2, err
    assert err.splitlines()[-1].split(": error: ", 1)[1] == (f"--out {out}: is a file; give the folder to write the "
                                                              "results into")
    assert out.read_text() == "keep"


def test_vr_spectrum_refuses_an_out_it_cannot_make(tmp_path, capsys):
    """--out below a file (here notes.txt/spectra) was a NotADirectoryError traceback from mkdir
    (exit 1), after the optimum was computed; now an argparse error naming --out, before it."""
    spectrum = _script("vr_spectrum.py")
    (tmp_path / "notes.txt").write_text("keep")
    out = tmp_path / "notes.txt" / "spectra"
    code, err = _exit_code_and_stderr(spectrum.main, ["--smoke", "--out", str(out)], capsys)
    assert code == 2, err
    assert err.splitlines()[-1].split(": error: ", 1)[1] == f"--out {out}: cannot make the folder (Not a directory)"


# --------------------------------------------------------------------------- scripts/gpu_run.sh --help
ROOT = Path(__file__).resolve().parents[1]


def test_gpu_run_help_exits_0_and_a_bad_argument_2():
    script = str(ROOT / "scripts" / "gpu_run.sh")
    proc = subprocess.run(["bash", script, "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "usage:" in proc.stdout and proc.stderr == ""
    proc = subprocess.run(["bash", script, "--bogus"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "usage:" in proc.stderr


def _load_script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_client_optimizer_reports_the_median(monkeypatch):
    """sorted(times)[steps // 2] was the upper middle value: at 2 steps the slower one."""
    import torch

    mod = _load_script("bench_client_optimizer")
    clock = iter([0.0, 1.0, 10.0, 13.0])  # step times 1 and 3
    monkeypatch.setattr(mod, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))
    net = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    got = mod.median_step_seconds(opt, net, torch.zeros(4, 3), torch.zeros(4, dtype=torch.int64), 2)
    assert got == pytest.approx(2.0)


def test_measure_host_planning_refuses_a_non_positive_count():
    """--steps 0 planned a round of one local step per client (the scaled steps are floored at 1)."""
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "measure_host_planning.py"), "--runs", "1",
                           "--rounds", "1", "--steps", "0"], capture_output=True, text=True, cwd=ROOT,
                          env={**__import__("os").environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--steps must be >= 1" in proc.stderr


# --------------------------------------------------------------------------- check_ranges.sh
def _check_ranges(tmp_path, *args, **env):
    import os

    return subprocess.run(["bash", str(ROOT / "scripts" / "check_ranges.sh"), *args], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "DRY_RUN": "1", **env})


def test_check_ranges_installs_each_end_in_its_own_clone_and_runs_the_suite_and_the_book(tmp_path):
    """The commands behind the README's 'both ends of those ranges were tested' (DRY_RUN prints them): the
    lowest end with uv's lowest-direct resolution on PYTHON_LOWEST, the newest with plain pip on PYTHON_NEWEST,
    each editable from a clone under WORKDIR, then the suite without the browser tests and the book's ci build
    in that clone; nothing is removed, made or cloned outside WORKDIR."""
    import shlex

    work = tmp_path / "ranges"
    done = _check_ranges(tmp_path, str(work), PYTHON_LOWEST="/py/low", PYTHON_NEWEST="/py/new")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    low, new = lines.index("== lowest: /py/low"), lines.index("== newest: /py/new")
    assert low == 0 < new
    ends = {"lowest": [shlex.split(line) for line in lines[1:new]],
            "newest": [shlex.split(line) for line in lines[new + 1:]]}
    for end, commands in ends.items():
        tree, venv = f"{work}/{end}/tree", f"{work}/{end}/venv"
        assert ["git", "clone", "-q", str(ROOT), tree] in commands
        assert [f"/py/{end[:3]}", "-m", "venv", venv] in commands
        installs = [c for c in commands if "install" in c and f"{tree}[book,test]" in c]
        if end == "lowest":
            assert installs == [[f"{venv}/bin/uv", "pip", "install", "-q", "--python", f"{venv}/bin/python",
                                 "--resolution", "lowest-direct", "-e", f"{tree}[book,test]"]]
        else:
            assert installs == [[f"{venv}/bin/pip", "install", "-q", "-e", f"{tree}[book,test]"]]
        tests = [c for c in commands if "pytest" in c]
        assert len(tests) == 1 and tests[0][:3] == ["env", "-C", tree]
        assert tests[0][tests[0].index(f"{venv}/bin/python"):] == [
            f"{venv}/bin/python", "-m", "pytest", "-q", "-n", "2", "--dist", "loadfile", "-m", "not serial",
            "-p", "no:cacheprovider"]
        assert [c for c in commands if "scripts/build_book.py" in c] == [
            ["env", "-C", tree, f"{venv}/bin/python", "scripts/build_book.py", "--profile", "ci"]]
        writes = [c for c in commands if c[0] in ("rm", "mkdir", "git")]
        assert len(writes) == 3 and all(c[-1].startswith(str(work)) for c in writes), writes


@pytest.mark.parametrize("args, message", [
    ((), "usage: scripts/check_ranges.sh WORKDIR [lowest] [newest]"),
    (("--help",), "usage: scripts/check_ranges.sh WORKDIR [lowest] [newest]"),
    (("/tmp/x", "oldest"), "check_ranges.sh: unknown end 'oldest' (lowest or newest)"),
])
def test_check_ranges_refuses_bad_arguments_before_anything_runs(tmp_path, args, message):
    done = _check_ranges(tmp_path, *args)
    assert (done.returncode, done.stdout, done.stderr.strip()) == (2, "", message)


def test_check_ranges_names_a_missing_interpreter(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k != "DRY_RUN"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "check_ranges.sh"), str(tmp_path / "w"), "newest"],
                          capture_output=True, text=True, timeout=60, env={**env, "PYTHON_NEWEST": "/no/python"})
    assert done.returncode == 2
    assert done.stderr.strip() == "check_ranges.sh: no interpreter at /no/python (set PYTHON_NEWEST)"
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("flags, message", [
    (["ch03"], "argument chapter: invalid choice: 'ch03' (choose from ch02, ch04, ch07, ch08, ch09, ch10)"),
    (["ch02", "--no-lr-sweep"], "--no-lr-sweep: only chapter 4 has a learning-rate sweep, not ch02"),
    (["ch10", "--no-bounds"], "--no-bounds: only chapter 7 runs the bounds, not ch10"),
    (["ch07", "--figure5"], "--figure5: only chapter 4 has Figure 5, not ch07"),
    (["ch07", "--speedup"], "--speedup: only chapter 8 has part 2's linear speedup, not ch07"),
    (["ch08", "--perturbation-only"], "--perturbation-only: only chapter 10 has part 6's perturbation runs, not ch08"),
    (["ch02", "--seeds", "5", "4"], "--seeds 5 4: LAST must be >= FIRST"),
    (["ch02", "--seeds", "-1", "4"], "argument --seeds: must be >= 0, got -1"),
    (["ch02", "--profile", "fast"], "argument --profile: invalid choice: 'fast' (choose from ci, full)"),
])
def test_measure_chapter_margins_refuses_bad_arguments(capsys, flags, message):
    """Exit 2 before any seed runs (argparse's choices quoted or not, as Python versions print them)."""
    code, err = _exit_code_and_stderr(_script("measure_chapter_margins.py").main, flags, capsys)
    said = err.splitlines()[-1].split(": error: ", 1)[1]
    for word in ("ci", "full", "ch02", "ch04", "ch07", "ch08", "ch09", "ch10"):
        said = said.replace(f"'{word}'", word)
    assert code == 2 and said == message, err
