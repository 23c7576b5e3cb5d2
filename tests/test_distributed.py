"""torch.distributed backend of the batched engine: 1 vs 2 vs 3 gloo processes give the same run;
distributed_apply's checks. Two ranks simulated in threads of one process (tests/thread_ranks.py): they equal one
process for every sampling scheme and server, keep float32, and a bad update on one rank raises on every rank."""
import json
import os
import pickle
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from fedlib.algorithms import ClientUpdate, make_algorithm
from fedlib.distributed import LocalCommunicator, distributed_apply, owned_clients, under_torchrun
from fedlib.sampling import full_participation, sample_clients
from fedlib.server import adam, momentum, plain
from fedlib.solvers import sgd

from thread_ranks import Hub, ThreadComm, cli_on_ranks, on_ranks

ROOT = Path(__file__).resolve().parents[1]
FLAGS = ["run", "synthetic", "--num-clients", "5", "--rounds", "3", "--epochs", "1-3", "--algorithm", "fednova-vr",
         "--server", "momentum", "--sampling", "uniform", "--clients-per-round", "4", "--quiet",
         "--checkpoint-every", "3"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env():
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return env


# torch 2.8 to (at least) 2.9 print this line from gloo's C++ on every process that starts a gloo group (the pinned
# torch does not): torch's output, not fedlib's, left out of what the tests compare
_GLOO_BANNER = re.compile(r"^\[Gloo\] Rank \d+ is connected to \d+ peer ranks\. "
                          r"Expected number of connected peer ranks is : \d+\n?", re.MULTILINE)


def _without_gloo_banner(text: str) -> str:
    return _GLOO_BANNER.sub("", text)


def _torchrun(n, out):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(n), "--master_port",
           str(_free_port()), "-m", "fedlib"] + FLAGS + ["--out", str(out)]
    proc = subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]


def _max_diff(h1, h2):
    d = 0.0
    for a, b in zip(h1, h2, strict=True):
        assert a["clients"] == b["clients"] and a["local_steps"] == b["local_steps"]
        for k in ("train_loss", "test_accuracy", "tau_eff", "chi2", "lr"):
            d = max(d, abs(a[k] - b[k]))
        for k in ("weights", "a_norms"):
            d = max(d, float(np.max(np.abs(np.subtract(a[k], b[k])))))
    return d


def test_one_two_three_processes_agree(tmp_path):
    from fedlib.cli import main

    assert main(FLAGS + ["--out", str(tmp_path / "w0.json")]) == 0
    ref = json.loads((tmp_path / "w0.json").read_text())
    ref_ckpt = pickle.loads((tmp_path / "w0.json.ckpt").read_bytes())
    for n in (2, 3):
        out = tmp_path / f"w{n}.json"
        _torchrun(n, out)
        res = json.loads(out.read_text())
        assert res["config"]["world_size"] == n
        diff = _max_diff(ref["history"], res["history"])
        print(f"world size {n}: max abs difference of the history vs one process = {diff:.3g}")
        assert diff <= 1e-12  # the order of the additions only (about 1e-16 relative)
        ck = pickle.loads((tmp_path / f"w{n}.json.ckpt").read_bytes())
        assert np.max(np.abs(ck["state"].params - ref_ckpt["state"].params)) <= 1e-10
        # the gathered control variates and the server momentum match too
        assert np.max(np.abs(ck["state"].variates.client - ref_ckpt["state"].variates.client)) <= 1e-10
        assert np.max(np.abs(ck["state"].server[0] - ref_ckpt["state"].server[0])) <= 1e-10
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(f"w{n}")) == \
            [f"w{n}.json", f"w{n}.json.ckpt"]  # rank 0 only wrote


def test_owned_clients_partition():
    blocks = [owned_clients(7, 3, r) for r in range(3)]
    assert np.array_equal(np.concatenate(blocks), np.arange(7))
    with pytest.raises(ValueError, match="world size: 4 processes but only 3 clients"):
        owned_clients(3, 4, 0)


def test_under_torchrun():
    assert under_torchrun({"WORLD_SIZE": "2", "RANK": "0"})
    assert not under_torchrun({})


@pytest.mark.parametrize("name", ["fednova", "fedavg", "scaffold", "vrlsgd", "fednova-vr"])
def test_distributed_apply_world_one_matches_apply(name):
    """One process (``torchrun --nproc_per_node 1``, LocalCommunicator) is apply bit for bit, so that a checkpoint
    of a plain run resumed under torchrun with one process (or the reverse) is the uninterrupted run. Before,
    SCAFFOLD / FedNova-VR's mean c_bar was a sum over the rank's clients one by one, not apply's stacked sum:
    off by 1e-16 relative (a 4-round SCAFFOLD run of run synthetic: 1.6e-16 in one train_loss)."""
    from fedlib.algorithms import ClientUpdate, make_algorithm
    from fedlib.sampling import full_participation
    from fedlib.server import momentum
    from fedlib.solvers import sgd

    rng = np.random.default_rng(0)
    algo = make_algorithm(name, sgd(0.1), momentum(0.9))
    p = np.array([0.1, 0.2, 0.3, 0.4])
    state = algo.init(np.zeros((3, 2)), 4)
    part = full_participation(p)
    for _ in range(2):
        ups = [ClientUpdate(i, rng.normal(size=(3, 2)), float(i + 1), i + 1) for i in range(4)]
        s1, d1 = algo.apply(state, part, ups, 0.1, p)
        s2, d2 = distributed_apply(LocalCommunicator(), algo, state, part, ups[::-1], 0.1, p)
        np.testing.assert_array_equal(s2.params, s1.params)
        assert d1.tau_eff == d2.tau_eff and np.array_equal(d1.weights, d2.weights)
        if s1.variates is not None:
            np.testing.assert_array_equal(s2.variates.client, s1.variates.client)
            np.testing.assert_array_equal(s2.variates.mean, s1.variates.mean)
        np.testing.assert_array_equal(s2.server.buffer, s1.server.buffer)
        state = s1


@pytest.mark.parametrize("name", ["fedavg", "fednova", "scaffold", "vrlsgd"])
def test_distributed_apply_takes_a_participation_in_any_order_like_apply(name):
    """A Participation built by hand with its clients unsorted ([3, 0, 1], updates in that order): apply takes it.
    Before, distributed_apply stopped on every rank with 'distributed round: ranks reported clients [0, 1, 3],
    expected [3, 0, 1]' (every participant was reported); now one process is apply bit for bit, two thread ranks
    apply to 1e-15."""
    from fedlib.sampling import Participation

    algo = make_algorithm(name, sgd(0.1), momentum(0.9))
    p = np.array([0.1, 0.2, 0.3, 0.4])
    state = algo.init(np.zeros(3), 4)
    part = Participation(np.array([3, 0, 1]), np.array([1.2, 0.5, 1.0]))
    rng = np.random.default_rng(1)
    ups = [ClientUpdate(c, rng.normal(size=3), float(c + 1), c + 1) for c in (3, 0, 1)]
    whole, d1 = algo.apply(state, part, ups, 0.1, p)
    one, d2 = distributed_apply(LocalCommunicator(), algo, state, part, ups, 0.1, p)
    np.testing.assert_array_equal(one.params, whole.params)
    assert d2.clients.tolist() == [3, 0, 1] and np.array_equal(d2.a_norms, d1.a_norms)
    assert d2.tau_eff == d1.tau_eff and np.array_equal(d2.weights, d1.weights) and d2.chi2 == d1.chi2

    def step(comm):
        own = set(owned_clients(4, 2, comm.rank).tolist())
        return distributed_apply(comm, algo, state, part, [u for u in ups if u.client in own], 0.1, p)

    for s, d in on_ranks(2, step):
        np.testing.assert_allclose(s.params, whole.params, rtol=0, atol=1e-15)
        assert d.clients.tolist() == [3, 0, 1] and np.array_equal(d.weights, d1.weights)


