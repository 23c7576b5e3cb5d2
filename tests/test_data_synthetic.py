"""Tests of the FedProx Synthetic(alpha, beta) generator (REFERENCE §3), with alpha and beta that overflow and
ALPHA_MAX, and num_samples as a 0-d array."""
from __future__ import annotations

import math

import numpy as np
import pytest

from fedlib.data.clients import FederatedDataset
from fedlib.data.synthetic import synthetic, synthetic_covariance_diagonal
from fedlib.rng import generator


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
        # were numpy's OverflowError 'Python int too large to convert to C long', naming no argument
        ({"num_samples": 2 ** 63}, "^num_samples must be below 2\\*\\*63"),
        ({"num_clients": 2, "num_samples": [10, 10 ** 30]}, "^num_samples must be below 2\\*\\*63"),
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


# ---------------------------------------------------------------------- Synthetic(alpha, beta) that overflows float64
def _tiny_synthetic(alpha, beta):
    """One client, d = 1, C = 2, n = 2, seed 19: the draws of stream (19, "data", 0) are, in order,
    Z0 (u = alpha Z0), Z1 (B = beta Z1), Z2, Z3 (W), Z4, Z5 (b), Z6 (v), Z7, Z8 (x; Sigma = 1)."""
    from fedlib.data.synthetic import synthetic

    return synthetic(alpha, beta, num_clients=1, dim=1, num_classes=2, seed=19, num_samples=2)


def test_synthetic_refuses_alpha_whose_class_scores_overflow():
    r"""With beta = 0, x_i = Z6 + Z_{7+i} and the scores are u (x_i + 1) up to O(1) terms: they overflow
    float64 once alpha Z0 (max_i x_i + 1) passes the largest double (about 5.5e307). Before, alpha just
    above that limit gave numpy overflow warnings and labels that were the argmax of inf. Now alpha above
    ALPHA_MAX = 2^26 (test_synthetic_alpha_bound_is_float32_resolution_of_the_class_part) is refused before
    any draw, on both sides of the overflow limit, without a warning."""
    z = generator(19, "data", 0).standard_normal(9)
    x = z[6] + z[7:9]
    assert z[0] > 1 and np.all(x > 0)
    limit = np.finfo(np.float64).max / (z[0] * (x.max() + 1.0))  # about 5.5e307
    with np.errstate(all="raise"):  # no overflow warning either
        for alpha in (limit * (1 - 1e-9), limit * (1 + 1e-9)):
            with pytest.raises(ValueError, match=r"^alpha must be at most ALPHA_MAX = 2\*\*26"):
                _tiny_synthetic(alpha, 0.0)


def test_synthetic_refuses_beta_whose_inputs_overflow():
    """x_i = beta Z1 + Z6 + Z_{7+i} with Z1 = 1.188: inf for beta = 1.6e308 (1.9e308 > the largest
    double). Before, FederatedDataset refused it without naming beta ('client 0 train x contains
    NaN or inf'), after numpy's overflow warnings."""
    z1 = generator(19, "data", 0).standard_normal(2)[1]
    assert z1 > np.finfo(np.float64).max / 1.6e308
    with np.errstate(all="raise"):
        with pytest.raises(ValueError, match=r"^beta=1\.6e\+308 is too large: client 0's inputs x .* overflow "
                                             r"float64 \(inf\); choose a smaller beta"):
            _tiny_synthetic(0.0, 1.6e308)



def test_synthetic_refuses_beta_whose_class_scores_overflow_and_says_nothing_else(capfd):
    """x_i = beta Z1 + Z6 + Z_{7+i} = 1.19e308 for beta = 1e308 is finite, but its score against W = (Z2, Z3) =
    (0.55, -1.64) is -1.94e308, beyond float64 (numpy's matmul overflows: the errstate around the draws set to
    "raise" turns this call into FloatingPointError). The ValueError naming alpha and beta alone: no RuntimeWarning
    (as errors here) and nothing printed. Before this test no test reached that overflow (beta = 1.6e308 overflows in
    Python's float product, silently): errstate(over="print", invalid="print") there (mutant EP12 of the
    negative-assertion pass: numpy's 'Warning: overflow encountered in matmul' on the C stderr) passed the suite."""
    import warnings

    z = generator(19, "data", 0).standard_normal(4)
    x = 1e308 * float(z[1])  # Python floats: inf without a warning
    assert math.isfinite(x) and x * float(z[3]) == -math.inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError) as info:
            _tiny_synthetic(0.0, 1e308)
    assert str(info.value) == ("alpha=0.0, beta=1e+308 are too large: client 0's class scores x^T W_k + b_k (W_k, b_k ~ "
                               "N(u_k, 1), u_k ~ N(0, alpha^2)) overflow float64 (inf or NaN), so its labels would be "
                               "the argmax of inf; choose a smaller alpha or beta")
    assert capfd.readouterr() == ("", "")

