"""Checkpoint files on disk (fedlib.checkpoint): the streamed save writes the old format byte for byte,
files of the old code still load, a failed save keeps the previous file, save and load hold about one
copy of the file in memory, and a file rewritten while it is read is refused."""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import torch

from fedlib import checkpoint as ck

from torch_threads import one_torch_thread  # noqa: F401 (autouse fixture)


# --------------------------------------------------------------------------- the streamed save and its memory
ROOT = Path(__file__).resolve().parents[1]


class _Pair(NamedTuple):
    a: object
    b: object


def _state():
    """Tensors and arrays of every layout save_checkpoint meets: contiguous, transposed, sliced,
    bfloat16, 0-d, one object twice, arrays larger than pickle's 64 KiB frames and smaller ones."""
    g = torch.Generator().manual_seed(3)
    big = torch.randn(300, 200, generator=g, dtype=torch.float64)
    shared = torch.randn(7, generator=g)
    arr = np.arange(40000, dtype=np.float32).reshape(200, 200)
    return {"params": {"w": big, "wt": big.T, "slice": big[::3, 1:], "bf": torch.randn(50, generator=g).bfloat16(),
                       "s0": torch.tensor(2.5), "i": torch.arange(12).reshape(3, 4)},
            "momentum": _Pair(shared, shared), "np": [arr, arr, np.asfortranarray(arr), arr[:, ::2], np.float64(1.5),
                                                      np.array(3)], "none": None}


def _old_bytes(**kw) -> bytes:
    """What the code before the streaming save wrote: ``pickle.dumps`` of the document (the state
    copied by ``to_numpy_tree``), then the footer."""
    round_done, seed = kw["round_done"], kw["seed"]
    doc = {"format": ck.FORMAT, "kind": kw.get("kind", "run"), "config": dict(kw["config"]), "round": round_done,
           "state": ck.to_numpy_tree(kw["state"]), "history": [dict(h) for h in kw["history"]],
           "initial": dict(kw.get("initial") or {}),
           "rng": {"seed": seed, "next_round": round_done,
                   "note": "all draws come from (seed, purpose, round, client) streams; nothing else carries state"},
           "extra": dict(kw.get("extra") or {})}
    blob = pickle.dumps(doc, protocol=4)
    return blob + ck.FOOTER + hashlib.sha256(blob).hexdigest().encode("ascii")


def test_streamed_checkpoint_is_byte_identical_to_the_old_format(tmp_path):
    kw = dict(config={"lr": 0.02, "nested": {"a": [1, 2]}}, round_done=4, state=_state(),
              history=[{"round": 1, "loss": 0.5}], initial={"loss": 2.0}, seed=7, extra={"tau": [2, 3]})
    path = ck.save_checkpoint(tmp_path / "c.ckpt", **kw)
    assert path.read_bytes() == _old_bytes(**kw)
    doc = ck.load_checkpoint(path)
    want = ck.to_numpy_tree(kw["state"])
    np.testing.assert_array_equal(doc["state"]["params"]["wt"], want["params"]["wt"])
    np.testing.assert_array_equal(doc["state"]["np"][3], want["np"][3])
    assert doc["state"]["np"][2].flags.c_contiguous  # copied in C order, as to_numpy_tree did
    # the state is not modified, and the saved arrays do not share memory with it
    doc["state"]["params"]["w"][0, 0] = 99.0
    assert float(kw["state"]["params"]["w"][0, 0]) != 99.0


