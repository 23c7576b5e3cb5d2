"""The Table 1 runner (``python -m fedlib table1``): order, skipping, budget, one tiny real run."""
from __future__ import annotations

import pytest
import torch

from fedlib.cli import main
from fedlib.experiments import cifar10 as C
from fedlib.results import read_result


@pytest.fixture(autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_cells_and_hyper_parameters():
    assert len(C.CELLS) == 17 and len(set(C.CELL_IDS)) == 17
    assert C.CELL_IDS[:8] == ["sgd-e2-fedavg", "sgd-e2-fednova", "momentum-e2-fedavg", "momentum-e2-fednova",
                              "sgd-u25-fedavg", "sgd-u25-fednova", "momentum-u25-fedavg", "momentum-u25-fednova"]
    by = {c.id: c for c in C.CELLS}
    for c in C.CELLS:
        uses_momentum = c.solver.startswith("momentum") or c.server == "momentum"
        assert c.lr == (0.02 if uses_momentum else 0.05), c.id
        alg = c.make_algorithm()
        assert alg.solver.weight_decay == 1e-4
    assert by["prox-e2-fedprox"].mu == 0.005 and by["prox-u25-fednova"].mu == 0.001
    assert by["prox-e2-fednova"].tau_eff == "local_steps"
    assert by["hybrid-u25-fednova"].make_algorithm().solver.momentum == 0.9
    assert by["servermom-u25-fednova"].make_algorithm().solver.momentum == 0
    assert set(C.PAPER_VALUES) == set(C.CELL_IDS)
    assert all(v["status"] in ("confirmed", "unconfirmed") for v in C.PAPER_VALUES.values())


def test_dry_run_order_seed_first(tmp_path, capsys):
    assert main(["table1", "--results", str(tmp_path), "--budget-seconds", "100", "--dry-run"]) == 0
    lines = [l for l in capsys.readouterr().out.splitlines() if l.startswith("would run")]
    assert len(lines) == 3 * 17
    seeds = [int(l.split(" seed ")[1].split()[0]) for l in lines]
    assert seeds == [0] * 17 + [1] * 17 + [2] * 17
    assert lines[0].startswith("would run: sgd-e2-fedavg seed 0")
    assert not list(tmp_path.iterdir())


def test_bad_flags(tmp_path, capsys):
    assert main(["table1", "--results", str(tmp_path), "--budget-seconds", "1", "--seeds", "a,b", "--dry-run"]) == 2
    assert main(["table1", "--results", str(tmp_path), "--budget-seconds", "1", "--cells", "nope", "--dry-run"]) == 2
    assert "--cells" in capsys.readouterr().err


def test_runs_skips_and_respects_budget(tmp_path, capsys):
    args = ["table1", "--results", str(tmp_path), "--sample", "--width", "0.03", "--rounds", "1", "--device", "cpu",
            "--seeds", "0"]
    # one tiny real cell
    assert main([*args, "--budget-seconds", "120", "--cells", "sgd-u25-fednova"]) == 0
    f = tmp_path / "sgd-u25-fednova__seed0.json"
    res = read_result(f)
    assert res["config"]["cell_id"] == "sgd-u25-fednova" and res["config"]["seed"] == 0
    assert res["history"][0]["chi2"] == pytest.approx(0.0, abs=1e-12)
    assert res["summary"]["seconds_per_run_round"] > 0
    mtime = f.stat().st_mtime_ns
    # present -> skipped; a tiny budget starts nothing (the estimate comes from the result above)
    capsys.readouterr()
    assert main([*args, "--budget-seconds", "0.01", "--cells", "sgd-u25-fednova,sgd-u25-fedavg"]) == 0
    out = capsys.readouterr().out
    assert "present: sgd-u25-fednova__seed0.json" in out and "1 not started" in out
    assert f.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sgd-u25-fednova__seed0.json"]


def test_summary_marks_missing_cells(tmp_path):
    rows = C.table1_summary(C.load_table1_results(tmp_path / "none"))
    assert len(rows) == 17 and all(r["mean"] is None and r["n_seeds"] == 0 for r in rows)
    text = C.format_summary_rows(rows)
    assert all(r[3] == "not yet run" for r in text)


def test_group_past_the_budget_is_stopped_and_writes_nothing(tmp_path):
    data = C.load_data(sample=True)
    logs = []
    out = C.run_table1(tmp_path, budget_seconds=0.2, seeds=(0,), cells=["sgd-e2-fedavg", "sgd-e2-fednova"],
                       data=data, width=0.03, rounds=3, device="cpu", stack=2, log=logs.append)
    assert out["written"] == [] and len(out["aborted"]) == 2 and len(out["not_started"]) == 2
    assert any("nothing written" in line for line in logs)
    assert list(tmp_path.iterdir()) == []
