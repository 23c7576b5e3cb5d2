"""The command line as a user meets it: failures of the file system, odd paths, hand-edited results."""
import errno

import pytest

from fedlib.cli import main

TINY = ["run", "synthetic", "--rounds", "1", "--num-clients", "4", "--quiet"]


def test_a_write_failure_after_training_is_a_one_line_error_not_a_traceback(tmp_path, monkeypatch, capsys):
    # e.g. the disk filled up during the run: the result cannot be staged next to --out
    import fedlib._io as io

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(io.tempfile, "mkstemp", full)
    out = tmp_path / "r.json"
    rc = main([*TINY, "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "No space left on device" in err and "Traceback" not in err
    assert err.strip().count("\n") == 0 and err.startswith("python -m fedlib run synthetic: error:")
    assert not out.exists() and list(tmp_path.iterdir()) == []


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
    assert "required unless --sample or --random-images" in _help(capsys, "bench", "cifar10")


def test_a_result_with_a_percentage_accuracy_is_refused(tmp_path):
    # e.g. a history typed in (or converted) from a log that prints 70.5 for 70.5 %: the table1
    # summary multiplies by 100 and would show 7050
    import json

    from fedlib.results import read_result, validate_result

    out = tmp_path / "r.json"
    assert main([*TINY, "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    validate_result(doc)
    doc["history"][0]["test_accuracy"] = 70.5
    with pytest.raises(ValueError, match=r"history\[0\]\.test_accuracy must be a fraction in \[0, 1\]"):
        validate_result(doc)
    out.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="not a percentage"):
        read_result(out)


def test_provenance_records_the_folder_a_relative_command_ran_in(tmp_path, monkeypatch):
    # `--out r.json` / `--data .` in the recorded command could not be rerun as written from
    # anywhere else: the result did not say which folder they were relative to
    import json
    import shlex

    from fedlib.results import read_result

    monkeypatch.chdir(tmp_path)
    assert main([*TINY, "--out", "r.json"]) == 0
    prov = read_result(tmp_path / "r.json")["provenance"]
    assert prov["cwd"] == str(tmp_path)
    assert shlex.split(prov["command"])[-1] == "r.json"
    assert json.loads((tmp_path / "r.json").read_text())["provenance"]["cwd"] == str(tmp_path)


def test_table1_images_per_second_help_says_earlier_results_come_first_and_its_default(capsys):
    # the help said 'used until a group has been measured', but a rate from earlier results in
    # --results wins over the hint (as the description says), and it did not say what happens without it
    text = _help(capsys, "table1")
    assert "used only when --results holds no earlier result with the same engine settings" in text
    assert "(default: none: the first group starts unestimated" in text


def test_out_dash_is_refused_rather_than_written_as_a_file_named_dash(tmp_path, monkeypatch, capsys):
    # `--out - | jq ...` wrote a file called '-' into the current folder and printed 'wrote -'
    monkeypatch.chdir(tmp_path)
    assert main([*TINY, "--out", "-"]) == 2
    assert "results are not written to stdout" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_the_console_script_is_recorded_as_python_m_fedlib(monkeypatch):
    # `fedlib run synthetic ...` (the [project.scripts] entry point) was recorded as
    # 'python /abs/venv/bin/fedlib run synthetic ...', not as the documented 'python -m fedlib ...'
    import sys

    from fedlib.results import make_provenance

    monkeypatch.setattr(sys, "argv", ["/opt/my venv/bin/fedlib", "run", "synthetic", "--out", "a b.json"])
    assert make_provenance(0.0, 1.0)["command"] == "python -m fedlib run synthetic --out 'a b.json'"


def test_table1_with_a_large_stack_reaches_training(tmp_path, monkeypatch, capsys):
    # --stack 12 named the group's checkpoint after all 12 runs: '[Errno 36] File name too long'
    # before anything trained (a traceback before the OSError one-liner)
    import fedlib.experiments.cifar10 as C

    class Reached(Exception):
        pass

    def fake(runs, *args, **kwargs):
        assert len(runs) == 12
        raise Reached

    monkeypatch.setattr(C, "train_runs", fake)
    cells = [c.id for c in C.CELLS][:12]
    with pytest.raises(Reached):
        main(["table1", "--sample", "--width", "0.03", "--rounds", "2", "--stack", "12", "--seeds", "0",
              "--cells", ",".join(cells), "--budget-seconds", "1000", "--results", str(tmp_path / "r")])


def test_an_out_name_too_long_for_the_temporary_file_is_refused_before_training(tmp_path, monkeypatch, capsys):
    # a 250-byte name is a valid file name, but '.<name>.<8>.tmp' is not: the run trained, then
    # failed to write its result ('File name too long')
    import fedlib.cli.synthetic as S

    out = tmp_path / ("r" * 245 + ".json")
    calls = []
    monkeypatch.setattr(S, "write_result", lambda *a, **k: calls.append(a))
    rc = main([*TINY, "--out", str(out)])
    assert rc == 2 and calls == []
    assert "at most 241 can be written atomically" in capsys.readouterr().err


def test_a_default_checkpoint_name_too_long_is_refused_before_training(tmp_path, capsys):
    # --out of 239 bytes is fine, but its default checkpoint '<out>.ckpt' (244) failed at the first checkpoint
    out = tmp_path / ("r" * 234 + ".json")
    rc = main([*TINY, "--out", str(out), "--checkpoint-every", "1"])
    assert rc == 2 and "--checkpoint" in capsys.readouterr().err and not out.exists()
