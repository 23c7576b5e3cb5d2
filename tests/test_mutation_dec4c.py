"""Mutation pass over the code written on 2026-12-04 (afternoon): tests for the mutants the
suite let through (see the commit messages for which mutant each test kills)."""
import errno
import pickle

import numpy as np
import pytest

from fedlib import checkpoint as ck


def _save(path):
    return ck.save_checkpoint(path, config={"a": 1}, round_done=2, state={"w": np.arange(3.0)},
                              history=[{"round": 1}], seed=0, kind="test")


def test_an_empty_checkpoint_file_is_reported_as_empty(tmp_path):
    path = tmp_path / "ck.pkl"
    path.write_bytes(b"")
    with pytest.raises(ck.CheckpointError) as info:
        ck.load_checkpoint(path)
    assert info.value.reason == "empty (0 bytes)"


def test_a_truncated_checkpoint_names_the_unpickling_error_not_empty(tmp_path):
    path = _save(tmp_path / "ck.pkl")
    path.write_bytes(path.read_bytes()[:20])  # no footer left: read unchecked, fails to unpickle
    with pytest.raises(ck.CheckpointError) as info:
        ck.load_checkpoint(path)
    assert info.value.reason.startswith("truncated, corrupt or not a fedlib checkpoint: it does not unpickle (")


def test_a_read_error_while_unpickling_is_unreadable_not_corrupt(tmp_path, monkeypatch):
    path = _save(tmp_path / "ck.pkl")
    assert ck.load_checkpoint(path, kind="test")["round"] == 2

    def failing_load(fh):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(ck.pickle, "load", failing_load)
    with pytest.raises(ck.CheckpointError) as info:
        ck.load_checkpoint(path)
    assert info.value.reason == "unreadable (Input/output error)"
