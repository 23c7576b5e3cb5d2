"""What ``python -m fedlib`` says about its own usage: the ``--help`` texts say what happens without
--out, --data-root or --checkpoint-every, what the run seed draws and where --images-per-second's rate
comes from; an argument a subcommand does not take is reported by that subcommand."""
import re

import pytest

from fedlib.cli import main

from cliutil import cli_exit


def _help(capsys, *command):
    with pytest.raises(SystemExit) as stop:
        main([*command, "--help"])
    assert stop.value.code == 0
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("command", [("run", "synthetic"), ("run", "cifar10")])
def test_help_says_what_happens_without_out_data_root_and_checkpoint_every(capsys, command):
    # a user reading --help could not tell that without --out nothing is written, that --data-root
    # is needed unless --sample, or that no checkpoint is written without --checkpoint-every
    text = _help(capsys, *command)
    assert "atomically (default: none; only the summary is printed)" in text
    if command[1] == "synthetic":
        assert "after the last one (default: none)" in text
    else:
        assert "required unless --sample" in text


def test_bench_cifar10_help_names_random_images_as_an_alternative_to_data_root(capsys):
    # it said 'required unless --sample or --random-images', but without any of them the command runs on the
    # shipped sample (its description says so)
    text = _help(capsys, "bench", "cifar10")
    assert "without it the shipped sample is used (as --sample), or with --random-images the full split's labels" in text
    assert "required unless" not in text.split("--download")[0]


def test_table1_images_per_second_help_says_earlier_results_come_first_and_its_default(capsys):
    # the help said 'used until a group has been measured', but a rate from earlier results in
    # --results wins over the hint (as the description says), and it did not say what happens without it
    text = _help(capsys, "table1")
    assert "used only when --results holds no earlier result with the same engine settings" in text
    assert "(default: none: the first group starts unestimated" in text


def test_run_cifar10_help_says_the_seed_draws_the_initial_model(capsys):
    """run cifar10 --help said the seed draws 'mini-batches, sampling, random epochs'; it also draws the initial
    model (vgg11(seed=run seed)), augmentation and dropout: two seeds do not share their initial model."""
    with pytest.raises(SystemExit) as exc:
        main(["run", "cifar10", "--help"])
    assert exc.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "run seed: the initial model (the same for every algorithm)" in text


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


@pytest.mark.parametrize("argv, message", [
    (["run", "synthetic", "--rounds", "1", "--outt", "x.json"], "unrecognized arguments: --outt x.json; did you mean --out?"),
    (["run", "synthetic", "--rounds", "1", "--outt=x.json"], "unrecognized arguments: --outt=x.json; did you mean --out?"),
    (["run", "synthetic", "--rouns", "1", "--seeed", "3"],
     "unrecognized arguments: --rouns 1 --seeed 3; did you mean --rounds for --rouns, --seed for --seeed?"),
    (["rerun", "a.json", "--bogus", "b.json"], "unrecognized arguments: --bogus b.json"),
    (["rerun", "a.json", "--bogus=1", "b.json"], "unrecognized arguments: --bogus=1 b.json; python -m fedlib rerun "
                                                 "takes 1 positional argument (result), got 2 (see --help)"),
    (["run", "synthetic", "x.json", "--outt", "y"],
     "unrecognized arguments: x.json --outt y; did you mean --out?; "
     "python -m fedlib run synthetic takes no positional arguments, got 1 (see --help)"),
])
def test_a_mistyped_option_is_not_counted_as_positionals_and_the_closest_option_is_suggested(argv, message):
    """The word after an unknown option is taken as its value, not as a positional argument, and an unknown option
    close to a known one is answered with it ('--bogus' is close to none). Before: "unrecognized arguments: --outt
    x.json; python -m fedlib run synthetic takes no positional arguments, got 1 (see --help)", though x.json was
    the value of the mistyped --out."""
    rc, out, err = cli_exit(argv)
    assert (rc, out) == (2, ""), (rc, out, err)
    command = " ".join(argv[:2]) if argv[0] == "run" else argv[0]
    assert err.strip().splitlines()[-1] == f"python -m fedlib {command}: error: {message}"


