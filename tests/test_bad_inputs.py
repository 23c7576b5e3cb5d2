"""Every user-facing failure mode, in one table: each bad input fails fast with a message
naming the parameter / flag / file, exit status 2 on the command line, and no result file.

``CLI_CASES`` run ``fedlib.cli.main`` in process (argparse errors raise ``SystemExit(2)``;
everything else returns 2); ``API_CASES`` call the library. The README's troubleshooting
table quotes these messages (written by hand; tests/test_readme.py runs its one-flag rows).
"""
import json
import pickle

import numpy as np
import pytest

from fedlib.cli import main

SYN = ["run", "synthetic", "--num-clients", "3", "--rounds", "2", "--quiet"]
LEAF = ["run", "synthetic", "--rounds", "2", "--quiet"]  # --data: no Synthetic flags (they are refused)


def _leaf(tmp, name="bad.json", *, users=("a", "b"), x=None, y=None):
    x = x if x is not None else {u: [[0.0, 1.0], [1.0, 0.0]] for u in users}
    y = y if y is not None else {u: [0, 1] for u in users}
    doc = {"users": list(users), "num_samples": [len(x[u]) for u in users],
           "user_data": {u: {"x": x[u], "y": y[u]} for u in users}}
    path = tmp / name
    path.write_text(json.dumps(doc))
    return str(path)


def _leaf_folder(tmp):
    """A LEAF folder (train/ and test/): a result written into train/ was read as data by the next run."""
    for part in ("train", "test"):
        (tmp / "ds" / part).mkdir(parents=True)
        _leaf(tmp / "ds" / part, f"{part}.json")
    return str(tmp / "ds")


def _nan_leaf(tmp):
    path = tmp / "nan.json"
    path.write_text('{"users": ["a"], "num_samples": [2], "user_data": {"a": {"x": [[NaN, 1.0], [1.0, 0.0]], '
                    '"y": [0, 1]}}}')
    return str(path)


def _corrupt_cifar(tmp):
    folder = tmp / "cifar-10-batches-py"
    folder.mkdir()
    for name in ["data_batch_%d" % i for i in range(1, 6)] + ["test_batch"]:
        (folder / name).write_bytes(b"not a pickle")
    return str(tmp)


def _ckpt_other_config(tmp):
    assert main(SYN + ["--out", str(tmp / "first.json"), "--checkpoint-every", "1"]) == 0
    (tmp / "first.json.ckpt").rename(tmp / "other.ckpt")
    return str(tmp / "other.ckpt")


def _corrupt_ckpt(tmp):
    (tmp / "junk.ckpt").write_bytes(b"\x00junk")
    return str(tmp / "junk.ckpt")


def _not_a_result(tmp):
    (tmp / "x.json").write_text("{not json")
    return str(tmp / "x.json")


