"""Mutation pass on the Table 1 parts of fedlib.experiments.cifar10 (the cells, the checks on
result files, the runner's planning and the chapter's summaries): tests that kill the mutants
the other tests let survive. Every expected number is worked out by hand in the test (or its
comment), never taken from the function under test; nothing here trains a network.

Mutants of the record of each call that trained a group (provenance['resumed']), of the rangeless pass (described
in tests/README.md, Mutation passes).

Mutants of 86c5527..90cbd4d (experiments/cifar10.py) (pass described in tests/README.md, Mutation passes):
experiments/cifar10.py summary_lines: CI1 ``is None`` -> ``is not None``, CI7 the larger of the final and in-round
  difference -> the smaller: killed by the suite. CI2 ``repeats and gaps`` -> ``or``, CI3 -> ``repeats``, CI8 ->
  ``gaps`` (max of nothing), CI4 ``abs`` dropped, CI5 ``or 0.0`` dropped (a repeat without a per-round
  difference), CI6 the largest repeat -> the smallest: killed here.

Mutants of 2da6626..df82563 (experiments/cifar10.py: run_table1's ``check`` binds ``marks`` and ``state`` as
default arguments; plan_table1's annotation, which computes nothing) (pass described in tests/README.md, Mutation
passes): 7 mutants, ``pytest -x`` on test_table1.py, test_table1_resume.py and this file: 4 killed by the suite, 0
killed here, 3 equivalent.
  TB2 ``state={}``, TB4 ``state=dict(state)``, TB7 ``state={"reason": None, "paused": False}`` (a dict the loop
  never reads: a stop or pause unseen) and TB5 ``marks=[]`` (no round 0 mark): killed by the suite
  (test_table1.py's stopped group, test_the_in_training_projection_by_hand).
  TB1 ``marks=[0.0]``, TB6 ``marks=list(marks)``: equivalent (the default is made when ``def check`` runs,
  once per group right after ``marks = [0.0]``, and nothing but ``check`` reads ``marks``). TB3 both bindings
  dropped (late binding): equivalent (``state`` and ``marks`` are assigned once per group before ``def check``,
  never rebound before the loop's next group, and train_runs calls ``check`` only while it runs).

Mutants of f9b9704..2e0d04d (fedlib/experiments/cifar10.py: plan_table1's seeds[i]) (pass described in
tests/README.md, Mutation passes): E28 ``seeds[i + 1]``; E29 ``seed``. killed by the suite: E28, E29.

Mutants of 2e0d04d..fb2fbe6 (fedlib/experiments/cifar10.py: run_table1's number checks of budget_seconds,
continue_later, safety) (pass described in tests/README.md, Mutation passes): T1 the bool exclusion dropped; T2
safety not checked; T3 continue_later not checked; T4 budget_seconds not checked. killed by the suite: T2-T4.
killed here: T1.

Mutants of fb91484..97fac41 (fedlib/experiments/cifar10.py: table1 --dry-run planned with the call's code,
_engine_key, _first_rate, _previous_rate_and_files, _next_group and the dry run's loop in run_table1) (pass described
in tests/README.md, Mutation passes): 24 mutants (ids as drafted; the gaps are drafts not run), one at a time,
``pytest -x`` on this file, test_cli_table1_modes.py, test_mutation_cli_cifar10.py, test_table1_resume.py,
test_gpu_rehearsal.py and test_table1.py: 11 killed by the suite, 13 killed here, 0 equivalent.
  killed by the suite: EK2 ``cudnn_benchmark`` always in the key; FR1 any number stacked tried before the call's
  stacking; FR2 the hint before earlier results; FR4 no fallback to results of another stacking; NG1 ``k = stack``
  (more runs than are left); NG3 the margin dropped for a paused group measured over 3 rounds with a later call;
  NG4 a paused group's need against this call's time alone; NG6 the safety margin dropped in the group sizing; NG9
  a paused group's need for all its rounds; DR1 the dry run's groups not taking their time off the budget; DR8
  ``remaining <= 0`` -> ``< 0`` (a budget of 0 planned a group without a rate).
  killed here: EK1 the device type 'cuda:1' for cuda:1; FR5 the rate of results stacked ``stack``, not
  ``min(stack, runs left)``; PF1 every readable result file named as the rate's source; NG8 the later call's stop
  reason 'budget' ('over --budget-seconds' for the runs it starts); DR2 a resumed group's time for all its rounds,
  DR3 its runs' lines likewise; DR4 a group ending exactly at the budget said to pause; DR5 groups planned after a
  pause; DR6 the runs after a group without a rate returned twice; DR7 those runs listed again as 'beyond the
  budget'; DR9 the dry run blind to a paused group; DR11 a resumed group without a rate estimated (TypeError); DR12
  a group the later call starts listed as 'would run'.

Mutants of f929b39..780545c (fedlib/experiments/cifar10.py, aa53e14: the dry run's wording) (pass described in
tests/README.md, Mutation passes):
  TB1, TB2 '... s in all up to here' back to '... s so far' in the planned runs' / the later runs' lines. killed by
  the suite: TB1, TB2.

Mutants of 652fbe7..0e9da1f (fedlib/experiments/cifar10.py, 15ad681: run_table1's ``group_config`` and
``paused_group``'s early check of a group checkpoint's settings, ``_TABLE1_RESUME_HINT``) (pass described in
tests/README.md, Mutation passes): 6 mutants (ids as drafted: TG6, TG8, TG9 not run), one at a time, ``pytest -x
-q`` on this file, test_cli_table1_modes.py, test_table1_resume.py, test_mutation_cifar10_experiments.py and
test_resume_differential.py's two table1 resume tests: 6 killed by the suite.
  TG1 paused_group's check_config dropped; TG2 every recorded key compared (the data and cuDNN's mode, which
  group_config lacks, too); TG3 the config of the whole todo list for the prefix's; TG4 "rounds" not in
  group_config; TG5 path / conv recorded at their defaults too; TG7 paused_group's refusal without its hint.
  killed by the suite: TG1, TG4, TG5, TG7 (test_resume_differential.py), TG2, TG3 (this file).
Mutants of c5aa211..361d535 (fedlib/experiments/cifar10.py, 1be64c2: run_table1's ``paused_read``; 4f038e4: the data
fingerprinted once a call) (pass described in tests/README.md, Mutation passes): 7 mutants, one at a time, ``pytest -x
-q`` on test_table1_resume.py, test_table1.py's two fingerprint tests, this file, test_mutation_cifar10_experiments.py
and test_resume_differential.py's three table1 resume tests: 4 killed by the suite, 3 equivalent.
  PR1 paused_group's ``paused_read.clear()`` dropped; PR2 the read checkpoint not kept; PR3 ``pop`` -> ``get``; PR4
  popped without ``if use_ckpt``; PR5 train_runs' resume_from None. FP1 the group checkpoint's config without the
  fingerprint; FP2 the data fingerprinted again for ``trained_on``.
  killed by the suite: PR2, PR5 (test_a_paused_group_is_read_once_to_resume), FP1, FP2
  (test_table1_fingerprints_the_data_once_and_its_checkpoints_record_it).
  equivalent: PR1 (an entry is kept only for the paused group, which _next_group then trains (k is the paused
  prefix's length), popping it, or the call stops), PR3 (the entry is cleared by the next paused_group call, and
  train_runs holds the document for the whole group anyway), PR4 (an entry for ``ckpt`` means its file was just
  read, so ``use_ckpt`` is true).
"""
from __future__ import annotations

import hashlib
import json
import types
from pathlib import Path

import numpy as np
import pytest

from fedlib import checkpoint as ck
from fedlib.experiments import cifar10 as C

COMMITTED = Path(__file__).resolve().parents[1] / "data" / "results" / "cifar10"


def _committed(name="sgd-e2-fedavg__seed0.json"):
    return json.loads((COMMITTED / name).read_text())


