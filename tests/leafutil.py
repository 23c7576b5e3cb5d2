"""Shared by the LEAF tests: a LEAF JSON document built from per-user lists, and written to a file; a small LEAF
folder of generated data."""
from __future__ import annotations

import json


def leaf_doc(users, xs, ys, counts=None) -> dict:
    """``{"users", "num_samples", "user_data"}`` of ``users`` with rows ``xs[i]`` and labels ``ys[i]``;
    ``counts`` replaces the true ``num_samples`` (to test a file whose counts disagree)."""
    return {
        "users": users,
        "num_samples": [len(y) for y in ys] if counts is None else counts,
        "user_data": {u: {"x": x, "y": y} for u, x, y in zip(users, xs, ys)},
    }


def write_leaf(path, doc):
    """Write ``doc`` (a dict as JSON, or a string as it is) to ``path``, creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def three_client_leaf(tmp_path):
    """A 3-client LEAF folder (``train/`` and ``test/``) of generated Synthetic data at ``tmp_path / "leaf"``, 30, 40
    and 25 training samples; its path."""
    from fedlib.data import save_leaf, synthetic

    folder = tmp_path / "leaf"
    save_leaf(synthetic(num_clients=3, seed=0, num_samples=[30, 40, 25]), folder)
    return folder