def test_files_of_the_old_code_with_and_without_footer_still_load(tmp_path):
    kw = dict(config={"x": 1}, round_done=2, state={"w": torch.ones(70000)}, history=[], seed=0)
    blob = _old_bytes(**kw)
    with_footer, without = tmp_path / "a.ckpt", tmp_path / "b.ckpt"
    with_footer.write_bytes(blob)
    without.write_bytes(blob[:-(len(ck.FOOTER) + 64)])
    for p in (with_footer, without):
        assert ck.load_checkpoint(p)["state"]["w"].sum() == 70000.0
    bad = bytearray(blob)
    bad[len(blob) // 2] ^= 1  # inside the array's bytes: still unpickles, into another number
    with_footer.write_bytes(bytes(bad))
    with pytest.raises(ck.CheckpointError, match="SHA-256 does not match") as info:
        ck.load_checkpoint(with_footer)
    assert info.value.reason.startswith("corrupt: its SHA-256 footer does not match")


def test_a_failing_save_leaves_the_previous_checkpoint_and_no_temporary_file(tmp_path):
    path = ck.save_checkpoint(tmp_path / "c.ckpt", config={}, round_done=1, state={"w": np.ones(3)}, history=[])
    before = path.read_bytes()
    # a local lambda does not pickle: AttributeError "Can't pickle local object" on Python 3.10 to 3.12,
    # AttributeError "Can't get local object" on 3.13, pickle.PicklingError on later versions
    with pytest.raises((AttributeError, pickle.PicklingError), match="[Cc]an't (pickle|get) local object"):
        ck.save_checkpoint(path, config={}, round_done=2, state={"w": np.ones(3)}, history=[],
                           extra={"f": lambda: 0})
    assert path.read_bytes() == before and sorted(os.listdir(tmp_path)) == ["c.ckpt"]


_PEAK_SCRIPT = textwrap.dedent("""
    import gc, json, os, sys
    import torch
    from fedlib.checkpoint import load_checkpoint, save_checkpoint

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def high_water_mark():
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

    def reset_peak():
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM back to the current resident size (Linux >= 4.0)

    def start():
        # the peak of this process's memory from here on: ru_maxrss is not that, since Linux folds the
        # peak of the image replaced by exec into it, and subprocess starts this script by vfork + exec
        # from the test process, so a pytest worker's own peak (GBs late in the suite) became "extra"
        # (10.8x in CI); VmHWM is the peak of this image only, and clear_refs resets it to now
        gc.collect()
        reset_peak()
        return rss()

    mode, path = sys.argv[1], sys.argv[2]
    try:
        reset_peak()
    except OSError as exc:
        print(json.dumps({"skip": f"cannot reset the peak resident size ({exc})"}))
        sys.exit(0)
    if mode == "save":
        g = torch.Generator().manual_seed(0)
        state = {"params": {f"w{k}": torch.randn(2 ** 21, generator=g) for k in range(12)}}  # 12 x 8 MiB
        before = start()
        save_checkpoint(path, config={"a": 1}, round_done=3, state=state, history=[], seed=0)
    else:
        before = start()
        doc = load_checkpoint(path)
    peak = high_water_mark()
    print(json.dumps({"extra": peak - before, "file": os.path.getsize(path)}))
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_save_and_load_hold_about_one_copy_of_the_file(tmp_path):
    """Peak resident memory over the resident memory before the call, in a fresh process
    (tracemalloc does not see torch's storage). The old code held about 3x the file while saving
    (a copy of the state, the pickle's bytes, and those bytes with the footer appended) and 2x
    while loading (the file's bytes, then the body sliced off for hashing, or the file and the
    arrays); now about 1x each: the pickler's bytes of the arrays while saving, the arrays while
    loading."""
    script, path = tmp_path / "peak.py", tmp_path / "peak.ckpt"
    script.write_text(_PEAK_SCRIPT)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    ratios = {}
    for mode in ("save", "load"):
        out = subprocess.run([sys.executable, str(script), mode, str(path)], capture_output=True, text=True,
                             env=env, cwd=ROOT, check=True)
        got = json.loads(out.stdout)
        if "skip" in got:
            pytest.skip(got["skip"])
        assert got["file"] > 96 * 2 ** 20
        ratios[mode] = got["extra"] / got["file"]
    assert ratios["save"] < 1.5 and ratios["load"] < 1.5, ratios


# --------------------------------------------------------------------------- load_checkpoint reads a file twice
def test_a_checkpoint_rewritten_in_place_between_hashing_and_unpickling_is_refused(tmp_path, monkeypatch):
    """load_checkpoint hashes the file, then unpickles it in a second pass. A file rewritten in place
    in between (``cp`` onto it, a copy tool) was unpickled unchecked: here a damaged copy of the same
    length, which load_checkpoint alone refuses, was returned as the state. The old code read the
    file once; now a file that changed between the passes is refused."""
    path = tmp_path / "c.ckpt"
    n = 300_000  # 2.4 MB: more than the reader's buffer, so the second pass reads the file again
    ck.save_checkpoint(path, config={}, round_done=1, state={"x": np.ones(n)}, history=[], seed=0)
    good = path.read_bytes()
    bad = good.replace(np.ones(n).tobytes(), np.full(n, 7.0).tobytes())
    assert len(bad) == len(good) and bad != good
    real = ck._check_footer

    def hashed_then_rewritten(who, p, fh, length):
        real(who, p, fh, length)  # the good bytes pass the footer check
        with open(path, "r+b") as w:  # rewritten in place, same inode and length
            w.write(bad)

    monkeypatch.setattr(ck, "_check_footer", hashed_then_rewritten)
    with pytest.raises(ck.CheckpointError) as info:
        ck.load_checkpoint(path)
    assert info.value.reason == "changed while it was read"
    monkeypatch.undo()
    with pytest.raises(ck.CheckpointError, match="SHA-256"):  # the damaged file on its own is refused
        ck.load_checkpoint(path)
    path.write_bytes(good)
    assert np.array_equal(ck.load_checkpoint(path)["state"]["x"], np.ones(n))


def test_a_checkpoint_replaced_by_an_atomic_save_while_it_is_read_still_loads(tmp_path, monkeypatch):
    """The other side of the check above: a save (atomic_write renames a new file over the path) while a
    load has the old file open leaves the open file's bytes as they were; it loads, the old state."""
    path = tmp_path / "c.ckpt"
    n = 300_000
    ck.save_checkpoint(path, config={}, round_done=1, state={"x": np.ones(n)}, history=[], seed=0)
    real = ck._check_footer

    def hashed_then_replaced(who, p, fh, length):
        real(who, p, fh, length)
        real_save(path, config={}, round_done=2, state={"x": np.full(n, 7.0)}, history=[], seed=0)

    real_save = ck.save_checkpoint
    monkeypatch.setattr(ck, "_check_footer", hashed_then_replaced)
    doc = ck.load_checkpoint(path)
    assert doc["round"] == 1 and np.array_equal(doc["state"]["x"], np.ones(n))
    monkeypatch.undo()
    assert ck.load_checkpoint(path)["round"] == 2