# ====================================================================== the cells
#: Paper App. I as REFERENCE reads it: (id, row, E, method, algorithm, solver, lr, mu, momentum,
#: server, server momentum, tau_eff); lr 0.02 with (local or server) momentum, 0.05 otherwise;
#: mu 0.005 for E = 2 and 0.001 for E ~ U(2, 5); FedNova-prox normalises by the local steps.
EXPECTED_CELLS = [
    ("sgd-e2-fedavg", "SGD", "2", "FedAvg", "fedavg", "sgd", 0.05, 0.0, None, "plain", None, None),
    ("sgd-e2-fednova", "SGD", "2", "FedNova", "fednova", "sgd", 0.05, 0.0, None, "plain", None, None),
    ("momentum-e2-fedavg", "momentum", "2", "FedAvg", "fedavg", "momentum", 0.02, 0.0, 0.9, "plain", None, None),
    ("momentum-e2-fednova", "momentum", "2", "FedNova", "fednova", "momentum", 0.02, 0.0, 0.9, "plain", None, None),
    ("sgd-u25-fedavg", "SGD", "2-5", "FedAvg", "fedavg", "sgd", 0.05, 0.0, None, "plain", None, None),
    ("sgd-u25-fednova", "SGD", "2-5", "FedNova", "fednova", "sgd", 0.05, 0.0, None, "plain", None, None),
    ("momentum-u25-fedavg", "momentum", "2-5", "FedAvg", "fedavg", "momentum", 0.02, 0.0, 0.9, "plain", None, None),
    ("momentum-u25-fednova", "momentum", "2-5", "FedNova", "fednova", "momentum", 0.02, 0.0, 0.9, "plain", None,
     None),
    ("prox-e2-fedprox", "proximal", "2", "FedProx", "fedprox", "prox", 0.05, 0.005, None, "plain", None, None),
    ("prox-e2-fednova", "proximal", "2", "FedNova", "fednova", "prox", 0.05, 0.005, None, "plain", None,
     "local_steps"),
    ("prox-u25-fedprox", "proximal", "2-5", "FedProx", "fedprox", "prox", 0.05, 0.001, None, "plain", None, None),
    ("prox-u25-fednova", "proximal", "2-5", "FedNova", "fednova", "prox", 0.05, 0.001, None, "plain", None,
     "local_steps"),
    ("vr-u25-scaffold", "VR", "2-5", "SCAFFOLD", "scaffold", "sgd", 0.05, 0.0, None, "plain", None, None),
    ("vr-u25-fednova", "VR", "2-5", "FedNova", "fednova-vr", "sgd", 0.05, 0.0, None, "plain", None, None),
    ("momentum-vr-u25-fednova", "momentum + VR", "2-5", "FedNova", "fednova-vr", "momentum", 0.02, 0.0, 0.9, "plain",
     None, None),
    ("hybrid-u25-fednova", "hybrid momentum", "2-5", "FedNova", "fednova", "momentum", 0.02, 0.0, 0.9, "momentum",
     0.9, None),
    ("servermom-u25-fednova", "server momentum", "2-5", "FedNova", "fednova", "sgd", 0.02, 0.0, None, "momentum",
     0.9, None),
]


def test_every_cell_is_paper_appendix_i_in_run_order():
    """All 17 cells, field by field and in run order (the existing test pins the first eight ids
    and a few values; a FedNova-prox run as plain FedNova, or SCAFFOLD as another method, passed it)."""
    assert [tuple(c.config().values()) for c in C.CELLS] == EXPECTED_CELLS
    assert C.CELL_IDS == [e[0] for e in EXPECTED_CELLS]


def _server_after_two_rounds(server):
    """Two server steps with the aggregate D = 1 and lr 1 from x = 0: server momentum gives
    u = -1, x = 1, then u = -beta - 1, x = 2 + beta (plain: x = 2)."""
    x = {"w": np.zeros(1)}
    d = {"w": np.ones(1)}
    state = server.init(x)
    for _ in range(2):
        x, state = server.update(d, state, x, 1.0)
    return float(x["w"][0])


def test_a_cell_without_momentum_values_gets_the_papers_0_9():
    """A Cell of a momentum solver or server momentum that leaves ``momentum`` /
    ``server_momentum`` unset gets the paper's 0.9 for both."""
    cell = C.Cell("x", "r", "2", "FedNova", "fednova", "momentum", 0.02, server="momentum")
    alg = cell.make_algorithm()
    assert alg.solver.momentum == 0.9
    assert _server_after_two_rounds(alg.server) == pytest.approx(2.9, abs=1e-12)
    # given values are used as they are
    alg = C.Cell("y", "r", "2", "FedNova", "fednova", "momentum", 0.02, momentum=0.5, server="momentum",
                 server_momentum=0.25).make_algorithm()
    assert alg.solver.momentum == 0.5
    assert _server_after_two_rounds(alg.server) == pytest.approx(2.25, abs=1e-12)


# ====================================================================== the data fingerprint
def _data(train_images, train_labels, test_images, test_labels):
    return types.SimpleNamespace(train_images=train_images, train_labels=train_labels, test_images=test_images,
                                 test_labels=test_labels)


def test_data_fingerprint_by_hand():
    """SHA-256 over each field's name, shape and bytes (train images, train labels, test images,
    test labels; a missing field: its name only), and over the client split with a separator
    after each client, both cut to 20 hex digits."""
    tri = np.arange(12, dtype=np.uint8).reshape(3, 2, 2)
    trl = np.array([0, 1, 1], dtype=np.int64)
    tel = np.array([2], dtype=np.int64)
    parts = [np.array([0, 2]), np.array([1])]
    fp = C.data_fingerprint(_data(tri, trl, None, tel), parts)
    d = hashlib.sha256()
    d.update(b"train_images" + b"(3, 2, 2)" + bytes(range(12)))
    d.update(b"train_labels" + b"(3,)" + trl.tobytes())
    d.update(b"test_images")
    d.update(b"test_labels" + b"(1,)" + tel.tobytes())
    s = hashlib.sha256(np.array([0, 2], dtype=np.int64).tobytes() + b"|" + np.array([1], dtype=np.int64).tobytes()
                       + b"|")
    assert fp == {"num_train": 3, "num_test": 1, "sha256": d.hexdigest()[:20], "split_sha256": s.hexdigest()[:20]}


def test_data_fingerprint_tells_apart_what_a_resume_must_not_mix():
    """Other pixels, the same pixels in another shape, the fields in other places, or another cut of
    the same client order give another fingerprint."""
    rng = np.random.default_rng(0)
    tri = rng.integers(0, 255, size=(4, 2, 2), dtype=np.uint8)
    trl, tel = np.array([0, 1, 0, 1]), np.array([1, 0])
    parts = [[0, 1], [2, 3]]
    base = C.data_fingerprint(_data(tri, trl, tri[:2], tel), parts)
    assert C.data_fingerprint(_data(tri.copy(), trl, tri[:2].copy(), tel), parts) == base
    other_pixels = tri.copy()
    other_pixels[0, 0, 0] ^= 1
    assert C.data_fingerprint(_data(other_pixels, trl, tri[:2], tel), parts)["sha256"] != base["sha256"]
    assert C.data_fingerprint(_data(tri.reshape(4, 4), trl, tri[:2], tel), parts)["sha256"] != base["sha256"]
    # the same arrays under other names: train images x = train labels, then moved to the test images
    x = np.array([0, 1, 0, 1])
    assert (C.data_fingerprint(_data(x, x, None, tel), parts)["sha256"]
            != C.data_fingerprint(_data(None, x, x, tel), parts)["sha256"])
    split = C.data_fingerprint(_data(tri, trl, tri[:2], tel), [[0], [1, 2, 3]])
    assert split["sha256"] == base["sha256"] and split["split_sha256"] != base["split_sha256"]


# ====================================================================== planning
def test_plan_table1_defaults_to_every_cell_for_seeds_0_1_2(tmp_path):
    """17 cells x seeds 0, 1, 2 by default, seed-major, none present in an empty folder."""
    plan = C.plan_table1(tmp_path)
    assert len(plan) == 51
    assert [p["seed"] for p in plan] == [0] * 17 + [1] * 17 + [2] * 17
    assert [p["cell"].id for p in plan[17:34]] == C.CELL_IDS
    assert plan[18]["path"] == tmp_path / "sgd-e2-fednova__seed1.json"
    assert not any(p["present"] for p in plan)


def test_plan_table1_takes_a_folder_name_and_names_unknown_cells(tmp_path):
    """A folder given as a string works as a Path; an unknown cell is refused by name with the
    known ones (a ValueError, not a KeyError from the lookup)."""
    (tmp_path / "sgd-e2-fedavg__seed3.json").write_text("{}")
    plan = C.plan_table1(str(tmp_path), seeds=(3,), cells=["sgd-e2-fedavg", "vr-u25-scaffold"])
    assert [(p["cell"].id, p["path"], p["present"]) for p in plan] == [
        ("sgd-e2-fedavg", tmp_path / "sgd-e2-fedavg__seed3.json", True),
        ("vr-u25-scaffold", tmp_path / "vr-u25-scaffold__seed3.json", False)]
    with pytest.raises(ValueError, match=r"unknown Table 1 cell\(s\) \['nope'\]; known: \['sgd-e2-fedavg'"):
        C.plan_table1(tmp_path, seeds=(0,), cells=["sgd-e2-fedavg", "nope"])


# ====================================================================== checks on result files
def test_cell_setup_problems_names_a_missing_or_extra_cell_field():
    """A result without a recorded cell lists every field as missing; a recorded cell with a field
    this code does not define names that field (both used to be refused; the names say why)."""
    doc = _committed()
    assert C.cell_setup_problems(doc) == []
    del doc["config"]["table1_cell"]
    (problem,) = C.cell_setup_problems(doc)
    assert problem.startswith("cell algorithm None (now 'fedavg'), epochs None (now '2'), id None (now "
                              "'sgd-e2-fedavg')")
    doc = _committed()
    doc["config"]["table1_cell"]["nesterov"] = True
    assert C.cell_setup_problems(doc) == ["cell nesterov True (now None)"]


def _with_rate(path, ips, **engine):
    doc = _committed()
    doc["config"]["engine"].update(engine)
    doc["summary"]["images_per_second"] = ips
    path.write_text(json.dumps(doc))


