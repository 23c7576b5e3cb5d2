"""Tests of the FedProx Synthetic(alpha, beta) generator (REFERENCE §3)."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.data.clients import FederatedDataset
from fedlib.data.synthetic import synthetic, synthetic_covariance_diagonal


@pytest.fixture(scope="module")
def ds11() -> FederatedDataset:
    return synthetic(alpha=1.0, beta=1.0, seed=0)


def _label_hist(y, c):
    return np.bincount(y, minlength=c) / len(y)


def test_shapes_types_and_sizes(ds11):
    assert isinstance(ds11, FederatedDataset)
    assert ds11.num_clients == 30 and ds11.num_features == 60 and ds11.num_classes == 10
    totals = np.array(ds11.meta["total_samples"])
    assert totals.min() >= 50
    for k in range(30):
        assert ds11.train_x[k].dtype == np.float64 and ds11.test_x[k].dtype == np.float64
        assert ds11.train_y[k].dtype == np.int64 and ds11.test_y[k].dtype == np.int64
        assert ds11.train_x[k].shape[1] == 60 and ds11.test_x[k].shape[1] == 60
        for y in (ds11.train_y[k], ds11.test_y[k]):
            assert y.min() >= 0 and y.max() < 10
        # the FedProx split: train = int(0.9 n) (floor), test = the rest
        n = len(ds11.train_y[k]) + len(ds11.test_y[k])
        assert n == totals[k]
        assert len(ds11.train_y[k]) == int(0.9 * n)
    assert ds11.name == "synthetic(1,1)"
    assert ds11.meta["users"][:2] == ["f_00000", "f_00001"]


def test_sizes_follow_lognormal_power_law(ds11):
    totals = np.array(ds11.meta["total_samples"])
    # lognormal(4, 2): heavy tail, median exp(4) ~ 55 above the floor of 50
    assert totals.max() > 5 * np.median(totals)
    assert len(set(totals.tolist())) > 20


def test_several_classes_and_non_iid(ds11):
    c = ds11.num_classes
    all_y = np.concatenate(list(ds11.train_y))
    assert (np.bincount(all_y, minlength=c) > 0).sum() >= 6
    hists = [_label_hist(y, c) for y in ds11.train_y]
    tv = [0.5 * np.abs(hists[i] - hists[j]).sum() for i in range(30) for j in range(i + 1, 30)]
    assert np.mean(tv) > 0.5  # clients have very different label mixes
    # most clients are dominated by a few labels
    assert np.median([h.max() for h in hists]) > 0.4


def test_iid_variant_has_similar_label_distributions():
    ds = synthetic(iid=True, num_clients=5, num_samples=4000, seed=3)
    assert ds.name == "synthetic_iid" and ds.meta["iid"] is True
    hists = [_label_hist(y, 10) for y in ds.train_y]
    tv = [0.5 * np.abs(hists[i] - hists[j]).sum() for i in range(5) for j in range(i + 1, 5)]
    assert max(tv) < 0.1
    # shared model: all clients' inputs are centred at zero
    assert np.abs(np.concatenate(list(ds.train_x)).mean(axis=0)).max() < 0.1


def test_reproducible_and_seed_dependent():
    a = synthetic(seed=7, num_clients=4)
    b = synthetic(seed=7, num_clients=4)
    c = synthetic(seed=8, num_clients=4)
    for k in range(4):
        np.testing.assert_array_equal(a.train_x[k], b.train_x[k])
        np.testing.assert_array_equal(a.train_y[k], b.train_y[k])
        np.testing.assert_array_equal(a.test_x[k], b.test_x[k])
        np.testing.assert_array_equal(a.test_y[k], b.test_y[k])
    assert a.meta["total_samples"] != c.meta["total_samples"]
    assert not np.array_equal(a.train_x[0][:10], c.train_x[0][:10])


def test_client_streams_independent_of_num_clients():
    small = synthetic(seed=2, num_clients=3, num_samples=80)
    large = synthetic(seed=2, num_clients=6, num_samples=80)
    for k in range(3):
        np.testing.assert_array_equal(small.train_x[k], large.train_x[k])


def test_does_not_touch_global_rng():
    np.random.seed(123)
    before = np.random.random()
    np.random.seed(123)
    synthetic(num_clients=2, seed=0)
    assert np.random.random() == before


def test_covariance_structure():
    n = 20000
    ds = synthetic(alpha=1.0, beta=1.0, num_clients=2, num_samples=n, seed=1, train_fraction=0.5)
    diag = synthetic_covariance_diagonal(60)
    np.testing.assert_allclose(diag, np.arange(1, 61) ** -1.2)
    x = np.concatenate([ds.train_x[1], ds.test_x[1]])
    var = x.var(axis=0, ddof=1)
    # within-client variance of feature j is j^-1.2 (relative s.e. ~ sqrt(2/n) = 1%)
    np.testing.assert_allclose(var, diag, rtol=0.08)
    slope = np.polyfit(np.log(np.arange(1, 61)), np.log(var), 1)[0]
    assert abs(slope + 1.2) < 0.05
    # features are independent given the client: off-diagonal correlations ~ 0
    corr = np.corrcoef(x, rowvar=False)
    assert np.abs(corr - np.eye(60)).max() < 0.05


def test_alpha_beta_spread():
    """beta controls the spread of client input means, alpha that of the model means."""
    wide = synthetic(alpha=5.0, beta=5.0, num_clients=30, num_samples=60, seed=4)
    narrow = synthetic(alpha=0.0, beta=0.0, num_clients=30, num_samples=60, seed=4)
    assert np.std(wide.meta["B"]) > 2.0 and np.std(wide.meta["u"]) > 2.0
    assert narrow.meta["B"] == [0.0] * 30 and narrow.meta["u"] == [0.0] * 30
    means_wide = np.std([x.mean() for x in wide.train_x])
    means_narrow = np.std([x.mean() for x in narrow.train_x])
    assert means_wide > 3 * means_narrow


def test_meta_records_parameters():
    ds = synthetic(alpha=0.5, beta=0.25, num_clients=3, dim=7, num_classes=4, seed=5, train_fraction=0.8)
    m = ds.meta
    assert (m["alpha"], m["beta"], m["num_clients"], m["dim"], m["num_classes"], m["seed"]) == (0.5, 0.25, 3, 7, 4, 5)
    assert m["train_fraction"] == 0.8 and m["iid"] is False
    assert ds.num_features == 7 and ds.num_classes == 4 and ds.name == "synthetic(0.5,0.25)"


def test_small_train_fraction_keeps_one_training_sample():
    ds = synthetic(num_clients=2, num_samples=[3, 60], train_fraction=0.01)
    assert [len(y) for y in ds.train_y] == [1, 1]
    assert [len(y) for y in ds.test_y] == [2, 59]


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"alpha": -0.1}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"beta": -1}, "beta"),
        ({"num_clients": 0}, "num_clients"),
        ({"num_clients": 2.5}, "num_clients"),
        ({"dim": 0}, "dim"),
        ({"num_classes": 1}, "num_classes"),
        ({"train_fraction": 0.0}, "train_fraction"),
        ({"train_fraction": 1.0}, "train_fraction"),
        ({"train_fraction": 1.5}, "train_fraction"),
        ({"seed": -1}, "seed"),
        ({"iid": "yes"}, "iid"),
        ({"num_samples": 0}, "num_samples"),
        ({"num_samples": [10, 10]}, "num_samples"),
        ({"num_samples": 5.0}, "num_samples"),
        ({"num_samples": "50"}, "num_samples"),
        ({"num_samples": True}, "num_samples"),
    ],
)
def test_bad_parameters(kwargs, name):
    with pytest.raises(ValueError, match=name):
        synthetic(**kwargs)


def test_alpha_leaves_the_data_unchanged_as_in_fedprox():
    """u_k ~ N(0, alpha^2) is added to every entry of W_k and b_k: every class score of a sample moves
    by u_k (sum_j x_j + 1), so argmax, hence every label, is the same for any alpha (and x does not
    involve alpha). The module docstring says so; beta does change the data."""
    base = synthetic(alpha=0.0, beta=1.0, num_clients=4, seed=3)
    for alpha in (0.5, 5.0):
        other = synthetic(alpha=alpha, beta=1.0, num_clients=4, seed=3)
        for k in range(4):
            np.testing.assert_array_equal(other.train_x[k], base.train_x[k])
            np.testing.assert_array_equal(other.train_y[k], base.train_y[k])
            np.testing.assert_array_equal(other.test_y[k], base.test_y[k])
    changed = synthetic(alpha=0.0, beta=3.0, num_clients=4, seed=3)
    assert not np.array_equal(changed.train_x[0], base.train_x[0])