@pytest.mark.parametrize("extra, message", [
    (["-", "x"], "unrecognized arguments: - x; python -m fedlib run synthetic takes no positional arguments, got 2 "
                 "(see --help)"),
    (["-1"], "unrecognized arguments: -1; python -m fedlib run synthetic takes no positional arguments, got 1 "
             "(see --help)"),
    (["-1", "x"], "unrecognized arguments: -1 x; python -m fedlib run synthetic takes no positional arguments, got 2 "
                  "(see --help)"),
    (["--outt", "-1"], "unrecognized arguments: --outt -1; did you mean --out?"),
    (["--outt", "x.json", "-1"], "unrecognized arguments: --outt x.json -1; did you mean --out?; python -m fedlib run "
                                 "synthetic takes no positional arguments, got 1 (see --help)"),
])
def test_a_dash_or_a_negative_number_among_the_unrecognised_words_is_counted_as_a_positional(extra, message):
    """``-`` (standard input, by convention) and a negative number are values, as argparse reads them (it hands
    them on as positionals): they are counted among the positional arguments given, and taken as the value of an
    unknown option right before them. Before, every word starting with ``-`` was left out of the count: ``- x``
    said 'got 1', and ``-1`` alone gave no count at all."""
    rc, out, err = cli_exit(["run", "synthetic", "--rounds", "1", *extra])
    assert (rc, out) == (2, ""), (rc, out, err)
    assert err.strip().splitlines()[-1] == f"python -m fedlib run synthetic: error: {message}"


@pytest.mark.parametrize("metavar, names", [(("LOW", "HIGH"), "LOW, HIGH"), (None, "bounds, bounds")])
def test_a_positional_of_several_values_is_counted_and_named_value_by_value(capsys, metavar, names):
    """A subcommand positional with ``nargs=2`` takes two values: the message counts both and names them by
    the tuple metavar (joining a tuple as a string raised TypeError) or by the dest twice. No command of
    fedlib has one today; the parser is built here as ``build_parser`` builds it."""
    from fedlib.cli import _CommandParser

    parser = _CommandParser(prog="prog")
    sub = parser.add_subparsers(dest="command").add_parser("span", prog="prog span")
    sub.add_argument("bounds", nargs=2, metavar=metavar)
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["span", "1", "2", "3"])
    assert stop.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"prog span: error: unrecognized arguments: 3; prog span takes 2 positional arguments ({names}), got 3 (see --help)"


@pytest.mark.parametrize("arguments, argv, takes", [
    ([("x", {"nargs": "?"})], ["a", "b"], "at most 1 positional argument ([x])"),
    ([("x", {"nargs": "+"})], ["a", "b", "-f", "c"], "1 or more positional arguments (x [x ...])"),
    ([("x", {"nargs": "*", "metavar": ("A", "B")})], ["a", "-f", "c"], "0 or more positional arguments ([A [B ...]])"),
    ([("x", {}), ("y", {"nargs": "?"})], ["a", "b", "c"], "1 to 2 positional arguments (x, [y])"),
    ([("x", {"choices": ["p", "q"]}), ("y", {"nargs": 2})], ["p", "b", "c", "d"], "3 positional arguments ({p,q}, y, y), got 4"),
])
def test_a_positional_of_no_fixed_count_is_reported_without_a_wrong_count(capsys, arguments, argv, takes):
    """A positional with nargs '?', '*' or '+' takes at most one, any number, one or more values: the message
    gives that range, names it as its usage does, and leaves out "got N" (how many values it took is not
    known). It said "takes 1 positional argument (x), got 2" for x '+' given a b -f c (x took a and b:
    three given), and "takes 2 positional arguments (A, B), got 3" for a tuple metavar with '*'. A
    positional with choices is named by them, as usage names it ('{p,q}', not its dest 'x')."""
    from fedlib.cli import _CommandParser

    parser = _CommandParser(prog="prog")
    sub = parser.add_subparsers(dest="command").add_parser("span", prog="prog span")
    sub.add_argument("-f", action="store_true")
    for name, kwargs in arguments:
        sub.add_argument(name, **kwargs)
    with pytest.raises(SystemExit) as stop:
        parser.parse_args(["span", *argv])
    assert stop.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"prog span: error: unrecognized arguments: {argv[-1]}; prog span takes {takes} (see --help)"


def _exit_code(call) -> int:
    """The status a process would exit with: ``call()``'s SystemExit code, else its return value."""
    try:
        return call()
    except SystemExit as stop:
        return stop.code


@pytest.mark.parametrize("argv, code", [(["--help"], 0), (["nope"], 2), (["rerun", "no-such-result.json"], 2)])
def test_python_m_fedlib_cli_is_python_m_fedlib(capsys, monkeypatch, argv, code):
    """``python -m fedlib.cli`` (fedlib/cli/__main__.py) runs the same command line as ``python -m fedlib``:
    the same output, and main's status as the process's exit status, whether main exits (0 for --help,
    argparse's 2 for an unknown subcommand) or returns it (2 for a result file that is not there)."""
    import runpy
    import sys

    monkeypatch.setattr(sys, "argv", ["fedlib.cli", *argv])
    with pytest.raises(SystemExit) as stop:
        runpy.run_module("fedlib.cli", run_name="__main__", alter_sys=True)
    got = capsys.readouterr()
    assert stop.value.code == code
    assert _exit_code(lambda: main(argv)) == code
    assert capsys.readouterr() == got