def test_previous_rate_counts_slow_rates_and_skips_zero_or_negative_ones(tmp_path):
    """Seconds per image = 1 / images_per_second: 0.5 images/s is a (slow) rate of 2 s per image;
    a recorded 0 or a negative rate is no rate (not a division by zero)."""
    _with_rate(tmp_path / "a__seed0.json", 0.5, width=0.5)
    _with_rate(tmp_path / "b__seed0.json", 0.0, width=0.5)
    _with_rate(tmp_path / "c__seed0.json", -4.0, width=0.5)
    assert C._previous_rate(tmp_path, {"width": 0.5}) == 2.0
    _with_rate(tmp_path / "d__seed0.json", 0.25, width=0.5)  # median of 2 and 4 s per image
    assert C._previous_rate(tmp_path, {"width": 0.5}) == 3.0


def test_run_seconds_shares_the_wall_time_among_the_runs_stacked():
    """Without seconds_per_run: the provenance's wall time / runs stacked (1 when not recorded)."""
    assert C.run_seconds({"summary": {"seconds_per_run": 7}, "provenance": {"wall_time_s": 100.0}}) == 7.0
    doc = {"provenance": {"wall_time_s": 100.0}, "config": {"engine": {"stacked_runs": 4}}}
    assert C.run_seconds(doc) == 25.0
    assert C.run_seconds({"provenance": {"wall_time_s": 100.0}, "config": {"engine": {}}}) == 100.0
    assert C.run_seconds({"provenance": {"wall_time_s": 100.0}}) == 100.0
    assert C.run_seconds({"config": {"engine": {"stacked_runs": 4}}}) is None


# ====================================================================== the runner's bookkeeping (no training)
def _scripted_train_runs(calls, *, resumed_from=0, seconds=50.0, seconds_before=0.0):
    """Stands in for train_runs: every run's history has test accuracy 0.1, 0.3, 0.2, 0.25 and
    train loss 4, 3, 2, 1 over its 4 rounds; the group 'took' ``seconds`` in this call."""
    def fake(runs, data, parts, *, rounds, **kw):
        calls.append([r["name"] for r in runs])
        calls.append(kw)
        acc, loss = [0.1, 0.3, 0.2, 0.25], [4.0, 3.0, 2.0, 1.0]
        hist = [{"round": t, "train_loss": loss[t], "test_accuracy": acc[t], "test_loss": 1.0, "tau_eff": 1.0,
                 "chi2": 0.0, "local_steps": [1], "lr": 0.05} for t in range(rounds)]
        return {"histories": [list(hist) for _ in runs], "seconds": seconds, "round_seconds": [], "stopped": False,
                "device": "cpu", "resumed_from": resumed_from, "seconds_before": seconds_before, "started": 0.0,
                "calls_before": []}
    return fake


@pytest.fixture(scope="module")
def sample():
    return C.load_data(sample=True)


def test_written_summary_of_a_stacked_group_by_hand(tmp_path, monkeypatch, sample):
    """Two E = 2 runs stacked, 4 rounds in 50 s on the sample (2000 training, 500 test images):
    final = the last round's values, best = 0.3, 25 s per run, 50 / (4 x 2) = 6.25 s per run and
    round, and (no per-client steps recorded) 4 rounds x 2 x (2 x 2000 + 500 / 3) images / 50 s."""
    assert (len(sample.train_labels), len(sample.test_labels)) == (2000, 500)
    calls, logs = [], []
    monkeypatch.setattr(C, "train_runs", _scripted_train_runs(calls))
    out = C.run_table1(tmp_path, budget_seconds=1e6, seeds=(0,), cells=["sgd-e2-fedavg", "sgd-e2-fednova"],
                       data=sample, width=0.03, rounds=4, device="cpu", stack=2, checkpoint_every=0,
                       log=logs.append)
    assert calls[0] == ["sgd-e2-fedavg__seed0", "sgd-e2-fednova__seed0"] and len(calls) == 2
    assert out["written"] == [str(tmp_path / "sgd-e2-fedavg__seed0.json"), str(tmp_path / "sgd-e2-fednova__seed0.json")]
    doc = json.loads((tmp_path / "sgd-e2-fednova__seed0.json").read_text())
    s = doc["summary"]
    assert (s["final_test_accuracy"], s["final_train_loss"], s["best_test_accuracy"], s["rounds"]) == (0.25, 1.0, 0.3, 4)
    assert (s["group_seconds"], s["runs_in_group"], s["seconds_per_run"]) == (50.0, 2, 25.0)
    assert s["seconds_per_run_round"] == 6.25
    assert s["images_per_second"] == pytest.approx(4 * 2 * (2 * 2000 + 500 / 3) / 50, rel=1e-12)
    assert "resumed_after_round" not in s and "resumed" not in doc["provenance"]
    assert doc["config"]["engine"]["stacked_runs"] == 2
    assert f"wrote {tmp_path / 'sgd-e2-fedavg__seed0.json'} (final test accuracy 0.2500)" in logs
    assert not any(line.startswith("resumed") for line in logs)
    # the rate measured: 4 rounds x 2 x 4166.67 images in 50 s
    assert "measured 667 images/s (training + evaluation, 2 run(s) stacked)" in logs


def test_a_resumed_group_records_and_logs_where_it_resumed(tmp_path, monkeypatch, sample):
    """Resumed after round 3 of 4 with 30 s of earlier training and 50 s in this call: 80 s in all,
    the provenance and summary say so, the log names the checkpoint it came from, and the one
    round trained in this call gives the rate, 2 x (2 x 2000 + 500 / 3) images / 50 s."""
    calls, logs = [], []
    monkeypatch.setattr(C, "train_runs", _scripted_train_runs(calls, resumed_from=3, seconds_before=30.0))
    C.run_table1(tmp_path, budget_seconds=1e6, seeds=(0,), cells=["sgd-e2-fedavg", "sgd-e2-fednova"], data=sample,
                 width=0.03, rounds=4, device="cpu", stack=2, checkpoint_every=0, log=logs.append)
    doc = json.loads((tmp_path / "sgd-e2-fedavg__seed0.json").read_text())
    assert doc["summary"]["group_seconds"] == 80.0 and doc["summary"]["resumed_after_round"] == 3
    assert doc["summary"]["seconds_per_run_round"] == 10.0  # 80 / (4 rounds x 2 runs)
    assert doc["provenance"]["resumed"]["from_round"] == 3
    assert doc["provenance"]["resumed"]["training_seconds_before"] == 30.0
    assert ("resumed sgd-e2-fedavg__seed0, sgd-e2-fednova__seed0 from round 3 "
            "(.ckpt__sgd-e2-fedavg__seed0+sgd-e2-fednova__seed0.pkl)") in logs
    assert "measured 167 images/s (training + evaluation, 2 run(s) stacked)" in logs


# ====================================================================== the chapter's table
def _result(accs, **extra):
    return {"history": [{"round": t, "test_accuracy": a} for t, a in enumerate(accs)], **extra}


def test_table1_summary_spread_by_hand():
    """One seed: std 0 (not NaN, not a made-up spread); two seeds 60 % and 64 %: mean 62, sample
    std sqrt((2^2 + 2^2) / 1) = 2.83; three seeds 60, 62, 67: std sqrt((3^2 + 1^2 + 4^2) / 2) = 3.61."""
    rows = {r["cell"]: r for r in C.table1_summary({
        "sgd-e2-fedavg": {0: _result([0.1, 0.6])},
        "sgd-e2-fednova": {0: _result([0.2, 0.6]), 1: _result([0.3, 0.64])},
        "sgd-u25-fedavg": {0: _result([0.60]), 1: _result([0.62]), 2: _result([0.67])}})}
    one, two, three = rows["sgd-e2-fedavg"], rows["sgd-e2-fednova"], rows["sgd-u25-fedavg"]
    assert (one["n_seeds"], one["mean"], one["std"]) == (1, 60.0, 0.0)
    assert (two["n_seeds"], two["mean"]) == (2, 62.0) and two["std"] == pytest.approx(8 ** 0.5, rel=1e-12)
    assert three["mean"] == pytest.approx(63.0) and three["std"] == pytest.approx(13 ** 0.5, rel=1e-12)
    assert rows["momentum-e2-fedavg"]["std"] is None and rows["momentum-e2-fedavg"]["mean"] is None


def test_table1_summary_counts_runs_by_their_final_evaluation():
    """A run counts when its last round has a test accuracy (its first round's is not the one
    that matters); one without history or without a final evaluation does not (and does not
    break the row)."""
    rows = {r["cell"]: r for r in C.table1_summary({"sgd-e2-fedavg": {
        0: _result([0.3, 0.5]), 1: _result([0.4, None]), 2: {"history": []}}})}
    r = rows["sgd-e2-fedavg"]
    assert (r["n_seeds"], r["mean"], r["best"]) == (1, 50.0, 50.0)


