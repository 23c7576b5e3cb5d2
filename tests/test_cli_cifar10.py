"""``python -m fedlib run cifar10`` / ``bench cifar10`` end to end at a tiny width on the shipped sample
(``bench cifar10 --profile``'s table, a split that cannot be made); ``bench cifar10``'s --download, --steps and
--full-round."""
from __future__ import annotations

import json
import math
import pickle
import re

import numpy as np
import pytest
import torch

from fedlib.cli import main
from fedlib.results import read_result
from cliutil import cli_exit, ctrl_c_after_saving
from torch_threads import one_torch_thread  # noqa: F401 (autouse fixture)

TINY = ["--sample", "--width", "0.03", "--device", "cpu"]


def test_run_cifar10_writes_a_valid_result(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["run", "cifar10", *TINY, "--rounds", "2", "--epochs", "2-5", "--algorithm", "fedavg", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    res = read_result(out)
    assert res["config"]["data"]["num_clients"] == 16 and res["config"]["batch_size"] == 32
    assert res["config"]["weight_decay"] == 1e-4 and res["config"]["lr_decay"] == "step"
    h = res["history"]
    assert [r["round"] for r in h] == [0, 1]
    for r in h:
        assert set(r) >= {"round", "train_loss", "test_accuracy", "tau_eff", "chi2", "local_steps", "lr"}
        assert len(r["local_steps"]) == 16 and 0 <= r["test_accuracy"] <= 1
        assert r["chi2"] > 0  # FedAvg with unequal tau_i
    assert h[1]["lr"] == pytest.approx(0.005)  # /10 after 50% of 2 rounds
    assert res["provenance"]["wall_time_s"] > 0
    assert "wrote" in capsys.readouterr().out


def test_run_cifar10_tau_eff_population_under_sampling(tmp_path, capsys):
    """--tau-eff population from the split's sizes (recorded in the config), --epochs 2, local
    SGD: tau_eff = sum_i p_i * 2 * ceil(n_i / 32), the same every round whichever clients come."""
    out = tmp_path / "r.json"
    rc = main(["run", "cifar10", *TINY, "--rounds", "2", "--epochs", "2", "--algorithm", "fednova", "--sampling",
               "uniform", "--clients-per-round", "4", "--tau-eff", "population", "--quiet", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    res = read_result(out)
    n = np.array(res["config"]["data"]["num_samples"])
    expected = float(n / n.sum() @ (2 * -(-n // 32)))
    assert res["config"]["tau_eff_value"] == pytest.approx(expected, rel=1e-14)
    assert [r["tau_eff"] for r in res["history"]] == pytest.approx([expected] * 2, rel=1e-14)
    assert "warning" not in capsys.readouterr().err


def test_run_cifar10_history_names_the_clients_of_each_round(tmp_path, capsys):
    """Each record's clients are the round's participants, in the order of local_steps: all 16 with full
    participation; under uniform sampling q = 4 distinct ones, whose tau_i = 2 ceil(n_i / 32) and whose
    weights p_i m / q give the recorded tau_eff = sum_S p_i (m / q) tau_i (FedNova, SGD). Before, the
    history had the steps without the clients, so a sampled round could not be checked or attributed."""
    full, sampled = tmp_path / "f.json", tmp_path / "s.json"
    assert main(["run", "cifar10", *TINY, "--rounds", "1", "--epochs", "2", "--quiet", "--out", str(full)]) == 0
    assert main(["run", "cifar10", *TINY, "--rounds", "2", "--epochs", "2", "--sampling", "uniform",
                 "--clients-per-round", "4", "--tau-eff", "a_norm", "--quiet", "--out", str(sampled)]) == 0, \
        capsys.readouterr().err
    assert read_result(full)["history"][0]["clients"] == list(range(16))
    res = read_result(sampled)
    n = np.array(res["config"]["data"]["num_samples"])
    p = n / n.sum()
    for rec in res["history"]:
        clients = rec["clients"]
        assert len(clients) == len(set(clients)) == 4 and all(0 <= c < 16 for c in clients)
        assert rec["local_steps"] == [int(2 * -(-n[c] // 32)) for c in clients]
        assert rec["tau_eff"] == pytest.approx(sum(p[c] * 16 / 4 * t for c, t in zip(clients, rec["local_steps"])),
                                               rel=1e-12)


def test_run_cifar10_resumes_from_its_checkpoint_bit_for_bit(tmp_path, monkeypatch):
    """run cifar10 --checkpoint-every K / --checkpoint / --resume (before: no such flags; a killed run started over):
    a run interrupted right after its round-2 checkpoint (Ctrl-C) keeps it and says so; --resume trains rounds 2..3
    and writes the unbroken run's history exactly (every field, FedNova with random epochs), its provenance saying
    where it resumed and which earlier call trained the rounds before; a fresh run refuses to replace the unfinished
    checkpoint, --resume refuses other --rounds and a missing file; --resume reads the checkpoint once."""
    import fedlib.checkpoint

    def command(rounds=4):
        return ["run", "cifar10", *TINY, "--rounds", str(rounds), "--epochs", "2-5", "--algorithm", "fednova", "--quiet"]

    flags = command()
    whole, part = tmp_path / "whole.json", tmp_path / "part.json"
    assert cli_exit([*flags, "--out", str(whole)])[0] == 0
    ckpt = tmp_path / "part.json.ckpt"
    real_save = ctrl_c_after_saving(monkeypatch)
    rc, _, err = cli_exit([*flags, "--out", str(part), "--checkpoint-every", "2"])
    assert rc == 130 and f"checkpoint {ckpt} kept: run the same command with --resume" in err, err
    monkeypatch.setattr(fedlib.checkpoint, "save_checkpoint", real_save)
    assert not part.exists() and fedlib.checkpoint.load_checkpoint(ckpt)["round"] == 2
    rc, _, err = cli_exit([*flags, "--out", str(part), "--checkpoint-every", "2"])  # a fresh run would overwrite it
    assert rc == 2 and "holds an unfinished run (2 of 4 rounds done)" in err, err
    rc, _, err = cli_exit([*command(6), "--out", str(part), "--resume"])
    assert rc == 2 and f"--resume: checkpoint {ckpt} is of a run of 4 rounds; give --rounds 4" in err, err
    rc, _, err = cli_exit([*flags, "--out", str(part), "--resume", "--checkpoint", str(tmp_path / "none.ckpt")])
    assert rc == 2 and "none.ckpt not found" in err, err
    reads, real_load = [], fedlib.checkpoint.load_checkpoint
    monkeypatch.setattr(fedlib.checkpoint, "load_checkpoint", lambda *a, **k: reads.append(a[0]) or real_load(*a, **k))
    rc, _, err = cli_exit([*flags, "--out", str(part), "--checkpoint-every", "2", "--resume"])
    assert rc == 0, err
    assert reads == [ckpt]  # read once, its rounds checked and resumed from (before: twice, ~40 MB at full width)
    a, b = read_result(whole), read_result(part)
    assert b["history"] == a["history"]
    resumed = b["provenance"]["resumed"]
    assert resumed["from_round"] == 2 and b["summary"]["resumed_after_round"] == 2
    assert [c["rounds"] for c in resumed["earlier_calls"]] == [[0, 2]] and "--checkpoint-every" in \
        resumed["earlier_calls"][0]["command"]
    assert "resumed" not in a["provenance"]


def test_missing_data_root(tmp_path, capsys):
    out = tmp_path / "r.json"
    missing = tmp_path / "nowhere"
    assert main(["run", "cifar10", "--data-root", str(missing), "--rounds", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "--download" in err
    assert not out.exists()


def test_no_data_flag(tmp_path, capsys):
    assert main(["run", "cifar10", "--rounds", "1"]) == 2
    assert "--data-root" in capsys.readouterr().err


def _fake_batch(path, n=20, seed=0):
    rng = np.random.default_rng(seed)
    with open(path, "wb") as fh:
        pickle.dump({"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                     "labels": rng.integers(0, 10, n).tolist()}, fh)


def test_corrupt_batch_file_is_named(tmp_path, capsys):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for i, name in enumerate(["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5",
                              "test_batch"]):
        _fake_batch(folder / name, seed=i)
    (folder / "data_batch_3").write_bytes(b"\x80\x04 truncated")
    out = tmp_path / "r.json"
    assert main(["run", "cifar10", "--data-root", str(tmp_path), "--rounds", "1", "--out", str(out)]) == 2
    assert "data_batch_3" in capsys.readouterr().err
    assert not out.exists()


def test_bf16_runs_on_the_cpu(tmp_path):
    """--precision bf16 (Table 1's GPU mode) also runs on a CPU, so CI exercises it."""
    out = tmp_path / "r.json"
    assert main(["run", "cifar10", "--sample", "--precision", "bf16", "--device", "cpu", "--rounds", "1",
                 "--width", "0.03", "--quiet", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["config"]["precision"] == "bf16"
    assert all(math.isfinite(h["train_loss"]) for h in doc["history"])


@pytest.mark.parametrize("flags", [["--solver", "adagrad"], ["--algorithm", "fedsgd"]])
def test_unknown_solver_or_algorithm(tmp_path, flags):
    out = tmp_path / "r.json"
    with pytest.raises(SystemExit) as exc:
        main(["run", "cifar10", *TINY, "--out", str(out), *flags])
    assert exc.value.code == 2
    assert not out.exists()


def test_impossible_combination(tmp_path, capsys):
    assert main(["run", "cifar10", *TINY, "--algorithm", "fedprox", "--out", str(tmp_path / "r.json")]) == 2
    assert "--mu" in capsys.readouterr().err


def test_divergence_writes_nothing(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["run", "cifar10", *TINY, "--rounds", "2", "--lr", "1e6", "--out", str(out)])
    assert rc == 2
    err = capsys.readouterr().err
    assert "round 0" in err and "nothing written" in err and "fednova seed 0" in err
    assert not out.exists()


def test_bench_cifar10(tmp_path, capsys):
    out = tmp_path / "b.json"
    assert main(["bench", "cifar10", "--sample", "--width", "0.03", "--steps", "3", "--repeat", "1", "--device", "cpu",
                 "--json", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert doc["kind"] == "bench"
    s = doc["summary"]
    assert s["sequential_images_per_s"] > 0 and s["engine_images_per_s"] > 0
    assert s["ratio"] == pytest.approx(s["engine_images_per_s"] / s["sequential_images_per_s"])
    assert s["max_local_steps"] == 3 and doc["config"]["local_steps"]
    assert s["runs_stacked"] == 1
    # two runs stacked: twice the images per engine round, the ratio still engine / sequential rate
    assert main(["bench", "cifar10", "--sample", "--width", "0.03", "--steps", "2", "--repeat", "1", "--runs", "2",
                 "--device", "cpu", "--json", str(out), "--quiet"]) == 0
    s = json.loads(out.read_text())["summary"]
    assert s["runs_stacked"] == 2
    assert s["engine_images_per_s"] == pytest.approx(2 * s["images_per_round"] / s["engine_seconds"])
    assert s["ratio"] == pytest.approx(s["engine_images_per_s"] / s["sequential_images_per_s"])
    assert main(["bench", "cifar10", "--sample", "--width", "0.03", "--steps", "2", "--repeat", "1",
                 "--device", "cpu"]) == 0
    assert "ratio" in capsys.readouterr().out
    # --profile: the operator table of one more (untimed) engine round; a bad path fails first
    assert main(["bench", "cifar10", "--sample", "--width", "0.03", "--steps", "2", "--repeat", "1", "--device", "cpu",
                 "--profile", str(tmp_path / "no" / "p.txt"), "--quiet"]) == 2
    assert "--profile" in capsys.readouterr().err
    assert main(["bench", "cifar10", "--sample", "--width", "0.03", "--steps", "2", "--repeat", "1", "--device", "cpu",
                 "--profile", str(tmp_path / "p.txt"), "--quiet"]) == 0
    assert "aten::" in (tmp_path / "p.txt").read_text()


def test_bench_cifar10_random_images(tmp_path, capsys):
    # the real 50,000-image split from the shipped labels, random pixels: the official sizes
    out = tmp_path / "b.json"
    assert main(["bench", "cifar10", "--random-images", "--width", "0.03", "--steps", "2", "--repeat", "1",
                 "--device", "cpu", "--json", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert doc["config"]["num_train"] == 50000 and sum(doc["config"]["client_sizes"]) == 50000
    assert "random images" in doc["config"]["data"]
    assert main(["bench", "cifar10", "--random-images", "--sample", "--device", "cpu"]) == 2
    assert "excludes" in capsys.readouterr().err


def test_run_cifar10_with_gemm_convolutions_records_it(tmp_path):
    """--conv gemm trains through the im2col convolutions and says so in the result; it is
    refused with --path vmap."""
    out = tmp_path / "g.json"
    assert main(["run", "cifar10", *TINY, "--rounds", "1", "--conv", "gemm", "--out", str(out), "--quiet"]) == 0
    doc = read_result(out)
    assert doc["config"]["conv"] == "gemm" and math.isfinite(doc["summary"]["final_train_loss"])
    assert main(["run", "cifar10", *TINY, "--rounds", "1", "--conv", "gemm", "--path", "vmap"]) == 2


def test_run_cifar10_and_table1_results_record_what_they_trained_on(tmp_path):
    """A CIFAR-10 result names its data by contents, as a LEAF result does: config.data holds the SHA-256 of the
    images and labels and of the client split (fedlib.experiments.cifar10.data_fingerprint). They held only the
    source path and the sizes, which do not tell the real images from a copy carried in parts, or from random
    pixels with the real labels."""
    from fedlib.data.partition import dirichlet_partition
    from fedlib.experiments.cifar10 import data_fingerprint, load_data, official_partition

    data = load_data(sample=True)
    out = tmp_path / "r.json"
    assert main(["run", "cifar10", *TINY, "--rounds", "1", "--epochs", "1", "--num-clients", "4", "--out", str(out),
                 "--quiet"]) == 0
    recorded = read_result(out)["config"]["data"]
    expected = data_fingerprint(data, dirichlet_partition(data.train_labels, 4, 0.1, 2020))
    assert (recorded["sha256"], recorded["split_sha256"]) == (expected["sha256"], expected["split_sha256"])
    results = tmp_path / "t1"
    assert main(["table1", "--results", str(results), *TINY, "--rounds", "1", "--seeds", "0", "--cells",
                 "sgd-e2-fedavg", "--budget-seconds", "300"]) == 0
    recorded = read_result(results / "sgd-e2-fedavg__seed0.json")["config"]["data"]
    expected = data_fingerprint(data, official_partition(data.train_labels))
    assert (recorded["sha256"], recorded["split_sha256"]) == (expected["sha256"], expected["split_sha256"])


def test_run_cifar10_refuses_a_checkpoint_among_the_data_files(tmp_path, capsys):
    """--checkpoint naming a data file (or a path in the batch folder) is refused as --out is. Before, the shipped
    sample itself as --checkpoint was refused only as 'not a fedlib checkpoint', with the advice to delete it."""
    from fedlib.data.cifar10 import DEFAULT_SAMPLE_PATH

    rc = main(["run", "cifar10", *TINY, "--rounds", "1", "--checkpoint", str(DEFAULT_SAMPLE_PATH),
               "--checkpoint-every", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and "--checkpoint" in err and "lies inside the shipped --sample folder" in err, err
    assert "delete the file" not in err
    batches = tmp_path / "cifar-10-batches-py"
    batches.mkdir()
    for name in ("data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch"):
        _fake_batch(batches / name)
    rc = main(["run", "cifar10", "--data-root", str(tmp_path), "--width", "0.03", "--device", "cpu", "--rounds", "1",
               "--checkpoint", str(batches / "run.ckpt"), "--checkpoint-every", "1"])
    err = capsys.readouterr().err
    assert rc == 2 and "lies inside the --data-root batch folder" in err, err
    assert not (batches / "run.ckpt").exists()


def test_bench_cifar10_compares_variants_in_one_run(tmp_path, capsys):
    """--compare: each variant is another engine timed after the base one in the same call;
    its rate follows from its own timed rounds and its runs, its gain is its rate over the
    base engine's. On a CPU cudnn-benchmark changes nothing but the code path runs; the
    flag is restored afterwards."""
    out = tmp_path / "b.json"
    before = torch.backends.cudnn.benchmark
    assert main(["bench", "cifar10", *TINY, "--steps", "2", "--repeat", "1", "--compare", "cudnn-benchmark",
                 "channels-first+runs=2", "conv=gemm", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "variant cudnn-benchmark:" in text and "variant channels-first+runs=2:" in text
    assert torch.backends.cudnn.benchmark == before
    doc = json.loads(out.read_text())
    s = doc["summary"]
    assert doc["config"]["compare"] == ["cudnn-benchmark", "channels-first+runs=2", "conv=gemm"]
    assert doc["config"]["cudnn_benchmark"] is False
    v1, v2, v3 = s["variants"]
    assert v3["settings"]["conv"] == "gemm" and doc["config"]["conv"] == "cudnn"
    assert v1["settings"] == {"runs": 1, "precision": "fp32", "cuda_graph": False, "channels_last": True,
                              "cudnn_benchmark": True, "conv": "cudnn"}
    assert v2["settings"]["runs"] == 2 and v2["settings"]["channels_last"] is False
    for v in (v1, v2, v3):
        runs = v["settings"]["runs"]
        assert v["engine_images_per_s"] == pytest.approx(runs * s["images_per_round"] / v["engine_seconds"])
        assert v["gain"] == pytest.approx(v["engine_images_per_s"] / s["engine_images_per_s"])
    from fedlib.experiments.cifar10 import load_benchmarks

    (row,) = load_benchmarks(tmp_path, prefix="b")  # what chapter 5's speed table reads
    with pytest.raises(FileNotFoundError, match=r"^nowhere: no such folder \(relative to the working folder "):
        load_benchmarks("nowhere")  # was [] (chapter 5: 'rows: a transposed table needs at least one row')
    assert [v["variant"] for v in row["variants"]] == doc["config"]["compare"]
    assert row["variants"][1]["gain"] == v2["gain"]
    assert main(["bench", "cifar10", *TINY, "--steps", "2", "--repeat", "1", "--cudnn-benchmark", "--json", str(out),
                 "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert doc["config"]["cudnn_benchmark"] is True and "variants" not in doc["summary"]
    for bad, says in ((["--cudnn-benchmark", "--compare", "cudnn-benchmark"], "already the base"),
                      (["--compare", "runs=1"], "already the base"), (["--compare", "fast"], "unknown 'fast'"),
                      (["--compare", "eager", "eager"], "twice"), (["--compare", "cuda-graph"], "CUDA"),
                      (["--compare", "runs=0"], "N >= 1"), (["--compare", "cudnn-benchmark+cudnn-benchmark"], "twice"),
                      (["--compare", "precision=fp16"], "precision must be")):
        assert main(["bench", "cifar10", *TINY, *bad]) == 2, bad
        assert says in capsys.readouterr().err, bad


def test_bench_hands_on_partial_results_and_a_killed_call_keeps_them(tmp_path, monkeypatch, capsys):
    """on_partial gets the measurements after the base engine and after each variant but the
    last; through the CLI, a call that dies during a variant leaves the file of what finished."""
    from fedlib.experiments import cifar10 as C

    data = C.load_data(sample=True)
    partials = []
    out = C.bench_cifar10(data, width=0.03, steps=2, repeat=1, device="cpu", compare=["base", "runs=2"],
                          on_partial=partials.append)
    assert [len(p["results"]["variants"]) for p in partials] == [0, 1]
    assert all(p["results"]["partial"] for p in partials) and "partial" not in out["results"]
    assert partials[1]["results"]["variants"][0] == out["results"]["variants"][0]
    assert partials[0]["results"]["engine_images_per_s"] == out["results"]["engine_images_per_s"]

    from fedlib.engines import stacked

    made = []

    class Dies(stacked.StackedEngine):  # the base engine, the first variant, then the call is killed
        def __init__(self, *a, **kw):
            made.append(kw.get("conv"))
            if len(made) == 3:
                raise KeyboardInterrupt("the device call's time limit")
            super().__init__(*a, **kw)

    monkeypatch.setattr(stacked, "StackedEngine", Dies)
    path = tmp_path / "cut.json"
    assert main(["bench", "cifar10", *TINY, "--steps", "2", "--repeat", "1", "--compare", "base", "conv=gemm",
                 "--json", str(path), "--quiet"]) == 130
    assert "keeps the base engine and the 1 variant(s) finished before" in capsys.readouterr().err
    doc = read_result(path)
    assert doc["summary"]["partial"] is True and [v["variant"] for v in doc["summary"]["variants"]] == ["base"]
    assert doc["config"]["compare"] == ["base", "conv=gemm"] and "sample" in doc["config"]["data"]


def test_bench_records_a_failed_variant_and_goes_on(tmp_path, monkeypatch, capsys):
    """A variant that raises (say, out of memory) is recorded with its error and the next one
    still runs: one failed candidate does not cost the others' device time."""
    from fedlib.engines import stacked
    from fedlib.experiments.cifar10 import load_benchmarks

    class NoGemm(stacked.StackedEngine):
        def __init__(self, *a, **kw):
            if kw.get("conv") == "gemm":
                raise RuntimeError("CUDA out of memory (simulated)")
            super().__init__(*a, **kw)

    monkeypatch.setattr(stacked, "StackedEngine", NoGemm)
    path = tmp_path / "bench-f.json"
    assert main(["bench", "cifar10", *TINY, "--steps", "2", "--repeat", "1", "--compare", "conv=gemm", "runs=2",
                 "--json", str(path)]) == 0
    assert "variant conv=gemm: failed (RuntimeError: CUDA out of memory (simulated))" in capsys.readouterr().out
    failed, ok = read_result(path)["summary"]["variants"]
    assert "out of memory" in failed["error"] and "gain" not in failed
    assert ok["variant"] == "runs=2" and ok["gain"] > 0
    (row,) = load_benchmarks(tmp_path, prefix="bench-f")
    assert row["variants"][0]["gain"] is None and "out of memory" in row["variants"][0]["error"]


@pytest.mark.parametrize("text, change", [("cudnn-benchmark", {"cudnn_benchmark": True}),
                                          ("channels-first", {"channels_last": False}),
                                          ("eager", {"cuda_graph": False}),
                                          ("runs=8", {"runs": 8}), ("base", {}),
                                          ("precision=fp32", {"precision": "fp32"}), ("conv=gemm", {"conv": "gemm"}),
                                          ("cudnn-benchmark+runs=6+channels-first",
                                           {"cudnn_benchmark": True, "runs": 6, "channels_last": False})])
def test_parse_bench_variant_changes_only_what_it_names(text, change):
    from fedlib.experiments.cifar10 import parse_bench_variant

    base = {"runs": 4, "precision": "bf16", "cuda_graph": True, "channels_last": True, "cudnn_benchmark": False,
            "conv": "cudnn"}
    got = parse_bench_variant(text, runs=4, precision="bf16", cuda_graph=True, path="grouped", cudnn_bench=False,
                              cuda=True)
    assert got == {**base, **change}


def test_bench_choices_are_the_engines():
    """experiments.cifar10 names the engine's choices without importing torch; they must agree."""
    from fedlib.engines.grouped import CONV_IMPLEMENTATIONS
    from fedlib.engines.stacked import PRECISIONS
    from fedlib.experiments.cifar10 import CONV_CHOICES, PRECISION_CHOICES

    assert CONV_CHOICES == CONV_IMPLEMENTATIONS and PRECISION_CHOICES == PRECISIONS


def test_parse_bench_variant_refuses_what_cannot_be_measured():
    from fedlib.experiments.cifar10 import bench_cifar10, parse_bench_variant

    kw = dict(runs=1, precision="fp32", cuda_graph=False, path="vmap", cudnn_bench=False, cuda=False)
    for text, says in (("channels-first", "grouped path"), ("", "non-empty"), ("eager", "already"),
                       ("runs=x", "whole number"), ("cuda-graph", "CUDA"), ("runs=2+runs=3", "changes runs twice"),
                       ("base+runs=2", "unknown 'base'"), ("conv=gemm", "grouped path")):
        with pytest.raises(ValueError, match=says):
            parse_bench_variant(text, **kw)
    with pytest.raises(ValueError, match="list of variants"):
        bench_cifar10(None, compare="eager")
    grouped = dict(kw, path="grouped")
    with pytest.raises(ValueError, match="cannot be combined with channels-first"):
        parse_bench_variant("conv=gemm+channels-first", **grouped)
    with pytest.raises(ValueError, match="already"):
        parse_bench_variant("conv=gemm", **dict(grouped, conv="gemm"))
    assert parse_bench_variant("conv=cudnn", **dict(grouped, conv="gemm"))["conv"] == "cudnn"
    with pytest.raises(ValueError, match="conv must be one of"):
        parse_bench_variant("conv=fft", **grouped)


def test_cudnn_benchmark_context_sets_and_restores_the_flag():
    import torch

    from fedlib.experiments.cifar10 import cudnn_benchmark

    before = torch.backends.cudnn.benchmark
    with cudnn_benchmark(not before):
        assert torch.backends.cudnn.benchmark == (not before)
    assert torch.backends.cudnn.benchmark == before
    with pytest.raises(RuntimeError):
        with cudnn_benchmark(not before):
            raise RuntimeError("boom")
    assert torch.backends.cudnn.benchmark == before


def test_format_bench_marks_gains_inside_the_base_spread():
    """With a `base` variant, a variant whose gain lies within |base gain - 1| of 1 is marked as
    no measured change; one outside it and a failed one are printed as they are."""
    from fedlib.experiments.cifar10 import format_bench

    results = {"sequential_images_per_s": 1000.0, "engine_images_per_s": 5000.0, "ratio": 5.0,
               "images_per_round": 100, "max_local_steps": 3, "prefix_efficiency": 0.5,
               "variants": [{"variant": "base", "gain": 1.04, "engine_images_per_s": 5200.0},
                            {"variant": "conv=gemm", "gain": 1.5, "engine_images_per_s": 7500.0},
                            {"variant": "runs=8", "gain": 0.97, "engine_images_per_s": 4850.0},
                            {"variant": "channels-first", "error": "RuntimeError: out of memory"}]}
    lines = format_bench(results).splitlines()
    assert lines[3].startswith("variant base:") and "spread" not in lines[3]
    assert "1.500x" in lines[4] and "spread" not in lines[4]
    assert "0.970x" in lines[5] and "within the base engine's own spread (±0.040)" in lines[5]
    assert lines[6] == "variant channels-first: failed (RuntimeError: out of memory)"


def test_bench_leaves_the_global_rng_alone():
    """The sequential loop's dropout drew from torch's global RNG (found by an RNG audit): the caller's state
    moved, and the loop differed between calls. It now runs on a forked RNG seeded from the run's stream."""
    import random

    import numpy as np
    import torch

    from fedlib.experiments import cifar10 as C

    data = C.load_data(sample=True)
    torch.manual_seed(123)
    np.random.seed(123)
    random.seed(123)
    before = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())
    C.bench_cifar10(data, width=0.03, steps=1, repeat=1, device="cpu")
    assert torch.equal(torch.get_rng_state(), before[0])
    assert np.array_equal(np.random.get_state()[1], before[1]) and random.getstate() == before[2]
    # repeat = 0 timed only the warm-up and reported the median of nothing (nan, with numpy's warning)
    with pytest.raises(ValueError, match="^repeat must be an integer >= 1"):
        C.bench_cifar10(data, width=0.03, steps=1, repeat=0, device="cpu")


# --------------------------------------------------------------------------- bench cifar10 --profile on the CPU
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


# --------------------------------------------------------------------------- a split that cannot be made
def test_run_cifar10_split_failure_does_not_advise_a_flag_that_does_not_exist(tmp_path, capsys):
    """``run cifar10 --sample --num-clients 1000`` said '... (lower min_size or num_clients)': the command
    line has no --min-size; it now says what the command line can change."""
    from fedlib.cli import main

    assert main(["run", "cifar10", "--sample", "--width", "0.05", "--rounds", "1", "--num-clients", "1000",
                 "--out", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m fedlib run cifar10: error: --num-clients / --partition-alpha: min_size=10 cannot "
                          "be met: 1000 clients x 10 samples > 2000 samples"), err
    assert err.rstrip().endswith("(the command line keeps the official min_size = 10 images per client: use fewer "
                                 "--num-clients, a larger --partition-alpha or more data)"), err
    assert not (tmp_path / "c.json").exists()


def _err(capsys, argv):
    assert main(argv) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize("extra", [[], ["--random-images"]])
def test_bench_cifar10_download_needs_a_data_root(capsys, monkeypatch, extra):
    """--download without --data-root was blamed on --sample (not given), or ignored with --random-images."""
    import fedlib.data.cifar10 as D
    import fedlib.experiments.cifar10 as C

    def started(*args, **kwargs):
        raise AssertionError("bench cifar10 went on to load data / benchmark")

    monkeypatch.setattr(C, "bench_cifar10", started)
    monkeypatch.setattr(D, "cifar10_random_images", started)
    err = _err(capsys, ["bench", "cifar10", "--download", "--width", "0.03", "--quiet"] + extra)
    if extra:  # it was told to add --data-root, which --random-images then refused
        assert "--random-images makes its images and reads no data set; --download is not used" in err
        assert "--data-root" not in err
    else:
        assert "--download" in err and "--data-root" in err and "--sample needs none" not in err


class _Steps(Exception):
    pass


@pytest.mark.parametrize("flags, steps", [([], 20), (["--steps", "5"], 5), (["--full-round"], None)])
def test_bench_cifar10_passes_the_steps_it_was_given(monkeypatch, flags, steps):
    """The benchmark is a stub that stops the command with the steps it was asked for: 20 by default,
    --steps as given, None (the whole round) for --full-round."""
    import fedlib.experiments.cifar10 as C

    def record(*args, **kwargs):
        raise _Steps(kwargs["steps"])

    monkeypatch.setattr(C, "bench_cifar10", record)
    with pytest.raises(_Steps) as seen:
        main(["bench", "cifar10", "--width", "0.03", "--repeat", "1", "--quiet", "--device", "cpu", *flags])
    assert seen.value.args == (steps,)


class _Width(Exception):
    pass


@pytest.mark.parametrize("device, flags, width", [("cpu", [], 0.03), ("cuda:0", [], 1.0), ("cpu", ["--width", "0.5"], 0.5),
                                                  ("cuda:0", ["--width", "0.5"], 0.5)])
def test_bench_cifar10_width_default_follows_the_device(monkeypatch, device, flags, width):
    """Without --width the benchmark runs VGG-11 at width 0.03 on the CPU and 1 on a GPU, by the device the command
    runs on (it was chosen by torch.cuda.is_available() when the parser was built: --device cpu on a GPU machine
    got width 1). The device check is stubbed to say ``device``; the benchmark stops with the width it was given."""
    import fedlib.cli.cifar10 as CLI
    import fedlib.experiments.cifar10 as C

    def record(*args, **kwargs):
        raise _Width(kwargs["width"])

    monkeypatch.setattr(CLI, "_check_device", lambda args: device)
    monkeypatch.setattr(C, "bench_cifar10", record)
    with pytest.raises(_Width) as seen:
        main(["bench", "cifar10", "--repeat", "1", "--quiet", *flags])
    assert seen.value.args == (width,)


def test_bench_cifar10_refuses_steps_with_full_round(monkeypatch, capsys):
    """--full-round with --steps timed the whole round and dropped --steps without a word."""
    import fedlib.experiments.cifar10 as C

    monkeypatch.setattr(C, "bench_cifar10", lambda *a, **k: pytest.fail("the benchmark was started"))
    err = _err(capsys, ["bench", "cifar10", "--width", "0.03", "--full-round", "--steps", "5", "--device", "cpu"])
    assert "--steps: --full-round times the whole round; give one of the two" in err


def test_parse_bench_variant_refuses_a_runs_count_int_cannot_read():
    """'runs=²' passed the str.isdigit() check (a superscript two is a digit to Python) and int() raised
    "invalid literal for int() with base 10: '²'", a message naming neither the variant nor runs=N."""
    from fedlib.experiments.cifar10 import parse_bench_variant

    kw = dict(runs=1, precision="fp32", cuda_graph=False, path="grouped", cudnn_bench=False, cuda=False)
    for text in ("runs=\u00b2", "runs=1\u00b9", "runs=\u2460"):
        with pytest.raises(ValueError, match=r"variant .*runs=N needs a whole number N >= 1"):
            parse_bench_variant(text, **kw)
    assert parse_bench_variant("runs=08", **kw)["runs"] == 8
    rc, _, err = cli_exit(["bench", "cifar10", "--sample", "--device", "cpu", "--compare", "runs=\u00b2"])
    assert rc == 2 and "--compare: variant 'runs=\u00b2': runs=N needs a whole number" in err