def test_run_cifar10_help_says_what_its_training_loss_is(capsys):
    """run cifar10 --help called train_loss 'training loss' (and the run prints a 'final training loss'), as run
    synthetic calls F(x) of the new global model; it is the clients' mean mini-batch loss during the round
    (fedlib.engines.stacked.RoundRecord), which a reader comparing the two commands would misread."""
    text = _help(capsys, "run", "cifar10")
    assert "is the clients' mean mini-batch loss during the round" in text
    assert "not the loss of the new global model that run synthetic records" in text


@pytest.mark.parametrize("argv", [["rerun", "result.json"], ["bench", "synthetic", "--rounds", "1", "--repeat", "1"],
                                  ["table1", "--dry-run"], ["run", "cifar10", "--rounds", "1"],
                                  ["bench", "cifar10", "--steps", "1"]])
def test_a_command_that_does_not_split_across_processes_is_refused_under_torchrun(capsys, monkeypatch, tmp_path, argv):
    """Under torchrun with WORLD_SIZE > 1 only ``run synthetic`` splits its clients across the ranks. Before, every
    other command ran whole on every rank: ``rerun`` ran the recorded command distributed, and rank 1, which
    writes nothing, stopped with '.../rerun.json: file not found' (torchrun: 'fedlib FAILED'); ``run cifar10``,
    ``table1`` and ``bench`` ran once per rank, on the same GPU, writing the same files (bench timed the copies
    competing)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert _exit_code(lambda: main(argv)) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert re.search(r"^python -m fedlib [a-z0-9 ]+: error: started by torchrun with WORLD_SIZE=2, but only "
                     r"'run synthetic' splits its work across processes: each of the 2 would run the whole command "
                     r"and write the same files; run it as one process, without torchrun$", err), err
    assert list(tmp_path.iterdir()) == []


def test_run_synthetic_is_not_refused_under_torchrun_nor_other_commands_with_one_process(capsys, monkeypatch):
    """The guard above leaves ``run synthetic`` to its own checks, and one torchrun process (WORLD_SIZE=1) runs any
    command as one process does."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    assert _exit_code(lambda: main(["run", "synthetic", "--engine", "reference"])) == 2
    assert "--distributed runs the batched engine: drop --engine reference" in capsys.readouterr().err
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert _exit_code(lambda: main(["rerun", "no-such-result.json"])) == 2
    err = capsys.readouterr().err
    assert "no-such-result.json" in err and "torchrun" not in err


@pytest.mark.parametrize("argv, code, escape", [(["rerun", "--help"], 0, "\\u2014"),
                                                (["table1", "--summary"], 0, "\\u2208")])
def test_a_stdout_without_unicode_gets_escapes_not_an_encoding_error(monkeypatch, argv, code, escape):
    """Under ``LC_ALL=C PYTHONIOENCODING=ascii`` (or a Windows code page) stdout cannot encode the em dash of
    ``rerun --help`` or the table's plus-minus and set signs. Before, ``rerun --help`` failed with a
    ``UnicodeEncodeError`` traceback and ``table1 --summary`` stopped half-printed with status 2, ``error: 'ascii'
    codec can't encode character '\\u2208' ...``; now each writes such characters as escapes, as Python's stderr does,
    exits as usual and leaves the stream's error handler as it found it."""
    import io
    import sys

    stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")
    monkeypatch.setattr(sys, "stdout", stream)
    assert _exit_code(lambda: main(argv)) == code
    stream.flush()
    text = stream.buffer.getvalue().decode("ascii")
    assert escape in text and stream.errors == "strict"
    assert text.splitlines()[0].startswith("usage: python -m fedlib rerun" if argv[0] == "rerun" else "| row | E |")


@pytest.mark.parametrize("command", [(), ("bench",), ("bench", "cifar10"), ("run", "synthetic"), ("table1",)])
def test_help_does_not_import_torch(command):
    """``python -m fedlib --help`` and ``bench --help`` took 3.3 s (0.3 s for the other commands): building the
    parser imported torch, to choose ``bench cifar10``'s --width default by ``torch.cuda.is_available()``. That
    default is now resolved by the command, from its --device."""
    import subprocess
    import sys

    code = ("import sys\nfrom fedlib.cli import main\ntry:\n    main(sys.argv[1:] + ['--help'])\n"
            "except SystemExit as stop:\n    assert stop.code == 0, stop.code\n"
            "print('torch imported' if 'torch' in sys.modules else 'no torch')")
    done = subprocess.run([sys.executable, "-c", code, *command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "no torch"