def test_table1_summary_flags_only_what_differs_from_the_paper():
    """A result that records no width, rounds, data size or precision is the paper's setup; each
    recorded difference is listed once per cell."""
    plain = _result([0.5], config={"engine": {}, "data": {}})
    rows = {r["cell"]: r for r in C.table1_summary({"sgd-e2-fedavg": {0: plain}})}
    assert rows["sgd-e2-fedavg"]["deviations"] == []
    odd = _result([0.5], config={"engine": {"width": 0.5, "precision": "bf16"}, "data": {"num_train": 2000},
                                 "rounds": 3})
    rows = {r["cell"]: r for r in C.table1_summary({"sgd-e2-fedavg": {0: odd, 1: odd}})}
    assert rows["sgd-e2-fedavg"]["deviations"] == ["2000 training images", "3 rounds", "bf16 autocast", "width 0.5"]


def test_paper_and_rerun_columns_of_the_table():
    """Paper column: a confirmed value with 2 decimals (and the text's ± where it gives one), an
    unconfirmed one as ≈ with 1 decimal, a missing unconfirmed one as [unconfirmed]; re-run column
    with the re-run's epochs where they differ."""
    text = {r[0] + "|" + r[1] + "|" + r[2]: r for r in C.format_summary_rows(C.table1_summary({}))}
    assert text["SGD|E=2|FedAvg"][7:] == ["60.68", "62.35"]
    assert text["SGD|E~U(2,5)|FedNova"][7:] == ["73.22", "70.54 (E∈{2,3,4})"]
    assert text["proximal|E=2|FedProx"][7:] == ["≈60.4 [unconfirmed]", "—"]
    assert text["VR|E~U(2,5)|FedNova"][7:] == ["[unconfirmed]", "—"]
    assert text["hybrid momentum|E~U(2,5)|FedNova"][7:] == ["81.15 ± 0.38", "—"]


def test_format_match_rows_by_hand():
    """Percent with 2 decimals, the round FedNova reaches the baseline (or never) and its share."""
    rows = [{"row": "SGD", "setting": "E=2", "baseline": "FedAvg", "seed": 0, "baseline_final": 0.6068,
             "fednova_rounds": 3, "fraction": 0.3},
            {"row": "SGD", "setting": "E=2", "baseline": "FedAvg", "seed": 1, "baseline_final": 0.5,
             "fednova_rounds": None, "fraction": None}]
    assert C.format_match_rows(rows) == [["SGD", "E=2", "FedAvg", 0, "60.68", 3, "0.30"],
                                         ["SGD", "E=2", "FedAvg", 1, "50.00", "never", "—"]]


def _clocked_train_runs(clock, calls, seconds_per_run_round):
    """train_runs on a fake clock: a round of k stacked runs takes k x seconds_per_run_round; the
    runner's callback may stop it."""
    def fake(runs, data, parts, *, rounds, callback=None, **kw):
        calls.append([r["name"] for r in runs])
        t0, hist, stopped = clock["t"], [[] for _ in runs], False
        for t in range(rounds):
            clock["t"] += seconds_per_run_round * len(runs)
            for h in hist:
                h.append({"round": t, "train_loss": 1.0, "test_accuracy": 0.5, "test_loss": 1.0, "tau_eff": 1.0,
                          "chi2": 0.0, "local_steps": [1], "lr": 0.05})
            if callback(t, [types.SimpleNamespace(test_accuracy=0.5)] * len(runs), clock["t"] - t0) is False:
                stopped = t + 1 < rounds
                break
        return {"histories": hist, "seconds": clock["t"] - t0, "round_seconds": [], "stopped": stopped,
                "device": "cpu", "resumed_from": 0, "seconds_before": 0.0, "started": t0, "calls_before": []}
    return fake


def test_a_stopped_pair_is_retried_one_run_at_a_time(tmp_path, monkeypatch, sample):
    """Budget 180 s, 10 rounds, 10 s per run and round: the pair (20 s a round) is stopped after
    round 1 (1040 + 8 x 20 x 1.15 = 1224 > 1180); one run then needs 1.15 x 100 = 115 s of the
    140 s left and is written; the other is left for later (40 s left)."""
    clock, calls = {"t": 1000.0}, []
    monkeypatch.setattr(C, "time", types.SimpleNamespace(time=lambda: clock["t"], perf_counter=lambda: clock["t"]))
    monkeypatch.setattr(C, "train_runs", _clocked_train_runs(clock, calls, 10.0))
    out = C.run_table1(tmp_path, budget_seconds=180, seeds=(0,), data=sample, width=0.03, rounds=10, device="cpu",
                       stack=2, checkpoint_every=0, log=lambda *a: None, cells=["sgd-e2-fedavg", "sgd-e2-fednova"])
    assert calls == [["sgd-e2-fedavg__seed0", "sgd-e2-fednova__seed0"], ["sgd-e2-fedavg__seed0"]]
    assert out["written"] == [str(tmp_path / "sgd-e2-fedavg__seed0.json")]
    assert out["aborted"] == ["sgd-e2-fednova__seed0"] and out["not_started"] == []


def test_train_runs_gets_this_calls_commit_and_a_failure_names_the_group(tmp_path, monkeypatch, sample):
    """The call's commit and dirty flag go to train_runs for the checkpoint's record; a
    FloatingPointError while training names the group and says nothing was written."""
    import fedlib.results

    monkeypatch.setattr(fedlib.results, "git_commit", lambda: ("ab" * 20, True))
    calls = []
    monkeypatch.setattr(C, "train_runs", _scripted_train_runs(calls))
    C.run_table1(tmp_path, budget_seconds=1e6, seeds=(0,), cells=["sgd-e2-fedavg"], data=sample, width=0.03,
                 rounds=4, device="cpu", checkpoint_every=0, log=lambda *a: None)
    info = calls[1]["call_info"]
    assert (info["git_commit"], info["git_dirty"]) == ("ab" * 20, True)

    def diverges(*a, **kw):
        raise FloatingPointError("loss is nan")

    monkeypatch.setattr(C, "train_runs", diverges)
    with pytest.raises(FloatingPointError, match=r"table1 cells \['sgd-e2-fednova__seed0'\]: loss is nan "
                                                 r"\(no result written for this group\)"):
        C.run_table1(tmp_path, budget_seconds=1e6, seeds=(0,), cells=["sgd-e2-fednova"], data=sample, width=0.03,
                     rounds=4, device="cpu", checkpoint_every=0, log=lambda *a: None)


def test_a_repeat_tag_may_contain_double_underscores(tmp_path):
    """``<cell>__seed<s>__<tag>.json``: the tag is everything after the seed's ``__``, also when
    it holds ``__`` or ``__seed`` itself; final 60 % vs 61.5 %: +1.5 points."""
    a = _committed()
    a["history"][-1]["test_accuracy"] = a["summary"]["final_test_accuracy"] = 0.6
    b = json.loads(json.dumps(a))
    b["history"][-1]["test_accuracy"] = b["summary"]["final_test_accuracy"] = 0.615  # read: the two must agree
    for tag in ("bf16__run2", "again__seed1"):
        (tmp_path / f"sgd-e2-fedavg__seed0__{tag}.json").write_text(json.dumps(b))
    rows = C.repeat_differences({"sgd-e2-fedavg": {0: a}}, tmp_path)
    assert [r["tag"] for r in rows] == ["again__seed1", "bf16__run2"]
    r = rows[0]
    assert (r["cell"], r["seed"], r["final"], r["repeat_final"]) == ("sgd-e2-fedavg", 0, 60.0, 61.5)
    assert (r["stacked"], r["repeat_stacked"]) == (a["config"]["engine"]["stacked_runs"],) * 2
    assert r["device"] == a["provenance"]["device"] and r["device"]
    assert r["difference"] == pytest.approx(1.5, abs=1e-12)
    assert r["max_round_difference"] == pytest.approx(1.5, abs=1e-12)  # every other round is the same


def _save_kw(folder, sample, folder_as_text=False, **kw):
    folder.mkdir()
    calls = []
    import fedlib.experiments.cifar10 as mod

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mod, "train_runs", _scripted_train_runs(calls))
        C.run_table1(str(folder) if folder_as_text else folder, budget_seconds=1e6, seeds=(0,), cells=["sgd-e2-fedavg"], data=sample, width=0.03,
                     rounds=4, device="cpu", log=lambda *a: None, **kw)
    return calls[1]


def test_a_call_with_a_later_one_checkpoints_and_saves_when_stopped(tmp_path, sample):
    """continue_later > 0 (even half a second): the group checkpoints (also with checkpoint_every
    0) and saves on a stop, to be resumed by the next call; without a later call it does not save
    on a stop."""
    kw = _save_kw(tmp_path / "a", sample, checkpoint_every=0, continue_later=0.5, folder_as_text=True)
    assert kw["checkpoint"] == tmp_path / "a" / ".ckpt__sgd-e2-fedavg__seed0.pkl" and kw["save_on_stop"] is True
    kw = _save_kw(tmp_path / "b", sample, checkpoint_every=0)
    assert kw["checkpoint"] is None and kw["save_on_stop"] is False
    kw = _save_kw(tmp_path / "c", sample)  # checkpoints after every round by default
    assert kw["checkpoint"] == tmp_path / "c" / ".ckpt__sgd-e2-fedavg__seed0.pkl" and kw["save_on_stop"] is False
    assert kw["checkpoint_every"] == 1
    kw = _save_kw(tmp_path / "d", sample, checkpoint_every=2.0)  # a whole number of rounds, as an int
    assert kw["checkpoint_every"] == 2 and type(kw["checkpoint_every"]) is int