# --------------------------------------------------------------------------- what alpha does: ALPHA_MAX
def test_synthetic_alpha_bound_is_float32_resolution_of_the_class_part():
    """8 alpha 2^-53 <= 2^-24: next to a shift |u_k| <= 8 alpha the N(0, 1) class-specific part of an entry
    u_k + eps of W_k keeps float32's 24 bits; the bound is 2^26, exactly."""
    from fedlib.data.synthetic import ALPHA_MAX
    assert ALPHA_MAX == 67108864.0
    assert 8 * ALPHA_MAX * 2.0 ** -53 == 2.0 ** -24


def test_synthetic_refuses_alpha_just_above_the_bound_and_takes_it_just_below():
    """Before: compared with alpha = 0, 0.04 % of the labels differed at alpha = 1e12, 6 % at 1e14, 83 % at
    1e16 (the shift rounds away the class differences); alpha cancels in the argmax, so every label must be
    alpha = 0's. At the bound the labels are still alpha = 0's; just above it alpha is refused by name."""
    from fedlib.data.synthetic import ALPHA_MAX, synthetic
    base = synthetic(0.0, 1.0, num_clients=4, seed=3)
    at = synthetic(ALPHA_MAX, 1.0, num_clients=4, seed=3)
    for a, b in zip(base.train_y + base.test_y, at.train_y + at.test_y):
        np.testing.assert_array_equal(a, b)
    above = float(np.nextafter(ALPHA_MAX, np.inf))
    with pytest.raises(ValueError, match=r"^alpha must be at most ALPHA_MAX = 2\*\*26 = 67108864, got 67108864\.00"):
        synthetic(above, 1.0, num_clients=4, seed=3)
    with pytest.raises(ValueError, match=r"^alpha must be at most ALPHA_MAX .* got 1000000000000\.0: the shift u_k"):
        synthetic(1e12, 1.0, num_clients=4, seed=3)
    assert synthetic(1e12, 1.0, num_clients=2, seed=3, iid=True).num_clients == 2  # iid: alpha is unused


def test_synthetic_docstring_no_longer_claims_alpha_has_no_effect_at_any_size():
    import importlib
    mod = importlib.import_module("fedlib.data.synthetic")  # the package's `synthetic` is the function
    doc = " ".join(mod.__doc__.split())
    assert "has no effect on the data" not in doc
    assert "In exact arithmetic :math:`\\alpha` has no effect on the labels" in doc
    assert "refuses :math:`\\alpha >` :data:`ALPHA_MAX`" in doc


def test_synthetic_accepts_a_zero_dimensional_num_samples_array():
    # np.array(60) was a bare "TypeError: iteration over a 0-d array"
    ds = synthetic(num_clients=2, num_samples=np.array(60))
    assert ds.meta["total_samples"] == [60, 60]
    with pytest.raises(ValueError, match="num_samples"):
        synthetic(num_clients=2, num_samples=np.array(60.5))


def test_iid_must_be_true_or_false():
    """iid goes through _validate.check_flag, with the message of every other flag ('iid must be True or False, got
    'no''); its own copy said 'iid must be a bool'. numpy's booleans give the same data as Python's."""
    import numpy as np

    from fedlib.data import synthetic

    with pytest.raises(ValueError, match=r"^iid must be True or False, got 'no'"):
        synthetic(num_clients=2, dim=3, num_classes=2, num_samples=[4, 4], seed=0, iid="no")
    a = synthetic(num_clients=2, dim=3, num_classes=2, num_samples=[4, 4], seed=0, iid=np.True_)
    b = synthetic(num_clients=2, dim=3, num_classes=2, num_samples=[4, 4], seed=0, iid=True)
    assert all(np.array_equal(x, y) for x, y in zip(a.train_x + a.train_y, b.train_x + b.train_y))