def test_distributed_apply_updates_the_own_rows_and_gather_variates_the_whole_stack():
    """What distributed_apply's docstring says of its state (which read 'identical on every rank', though each
    rank updates only its own clients' c_i): the model and c_bar agree on both ranks; rank 0's rows of rank 1's
    clients are still the given state's; gather_variates makes every rank's stack apply's."""
    from fedlib.distributed import gather_variates

    algo = make_algorithm("scaffold", sgd(0.1))
    p = np.full(4, 0.25)
    state = algo.init(np.zeros(3), 4)
    rng = np.random.default_rng(2)
    ups = [ClientUpdate(c, rng.normal(size=3), float(c + 1), c + 1) for c in range(4)]
    whole, _ = algo.apply(state, full_participation(p), ups, 0.1, p)

    def step(comm):
        own = set(owned_clients(4, 2, comm.rank).tolist())
        new, _ = distributed_apply(comm, algo, state, full_participation(p), [u for u in ups if u.client in own],
                                   0.1, p)
        return new, gather_variates(comm, new.variates, 4)

    (s0, g0), (s1, g1) = on_ranks(2, step)
    assert np.array_equal(s0.params, s1.params) and np.array_equal(s0.variates.mean, s1.variates.mean)
    assert np.array_equal(s0.variates.client[2:], state.variates.client[2:])  # rank 1's clients, as given
    assert not np.array_equal(s0.variates.client, s1.variates.client)
    for g in (g0, g1):
        np.testing.assert_allclose(g.client, whole.variates.client, rtol=0, atol=1e-15)


def test_ranks_of_different_rounds_are_refused_on_every_rank():
    """run_batched(comm=...) with rank 0 resumed from a checkpoint after round 2 and rank 1 started afresh (FedNova,
    full participation). Before, the first two rounds summed rank 0's clients' changes from the round-2 model and
    rank 1's from the initial one: rank 0 returned after round 4 with a model of neither run, without a word, while
    rank 1 waited for 2 more rounds (a gloo process until its timeout). Now both ranks stop in the first round."""
    from fedlib.data import synthetic
    from fedlib.engines.batched import run_batched
    from fedlib.problems.logistic import LogisticProblem
    from fedlib.schedules import FixedSteps

    prob = LogisticProblem(synthetic(num_clients=4, dim=3, num_classes=2, num_samples=[10, 20, 15, 12], seed=0))
    algo, sched = make_algorithm("fednova", sgd(0.1)), FixedSteps([1, 2, 3, 2])
    first = run_batched(algo, prob, sched, 2, batch_size=5)
    checkpoint = {"state": first.state, "history": first.history, "initial": first.initial}

    def run(comm):
        try:
            run_batched(algo, prob, sched, 4, batch_size=5, comm=comm, resume=checkpoint if comm.rank == 0 else None)
        except ValueError as exc:
            return str(exc)

    assert on_ranks(2, run) == ["state: the ranks hold the server states of different rounds ([2, 0], in rank "
                                "order); every rank must hold the same state (the same resume)"] * 2