@pytest.mark.parametrize("safety", [0.0, -1.0, float("inf"), float("nan")])
def test_run_table1_refuses_a_safety_factor_that_is_not_finite_and_positive(tmp_path, safety):
    with pytest.raises(ValueError, match="safety must be a finite factor > 0"):
        C.run_table1(tmp_path, budget_seconds=10, seeds=(0,), cells=["sgd-e2-fedavg"], safety=safety, dry_run=True,
                     log=lambda *a: None)


def test_a_group_pauses_only_when_its_next_round_would_end_past_the_call(tmp_path, monkeypatch, sample):
    """Budget 50 s with 100 s in a later call, 10 s a round: after round 4 (t = 3, at 1040 s) the
    next round ends exactly at the deadline, 1050 s, and is trained; after round 5 the next one
    would end at 1060 s: the group pauses there."""
    clock, calls, logs = {"t": 1000.0}, [], []
    monkeypatch.setattr(C, "time", types.SimpleNamespace(time=lambda: clock["t"], perf_counter=lambda: clock["t"]))
    monkeypatch.setattr(C, "train_runs", _clocked_train_runs(clock, calls, 10.0))
    out = C.run_table1(tmp_path, budget_seconds=50, seeds=(0,), data=sample, width=0.03, rounds=10, device="cpu",
                       continue_later=100, checkpoint_every=0, log=logs.append, cells=["sgd-e2-fedavg"])
    assert out["paused"] == ["sgd-e2-fedavg__seed0"] and out["written"] == []
    assert any("(round 5 of 10); the next call resumes it" in line for line in logs), logs


def _timed_train_runs(clock, durations, resumed_from=0, seconds_before=0.0):
    """One run whose round t takes durations[t - resumed_from] seconds on the fake clock (the
    runner may stop it); resumed after ``resumed_from`` rounds that took ``seconds_before``."""
    def fake(runs, data, parts, *, rounds, callback=None, **kw):
        t0, stopped = clock["t"], False
        hist = [{"round": t, "train_loss": 1.0, "test_accuracy": 0.5, "test_loss": 1.0, "tau_eff": 1.0, "chi2": 0.0,
                 "local_steps": [1], "lr": 0.05} for t in range(resumed_from)]
        for t in range(resumed_from, rounds):
            clock["t"] += durations[t - resumed_from]
            hist.append({"round": t, "train_loss": 1.0, "test_accuracy": 0.5, "test_loss": 1.0, "tau_eff": 1.0,
                         "chi2": 0.0, "local_steps": [1], "lr": 0.05})
            if callback(t, [types.SimpleNamespace(test_accuracy=0.5)], clock["t"] - t0) is False:
                stopped = t + 1 < rounds
                break
        return {"histories": [hist], "seconds": clock["t"] - t0, "round_seconds": [], "stopped": stopped,
                "device": "cpu", "resumed_from": resumed_from, "seconds_before": seconds_before, "started": t0,
                "calls_before": []}
    return fake


@pytest.mark.parametrize("durations, budget, later, stopped_after", [
    # -- from round 1 on: the mean round time after round 0, x 1.15 up to t = 2, x 1 from t = 3
    # t = 3 at 1034 s, 8 s a round (rounds 1-3): 1034 + 6 x 8 = 1082 <= 1085 (with the 1.15 margin 1089: stopped)
    ([10, 2, 2, 20, 2, 2, 2, 2, 2, 2], 85, 0, None),
    # t = 3 at 1064 s, 18 s a round: 1064 + 6 x 18 = 1172 > 1085: stopped
    ([10, 2, 2, 50, 2, 2, 2, 2, 2, 2], 85, 0, 3),
    # t = 2 at 1024 s, 7 s a round: 1024 + 7 x 7 x 1.15 = 1080.35 > 1075 (without the margin 1073): stopped
    ([10, 2, 12, 2, 2, 2, 2, 2, 2, 2], 75, 0, 2),
    # t = 3 at 1009 s, 2 s a round: 1009 + 6 x 2 = 1021 = the deadline: not past it
    ([3, 1, 1, 4, 1, 1, 1, 1, 1, 1], 21, 0, None),
    # -- round 0 (warm-up): goes on if a third of its time per round may fit and the next round ends in the call
    # 1030 + 9 x 30 / 3 = 1120 <= 1120 and 1060 <= 1120: goes on (then 1 s rounds)
    ([30, 1, 1, 1, 1, 1, 1, 1, 1, 1], 120, 0, None),
    # 1120 > 1119: projected at full warm-up time, 1030 + 9 x 30 x 1.15 = 1340.5 > 1119: stopped
    ([30, 1, 1, 1, 1, 1, 1, 1, 1, 1], 119, 0, 0),
    ([30, 1, 1, 1, 1, 1, 1, 1, 1, 1], 100, 0, 0),
    # a later call's 20 s count for the whole run: 1120 <= 1100 + 20 and 1060 <= 1100
    ([30, 1, 1, 1, 1, 1, 1, 1, 1, 1], 100, 20, None),
    # the next round ends exactly at this call's deadline: 1025 + 25 = 1050 <= 1050
    ([25, 1, 1, 1, 1, 1, 1, 1, 1, 1], 50, 100, None),
    # ... but not past it: 1030 + 30 = 1060 > 1050 (1340.5 > 1150 at full warm-up time): stopped
    ([30, 1, 1, 1, 1, 1, 1, 1, 1, 1], 50, 100, 0),
    # the last but one round is checked too: t = 8 at 1054 s, (7 x 2 + 30) / 8 = 5.5 s a round: 1059.5 > 1055
    ([10, 2, 2, 2, 2, 2, 2, 2, 30, 2], 55, 0, 8),
])
def test_the_in_training_projection_by_hand(tmp_path, monkeypatch, sample, durations, budget, later, stopped_after):
    """While one run trains (10 rounds, the fake clock at 1000 s, the deadline at 1000 s + budget),
    its finish is projected after every round: after round 0 (the warm-up) it goes on when at a
    third of that round's time it may finish by the deadline plus a later call's seconds and its
    next round ends within this call; otherwise, and from round 1 on with the mean time of the
    rounds after round 0, it is stopped when the projection (x 1.15 up to t = 2) is past the
    deadline plus the later call's seconds."""
    clock = {"t": 1000.0}
    monkeypatch.setattr(C, "time", types.SimpleNamespace(time=lambda: clock["t"], perf_counter=lambda: clock["t"]))
    monkeypatch.setattr(C, "train_runs", _timed_train_runs(clock, durations))
    logs = []
    out = C.run_table1(tmp_path, budget_seconds=budget, seeds=(0,), data=sample, width=0.03, rounds=10,
                       device="cpu", checkpoint_every=0, continue_later=later, log=logs.append,
                       cells=["sgd-e2-fedavg"])
    assert out["paused"] == []
    progress = [line for line in logs if line.startswith("  round")]
    if stopped_after is None:
        assert out["written"] == [str(tmp_path / "sgd-e2-fedavg__seed0.json")] and out["aborted"] == []
        assert not any(line.startswith(("stopped", "budget:")) for line in logs), logs
        # a progress line every 10 rounds: here once, after the last round
        assert progress == [f"  round 10/10 after {sum(durations)} s in this call; test accuracy 0.500"]
    else:
        assert out["written"] == [] and out["aborted"] == ["sgd-e2-fedavg__seed0"]
        # a stopped single run ends the call at once (no second "budget: ... stopping" for the same run)
        (line,) = [line for line in logs if line.startswith(("stopped", "budget:"))]
        assert line.startswith(f"stopped sgd-e2-fedavg__seed0 after round {stopped_after} ("), line
        assert progress == []


def test_run_table1_defaults_one_run_at_a_time_at_full_width_and_100_rounds(tmp_path, monkeypatch, sample):
    """Without stack, width and rounds: one run per group, and a present run of the paper's size
    (width 1, 100 rounds, as the committed ones) counts as done."""
    (tmp_path / "sgd-e2-fedavg__seed0.json").write_text(json.dumps(_committed()))
    logs = []
    out = C.run_table1(tmp_path, budget_seconds=0, seeds=(0,), cells=["sgd-e2-fedavg", "sgd-e2-fednova"],
                       dry_run=True, log=logs.append)
    assert out["skipped"] == [str(tmp_path / "sgd-e2-fedavg__seed0.json")]
    assert logs[0] == "present: sgd-e2-fedavg__seed0.json"
    calls = []
    monkeypatch.setattr(C, "train_runs", _scripted_train_runs(calls))
    (tmp_path / "b").mkdir()
    C.run_table1(tmp_path / "b", budget_seconds=1e6, seeds=(0,), cells=["sgd-e2-fedavg", "sgd-e2-fednova"],
                 data=sample, rounds=4, device="cpu", checkpoint_every=0, log=lambda *a: None)
    assert [c for c in calls if isinstance(c, list)] == [["sgd-e2-fedavg__seed0"], ["sgd-e2-fednova__seed0"]]