# (id, argv builder tmp -> list, env, fragment that the message must contain)
CLI_CASES = [
    ("negative lr", lambda t: SYN + ["--lr", "-0.1"], {}, "--lr"),
    ("mu < 0", lambda t: SYN + ["--algorithm", "fedprox", "--mu", "-1"], {}, "--mu"),
    ("fedprox without mu", lambda t: SYN + ["--algorithm", "fedprox"], {}, "--mu"),
    ("rho >= 1", lambda t: SYN + ["--solver", "momentum", "--momentum", "1.0"], {}, "--momentum"),
    ("server momentum >= 1", lambda t: SYN + ["--server", "momentum", "--server-momentum", "1"], {},
     "--server-momentum"),
    ("unknown algorithm", lambda t: SYN + ["--algorithm", "fedfoo"], {}, "--algorithm"),
    ("unknown solver", lambda t: SYN + ["--solver", "newton"], {}, "--solver"),
    ("tau_i = 0 (epochs 0)", lambda t: SYN + ["--epochs", "0"], {}, "--epochs"),
    ("bad epochs string", lambda t: SYN + ["--epochs", "5-2"], {}, "--epochs"),
    # past int64 the schedule failed inside, reported as 'a value is too large for the 64-bit integers'
    ("epochs past int64", lambda t: SYN + ["--epochs", "1-" + "9" * 20], {},
     "argument --epochs: epochs must be a whole number below 2**63 (an int64), got " + "9" * 20),
    ("clients per round > clients (uniform)", lambda t: SYN + ["--sampling", "uniform", "--clients-per-round", "9"],
     {}, "--clients-per-round 9 is larger than the number of clients (3)"),
    ("sampling without q", lambda t: SYN + ["--sampling", "uniform"], {}, "--clients-per-round is required"),
    ("tau_eff policy unknown", lambda t: SYN + ["--tau-eff", "sample"], {}, "argument --tau-eff"),
    ("tau_eff population for FedAvg", lambda t: SYN + ["--algorithm", "fedavg", "--tau-eff", "population"], {},
     "--tau-eff can only be set for fednova"),
    ("missing LEAF file", lambda t: LEAF + ["--data", str(t / "nope.json")], {}, "nope.json"),
    ("corrupt LEAF JSON", lambda t: LEAF + ["--data", (t / "c.json").write_text("{oops") and str(t / "c.json")], {},
     "c.json: not valid JSON"),
    ("NaN in data", lambda t: LEAF + ["--data", _nan_leaf(t)], {}, "NaN"),
    ("label out of range", lambda t: LEAF + ["--data", _leaf(t, y={"a": [0, 7], "b": [0, 1]}), "--num-classes", "2"],
     {}, "out of range [0, 2)"),
    ("empty client", lambda t: LEAF + ["--data", _leaf(t, x={"a": [], "b": [[0.0, 1.0]]}, y={"a": [], "b": [0]})],
     {}, "has no training samples"),
    ("feature shape mismatch", lambda t: LEAF + ["--data", _leaf(t, x={"a": [[0.0, 1.0]], "b": [[0.0, 1.0, 2.0]]},
                                                                 y={"a": [0], "b": [1]})], {}, "features"),
    ("Synthetic flag with --data", lambda t: LEAF + ["--data", _leaf(t), "--alpha", "3"], {},
     "--alpha: describes the generated Synthetic data"),
    ("--out is the --data file", lambda t: LEAF + ["--data", _leaf(t), "--out", _leaf(t)], {},
     "is the --data file; writing the result would replace the data"),
    ("--out inside a --data folder", lambda t: LEAF + ["--data", _leaf_folder(t), "--out", str(t / "ds" / "train" / "r.json")],
     {}, "lies inside the --data folder"),
    ("divergence", lambda t: ["run", "synthetic", "--num-clients", "3", "--rounds", "20", "--quiet", "--lr", "1e6", "--l2", "0.001"], {}, "diverged in round"),
    ("out folder missing", lambda t: SYN + ["--out", str(t / "no" / "r.json")], {}, "--out"),
    ("resume without checkpoint", lambda t: SYN + ["--resume", "--checkpoint", str(t / "none.ckpt")], {},
     "--resume: checkpoint"),
    ("resume from another config", lambda t: SYN + ["--lr", "0.05", "--resume", "--checkpoint", _ckpt_other_config(t)],
     {}, "differing keys: lr"),
    ("resume from a corrupt checkpoint", lambda t: SYN + ["--resume", "--checkpoint", _corrupt_ckpt(t)], {},
     "junk.ckpt is corrupt"),
    ("--checkpoint without --checkpoint-every", lambda t: SYN + ["--checkpoint", str(t / "c.ckpt")], {},
     "--checkpoint needs --checkpoint-every"),
    ("world size > clients", lambda t: SYN + ["--distributed"], {"WORLD_SIZE": "5", "RANK": "0"},
     "world size 5 is larger than the number of clients (3)"),
    ("--distributed outside torchrun", lambda t: SYN + ["--distributed"], {"WORLD_SIZE": None, "RANK": None},
     "launch with torchrun"),
    ("--distributed with the reference engine", lambda t: SYN + ["--distributed", "--engine", "reference"], {},
     "--distributed runs the batched engine"),
    ("cuda without a GPU", lambda t: SYN + ["--backend", "torch", "--device", "cuda"], {}, "--device"),
    ("unknown precision", lambda t: ["run", "cifar10", "--sample", "--precision", "fp16", "--device", "cpu",
                                      "--rounds", "1", "--width", "0.03", "--quiet"], {}, "--precision"),
    ("CUDA graph without a GPU", lambda t: ["run", "cifar10", "--sample", "--cuda-graph", "--device", "cpu",
                                             "--rounds", "1", "--width", "0.03", "--quiet"], {}, "--cuda-graph"),
    ("corrupt CIFAR batch", lambda t: ["run", "cifar10", "--data-root", _corrupt_cifar(t), "--device", "cpu",
                                        "--rounds", "1", "--width", "0.03", "--quiet"], {}, "data_batch_1"),
    ("missing CIFAR data", lambda t: ["run", "cifar10", "--data-root", str(t / "nodata"), "--device", "cpu",
                                       "--rounds", "1", "--quiet"], {}, "cifar-10-batches-py"),
    ("rerun of a corrupt result", lambda t: ["rerun", _not_a_result(t)], {}, "x.json: not valid JSON"),
    # the seed went through to numpy, whose error was reported as '--num-clients / --partition-alpha'
    ("partition seed of 2**32", lambda t: ["run", "cifar10", "--sample", "--partition-seed", "4294967296",
                                           "--device", "cpu", "--quiet"], {}, "--partition-seed: must be an integer in"),
]


def _run(argv):
    try:
        return main(argv)
    except SystemExit as exc:  # argparse: unknown choice / malformed value
        return exc.code


