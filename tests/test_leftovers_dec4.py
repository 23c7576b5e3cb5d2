"""Leftovers from earlier reviews and an audit of scripts/ (2026-12-04): each fix has a test that fails on the code
before it (a few companions pin what stays the same: the shipped results, the happy path)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from fedlib.rng import PURPOSES, generator
from fedlib.schedules import RandomSteps, WallClock
from cliutil import cli_exit


# ---------------------------------------------------------------- WallClock's own stream

def test_wallclock_speeds_come_from_their_own_stream():
    r"""rates(t)[i] = s_i e^{sigma Z}, times the straggling factor when U < straggler_prob, with Z
    then U the first two draws of generator(seed, "round_speeds", t, i)."""
    assert "round_speeds" in PURPOSES
    clock = WallClock([2.0, 8.0], round_seconds=1.0, jitter=0.5, straggler_prob=0.5, straggler_factor=0.25,
                      seed=7)
    for t in (0, 3):
        for i, s in enumerate((2.0, 8.0)):
            g = generator(7, "round_speeds", t, i)
            expected = s * np.exp(0.5 * g.standard_normal())
            if g.random() < 0.5:
                expected *= 0.25
            assert clock.rates(t)[i] == expected


def test_wallclock_speeds_are_independent_of_a_random_schedule_with_the_same_seed():
    """The clock drew its jitter from generator(seed, "local_steps", t, i), the stream of
    RandomSteps' step counts: with one seed for both, both were read from the same first 64-bit
    word. The ziggurat takes Z's sign from bit 8 of that word, and a step count uniform on
    [1, 2**32 - 1] is (almost) its low 32 bits, so bit 8 of the step count gave the sign of the
    jitter in 1,995 of 2,000 rounds. From independent streams they agree about half the time
    (binomial(2000, 1/2): 1,000 +- 22)."""
    rounds = 2000
    steps_of = RandomSteps(num_clients=1, low=1, high=2 ** 32 - 1, seed=3)
    clock = WallClock([10.0], round_seconds=1.0, jitter=1.0, seed=3)
    bit8 = np.array([(int(steps_of.local_steps(t)[0]) >> 8) & 1 for t in range(rounds)])
    slowed = np.array([clock.rates(t)[0] < 10.0 for t in range(rounds)])  # Z < 0
    agree = int(np.sum(bit8 == slowed))
    assert 900 < agree < 1100, agree


# ---------------------------------------------------------------- table1 --budget-seconds inf


@pytest.mark.parametrize("flags, message", [
    (["--budget-seconds", "inf"], "--budget-seconds must be a finite number of seconds, got inf; for no practical "
                                  "limit give one longer than the runs (e.g. 1e9)"),
    (["--budget-seconds", "1", "--continue-later", "inf"], "--continue-later must be a finite number of seconds, "
                                                           "got inf"),
])
def test_table1_refuses_an_infinite_budget(tmp_path, flags, message):
    """--budget-seconds inf (and --continue-later inf) had no documented meaning and was taken as
    "no limit": a dry run listed the runs, a real call would have trained every missing cell."""
    res = tmp_path / "results"
    rc, out, err = cli_exit(["table1", "--results", str(res), "--dry-run", "--cells", "sgd-e2-fedavg", "--seeds", "0",
                             *flags])
    assert (rc, out) == (2, ""), (rc, out, err)
    assert err.startswith(f"python -m fedlib table1: error: {message}"), err
    assert not res.exists()


@pytest.mark.parametrize("kw, message", [
    ({"budget_seconds": float("inf")}, "budget_seconds must be a finite number of seconds, got inf"),
    ({"budget_seconds": 1.0, "continue_later": float("inf")},
     "continue_later must be a finite number >= 0 of seconds, got inf"),
])
def test_run_table1_refuses_an_infinite_budget(tmp_path, kw, message):
    import fedlib.experiments.cifar10 as C

    lines = []
    with pytest.raises(ValueError, match="^" + message):
        C.run_table1(tmp_path, seeds=(0,), cells=["sgd-e2-fedavg"], dry_run=True, log=lines.append, **kw)
    assert lines == []


# ---------------------------------------------------------------- Synthetic(alpha, beta) that overflows

def _tiny_synthetic(alpha, beta):
    """One client, d = 1, C = 2, n = 2, seed 19: the draws of stream (19, "data", 0) are, in order,
    Z0 (u = alpha Z0), Z1 (B = beta Z1), Z2, Z3 (W), Z4, Z5 (b), Z6 (v), Z7, Z8 (x; Sigma = 1)."""
    from fedlib.data.synthetic import synthetic

    return synthetic(alpha, beta, num_clients=1, dim=1, num_classes=2, seed=19, num_samples=2)


def test_synthetic_refuses_alpha_whose_class_scores_overflow():
    r"""With beta = 0, x_i = Z6 + Z_{7+i} and the scores are u (x_i + 1) up to O(1) terms: they overflow
    float64 once alpha Z0 (max_i x_i + 1) passes the largest double (about 5.5e307). Before, alpha just
    above that limit gave numpy overflow warnings and labels that were the argmax of inf. Since the
    follow-ups of 2026-12-04 (tests/test_followups_dec4.py) alpha above ALPHA_MAX = 2^26 is refused before
    any draw, on both sides of the overflow limit, without a warning."""
    z = generator(19, "data", 0).standard_normal(9)
    x = z[6] + z[7:9]
    assert z[0] > 1 and np.all(x > 0)
    limit = np.finfo(np.float64).max / (z[0] * (x.max() + 1.0))  # about 5.5e307
    with np.errstate(all="raise"):  # no overflow warning either
        for alpha in (limit * (1 - 1e-9), limit * (1 + 1e-9)):
            with pytest.raises(ValueError, match=r"^alpha must be at most ALPHA_MAX = 2\*\*26"):
                _tiny_synthetic(alpha, 0.0)


def test_synthetic_refuses_beta_whose_inputs_overflow():
    """x_i = beta Z1 + Z6 + Z_{7+i} with Z1 = 1.188: inf for beta = 1.6e308 (1.9e308 > the largest
    double). Before, FederatedDataset refused it without naming beta ('client 0 train x contains
    NaN or inf'), after numpy's overflow warnings."""
    z1 = generator(19, "data", 0).standard_normal(2)[1]
    assert z1 > np.finfo(np.float64).max / 1.6e308
    with np.errstate(all="raise"):
        with pytest.raises(ValueError, match=r"^beta=1\.6e\+308 is too large: client 0's inputs x .* overflow "
                                             r"float64 \(inf\); choose a smaller beta"):
            _tiny_synthetic(0.0, 1.6e308)


# ---------------------------------------------------------------- arguments a subcommand does not take

@pytest.mark.parametrize("argv, command, message", [
    (["rerun", "a.json", "b.json"], "rerun",
     "unrecognized arguments: b.json; python -m fedlib rerun takes 1 positional argument (result), got 2 (see --help)"),
    (["rerun", "a.json", "--bogus"], "rerun", "unrecognized arguments: --bogus"),
    (["run", "synthetic", "--rounds", "2", "--bogus"], "run synthetic", "unrecognized arguments: --bogus"),
    (["table1", "extra"], "table1",
     "unrecognized arguments: extra; python -m fedlib table1 takes no positional arguments, got 1 (see --help)"),
])
def test_an_argument_a_subcommand_does_not_take_is_reported_by_that_subcommand(argv, command, message):
    """argparse reported them from the top level: 'usage: python -m fedlib [-h] COMMAND ...' and
    'python -m fedlib: error: unrecognized arguments: b.json', naming neither rerun nor what it takes."""
    rc, out, err = cli_exit(argv)
    assert (rc, out) == (2, ""), (rc, out, err)
    lines = err.strip().splitlines()
    assert lines[0].startswith(f"usage: python -m fedlib {command} [-h] "), lines[0]
    assert lines[-1] == f"python -m fedlib {command}: error: {message}"


# ---------------------------------------------------------------- a summary that disagrees with its history

SHIPPED_RUN = "data/results/cifar10/sgd-e2-fedavg__seed0.json"


def _shipped_run() -> dict:
    import json
    from pathlib import Path

    return json.loads((Path(__file__).resolve().parents[1] / SHIPPED_RUN).read_text())


def test_the_shipped_summary_is_its_history_s_last_round():
    """sgd-e2-fedavg seed 0 (Table 1, H200): final test accuracy 0.5882 in round 99 (1-based 100)."""
    from fedlib.results import validate_result

    doc = validate_result(_shipped_run())
    assert len(doc["history"]) == 100 and doc["summary"]["rounds"] == 100
    assert doc["summary"]["final_test_accuracy"] == doc["history"][99]["test_accuracy"] == 0.5882000000000001


@pytest.mark.parametrize("key, value, message", [
    ("final_test_accuracy", 0.6882, r"summary\.final_test_accuracy is 0\.6882 but the last round \(history\[99\]\) "
                                    r"has test_accuracy 0\.5882000000000001; the summary must be"),
    ("final_train_loss", None, r"summary\.final_train_loss is None but the last round \(history\[99\]\) has "
                               r"train_loss 0\.2467"),
    ("rounds", 99, r"summary\.rounds is 99 but the history has 100 records"),
])
def test_a_summary_that_disagrees_with_the_history_is_refused(tmp_path, key, value, message):
    """Table 1 reads summary.final_test_accuracy, the figures read the history: an edited (or
    mixed-up) file whose two disagree was read without a word."""
    import json

    from fedlib.results import read_result

    doc = _shipped_run()
    doc["summary"][key] = value
    f = tmp_path / "r.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=f"^{re.escape(str(f))}: {message}"):
        read_result(f)


def test_a_final_value_without_any_history_is_refused():
    from fedlib.results import make_result

    prov = _shipped_run()["provenance"]
    with pytest.raises(ValueError, match=r"^result: summary\.final_test_accuracy is 0\.5 but the history is empty"):
        make_result({"rounds": 0}, [], prov, summary={"final_test_accuracy": 0.5})


def test_rerun_refuses_a_summary_that_disagrees_with_its_history(tmp_path):
    """rerun read such a file and reported 'MISMATCH: summary.final_test_accuracy' (exit 1) as if
    the code had changed; the file contradicts itself: a bad input (exit 2), one line."""
    import json

    orig = tmp_path / "orig.json"
    rc, _, err = cli_exit(["run", "synthetic", "--num-clients", "3", "--rounds", "2", "--epochs", "1", "--quiet",
                           "--out", str(orig)])
    assert rc == 0, err
    doc = json.loads(orig.read_text())
    last = doc["history"][1]["test_accuracy"]
    doc["summary"]["final_test_accuracy"] = 0.99
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    rc, out, err = cli_exit(["rerun", str(bad), "--quiet"])
    assert (rc, out) == (2, "")
    assert err == (f"python -m fedlib rerun: error: {bad}: summary.final_test_accuracy is 0.99 but the last round "
                   f"(history[1]) has test_accuracy {last!r}; the summary must be the history's last record\n")


# ---------------------------------------------------------------- bench cifar10 --profile on the CPU

_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def _seconds(text: str) -> float:
    m = re.fullmatch(r"([0-9.]+)(s|ms|us|ns)", text)
    assert m, text
    return float(m.group(1)) * _UNITS[m.group(2)]


def test_bench_cifar10_profile_on_the_cpu_is_sorted_by_self_cpu_time(tmp_path):
    """On a CPU the operator table is sorted by self CPU time (``self_cpu_time_total``; on a GPU by
    self CUDA time): the operators that themselves take the time come first, not the wrappers
    (aten::conv2d -> aten::convolution -> ...) whose total includes their callees. Checked on the
    written table: the 'Self CPU' column never increases down the rows, at most 30 of them (the
    order of the numbers the profiler itself prints, not a measurement of this test)."""
    prof = tmp_path / "p.txt"
    rc, out, err = cli_exit(["bench", "cifar10", "--sample", "--width", "0.03", "--steps", "2", "--repeat", "1",
                             "--device", "cpu", "--profile", str(prof), "--quiet"])
    assert (rc, out) == (0, ""), err
    lines = prof.read_text().splitlines()
    rules = [i for i, line in enumerate(lines) if set(line.strip()) == {"-", " "} or set(line.strip()) == {"-"}]
    header = lines[rules[0] + 1].split("  ")
    columns = [c.strip() for c in header if c.strip()]
    assert columns[:3] == ["Name", "Self CPU %", "Self CPU"] and not any("CUDA" in c for c in columns)
    rows = [line.split() for line in lines[rules[1] + 1:rules[2]]]
    assert 5 <= len(rows) <= 30
    self_cpu = [_seconds(r[-5]) for r in rows]  # Self CPU, then CPU total %, CPU total, avg, calls
    assert self_cpu == sorted(self_cpu, reverse=True), self_cpu  # sorted by CPU total, or by CUDA time: fails
    assert lines[rules[2] + 1].startswith("Self CPU time total: ")


# ---------------------------------------------------------------- scripts/

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
    probe = _script("probe_scaffold_synthetic.py")
    code, err = _exit_code_and_stderr(probe.main, flags, capsys)
    assert code == 2 and err.splitlines()[-1].split(": error: ", 1)[1] == message, err


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