def test_run_table1_defaults_to_seeds_0_1_2(tmp_path):
    """Without seeds, a dry run lists every cell for seeds 0, 1 and 2 (51 runs) and starts none."""
    out = C.run_table1(tmp_path, budget_seconds=0, dry_run=True, log=lambda *a: None)
    assert len(out["not_started"]) == 51 and out["written"] == out["skipped"] == []
    assert {Path(p).name for p in out["not_started"]} == {f"{c}__seed{s}.json" for c in C.CELL_IDS for s in (0, 1, 2)}


def test_dry_run_marks_runs_beyond_the_budget_only_past_it(tmp_path):
    """3 rounds of an E = 2 run at 1000 images/s: 3 x (2 x 50,000 + 10,000 / 3) / 1000 = 310 s,
    x 1.15 = 356.5 s; a budget of exactly that is not exceeded, a second run is."""
    budget = 1.15 * (3 * (2 * 50000 + 10000 / 3.0) / 1000)
    logs = []
    C.run_table1(tmp_path, budget_seconds=budget, seeds=(0,), cells=["sgd-e2-fedavg", "sgd-e2-fednova"], rounds=3,
                 dry_run=True, images_per_second=1000, log=logs.append)
    assert logs[0].startswith("estimate: 1000 images/s from --images-per-second (hint"), logs
    runs = [line for line in logs if " seed 0 -> " in line]
    assert runs[0].startswith("would run: sgd-e2-fedavg seed 0") and "(~310 s at 1000 images/s; 310 s in all up to here)" in runs[0]
    assert runs[1].startswith("beyond the budget: sgd-e2-fednova seed 0") and "620 s in all up to here; over --budget-seconds" in runs[1]


def test_a_slow_hint_and_the_default_device_are_taken(tmp_path, monkeypatch, sample):
    """A hint under 1 image/s is a rate like any other; device None is resolved (cuda if torch sees
    one, else cpu) and recorded as the engine's device type."""
    import torch

    calls = []
    monkeypatch.setattr(C, "train_runs", _scripted_train_runs(calls))
    logs = []
    C.run_table1(tmp_path, budget_seconds=1e6, seeds=(0,), cells=["sgd-e2-fedavg"], data=sample, width=0.03,
                 rounds=4, images_per_second=0.75, checkpoint_every=0, log=logs.append)
    assert "estimate: 1 images/s (hint) until a group is measured" in logs
    doc = json.loads((tmp_path / "sgd-e2-fedavg__seed0.json").read_text())
    assert doc["config"]["engine"]["device_type"] == ("cuda" if torch.cuda.is_available() else "cpu")
    assert calls[1]["device"] == ("cuda" if torch.cuda.is_available() else "cpu")


def test_a_safety_factor_under_one_is_allowed(tmp_path):
    out = C.run_table1(tmp_path, budget_seconds=10, seeds=(0,), cells=["sgd-e2-fedavg"], safety=0.5, dry_run=True,
                       log=lambda *a: None)
    assert out["not_started"] == [str(tmp_path / "sgd-e2-fedavg__seed0.json")]


def test_a_call_with_exactly_three_rounds_left_starts_the_group(tmp_path, monkeypatch, sample):
    """With a later call, a group starts only if this call has time for at least 3 of its rounds:
    at 0.5 images/s (2 s per image) a round of an E = 2 run on 2000 training and 300 test images
    is 2 x (2 x 2000 + 300 / 3) = 8200 s, so a budget of exactly 24,600 s starts it and 24,599 s
    leaves it to the next call."""
    for budget, started in ((24600, True), (24599, False)):
        out, logs = _one_run_at_half_an_image_per_second(tmp_path / str(budget), monkeypatch, sample, budget,
                                                         continue_later=20000)
        assert (len(out["written"]), len(out["not_started"])) == ((1, 0) if started else (0, 1)), logs


def _one_run_at_half_an_image_per_second(folder, monkeypatch, sample, budget, **options):
    """run_table1 of one sgd-e2-fedavg run (4 rounds, 2000 training and 300 test images) on a stopped
    clock at a hinted 0.5 images/s, training scripted: (its result, its log lines)."""
    data = types.SimpleNamespace(train_labels=sample.train_labels, test_labels=np.zeros(300, dtype=np.int64))
    monkeypatch.setattr(C, "time", types.SimpleNamespace(time=lambda: 1000.0, perf_counter=lambda: 1000.0))
    calls, logs = [], []
    monkeypatch.setattr(C, "train_runs", _scripted_train_runs(calls))
    folder.mkdir()
    out = C.run_table1(folder, budget_seconds=budget, seeds=(0,), cells=["sgd-e2-fedavg"], data=data, width=0.03,
                       rounds=4, device="cpu", images_per_second=0.5, checkpoint_every=0, log=logs.append, **options)
    return out, logs


def test_a_checkpoint_of_the_first_run_alone_is_resumed_alone(tmp_path, monkeypatch, sample):
    """Every prefix of the runs left is looked for as a paused group, the longest first: with a
    checkpoint of the first run alone (and none of the pair), the first run is resumed alone,
    then the second trained."""
    from fedlib.checkpoint import save_checkpoint

    save_checkpoint(tmp_path / ".ckpt__sgd-e2-fedavg__seed0.pkl", config={"runs": ["sgd-e2-fedavg__seed0"]},
                    round_done=2, state={}, history=[], kind="table1", extra={"seconds": 10.0})
    calls, logs = [], []
    monkeypatch.setattr(C, "train_runs", _scripted_train_runs(calls))
    C.run_table1(tmp_path, budget_seconds=1e6, seeds=(0,), cells=["sgd-e2-fedavg", "sgd-e2-fednova"], data=sample,
                 width=0.03, rounds=4, device="cpu", stack=2, log=logs.append)
    assert [c for c in calls if isinstance(c, list)] == [["sgd-e2-fedavg__seed0"], ["sgd-e2-fednova__seed0"]]
    # no other rate: the checkpoint's 10 s for 2 rounds give 2 more rounds ~10 s
    assert "training 1 run(s) stacked (estimate 10 s): sgd-e2-fedavg__seed0, resuming after round 2" in logs


def test_a_checkpoint_after_three_rounds_replaces_the_hint(tmp_path, monkeypatch, sample):
    """After MIN_MEASURED_ROUNDS = 3 rounds (30 s) the group's own rate (10 s a round) replaces
    the hint (0.5 images/s would make its last round ~8333 s)."""
    from fedlib.checkpoint import save_checkpoint

    save_checkpoint(tmp_path / ".ckpt__sgd-e2-fedavg__seed0.pkl", config={"runs": ["sgd-e2-fedavg__seed0"]},
                    round_done=3, state={}, history=[], kind="table1", extra={"seconds": 30.0})
    calls, logs = [], []
    monkeypatch.setattr(C, "train_runs", _scripted_train_runs(calls))
    C.run_table1(tmp_path, budget_seconds=1e6, seeds=(0,), cells=["sgd-e2-fedavg"], data=sample, width=0.03,
                 rounds=4, device="cpu", images_per_second=0.5, log=logs.append)
    assert "training 1 run(s) stacked (estimate 10 s): sgd-e2-fedavg__seed0, resuming after round 3" in logs


def test_a_run_whose_estimate_is_exactly_the_budget_is_started(tmp_path, monkeypatch, sample):
    """Safety 1, 2 s per image, 4 rounds of 2 x 2000 + 300 / 3 = 4100 images: 32,800 s; a budget of
    exactly that starts the run, one second less does not."""
    for budget, started in ((32800, True), (32799, False)):
        out, logs = _one_run_at_half_an_image_per_second(tmp_path / str(budget), monkeypatch, sample, budget,
                                                         safety=1.0)
        assert (len(out["written"]), len(out["not_started"])) == ((1, 0) if started else (0, 1)), logs
        if not started:
            assert logs[-1] == "budget: 32799 s left, the next run needs ~32800 s; stopping"


def test_no_time_left_at_all_starts_nothing_even_without_a_rate(tmp_path, monkeypatch, sample):
    """A budget of 0 s (the clock standing still): exactly no time left, so no group is started to
    measure a rate."""
    monkeypatch.setattr(C, "time", types.SimpleNamespace(time=lambda: 1000.0, perf_counter=lambda: 1000.0))
    calls, logs = [], []
    monkeypatch.setattr(C, "train_runs", _scripted_train_runs(calls))
    out = C.run_table1(tmp_path, budget_seconds=0, seeds=(0,), cells=["sgd-e2-fedavg"], data=sample, width=0.03,
                       rounds=4, device="cpu", checkpoint_every=0, log=logs.append)
    assert calls == [] and out["written"] == [] and len(out["not_started"]) == 1
    assert logs == ["budget: no time left in this call; stopping"]


_W = 2 * 2000.0 + 500 / 3.0  # one round of an E = 2 run on the sample, in images


