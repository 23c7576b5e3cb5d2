"""Audit of fedlib.data.leaf, fedlib.experiments.surrogate and fedlib.experiments.acceleration:
one test per problem found (each failed before its fix)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fedlib.data import synthetic
from fedlib.data.leaf import load_leaf
from fedlib.experiments import acceleration as A
from fedlib.experiments import surrogate as S
from fedlib.problems import random_quadratic
from fedlib.problems.logistic import LogisticProblem
from fedlib.schedules import FixedSteps


# ----------------------------------------------------------------------------- leaf

@pytest.mark.parametrize("text,match", [
    # user 'a' written twice in user_data: the first copy's samples were lost (num_samples agreed with the last)
    ('{"users": ["a", "b"], "num_samples": [2, 1], "user_data": {'
     '"a": {"x": [[1.0, 2.0], [3.0, 4.0]], "y": [0, 1]}, '
     '"b": {"x": [[5.0, 6.0]], "y": [1]}, '
     '"a": {"x": [[7.0, 8.0], [9.0, 10.0]], "y": [1, 0]}}}', r"train\.json: key 'a' appears twice"),
    # a key written twice inside one user's entry
    ('{"users": ["a"], "num_samples": [1], "user_data": {'
     '"a": {"x": [[1.0, 2.0]], "y": [0], "x": [[3.0, 4.0]]}}}', "key 'x' appears twice"),
])
def test_leaf_key_written_twice_is_refused(tmp_path, text, match):
    """JSON keeps only the last of two equal keys, so a key written twice lost its first copy silently."""
    f = tmp_path / "train.json"
    f.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_leaf(f)


def test_leaf_without_duplicates_still_reads(tmp_path):
    text = ('{"users": ["a"], "num_samples": [2], "user_data": {'
            '"a": {"x": [[1.0, 2.0], [3.0, 4.0]], "y": [0, 1]}}}')
    f = tmp_path / "train.json"
    f.write_text(text)
    ds = load_leaf(f)
    assert ds.train_x[0].tolist() == [[1.0, 2.0], [3.0, 4.0]] and ds.train_y[0].tolist() == [0, 1]


# ----------------------------------------------------------------------------- acceleration

@pytest.mark.parametrize("reference", [[0.0], 0.0, [[0.0, 0.0]], [np.nan, 0.0]])
def test_iterate_round_maps_checks_reference_as_run_variant_does(reference):
    """A reference of the wrong shape broadcast silently in the closed-form iteration (distances to
    (0, 0) for [0.0]) while run_variant refused it."""
    prob = random_quadratic(3, 2, seed=0)
    with pytest.raises(ValueError, match="reference"):
        A.iterate_round_maps(prob, "fedavg", 0.05, FixedSteps([1, 3, 6]), 3, reference=reference)
    with pytest.raises(ValueError, match="reference"):
        A.run_variant(prob, "fedavg", 0.05, FixedSteps([1, 3, 6]), 3, reference=reference)


def test_closed_form_start_must_be_finite():
    """x0 with NaN gave a NaN distance series from the closed form (run_variant refused it)."""
    prob = random_quadratic(3, 2, seed=0)
    with pytest.raises(ValueError, match="x0 contains NaN"):
        A.iterate_round_maps(prob, "fedavg", 0.05, FixedSteps([1, 3, 6]), 3, x0=[np.nan, 0.0])
    with pytest.raises(ValueError, match="x0 contains NaN"):
        A.initial_state(prob, "scaffold", [np.inf, 0.0])
    assert A.initial_state(prob, "fednova-servermom", [1, 2]).tolist() == [1.0, 2.0, 1.0, 2.0]


@pytest.fixture(scope="module")
def small_logistic():
    return LogisticProblem(synthetic(1.0, 1.0, num_clients=3, dim=3, num_classes=3, seed=0,
                                     num_samples=[20, 30, 25]), l2=0.1)


@pytest.mark.parametrize("seeds,match", [([0.7], "seeds must be an integer"), ([True], "seeds must be an integer"),
                                         ([], "at least one run seed")])
def test_logistic_losses_seeds_are_integers(small_logistic, seeds, match):
    """seed 0.7 was truncated to seed 0 (the same run, silently); no seeds gave an array of shape (0,)
    instead of (len(seeds), rounds + 1)."""
    with pytest.raises(ValueError, match=match):
        A.logistic_losses(small_logistic, "fedavg", 0.05, FixedSteps([2, 2, 2]), seeds, 2, batch_size=5)


def test_perturbation_growth_seed_is_an_integer(small_logistic):
    """seed=1.9 ran seed 1 silently."""
    opt = A.logistic_optimum(small_logistic)
    with pytest.raises(ValueError, match="seed must be an integer"):
        A.perturbation_growth(small_logistic, opt, "scaffold", 0.1, [2, 3, 1], 4, seed=1.9)
    run = A.perturbation_growth(small_logistic, opt, "scaffold", 0.1, [2, 3, 1], 4, seed=np.int64(1))
    assert run.distances.shape == (5,)


# ----------------------------------------------------------------------------- surrogate

def test_unit_scaled_names_all_zero_features():
    """All-zero features gave a divide-by-zero warning and then 'client 0 train x contains NaN or inf'."""
    ds = synthetic(num_clients=2, dim=3, num_classes=3, seed=0, num_samples=[10, 20])
    zero = dataclasses.replace(ds, train_x=[np.zeros_like(x) for x in ds.train_x])
    with pytest.raises(ValueError, match="every feature is 0"):
        S.unit_scaled(zero)
    huge = dataclasses.replace(ds, train_x=[x * 1e200 for x in ds.train_x])
    with pytest.raises(ValueError, match="too large"):
        S.unit_scaled(huge)


@pytest.mark.parametrize("drop", [("summary", "nearest_one"), ("summary", "radius_bounds"), ("config", "rows")])
def test_read_vr_count_names_a_missing_field(tmp_path, drop):
    """A record without one of its fields raised a KeyError (the docstring promises ValueError)."""
    import json
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "data" / "results" / "linearised" / "scaffold-count.json"
    assert A.read_vr_count(src.parent, "scaffold")["kind"] == "linearised-count"  # the stored one reads
    record = json.loads(src.read_text())
    del record[drop[0]][drop[1]]
    (tmp_path / "scaffold-count.json").write_text(json.dumps(record))
    with pytest.raises(ValueError, match="a field is missing"):
        A.read_vr_count(tmp_path, "scaffold")


def test_read_vr_spectrum_names_a_missing_field(tmp_path):
    import json
    from pathlib import Path

    src = Path(__file__).resolve().parents[1] / "data" / "results" / "linearised" / "scaffold-count.json"
    record = json.loads(src.read_text())
    record["kind"] = "linearised-spectrum"
    del record["config"]["rows"]
    (tmp_path / "scaffold.json").write_text(json.dumps(record))
    np.savez(tmp_path / "scaffold.npz", eigenvalues=np.array([0.5 + 0.1j, 0.5 - 0.1j]))
    with pytest.raises(ValueError, match="no config.rows"):
        A.read_vr_spectrum(tmp_path, "scaffold")