@pytest.mark.parametrize("case", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli_bad_input(case, tmp_path, capsys, monkeypatch):
    name, build, env, fragment = case
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    for k in ("WORLD_SIZE", "RANK"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        if v is not None:
            monkeypatch.setenv(k, v)
    argv = build(tmp_path)
    out = tmp_path / "out" / "result.json"
    out.parent.mkdir()
    if "--out" not in argv and argv[0] != "rerun":
        argv = argv + ["--out", str(out)]
    capsys.readouterr()
    assert _run(argv) == 2
    err = capsys.readouterr().err
    assert fragment in err, err
    assert not out.exists() and not list(out.parent.iterdir())  # nothing written, not even a temp file


def _bad_p():
    from fedlib.sampling import sample_clients
    return sample_clients("full", [0.5, 0.6], None, 0, 0)


def _neg_lr():
    from fedlib.solvers import make_solver
    return make_solver("sgd", -0.1)


def _neg_mu():
    from fedlib.solvers import make_solver
    return make_solver("prox", 0.1, mu=-1.0)


def _rho_one():
    from fedlib.solvers import make_solver
    return make_solver("momentum", 0.1, momentum=1.0)


def _tau_zero():
    from fedlib.algorithms import make_algorithm
    from fedlib.data import synthetic
    from fedlib.engines.batched import run_batched
    from fedlib.problems.logistic import LogisticProblem
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd
    prob = LogisticProblem(synthetic(num_clients=2, seed=0))
    return run_batched(make_algorithm("fednova", sgd(0.1)), prob, FixedSteps([0, 3]), 1, batch_size=20)


def _shape_mismatch():
    from fedlib.algorithms import make_algorithm
    from fedlib.data import synthetic
    from fedlib.engines.batched import run_batched
    from fedlib.problems.logistic import LogisticProblem
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd
    prob = LogisticProblem(synthetic(num_clients=2, seed=0))
    return run_batched(make_algorithm("fednova", sgd(0.1)), prob, FixedSteps([1, 1]), 1, batch_size=20,
                       params={"W": np.zeros((3, 3)), "b": np.zeros(3)})


def _full_with_q():
    from fedlib.algorithms import make_algorithm
    from fedlib.data import synthetic
    from fedlib.engines.batched import run_batched
    from fedlib.problems.logistic import LogisticProblem
    from fedlib.schedules import FixedSteps
    from fedlib.solvers import sgd
    prob = LogisticProblem(synthetic(num_clients=2, seed=0))
    return run_batched(make_algorithm("fednova", sgd(0.1)), prob, FixedSteps([1, 1]), 1, batch_size=20,
                       clients_per_round=1)


def _unknown_algorithm():
    from fedlib.algorithms import make_algorithm
    from fedlib.solvers import sgd
    return make_algorithm("fedfoo", sgd(0.1))


def _impossible_sampling():
    from fedlib.sampling import sample_clients
    return sample_clients("uniform", [0.5, 0.5], 3, 0, 0)


def _weightless_sample():
    from fedlib.sampling import sample_clients
    return sample_clients("uniform", [0.5, 0.5, 0.0], 1, 0, 0)


def _fedprox_without_mu():
    from fedlib.experiments.quadratic import fixed_point
    from fedlib.problems import random_quadratic
    return fixed_point(random_quadratic(2, 2, seed=0), "fedprox", 0.05, [1, 2])


def _world_too_big():
    from fedlib.distributed import owned_clients
    return owned_clients(2, 3, 0)


def _bf16_fp64():
    import torch
    import torch.nn as nn

    from fedlib.engines.stacked import StackedEngine
    return StackedEngine(nn.Sequential(nn.Flatten(), nn.Linear(12, 2)), None, [], rounds=1, precision="bf16",
                         dtype=torch.float64)


def _cifar_batch(tmp):
    from fedlib.data.cifar10 import _read_split
    path = tmp / "data_batch_1"
    path.write_bytes(pickle.dumps({"data": np.zeros((2, 5), np.uint8), "labels": [0, 1]}))
    return _read_split(tmp, [path.name])


API_CASES = [
    ("p not summing to 1", lambda t: _bad_p(), "p"),
    ("negative lr (API)", lambda t: _neg_lr(), "lr"),
    ("mu < 0 (API)", lambda t: _neg_mu(), "mu"),
    ("rho >= 1 (API)", lambda t: _rho_one(), "momentum"),
    ("tau_i = 0 (API)", lambda t: _tau_zero(), "steps must be >= 1"),
    ("params shape mismatch", lambda t: _shape_mismatch(), "W"),
    ("unknown algorithm (API)", lambda t: _unknown_algorithm(), "algorithm"),
    ("more clients than exist without replacement", lambda t: _impossible_sampling(), "clients_per_round"),
    ("clients_per_round with full participation", lambda t: _full_with_q(), "full participation"),
    ("uniform sampling that could draw only weight-0 clients", lambda t: _weightless_sample(), "have weight 0"),
    ("FedProx closed form at mu = 0", lambda t: _fedprox_without_mu(), "mu must be"),
    ("world size > clients (API)", lambda t: _world_too_big(), "world size"),
    ("bf16 with float64 master parameters (API)", lambda t: _bf16_fp64(), "bf16"),
    ("malformed CIFAR batch", _cifar_batch, "data_batch_1"),
]


@pytest.mark.parametrize("case", API_CASES, ids=[c[0] for c in API_CASES])
def test_api_bad_input(case, tmp_path):
    name, fn, fragment = case
    with pytest.raises(ValueError) as info:
        fn(tmp_path)
    assert fragment in str(info.value), str(info.value)