@pytest.mark.parametrize("done, seconds, later, budget, trained", [
    # 2 rounds in 10 s: not measured enough for the margin to go, 1.15 x 10 = 11.5 s for the last 2 > 11
    (2, 10.0, 0, 11, False),
    (2, 10.0, 0, 12, True),
    # 3 rounds in 30 s, a later call: the margin stays, 11.5 s > 5 + 6; <= 10 + 2
    (3, 30.0, 6, 5, False),
    (3, 30.0, 2, 10, True),
    # 3 rounds in 30 s, the session's last call: its own rate without the margin, exactly the time left
    (3, 30.0, 0, (30.0 / (3 * _W)) * _W, True),
])
def test_a_paused_group_is_resumed_only_if_its_last_rounds_fit(tmp_path, monkeypatch, sample, done, seconds, later,
                                                                budget, trained):
    """A paused group (4 rounds, one run) resumes if its remaining rounds at its own rate, times
    the safety margin unless measured over 3 rounds in the session's last call, fit in the
    time left plus the later call's."""
    from fedlib.checkpoint import save_checkpoint

    save_checkpoint(tmp_path / ".ckpt__sgd-e2-fedavg__seed0.pkl", config={"runs": ["sgd-e2-fedavg__seed0"]},
                    round_done=done, state={}, history=[], kind="table1", extra={"seconds": seconds})
    monkeypatch.setattr(C, "time", types.SimpleNamespace(time=lambda: 0.0, perf_counter=lambda: 0.0))
    calls, logs = [], []
    monkeypatch.setattr(C, "train_runs", _scripted_train_runs(calls))
    out = C.run_table1(tmp_path, budget_seconds=budget, seeds=(0,), cells=["sgd-e2-fedavg"], data=sample, width=0.03,
                       rounds=4, device="cpu", continue_later=later, log=logs.append)
    assert (len(out["written"]) == 1) is trained and (calls != []) is trained, logs
    if not trained:
        # needs 1.15 x 10 = 11.5 s (printed rounded)
        assert logs[-1].startswith(f"budget: {budget} s left (+{later} s later), the paused group "
                                   "sgd-e2-fedavg__seed0 needs ~1")
        assert logs[-1].endswith(f" s for its last {4 - done} rounds; stopping")


def test_the_first_round_after_a_resume_projects_the_rounds_left(tmp_path, monkeypatch, sample):
    """Resumed after round 5 of 10 (5 s so far: it fits the 10 s budget), its first round in this
    call takes 3 s: at a third of that, the 4 rounds left end at 1003 + 4 x 1 = 1007 <= 1010, so
    it goes on (counting 14 rounds, 1017, it would be stopped) and, at 1 s a round, is written."""
    from fedlib.checkpoint import save_checkpoint

    save_checkpoint(tmp_path / ".ckpt__sgd-e2-fedavg__seed0.pkl", config={"runs": ["sgd-e2-fedavg__seed0"]},
                    round_done=5, state={}, history=[], kind="table1", extra={"seconds": 5.0})
    clock = {"t": 1000.0}
    monkeypatch.setattr(C, "time", types.SimpleNamespace(time=lambda: clock["t"], perf_counter=lambda: clock["t"]))
    monkeypatch.setattr(C, "train_runs", _timed_train_runs(clock, [3, 1, 1, 1, 1], resumed_from=5, seconds_before=5.0))
    logs = []
    out = C.run_table1(tmp_path, budget_seconds=10, seeds=(0,), data=sample, width=0.03, rounds=10, device="cpu",
                       log=logs.append, cells=["sgd-e2-fedavg"])
    assert out["written"] == [str(tmp_path / "sgd-e2-fedavg__seed0.json")] and out["aborted"] == [], logs


# -------------------------------------------------------------------------------- table1: each call's record
def test_each_call_that_trained_a_group_is_recorded_with_its_rounds_and_any_switch_is_flagged(tmp_path, monkeypatch):
    """Three calls train one 3-round group: rounds [0, 1), [1, 2) (each interrupted after its checkpoint),
    then [2, 3). The second call's record must say it began at round 1 (mutant: [0, end)); with the first
    call's record rewritten to cuda_graph=True, the last (eager) call's result must flag the switch
    although the second call was eager too (mutant: only when *every* earlier call differs)."""
    from cliutil import cli_exit
    from test_table1_resume import _interrupted_after_first_checkpoint, _rewrite, _table1_args

    from fedlib.results import read_result

    args = _table1_args(tmp_path, "--rounds", "3")
    ckpt = _interrupted_after_first_checkpoint(monkeypatch, args)
    assert [c["rounds"] for c in ck.load_checkpoint(ckpt)["extra"]["calls"]] == [[0, 1]]
    ckpt = _interrupted_after_first_checkpoint(monkeypatch, args)
    calls = ck.load_checkpoint(ckpt)["extra"]["calls"]
    assert [(c["cuda_graph"], c["rounds"]) for c in calls] == [(False, [0, 1]), (False, [1, 2])]
    _rewrite(ckpt, lambda doc: doc["extra"]["calls"][0].update(cuda_graph=True))
    rc, out, err = cli_exit(args)
    assert rc == 0, err
    resumed = read_result(tmp_path / "sgd-e2-fedavg__seed0.json")["provenance"]["resumed"]
    assert resumed["from_round"] == 2
    assert [(c["cuda_graph"], c["rounds"]) for c in resumed["earlier_calls"]] == [(True, [0, 1]), (False, [1, 2])]
    assert resumed.get("cuda_graph_changed") is True
    assert "CUDA graphs on in an earlier call" in out


# ------------------------------------------------------------------------------- mutants of 86c5527..90cbd4d
GAPS = [{"row": "SGD", "setting": "E=2", "baseline": "FedAvg", "seeds": [0], "baseline_final": 58.82,
         "fednova_final": 66.53, "gap": 7.71, "paper_gap": 5.63}]


NOISE = "- Every FedNova lead above is asserted to exceed the largest difference of a repeat, final or in any round: "


def test_summary_lines_noise_is_the_largest_difference_of_any_repeat():  # CI4, CI5, CI6, CI7
    repeats = [{"cell": "a", "seed": 0, "difference": -1.5, "max_round_difference": None},  # an older repeat file
               {"cell": "b", "seed": 1, "difference": -0.25, "max_round_difference": 0.75}]
    lines = C.summary_lines([], GAPS, [], [], repeats, [])
    assert lines[2] == ("- The same run made twice (a, seed 0) ends 1.50 points apart: differences of that size "
                        "between cells mean nothing.")
    assert lines[-1] == NOISE + "1.50 points."
    assert C.summary_lines([], GAPS, [], [], repeats[1:], [])[-1] == NOISE + "0.75 points."


def test_summary_lines_noise_needs_both_repeats_and_leads():  # CI2, CI3, CI8
    repeats = [{"cell": "a", "seed": 0, "difference": 0.5, "max_round_difference": 0.6}]
    for gaps, reps in ((GAPS, []), ([], repeats)):
        assert not any(line.startswith(NOISE) for line in C.summary_lines([], gaps, [], [], reps, []))


@pytest.mark.parametrize("kw, name, what", [
    ({"budget_seconds": True}, "budget_seconds", "a finite number >= 0 of seconds"),
    ({"budget_seconds": 1.0, "continue_later": np.True_}, "continue_later", "a finite number >= 0 of seconds"),
    ({"budget_seconds": 1.0, "safety": True}, "safety", "a finite factor > 0"),
])
def test_run_table1_refuses_a_bool_for_a_number_of_seconds_or_the_safety_factor(tmp_path, kw, name, what):
    """run_table1's budget_seconds, continue_later and safety are numbers; a bool is none (True passed float() as
    one second, 1.0 the safety factor): refused by name before anything is planned (mutant T1 of 2e0d04d..fb2fbe6: the
    bool exclusion dropped)."""
    lines = []
    with pytest.raises(ValueError, match=f"^{name} must be {what}, got (np\\.)?True"):
        C.run_table1(tmp_path, seeds=(0,), cells=["sgd-e2-fedavg"], dry_run=True, log=lines.append, **kw)
    assert lines == []


# ---------------------------------------------------------------- mutants of fb91484..97fac41 (table1 --dry-run)
def _rate_result(path, *, ips, stacked, width=0.03, device_type="cpu"):
    """A result file as _previous_rate reads it: the engine settings of a 0.03-wide run on the sample (2000
    training images) and its measured images_per_second."""
    path.write_text(json.dumps({"config": {"engine": {
        "width": width, "precision": "fp32", "path": "grouped", "cuda_graph": False, "device_type": device_type,
        "num_train": 2000, "stacked_runs": stacked}}, "summary": {"images_per_second": ips}}))