def _two_ranks(tmp_path, cmds, timeout=120):
    """Start rank 0 and rank 1 by hand (no torchrun), each in its own folder; their results."""
    port = str(_free_port())
    procs = []
    for rank, (cwd, argv) in enumerate(cmds):
        env = dict(_env(), WORLD_SIZE="2", RANK=str(rank), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=port)
        procs.append(subprocess.Popen([sys.executable] + argv, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    try:
        codes = [p.wait(timeout=timeout) for p in procs]
    except subprocess.TimeoutExpired:  # a rank still waiting in a collective: stop both (no process left behind)
        running = [rank for rank, p in enumerate(procs) if p.poll() is None]
        for p in procs:
            p.kill()
        outs = [p.communicate() for p in procs]
        pytest.fail(f"rank(s) {running} still running after {timeout} s; stderr: "
                    + " | ".join(err[-1500:] for _, err in outs))
    return [(rc, p.stdout.read(), p.stderr.read()) for rc, p in zip(codes, procs)]


def test_ranks_resuming_from_different_rounds_are_refused(tmp_path):
    """Two machines without a shared filesystem: each rank reads its own checkpoint; ranks at
    different rounds must not train together (they did, and rank 0 wrote a wrong result)."""
    from fedlib.cli import main

    flags = ["run", "synthetic", "--num-clients", "4", "--rounds", "6", "--quiet", "--checkpoint-every", "2"]
    assert main(flags + ["--out", str(tmp_path / "full.json")]) == 0
    doc = pickle.loads((tmp_path / "full.json.ckpt").read_bytes())
    for rank, done in ((0, 4), (1, 2)):  # the same run's checkpoint, cut at different rounds
        folder = tmp_path / f"m{rank}"
        folder.mkdir()
        cut = dict(doc, round=done, history=doc["history"][:done])
        (folder / "run.json.ckpt").write_bytes(pickle.dumps(cut))
    argv = ["-m", "fedlib"] + flags + ["--out", "run.json", "--resume"]
    results = _two_ranks(tmp_path, [(tmp_path / "m0", argv), (tmp_path / "m1", argv)])
    for rc, _, err in results:
        assert rc == 2 and "the ranks resumed from different checkpoints (rounds [4, 2])" in err, err[-2000:]
    assert not (tmp_path / "m0" / "run.json").exists()


def test_a_rank_that_stops_before_the_first_round_stops_every_rank(tmp_path):
    """Two machines, real gloo processes: rank 1's machine lacks the checkpoint to --resume from. Rank 1 stopped
    with 'checkpoint ... not found' before joining the process group, and rank 0 waited for it in the rendezvous
    until the group's timeout (10 minutes: here, past the 120 s this test waits). Rank 1 now joins to say why it
    stops, and both exit with status 2 within seconds, rank 0 naming rank 1 and its message."""
    from fedlib.cli import main

    flags = ["run", "synthetic", "--num-clients", "4", "--rounds", "4", "--quiet", "--checkpoint-every", "2"]
    assert main(flags + ["--rounds", "2", "--out", str(tmp_path / "first.json")]) == 0
    for rank in range(2):
        (tmp_path / f"m{rank}").mkdir()
    (tmp_path / "m0" / "run.json.ckpt").write_bytes((tmp_path / "first.json.ckpt").read_bytes())
    argv = ["-m", "fedlib"] + flags + ["--out", "run.json", "--resume"]
    (rc0, _, err0), (rc1, _, err1) = _two_ranks(tmp_path, [(tmp_path / "m0", argv), (tmp_path / "m1", argv)])
    missing = "--resume: checkpoint run.json.ckpt not found"
    assert rc1 == 2 and f"error: {missing}" in err1, err1[-2000:]
    assert rc0 == 2 and (f"error: --distributed: a rank stopped before the first round (rank 1: {missing}); every "
                         "rank stops") in err0, err0[-2000:]
    assert sorted(p.name for p in (tmp_path / "m0").iterdir()) == ["run.json.ckpt"]  # kept, nothing written
    assert list((tmp_path / "m1").iterdir()) == []


def test_ranks_that_stop_before_the_first_round_are_named_on_every_rank(tmp_path, monkeypatch, capsys):
    """Thread ranks: rank 1 cannot write its --out (a folder that does not exist on its machine), rank 2 has no
    checkpoint. Each prints its own error; the others name every rank that stopped, in rank order."""
    from fedlib.cli import main

    flags = ["run", "synthetic", "--num-clients", "4", "--rounds", "4", "--quiet", "--checkpoint-every", "2"]
    assert main(flags + ["--rounds", "2", "--out", str(tmp_path / "first.json")]) == 0
    for rank in (0, 2):
        (tmp_path / f"m{rank}").mkdir()
    (tmp_path / "m0" / "run.json.ckpt").write_bytes((tmp_path / "first.json.ckpt").read_bytes())
    argvs = [flags + ["--resume", "--out", str(tmp_path / f"m{rank}" / "run.json")] for rank in range(3)]
    capsys.readouterr()
    assert cli_on_ranks(monkeypatch, argvs) == [2, 2, 2]
    err = sorted(capsys.readouterr().err.splitlines())
    prefix = "python -m fedlib run synthetic: error: "
    own = [line.removeprefix(prefix) for line in err if "every rank stops" not in line]
    assert own[0] == f"--out {tmp_path / 'm1' / 'run.json'}: folder {tmp_path / 'm1'} does not exist", own
    assert own[1] == f"--resume: checkpoint {tmp_path / 'm2' / 'run.json.ckpt'} not found"
    told = [line for line in err if "every rank stops" in line]
    assert told == [f"{prefix}--distributed: ranks stopped before the first round (rank 1: {own[0]}; rank 2: "
                    f"{own[1]}); every rank stops"]
    assert sorted(p.name for p in (tmp_path / "m0").iterdir()) == ["run.json.ckpt"]


def test_a_checkpoint_rank_0_cannot_write_stops_every_rank(tmp_path, monkeypatch, capsys):
    """Rank 0 writes the checkpoints; when a write fails (a full disk), rank 0 stopped with the error and the other
    ranks went on into the next round's collective, waiting for rank 0 until the group's timeout (10 minutes; here
    the thread world's 60 s barrier). The ranks now learn of it after the checkpoint round: rank 0 prints its error
    (status 1, as any file-system failure), the others name rank 0 and the round (status 2); the checkpoint of the
    round before stays."""
    from cliutil import full_disk_at_round

    full_disk_at_round(monkeypatch, 4)
    flags = ["run", "synthetic", "--num-clients", "4", "--rounds", "6", "--quiet", "--checkpoint-every", "2",
             "--out", str(tmp_path / "run.json")]
    capsys.readouterr()
    assert cli_on_ranks(monkeypatch, [flags, flags]) == [1, 2]
    err = capsys.readouterr().err.splitlines()
    disk = f"[Errno 28] No space left on device: '{tmp_path / 'run.json.ckpt'}'"
    assert sorted(err) == sorted([f"python -m fedlib run synthetic: error: {disk}",
                                  "python -m fedlib run synthetic: error: --distributed: a rank could not write the "
                                  f"checkpoint of round 4 (rank 0: OSError: {disk}); every rank stops"])
    assert pickle.loads((tmp_path / "run.json.ckpt").read_bytes())["round"] == 2
    assert not (tmp_path / "run.json").exists()


#: A driver run on both ranks: rank ``FAIL_RANK``'s clients' local training raises ``ERROR`` in round ``FAIL_ROUND``
#: (the engine's _local_phase patched in that process), then ``python -m fedlib <argv>`` or, with ``--lib``, a
#: run_batched of its own whose failing rank's process goes on (as a sweep's or a notebook's does) until the other
#: rank is done, or for ``LINGER`` s.
_FAILING_RANK = """\
import os, sys, time
import fedlib.engines.batched as batched

RANK, FAIL_RANK, FAIL_ROUND = int(os.environ["RANK"]), int(os.environ["FAIL_RANK"]), int(os.environ["FAIL_ROUND"])
real = batched._local_phase


def local_phase(be, solver, theta0, corr, clients, tau, n_i, offsets, Xall, Yall, B, D, C, l2, seed, t, *rest):
    if RANK == FAIL_RANK and t == FAIL_ROUND:
        raise FloatingPointError(f"overflow in client {int(max(clients))}'s step")
    return real(be, solver, theta0, corr, clients, tau, n_i, offsets, Xall, Yall, B, D, C, l2, seed, t, *rest)


batched._local_phase = local_phase
if sys.argv[1] != "--lib":
    from fedlib.cli import main
    sys.exit(main(sys.argv[1:]))
from fedlib.algorithms import make_algorithm
from fedlib.data import synthetic
from fedlib.distributed import init_from_env
from fedlib.problems.logistic import LogisticProblem
from fedlib.schedules import FixedSteps
from fedlib.solvers import sgd

comm = init_from_env()
prob = LogisticProblem(synthetic(num_clients=4, dim=3, num_classes=2, num_samples=[10, 20, 15, 12], seed=0))
start = time.perf_counter()
try:
    batched.run_batched(make_algorithm("fednova", sgd(0.1)), prob, FixedSteps([1, 2, 3, 2]), 5, batch_size=5, comm=comm)
    print("finished", flush=True)
except Exception as exc:
    print(f"{type(exc).__name__}: {exc}", flush=True)
open(f"done_{RANK}", "w").close()
while RANK == FAIL_RANK and not os.path.exists(f"done_{1 - RANK}") and time.perf_counter() - start < float(os.environ["LINGER"]):
    time.sleep(0.1)  # this process goes on until the other rank is done (or LINGER s have passed)
"""


def _failing_rank(tmp_path, argv, fail_rank=1, fail_round=2, linger=0, timeout=60):
    script = tmp_path / "failing_rank.py"
    script.write_text(_FAILING_RANK)
    env = {"FAIL_RANK": str(fail_rank), "FAIL_ROUND": str(fail_round), "LINGER": str(linger)}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        return _two_ranks(tmp_path, [(tmp_path, [str(script)] + argv)] * 2, timeout=timeout)


@pytest.mark.parametrize("fail_rank", [1, 0])
def test_a_rank_whose_local_training_fails_stops_every_rank(tmp_path, fail_rank):
    """Two real gloo processes of ``run synthetic --distributed``; rank ``fail_rank``'s clients' local training
    raises a FloatingPointError in round 2 (of 5). Before, that rank stopped alone ('diverged in round 2: ...',
    status 2) and the other, waiting in round 2's first collective, died when the process went away with gloo's
    "Connection closed by peer" (rank 1: "Connection reset by peer") RuntimeError traceback, status 1, not saying
    why (had the failing process lived on, it would have waited until the group's 10-minute timeout). The error now
    travels with that collective: the other rank names the rank, the round and the error, status 2, both within
    seconds; nothing is written."""
    flags = ["run", "synthetic", "--num-clients", "4", "--rounds", "5", "--quiet", "--distributed", "--out",
             str(tmp_path / "run.json")]
    results = _failing_rank(tmp_path, flags, fail_rank=fail_rank, timeout=60)
    own = f"diverged in round 2: overflow in client {2 * fail_rank + 1}'s step"
    rc, _, err = results[fail_rank]
    assert rc == 2 and f"error: {own} (nothing written)" in err, err[-2000:]
    rc, _, err = results[1 - fail_rank]
    assert rc == 2, err[-2000:]
    assert _without_gloo_banner(err).strip().splitlines()[-1] == (
        f"python -m fedlib run synthetic: error: --distributed: a rank stopped in round 2 (rank {fail_rank}: "
        f"DivergenceError: {own}); every rank stops"), err[-2000:]
    assert not (tmp_path / "run.json").exists()


def test_a_rank_that_fails_and_lives_on_does_not_leave_the_others_waiting(tmp_path):
    """run_batched on two real gloo processes (the group's timeout 600 s); rank 1's local training raises in round
    2 and its process goes on (a sweep's next run, a notebook) until rank 0 is done, up to 90 s. Before, rank 0
    waited in round 2's first collective: both still running when this test stopped them after 45 s. Now rank 0 raises RankStopped naming rank 1,
    the round and the error at once, and rank 1 its own error."""
    (rc0, out0, err0), (rc1, out1, err1) = _failing_rank(tmp_path, ["--lib"], linger=90, timeout=45)
    assert rc0 == 0 and out0.strip() == ("RankStopped: a rank stopped in round 2 (rank 1: DivergenceError: diverged in "
                                         "round 2: overflow in client 3's step); every rank stops"), err0[-2000:]
    assert rc1 == 0 and out1.strip() == "DivergenceError: diverged in round 2: overflow in client 3's step"


def _run_catching(comm, hooks):
    """A 4-round FedNova-VR run_batched on thread rank ``comm`` (4 clients); its rounds seen by ``on_round_end`` and
    what it raised, as ``(type name, message)``."""
    from fedlib.data import synthetic
    from fedlib.engines.batched import run_batched
    from fedlib.problems.logistic import LogisticProblem
    from fedlib.schedules import FixedSteps

    prob = LogisticProblem(synthetic(num_clients=4, dim=3, num_classes=2, num_samples=[10, 20, 15, 12], seed=0))
    ends = []
    try:
        run_batched(make_algorithm("fednova-vr", sgd(0.1)), prob, FixedSteps([1, 2, 3, 2]), 4, batch_size=5, comm=comm,
                    on_round_end=lambda state, history, initial: ends.append(len(history)), **hooks(comm.rank))
        return ends, None
    except Exception as exc:  # noqa: BLE001 - compared below
        return ends, (type(exc).__name__, str(exc))


@pytest.mark.parametrize("round_", [1, 3])
def test_a_callback_that_fails_on_one_rank_stops_every_rank(round_):
    """Thread ranks: rank 0's callback (the CLI's progress bar) raises after round ``round_`` of 4. It raised on rank 0
    alone, and rank 1 waited in the next collective (the next round's, or the gather of the c_i). Rank 0 still
    hands the round to on_round_end (a checkpoint of a whole round), then the error reaches rank 1 in the next round's
    first collective, after the last round in the run's closing one."""
    def hooks(rank):
        def callback(rec):
            if rank == 0 and rec["round"] == round_:
                raise KeyError("bar")
        return {"callback": callback}

    told = f"a rank stopped in round {round_} (rank 0: KeyError: 'bar'); every rank stops"
    assert on_ranks(2, lambda comm: _run_catching(comm, hooks)) == [
        (list(range(1, round_ + 2)), ("KeyError", "'bar'")), (list(range(1, round_ + 2)), ("RankStopped", told))]


def test_ranks_whose_local_round_fails_are_named_on_every_rank():
    """Thread ranks: ranks 1 and 2 of 3 fail in round 2 before their clients train (their lr_at raises). Each
    raises its own error in round 2's first collective; rank 0 names both."""
    def hooks(rank):
        def lr_at(t):
            if rank and t == 2:
                raise ValueError(f"lr_at: no rate for round {t} on rank {rank}")
            return 0.1
        return {"lr_at": lr_at}

    told = ("ranks stopped in round 2 (rank 1: lr_at: no rate for round 2 on rank 1; rank 2: lr_at: no rate for round 2 "
            "on rank 2); every rank stops")
    assert on_ranks(3, lambda comm: _run_catching(comm, hooks)) == [
        ([1, 2], ("RankStopped", told)), ([1, 2], ("ValueError", "lr_at: no rate for round 2 on rank 1")),
        ([1, 2], ("ValueError", "lr_at: no rate for round 2 on rank 2"))]


def test_one_process_raises_a_callback_error_at_once():
    """Without comm (and with one rank) nothing is handed on: the callback's error is raised as it comes, before
    on_round_end sees the round."""
    def hooks(rank):
        def callback(rec):
            if rec["round"] == 1:
                raise KeyError("bar")
        return {"callback": callback}

    assert _run_catching(LocalCommunicator(), hooks) == ([1], ("KeyError", "'bar'"))


@pytest.mark.parametrize("fail_at", [2, 3, 5])
def test_a_progress_bar_that_fails_on_rank_0_stops_every_rank(tmp_path, monkeypatch, capsys, fail_at):
    """Thread ranks of ``run synthetic --distributed --checkpoint-every 2``: rank 0's progress bar raises EIO (its
    terminal went away) in round ``fail_at`` (0-based, of 6). Rank 0 stopped alone and rank 1 waited in the next
    collective (with gloo, the group's timeout). Now rank 0 prints its error (status 1) and rank 1 names rank 0, the
    round and the error (status 2); the checkpoint of the rounds done stays, no result is written."""
    import fedlib.cli.synthetic as synthetic_cli

    class Bar:
        rounds = 0

        def set_postfix(self, **kw):
            pass

        def update(self, n):
            if Bar.rounds == fail_at:
                raise OSError(5, "Input/output error")
            Bar.rounds += 1

        def close(self):
            pass

    monkeypatch.setattr(synthetic_cli, "progress_bar", lambda *a, **k: Bar())
    flags = ["run", "synthetic", "--num-clients", "4", "--rounds", "6", "--quiet", "--checkpoint-every", "2",
             "--algorithm", "fednova-vr", "--out", str(tmp_path / "run.json")]
    capsys.readouterr()
    assert cli_on_ranks(monkeypatch, [flags, flags]) == [1, 2]
    err = capsys.readouterr().err.splitlines()
    assert sorted(err) == ["python -m fedlib run synthetic: error: --distributed: a rank stopped in round "
                           f"{fail_at} (rank 0: OSError: [Errno 5] Input/output error); every rank stops",
                           "python -m fedlib run synthetic: error: [Errno 5] Input/output error"]
    # the rounds through fail_at were whole (on_round_end saw them): checkpointed every 2, and the last round
    assert pickle.loads((tmp_path / "run.json.ckpt").read_bytes())["round"] == (6 if fail_at == 5 else
                                                                               (fail_at + 1) // 2 * 2)
    assert not (tmp_path / "run.json").exists()


@pytest.mark.parametrize("fail_rank", [0, 1])
def test_a_rank_whose_metrics_fail_in_a_checkpoint_round_stops_every_rank(tmp_path, monkeypatch, capsys, fail_rank):
    """Thread ranks of ``run synthetic --distributed --checkpoint-every 2``: rank ``fail_rank``'s metrics of round 3
    (0-based, of 6; rounds done 4, a checkpoint round) raise EIO. That rank cannot record the round, so it skips
    on_round_end and hands its error on in the next collective; the other rank is in on_round_end's own collective
    (the checkpoint round's _stop_together). Before, the two collectives met: the other rank read the hand-off as a
    failed checkpoint write ('--distributed: a rank could not write the checkpoint of round 4 (rank 1: {'error':
    None, 'round': None, 'info': {}, 'stopped': (3, ...)})'), held that error as its own and waited for the failing
    rank in the next collective (the thread world's 60 s barrier; with gloo, the group's 10 minutes). Now it names
    the rank, the round and the error (status 2), the failing rank prints its own (status 1); the checkpoint of the
    rounds done stays (rank 0 wrote round 4's when it was not the failing rank)."""
    import fedlib.cli.synthetic as synthetic_cli
    import fedlib.engines.batched as batched

    real = batched._metrics

    def metrics(problem, params, t, evaluate):
        if t == 3 and synthetic_cli.os.environ["RANK"] == str(fail_rank):
            raise OSError(5, "Input/output error")
        return real(problem, params, t, evaluate)

    monkeypatch.setattr(batched, "_metrics", metrics)
    flags = ["run", "synthetic", "--num-clients", "4", "--rounds", "6", "--quiet", "--checkpoint-every", "2",
             "--out", str(tmp_path / "run.json")]
    capsys.readouterr()
    statuses = cli_on_ranks(monkeypatch, [flags, flags])
    assert statuses == ([1, 2] if fail_rank == 0 else [2, 1])
    assert sorted(capsys.readouterr().err.splitlines()) == [
        "python -m fedlib run synthetic: error: --distributed: a rank stopped in round 3 "
        f"(rank {fail_rank}: OSError: [Errno 5] Input/output error); every rank stops",
        "python -m fedlib run synthetic: error: [Errno 5] Input/output error"]
    assert pickle.loads((tmp_path / "run.json.ckpt").read_bytes())["round"] == (2 if fail_rank == 0 else 4)
    assert not (tmp_path / "run.json").exists()


def test_rank_stopped_needs_a_rank():
    from fedlib.distributed import RankStopped

    with pytest.raises(ValueError, match=r"^stops must name at least one rank that stopped, got none$"):
        RankStopped([])
    with pytest.raises(ValueError, match=r"^stops must be \(rank, round, error\) triples"):
        RankStopped([(1, -1, "x")])


def test_a_distributed_run_returns_every_clients_control_variate(tmp_path):
    """``run_batched(comm=...)``: each rank updates only its own c_i; the returned state holds all
    of them (gathered), equal to the one-process run's."""
    script = tmp_path / "vr.py"
    script.write_text(
        "import sys, numpy as np\n"
        "from fedlib.algorithms import make_algorithm\n"
        "from fedlib.data import synthetic\n"
        "from fedlib.distributed import init_from_env\n"
        "from fedlib.engines.batched import run_batched\n"
        "from fedlib.problems.logistic import LogisticProblem\n"
        "from fedlib.schedules import FixedSteps\n"
        "from fedlib.solvers import sgd\n"
        "prob = LogisticProblem(synthetic(num_clients=5, seed=0, num_samples=[30, 40, 50, 60, 70]))\n"
        "comm = init_from_env('cpu') if len(sys.argv) > 2 else None\n"
        "run = run_batched(make_algorithm('scaffold', sgd(0.05)), prob, FixedSteps([2, 3, 1, 4, 2]), 3,\n"
        "                  batch_size=8, seed=1, comm=comm)\n"
        "rank = 0 if comm is None else comm.rank\n"
        "np.save(sys.argv[1] + f'_{rank}.npy', np.asarray(run.state.variates.client))\n")
    one = subprocess.run([sys.executable, str(script), str(tmp_path / "one")], env=_env(), capture_output=True,
                         text=True, timeout=120)
    assert one.returncode == 0, one.stderr[-2000:]
    argv = [str(script), str(tmp_path / "two"), "distributed"]
    for rc, _, err in _two_ranks(tmp_path, [(tmp_path, argv), (tmp_path, argv)]):
        assert rc == 0, err[-2000:]
    ref = np.load(tmp_path / "one_0.npy")
    assert np.all(np.abs(ref).reshape(5, -1).max(axis=1) > 0)  # every client has a variate
    for rank in (0, 1):
        np.testing.assert_allclose(np.load(tmp_path / f"two_{rank}.npy"), ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ["scaffold", "vrlsgd", "fednova-vr"])
def test_on_round_end_of_a_two_rank_run_sees_every_clients_control_variate(name):
    """``run_batched(comm=..., on_round_end=...)``: the state handed to ``on_round_end`` is the run's whole
    state on every rank (each rank updated only its own clients' c_i; the others' are gathered), so that a
    checkpoint of it (:func:`fedlib.checkpoint.load_checkpoint`'s recipe, rank 0 saving) resumes the run.
    Before, each rank handed out its own rows and the others' as they were when the run began: rank 0's
    state after round 2 of 5 clients missed clients 3-4's updates (0.7 and 1.3 off), and the run resumed from
    it ended 0.025 (scaffold) to 0.045 (vrlsgd) away from the uninterrupted run's model."""
    from fedlib.data import synthetic
    from fedlib.engines.batched import run_batched
    from fedlib.problems.logistic import LogisticProblem
    from fedlib.schedules import FixedSteps

    prob = LogisticProblem(synthetic(num_clients=5, dim=3, num_classes=2, num_samples=[10, 20, 15, 12, 30], seed=0))
    algo, sched = make_algorithm(name, sgd(0.1)), FixedSteps([1, 2, 3, 2, 1])
    seen = {}

    def two_rounds(comm):
        def on_round_end(state, history, initial):
            seen[comm.rank, len(history)] = {"state": state, "history": list(history), "initial": initial}
        return run_batched(algo, prob, sched, 2, batch_size=5, comm=comm, on_round_end=on_round_end)

    runs = on_ranks(2, two_rounds)
    for rounds in (1, 2):
        one = run_batched(algo, prob, sched, rounds, batch_size=5).state.variates
        for rank in (0, 1):
            got = seen[rank, rounds]["state"].variates
            np.testing.assert_allclose(got.client, one.client, rtol=0, atol=1e-13)
            np.testing.assert_allclose(got.mean, one.mean, rtol=0, atol=1e-13)
    for rank in (0, 1):  # the returned state is the last one handed out
        assert np.array_equal(runs[rank].state.variates.client, seen[rank, 2]["state"].variates.client)
    straight = run_batched(algo, prob, sched, 4, batch_size=5)
    resumed = run_batched(algo, prob, sched, 4, batch_size=5, resume=seen[0, 2])
    for k in ("W", "b"):
        np.testing.assert_allclose(resumed.params[k], straight.params[k], rtol=0, atol=1e-13)


def test_init_from_env_destroys_its_process_group_at_exit(tmp_path):
    """A script that never calls destroy_process_group (the variate test above): the group is destroyed before
    the interpreter shuts down. A group left to the C++ destructors once killed a rank with "terminate called
    without an active exception" (exit -6) after its work was done. The check runs after fedlib's handler
    (atexit runs handlers last-registered first)."""
    script = tmp_path / "exit.py"
    script.write_text(
        "import atexit\n"
        "import torch.distributed as dist\n"
        "from fedlib.distributed import init_from_env\n"
        "atexit.register(lambda: print('initialised at exit:', dist.is_initialized()))\n"
        "comm = init_from_env('cpu')\n"
        "print('world', comm.world_size, dist.is_initialized())\n")
    env = dict(_env(), WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _without_gloo_banner(done.stdout).splitlines() == ["world 1 True", "initialised at exit: False"], done.stdout


def test_init_from_env_registers_its_exit_handler_once_per_process(tmp_path):
    """A process that initialises, destroys and initialises a group again (one after another, as a notebook
    can) registered one exit handler per initialisation, each run at exit; now one runs, once. Counted by
    the handler's own call of ``dist.is_initialized`` (the check registered first runs last)."""
    script = tmp_path / "again.py"
    script.write_text(
        "import atexit\n"
        "import torch.distributed as dist\n"
        "from fedlib.distributed import init_from_env\n"
        "calls = []\n"
        "atexit.register(lambda: print('exit handler calls:', len(calls)))\n"
        "for _ in range(3):\n"
        "    init_from_env('cpu')\n"
        "    dist.destroy_process_group()\n"
        "real = dist.is_initialized\n"
        "dist.is_initialized = lambda: calls.append(1) or real()\n")
    env = dict(_env(), WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="0")
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _without_gloo_banner(done.stdout).splitlines() == ["exit handler calls: 1"], done.stdout


def test_run_synthetic_distributed_destroys_its_group_before_it_returns(tmp_path):
    """``run synthetic --distributed`` under a one-process group, twice in one process (as a notebook or a script
    calling ``fedlib.cli.main`` can): each run leaves no group behind when it returns, so the second initialises
    its own. Without the CLI's ``destroy_process_group`` (mutant SYN12 of test_mutation_cli.py) the first run's
    group outlived it (``init_from_env``'s exit handler only destroys it at the end of the process)."""
    script = tmp_path / "twice.py"
    script.write_text(
        "import sys\n"
        "import torch.distributed as dist\n"
        "from fedlib.cli import main\n"
        "for k in range(2):\n"
        "    rc = main(['run', 'synthetic', '--num-clients', '3', '--rounds', '2', '--distributed', '--quiet',\n"
        "               '--out', sys.argv[1] + f'/r{k}.json'])\n"
        "    print('run', k, 'status', rc, 'initialised after:', dist.is_initialized(), flush=True)\n")
    env = dict(_env(), WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    done = subprocess.run([sys.executable, str(script), str(tmp_path)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert _without_gloo_banner(done.stdout).splitlines() == [
        "run 0 status 0 initialised after: False", "run 1 status 0 initialised after: False"], done.stdout
    first, second = (json.loads((tmp_path / f"r{k}.json").read_text()) for k in range(2))
    assert first["config"]["world_size"] == second["config"]["world_size"] == 1
    untimed = [[{k: v for k, v in h.items() if k != "time_s"} for h in r["history"]] for r in (first, second)]
    assert untimed[0] == untimed[1]  # the same run twice: the second group is as good as the first


# ---------------------------------------------------------------- distributed_apply = apply, inputs included
def _client_updates(m, tree=False, seed=0):
    from fedlib.algorithms import ClientUpdate

    rng = np.random.default_rng(seed)

    def delta():
        return {"W": rng.normal(size=(2, 3)), "b": rng.normal(size=3)} if tree else rng.normal(size=3)

    return [ClientUpdate(i, delta(), float(i + 1), i + 1) for i in range(m)]


@pytest.mark.parametrize("name", ["scaffold", "vrlsgd", "fednova-vr"])
def test_distributed_apply_with_vr_on_tree_params_is_apply(name):
    """Control variates of dict parameters (apply handles any tree): distributed_apply gave a TypeError
    (scaffold) or KeyError (vrlsgd); now two rounds match apply to 1e-14, variates included."""
    from fedlib.algorithms import make_algorithm
    from fedlib.sampling import full_participation
    from fedlib.solvers import sgd

    p = np.array([0.3, 0.7])
    algo = make_algorithm(name, sgd(0.1))
    state = algo.init({"W": np.zeros((2, 3)), "b": np.zeros(3)}, 2)
    for r in range(2):
        ups = _client_updates(2, tree=True, seed=r)
        want, _ = algo.apply(state, full_participation(p), ups, 0.1, p)
        got, _ = distributed_apply(LocalCommunicator(), algo, state, full_participation(p), ups, 0.1, p)
        for k in ("W", "b"):
            np.testing.assert_allclose(got.params[k], want.params[k], rtol=0, atol=1e-14)
            np.testing.assert_allclose(got.variates.client[k], want.variates.client[k], rtol=0, atol=1e-14)
            np.testing.assert_allclose(got.variates.mean[k], want.variates.mean[k], rtol=0, atol=1e-14)
        state = want


def test_distributed_apply_keeps_scalar_leaves_scalar():
    """A 0-d parameter stays 0-d through the all-reduce (it came back with shape (1,))."""
    from fedlib.algorithms import ClientUpdate, make_algorithm
    from fedlib.sampling import full_participation
    from fedlib.solvers import sgd

    p = np.array([0.5, 0.5])
    algo = make_algorithm("fednova", sgd(0.1))
    state = algo.init({"w": np.zeros(2), "s": np.array(0.0)}, 2)
    ups = [ClientUpdate(i, {"w": np.ones(2), "s": np.array(float(i))}, 1.0, 1) for i in range(2)]
    got, _ = distributed_apply(LocalCommunicator(), algo, state, full_participation(p), ups, 0.1, p)
    want, _ = algo.apply(state, full_participation(p), ups, 0.1, p)
    assert np.shape(got.params["s"]) == () and float(got.params["s"]) == float(want.params["s"]) == 0.5


@pytest.mark.parametrize("lr, p, match", [(0.1, None, r"p \(weights of all clients\) is required"),
                                          (0.1, [5.0, 5.0, 5.0, 5.0], "p must sum to 1"),
                                          (0.0, [0.25] * 4, "lr must be")])
def test_distributed_apply_checks_its_inputs_like_apply(lr, p, match):
    """p = None gave an IndexError, p summing to 20 a control-variate mean 20x too large, lr = 0 NaN variates."""
    from fedlib.algorithms import make_algorithm
    from fedlib.sampling import full_participation
    from fedlib.solvers import sgd

    algo = make_algorithm("scaffold", sgd(0.1))
    state = algo.init(np.zeros(3), 4)
    with pytest.raises(ValueError, match=match):
        distributed_apply(LocalCommunicator(), algo, state, full_participation(np.full(4, 0.25)), _client_updates(4),
                          lr, p)


def test_distributed_apply_refuses_updates_of_clients_the_rank_does_not_own():
    """Every rank handing in every participant's update added each change world_size times (the merged
    client set still looked complete); a rank must report its own participants, each once."""
    from fedlib.algorithms import make_algorithm
    from fedlib.distributed import Communicator
    from fedlib.sampling import full_participation
    from fedlib.solvers import sgd

    class RankZeroOfTwo(Communicator):  # the error travels with the first collective; nothing is summed
        rank, world_size = 0, 2

        def all_gather_object(self, obj):
            assert obj["error"] and not obj["info"]
            return [obj, {"error": None, "info": {2: (1.0, 1), 3: (1.0, 1)}}]  # rank 1: its own, fine

        def all_gather_array(self, x):
            raise AssertionError("no array collective expected")

    algo = make_algorithm("fednova", sgd(0.1))
    state = algo.init(np.zeros(3), 4)
    part = full_participation(np.full(4, 0.25))
    with pytest.raises(ValueError, match="updates: rank 0 must report each of its own participants once"):
        distributed_apply(RankZeroOfTwo(), algo, state, part, _client_updates(4), 0.1, None)
    ups = _client_updates(4)
    with pytest.raises(ValueError, match="updates: rank 0"):  # one of its own, twice
        distributed_apply(RankZeroOfTwo(), algo, state, part, [ups[0], ups[0]], 0.1, None)


# --------------------------------------------------------------------------- distributed_apply's p
def _own_loop_round(name="fednova"):
    import numpy as np

    from fedlib.algorithms import ClientUpdate, make_algorithm
    from fedlib.sampling import full_participation
    from fedlib.solvers import sgd

    algo = make_algorithm(name, sgd(0.1))
    state = algo.init(np.zeros(2), 3)
    updates = [ClientUpdate(i, np.ones(2) * (i + 1), 2.0, 2) for i in range(3)]
    return algo, state, full_participation([0.2, 0.3, 0.5]), updates


def test_distributed_apply_checks_p_for_every_algorithm():
    from fedlib.distributed import LocalCommunicator, distributed_apply

    algo, state, part, updates = _own_loop_round()
    with pytest.raises(ValueError, match=r"^p must sum to 1"):
        distributed_apply(LocalCommunicator(), algo, state, part, updates, 0.1, [2, 3, 5])


@pytest.mark.parametrize("name", ["fedavg", "fednova", "scaffold", "vrlsgd", "fednova-vr"])
def test_two_ranks_equal_one_process_for_every_sampling_and_server(name):
    """Every sampling scheme (with-replacement: distinct sorted clients, weights counts/q) and
    server optimizer; uniform q = 2 of 5 leaves a rank without participants in some rounds."""
    m, p = 5, np.array([0.1, 0.15, 0.2, 0.25, 0.3])
    empty_rank_rounds = 0
    for server in (plain(0.5), momentum(0.9), adam(0.1)):
        for sampling, q in (("full", None), ("with-replacement", 4), ("uniform", 2)):
            algo = make_algorithm(name, sgd(0.1), server)
            rng = np.random.default_rng(0)
            one = algo.init(np.zeros(3), m)
            ranks = [one, one]
            for t in range(3):
                part = sample_clients(sampling, p, q, 3, t)
                ups = {int(c): ClientUpdate(int(c), rng.normal(size=3), float(rng.uniform(1, 5)),
                                            int(rng.integers(1, 6))) for c in part.clients}
                one, d1 = algo.apply(one, part, [ups[int(c)] for c in part.clients], 0.1, p)
                empty_rank_rounds += any(not set(owned_clients(m, 2, r).tolist()) & set(ups) for r in range(2))

                def step(comm, ranks=ranks, part=part, ups=ups, algo=algo):
                    own = set(owned_clients(m, 2, comm.rank).tolist())
                    return distributed_apply(comm, algo, ranks[comm.rank], part,
                                             [u for c, u in ups.items() if c in own], 0.1, p)

                res = on_ranks(2, step)
                ranks = [s for s, _ in res]
                for r, (s, d) in enumerate(res):
                    np.testing.assert_allclose(s.params, one.params, rtol=0, atol=1e-13)
                    assert abs(d.tau_eff - d1.tau_eff) <= 1e-13 and np.allclose(d.weights, d1.weights, rtol=0,
                                                                                  atol=1e-15)
                    if one.variates is not None:  # each rank holds its own clients' c_i
                        own = owned_clients(m, 2, r)
                        np.testing.assert_allclose(s.variates.client[own], one.variates.client[own], rtol=0,
                                                   atol=1e-13)
                        np.testing.assert_allclose(s.variates.mean, one.variates.mean, rtol=0, atol=1e-13)
    assert empty_rank_rounds > 0


def test_distributed_apply_refuses_deltas_of_another_shape_like_apply():
    """Deltas of shape (3, 1) for a (3,) model: apply refuses them; distributed_apply broadcast
    x + change into a (3, 3) model without a word."""
    p = np.full(2, 0.5)
    algo = make_algorithm("fednova", sgd(0.1))
    state = algo.init(np.zeros(3), 2)
    ups = [ClientUpdate(i, np.ones((3, 1)), 1.0, 1) for i in range(2)]
    with pytest.raises(ValueError, match="structure and leaf shapes of state.params"):
        algo.apply(state, full_participation(p), ups, 0.1, p)
    with pytest.raises(ValueError, match=r"updates: client 0's delta must have the structure and leaf shapes"):
        distributed_apply(LocalCommunicator(), algo, state, full_participation(p), ups, 0.1, p)


def test_allreduce_sum_keeps_a_float32_array_float32():
    """A numpy float32 model came out of a 2-rank round as float64 (one process keeps float32)."""
    p = np.full(4, 0.25)
    algo = make_algorithm("fednova", sgd(0.1), momentum(0.9))
    state = algo.init(np.zeros(3, np.float32), 4)
    rng = np.random.default_rng(0)
    ups = [ClientUpdate(i, rng.normal(size=3).astype(np.float32), float(i + 1), i + 1) for i in range(4)]
    want, _ = algo.apply(state, full_participation(p), ups, 0.1, p)
    res = on_ranks(2, lambda c: distributed_apply(
        c, algo, state, full_participation(p), [u for u in ups if u.client in owned_clients(4, 2, c.rank)], 0.1, p))
    for s, _ in res:
        assert s.params.dtype == want.params.dtype == np.float32
        assert s.server.buffer.dtype == np.float32
        np.testing.assert_allclose(s.params, want.params, rtol=1e-6)
    assert LocalCommunicator().allreduce_sum(np.ones(2, np.float32)).dtype == np.float32


@pytest.mark.parametrize("x", [np.array([1, 2]), np.array([True, False]), np.int64(3), 3, [1, 2],
                               torch.tensor([1, 2]), torch.tensor([True])])
def test_allreduce_sum_refuses_what_it_cannot_return_in_its_dtype(x):
    """allreduce_sum returns its argument's kind and dtype (its docstring) and sums in float64, so it takes real and
    complex floats only: integers and bools are a ValueError naming x. Was: a numpy integer or bool array came back float64 ([1, 2] ->
    [1., 2.]), a torch int64 tensor was rounded through float64 (2**53 + 1 -> 2**53), a torch bool tensor of two
    True ranks came back True (2.0 cast to bool), and a complex array or tensor lost its imaginary part with a
    ComplexWarning (complex numbers are summed since, test_allreduce_sum_adds_complex_numbers_part_by_part)."""
    message = r"^x must be a numpy array or torch tensor of real or complex floats .* got dtype "
    with pytest.raises(ValueError, match=message):
        LocalCommunicator().allreduce_sum(x)
    with pytest.raises(ValueError, match=message):  # on two ranks: both refuse before the collective
        on_ranks(2, lambda comm: comm.allreduce_sum(x))


def test_allreduce_sum_of_floats_is_unchanged():
    """Every real float dtype still comes back in its kind and dtype, summed in float64 over the ranks (float16 and
    bfloat16 tensors too: bfloat16 has no numpy dtype, and .numpy() of it raised TypeError)."""
    def sums(x):
        return on_ranks(2, lambda c: c.allreduce_sum(x))

    for x in (np.array([0.25, 1.5]), np.array([0.25, 1.5], np.float32), np.float64(0.75), 0.75, [0.25, 1.5]):
        for total in sums(x):
            want = np.asarray(x) * 2
            assert isinstance(total, np.ndarray) and total.dtype == want.dtype and total.tolist() == want.tolist()
    for dtype in (torch.float64, torch.float32, torch.float16, torch.bfloat16):
        for total in sums(torch.tensor([0.25, 1.5], dtype=dtype)):
            assert total.dtype == dtype and total.tolist() == [0.5, 3.0]


def test_allreduce_sum_adds_complex_numbers_part_by_part():
    """A complex array or tensor comes back complex, in its dtype, the real and imaginary parts each summed in
    float64 over the ranks (inf and -0.0 parts kept: they are set, not rebuilt as re + 1j * im). Before
    (2026-12-05, after refusing complex numbers for a few hours): the imaginary part was dropped with only a
    ComplexWarning."""
    import warnings

    x = np.array([1 + 1j, 2j, complex(np.inf, -0.0)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for total in on_ranks(2, lambda c: c.allreduce_sum(x)):
            assert total.dtype == np.complex128 and total.real.tolist() == [2.0, 0.0, np.inf]
            assert total.imag.tolist() == [2.0, 4.0, 0.0] and np.signbit(total.imag[2])   # -0.0 + -0.0
        for total in on_ranks(2, lambda c: c.allreduce_sum(x.astype(np.complex64))):
            assert total.dtype == np.complex64 and total[:2].tolist() == [2 + 2j, 4j]
        for t in (torch.tensor([1 + 2j, -0.5j]), torch.tensor([1 + 2j, 0.5j]).conj()):
            for total in on_ranks(2, lambda c, t=t: c.allreduce_sum(t)):
                assert total.dtype == torch.complex64 and torch.equal(total, 2 * t.resolve_conj())


def test_distributed_apply_on_complex_parameters_is_apply():
    """FedNova on complex parameters over two thread ranks, each with its own clients, gives apply's global model
    (to 1e-15, the order of the additions). Was: [1+1j, 2j]-like changes came out with their imaginary parts
    dropped."""
    p = np.array([0.1, 0.2, 0.3, 0.4])
    algo = make_algorithm("fednova", sgd(0.1))
    state = algo.init(np.zeros(2, dtype=complex), 4)
    ups = [ClientUpdate(i, np.array([1 + 1j, 2j]) * (i + 1), float(i + 1), i + 1) for i in range(4)]
    want, _ = algo.apply(state, full_participation(p), ups, 0.1, p)

    def rank(comm):
        mine = owned_clients(4, comm.world_size, comm.rank)
        return distributed_apply(comm, algo, state, full_participation(p), [u for u in ups if u.client in mine],
                                 0.1, p)[0].params

    assert np.abs(want.params.imag).max() > 0.1
    for got in on_ranks(2, rank):
        assert got.dtype == np.complex128 and np.abs(got - want.params).max() < 1e-15


def test_a_bad_update_on_one_rank_raises_on_every_rank():
    """Rank 0's check raised on rank 0 alone while rank 1 waited in the first collective (with gloo until
    the process group's 600 s timeout); the error now travels with that collective to every rank."""
    m = 4
    p = np.full(m, 0.25)
    algo = make_algorithm("fednova", sgd(0.1))
    state = algo.init(np.zeros(3), m)
    hub, errors = Hub(2), [None, None]
    hub.barrier = threading.Barrier(2, timeout=3)

    def target(r):
        comm = ThreadComm(hub, r)
        own = owned_clients(m, 2, r)
        shape = (3, 1) if r == 0 else (3,)  # rank 0 hands in changes of another shape
        ups = [ClientUpdate(int(c), np.ones(shape), 1.0, 1) for c in own]
        try:
            distributed_apply(comm, algo, state, full_participation(p), ups, 0.1, p)
        except BaseException as exc:  # noqa: BLE001 - inspected below
            errors[r] = exc

    threads = [threading.Thread(target=target, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(e, ValueError) for e in errors), errors
    assert str(errors[0]) == str(errors[1]) and "client 0's delta must have the structure" in str(errors[1])


def test_distributed_apply_refuses_deltas_of_another_kind_than_the_model():
    """distributed_apply (one process: LocalCommunicator) with torch deltas onto a numpy model died in
    the server optimizer with numpy's 'Concatenation operation is not implemented'; now the rank's
    update check names the client (raised on every rank, after the first collective)."""
    from fedlib.algorithms import ClientUpdate, make_algorithm
    from fedlib.distributed import LocalCommunicator, distributed_apply

    algo = make_algorithm("fednova", sgd(1.0))
    state = algo.init(np.zeros(1), 2)
    t = lambda v: torch.tensor([v], dtype=torch.float64)  # noqa: E731
    updates = [ClientUpdate(0, t(-2.0), 2.0, 2), ClientUpdate(1, t(-6.0), 6.0, 6)]
    with pytest.raises(ValueError, match="client 0's delta holds torch tensors but state.params holds numpy arrays"):
        distributed_apply(LocalCommunicator(), algo, state, full_participation([0.5, 0.5]), updates, 1.0, None)
    same = [u._replace(delta=u.delta.numpy()) for u in updates]
    new, _ = distributed_apply(LocalCommunicator(), algo, state, full_participation([0.5, 0.5]), same, 1.0, None)
    assert new.params.tolist() == [-4.0]


@pytest.mark.parametrize("name, server, part", [("fednova", momentum(0.9), "server"), ("scaffold", plain(), "variates"),
                                                 ("vrlsgd", adam(0.1), "server")])
def test_distributed_apply_refuses_a_state_of_numpy_arrays_next_to_a_torch_model_like_apply(name, server, part):
    """A state whose model alone was turned into torch tensors (a checkpoint stores numpy arrays): apply names
    ``state``; distributed_apply died in the server optimizer with numpy's "unsupported operand type(s) for -:
    'numpy.ndarray' and 'Tensor'" (momentum) or went on with numpy c_i next to a torch model (SCAFFOLD)."""
    algo = make_algorithm(name, sgd(0.1), server)
    state = algo.init(np.zeros(2), 2)
    state = state._replace(params=torch.zeros(2, dtype=torch.float64))
    t = lambda v: torch.full((2,), v, dtype=torch.float64)  # noqa: E731
    args = (state, full_participation([0.5, 0.5]), [ClientUpdate(0, t(1.0), 1.0, 1), ClientUpdate(1, t(2.0), 2.0, 2)],
            0.1, [0.5, 0.5])
    match = rf"^state\.{part} holds numpy arrays but state\.params holds torch tensors: use one kind"
    with pytest.raises(ValueError, match=match):
        algo.apply(*args)
    with pytest.raises(ValueError, match=match):
        distributed_apply(LocalCommunicator(), algo, *args)


@pytest.mark.parametrize("num_clients", [3, 5])
def test_gather_variates_names_a_num_clients_other_than_the_stack_rows(num_clients):
    """Before: with 2 ranks a stack of 4 c_i and num_clients=5 was an IndexError ('index 4 is out of
    bounds for axis 0 with size 4'); num_clients=3 answered a stack whose last row each rank kept from
    its own copy, without a word. The right num_clients gathers as before."""
    from fedlib.distributed import gather_variates

    variates = make_algorithm("scaffold", sgd(0.1)).init(np.zeros(2), num_clients=4).variates
    with pytest.raises(ValueError, match=rf"^num_clients: the stacked c_i have \[4\] rows, got num_clients={num_clients}$"):
        on_ranks(2, lambda c: gather_variates(c, variates, num_clients))
    whole = on_ranks(2, lambda c: gather_variates(c, variates, 4))
    assert all(np.array_equal(w.client, variates.client) for w in whole)


@pytest.mark.parametrize("comm", [None, "local"])
@pytest.mark.parametrize("num_clients, match", [(float("nan"), r"^num_clients must be an integer >= 1, got nan$"),
                                                (0, r"^num_clients must be an integer >= 1, got 0$"),
                                                (5, r"^num_clients: the stacked c_i have \[4\] rows, got num_clients=5$")])
def test_gather_variates_checks_num_clients_with_one_process_too(comm, num_clients, match):
    """Before: with one process (comm None or of world size 1) num_clients was not read: nan, 0 or 5 for a stack of
    4 passed, and the same code failed only when it ran on several processes. A None stack is checked as well."""
    from fedlib.distributed import gather_variates

    comm = LocalCommunicator() if comm == "local" else None
    variates = make_algorithm("scaffold", sgd(0.1)).init(np.zeros(2), num_clients=4).variates
    with pytest.raises(ValueError, match=match):
        gather_variates(comm, variates, num_clients)
    if num_clients != 5:
        with pytest.raises(ValueError, match=match):
            gather_variates(comm, None, num_clients)
    assert gather_variates(comm, variates, 4) is variates and gather_variates(comm, None, 4) is None