def test_the_dry_run_and_the_call_take_the_rate_of_results_stacked_as_the_call_stacks(tmp_path, monkeypatch, sample):
    """One run left and --stack 2: the call stacks min(2, 1) = 1, so the rate is that of the result of one run
    stacked (1000 images/s), not of the pair (3000) nor of another width (5000), and the dry run names only the
    file it took it from. 4 rounds of (2 x 2000 + 500 / 3) images at 1000 images/s: 16.7 s, printed 17. Mutants
    FR5 (stacked=stack: the pair's 3000 images/s) and PF1 (every readable result file named)."""
    _rate_result(tmp_path / "sgd-e2-fednova__seed0.json", ips=1000.0, stacked=1)
    _rate_result(tmp_path / "momentum-e2-fedavg__seed0.json", ips=3000.0, stacked=2)
    _rate_result(tmp_path / "momentum-e2-fednova__seed0.json", ips=5000.0, stacked=1, width=0.5)
    kw = dict(budget_seconds=1e6, seeds=(0,), cells=["sgd-e2-fedavg"], data=sample, width=0.03, rounds=4,
              device="cpu", stack=2, checkpoint_every=0)
    dry = []
    C.run_table1(tmp_path, dry_run=True, log=dry.append, **kw)
    assert dry == [f"estimate: 1000 images/s from earlier results with the same engine settings in {tmp_path}: "
                   "sgd-e2-fednova__seed0.json",
                   f"would run: sgd-e2-fedavg seed 0 -> {tmp_path / 'sgd-e2-fedavg__seed0.json'}  (~17 s at 1000 "
                   "images/s; 17 s in all up to here)"]
    calls, real = [], []
    monkeypatch.setattr(C, "train_runs", _scripted_train_runs(calls))
    C.run_table1(tmp_path, log=real.append, **kw)
    assert real[:2] == ["estimate: 1000 images/s from earlier results with the same engine settings",
                        "training 1 run(s) stacked (estimate 17 s): sgd-e2-fedavg__seed0"]


def test_a_numbered_cuda_device_takes_the_rate_of_results_on_cuda(tmp_path):
    """A result records the device type ('cuda'), not the device: a dry run (as a call) on cuda:1 takes the rate
    of a result trained on cuda:0 (mutant EK1: 'cuda:1' matched no result, and the run had no estimate)."""
    _rate_result(tmp_path / "sgd-e2-fednova__seed0.json", ips=1000.0, stacked=1, device_type="cuda")
    data = types.SimpleNamespace(train_labels=np.zeros(2000, dtype=np.int64), test_labels=np.zeros(500, dtype=np.int64))
    logs = []
    C.run_table1(tmp_path, budget_seconds=1e6, seeds=(0,), cells=["sgd-e2-fedavg"], data=data, width=0.03, rounds=4,
                 device="cuda:1", dry_run=True, log=logs.append)
    assert logs[0] == (f"estimate: 1000 images/s from earlier results with the same engine settings in {tmp_path}: "
                       "sgd-e2-fednova__seed0.json")
    assert C._engine_key(width=1.0, precision="fp32", path="grouped", cuda_graph=False, device="cuda:1",
                         num_train=2000, cudnn_bench=False, conv="cudnn")["device_type"] == "cuda"


@pytest.mark.parametrize("budget, expected", [
    # 3 rounds (12,300 s) do not fit in 12,299 s: the next call starts the first run (NG8, DR12)
    (12299, ["12299 s left in this call, under 3 rounds (~4100.0 s each) of sgd-e2-fedavg__seed0: it starts in the "
             "next call",
             "beyond the budget: sgd-e2-fedavg seed 0 -> {0}  (~16400 s at 1 images/s; 16400 s in all up to here; starts in a "
             "later call)",
             "beyond the budget: sgd-e2-fednova seed 0 -> {1}  (~16400 s at 1 images/s; 32800 s in all up to here; starts in a "
             "later call)"]),
    # 3 rounds fit, 4 (16,400 s) do not: the run starts and pauses, nothing else starts in this call (DR5)
    (12300, ["would run: sgd-e2-fedavg seed 0 -> {0}  (~16400 s at 1 images/s; 16400 s in all up to here; pauses at this "
             "call's budget for the next call)",
             "budget: the group pauses at this call's budget (12300 s left)",
             "beyond the budget: sgd-e2-fednova seed 0 -> {1}  (~16400 s at 1 images/s; 32800 s in all up to here; starts in a "
             "later call)"]),
    # exactly 4 rounds: the run ends at the budget without a pause, and no time is left (DR4)
    (16400, ["would run: sgd-e2-fedavg seed 0 -> {0}  (~16400 s at 1 images/s; 16400 s in all up to here)",
             "budget: no time left in this call; stopping",
             "beyond the budget: sgd-e2-fednova seed 0 -> {1}  (~16400 s at 1 images/s; 32800 s in all up to here; over "
             "--budget-seconds 16400 with the x1.15 safety margin)"]),
])
def test_the_dry_run_of_a_call_with_a_later_one(tmp_path, sample, budget, expected):
    """continue_later 10,000 s, 1 image/s, one run at a time, 4 rounds of 2 x 2000 + 300 / 3 = 4100 images: a run
    takes 16,400 s (x 1.15 = 18,860 s <= budget + 10,000 in each case). A run starts only with 3 of its rounds
    left in this call; it pauses if it does not end by this call's budget (16,400 s > 12,300 s), and then nothing
    more starts; the runs left start in the later call. Mutants NG8 (the later call's stop said 'over
    --budget-seconds'), DR12 (the run left to the later call listed as 'would run'), DR5 (runs planned after a
    pause), DR4 (a run ending exactly at the budget said to pause)."""
    data = types.SimpleNamespace(train_labels=sample.train_labels, test_labels=np.zeros(300, dtype=np.int64))
    logs = []
    C.run_table1(tmp_path, budget_seconds=budget, seeds=(0,), cells=["sgd-e2-fedavg", "sgd-e2-fednova"], data=data,
                 width=0.03, rounds=4, device="cpu", stack=1, images_per_second=1, continue_later=10000,
                 dry_run=True, log=logs.append)
    paths = (tmp_path / "sgd-e2-fedavg__seed0.json", tmp_path / "sgd-e2-fednova__seed0.json")
    assert logs == [f"estimate: 1 images/s from --images-per-second (hint; no earlier result with the same engine "
                    f"settings in {tmp_path})"] + [line.format(*paths) for line in expected]


def _paused(tmp_path, **extra):
    from fedlib.checkpoint import save_checkpoint

    save_checkpoint(tmp_path / ".ckpt__sgd-e2-fedavg__seed0.pkl", config={"runs": ["sgd-e2-fedavg__seed0"]},
                    round_done=3 if extra else 2, state={}, history=[], kind="table1", extra=extra)


def test_the_dry_run_resumes_a_paused_group_for_its_last_rounds_at_its_own_rate(tmp_path, sample):
    """A paused group (3 of 4 rounds in 30 s) is planned first, as the call resumes it: at its own rate, 10 s a
    round of W = 2 x 2000 + 500 / 3 images (3W / 30 = 417 images/s), its last round takes 10 s; 50 s of 60 are
    left and the next run, 1.15 x 4 x 10 = 46 s, fits. Mutants DR2 (the group's time for all 4 rounds: 40 s,
    leaving 20), DR3 (each run's line with all 4 rounds), DR9 (the paused group not looked for: no rate)."""
    _paused(tmp_path, seconds=30.0)
    logs = []
    out = C.run_table1(tmp_path, budget_seconds=60, seeds=(0,), cells=["sgd-e2-fedavg", "sgd-e2-fednova"],
                       data=sample, width=0.03, rounds=4, device="cpu", stack=1, dry_run=True, log=logs.append)
    assert logs == [f"would run: sgd-e2-fedavg seed 0 -> {tmp_path / 'sgd-e2-fedavg__seed0.json'}  (~10 s at 417 "
                    "images/s; 10 s in all up to here; resumed after round 3)",
                    f"would run: sgd-e2-fednova seed 0 -> {tmp_path / 'sgd-e2-fednova__seed0.json'}  (~40 s at 417 "
                    "images/s; 50 s in all up to here)"]
    assert out["not_started"] == [str(tmp_path / "sgd-e2-fedavg__seed0.json"),
                                  str(tmp_path / "sgd-e2-fednova__seed0.json")]


def test_the_dry_run_without_a_rate_lists_the_first_group_and_the_rest_once(tmp_path, sample):
    """No earlier result, no hint, and a paused group that recorded no seconds: no rate, so the paused group
    'would run' (measured while it trains) and the other run 'would run if time is left', each listed and
    returned once. Mutants DR11 (a resumed group without a rate estimated: TypeError), DR7 (the rest listed again
    as 'beyond the budget'), DR6 (the rest returned twice in not_started)."""
    _paused(tmp_path)
    logs = []
    out = C.run_table1(tmp_path, budget_seconds=60, seeds=(0,), cells=["sgd-e2-fedavg", "sgd-e2-fednova"],
                       data=sample, width=0.03, rounds=4, device="cpu", stack=1, dry_run=True, log=logs.append)
    first, second = tmp_path / "sgd-e2-fedavg__seed0.json", tmp_path / "sgd-e2-fednova__seed0.json"
    assert logs == [f"would run: sgd-e2-fedavg seed 0 -> {first}  (no estimate: no earlier result with the same engine "
                    "settings and no --images-per-second; measured while it trains)",
                    f"would run if time is left: sgd-e2-fednova seed 0 -> {second}  (sized with the rate the first "
                    "group measures)"]
    assert out["not_started"] == [str(first), str(second)]
