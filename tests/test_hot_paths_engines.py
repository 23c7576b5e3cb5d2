"""The engines' per-round fast paths refuse what the slow checks refuse,
and give the same numbers: a bad input reaching an entry point is still named."""

import numpy as np
import pytest

from fedlib.rng import generator, seed_sequence

# ---------------------------------------------------------------- seed_sequence: plain in-range ints skip check_int


@pytest.mark.parametrize("seed, keys, match", [
    (-1, (0,), "seed must be an integer >= 0"),
    (True, (0,), "seed must be an integer >= 0"),
    (1.0, (0,), "seed must be an integer >= 0"),
    (2 ** 128, (0,), "seed must be below 2\\*\\*128"),
    (0, (-1,), "key must be an integer >= 0"),
    (0, (True,), "key must be an integer >= 0"),
    (0, (np.bool_(True),), "key must be an integer >= 0"),
    (0, (2.0,), "key must be an integer >= 0"),
    (0, (2 ** 32,), "key must be below 2\\*\\*32"),
    (0, (1, 2 ** 32), "key must be below 2\\*\\*32"),
    (0, (np.int64(2) ** 32,), "key must be below 2\\*\\*32"),
    (0, ("1",), "key must be an integer >= 0"),
])
def test_seed_sequence_refuses_what_it_refused(seed, keys, match):
    with pytest.raises(ValueError, match=match):
        seed_sequence(seed, "batches", *keys)
    with pytest.raises(ValueError, match=match):
        generator(seed, "batches", *keys)


@pytest.mark.parametrize("purpose", ["", None, 3, b"batches"])
def test_seed_sequence_refuses_a_bad_purpose_every_time(purpose):
    for _ in range(2):  # the second call would find a remembered key, if one had been remembered
        with pytest.raises(ValueError, match="purpose must be a non-empty string"):
            seed_sequence(0, purpose, 1)


def test_seed_sequence_numpy_and_python_ints_give_the_same_stream():
    class Purpose(str):
        pass

    want = seed_sequence(7, "batches", 3, 5).generate_state(4).tolist()
    assert seed_sequence(np.int64(7), "batches", np.int32(3), np.uint8(5)).generate_state(4).tolist() == want
    assert seed_sequence(7, Purpose("batches"), 3, 5).generate_state(4).tolist() == want
    assert seed_sequence(2 ** 128 - 1, "x", 2 ** 32 - 1).spawn_key[1:] == (2 ** 32 - 1,)
    assert seed_sequence(7, "batches").spawn_key == seed_sequence(7, "batches").spawn_key
    draws = [generator(seed, "batches", 3, 5).integers(0, 2 ** 62) for seed in (7, np.int64(7))]
    assert draws[0] == draws[1]


# ---------------------------------------------------------------- run_replicas: round 0 checks sampling, p and q;
# later rounds draw without repeating them; coefficients and chi2 from the weights effective_weights checked

from fedlib.engines.quadratic import gradient_noise, run_replicas  # noqa: E402
from fedlib.problems.quadratic import QuadraticProblem  # noqa: E402
from fedlib.sampling import (Participation, _sample_clients_again, sample_clients,  # noqa: E402
                             sample_uniform_without_replacement, sample_with_replacement)
from fedlib.schedules import RandomLocalWork  # noqa: E402
from fedlib.solvers import momentum_sgd, sgd  # noqa: E402
from fedlib.theory import chi_square  # noqa: E402


def _quadratic(m=4):
    rng = np.random.default_rng(0)
    return QuadraticProblem(H=np.stack([np.eye(2) * (1 + i) for i in range(m)]), e=rng.normal(size=(m, 2)),
                            p=np.full(m, 1 / m))


@pytest.mark.parametrize("scheme, q", [("full", None), ("uniform", 2), ("with-replacement", 3)])
def test_sample_clients_again_draws_what_sample_clients_draws(scheme, q):
    p = np.array([0.1, 0.2, 0.3, 0.4])
    for t in range(6):
        want, got = sample_clients(scheme, p, q, 5, t), _sample_clients_again(scheme, p, q, 5, t)
        assert want.clients.tolist() == got.clients.tolist()
        assert want.weights.tobytes() == got.weights.tobytes()


@pytest.mark.parametrize("bad_p, match", [([0.5, 0.6], "must sum to 1"), ([1.5, -0.5], "non-negative"),
                                          ([np.nan, 1.0], "NaN or inf")])
def test_the_public_samplers_still_check_p(bad_p, match):
    rng = np.random.default_rng(0)
    for draw in (sample_with_replacement, sample_uniform_without_replacement):
        with pytest.raises(ValueError, match=match):
            draw(bad_p, 1, rng)


@pytest.mark.parametrize("kwargs, match", [
    (dict(sampling="uniform", clients_per_round=5), "cannot sample 5 clients without replacement"),
    (dict(sampling="uniform", clients_per_round=0), "clients_per_round must be an integer >= 1"),
    (dict(sampling="uniform", clients_per_round=True), "clients_per_round must be an integer >= 1"),
    (dict(sampling="with-replacement", clients_per_round=2.0), "clients_per_round must be an integer >= 1"),
    (dict(sampling="with-replacement"), "clients_per_round"),
    (dict(sampling="full", clients_per_round=2), "clients_per_round: full participation"),
    (dict(sampling="uniformly", clients_per_round=2), "sampling must be one of"),
])
def test_run_replicas_refuses_bad_participation_arguments(kwargs, match):
    prob = _quadratic()
    work = RandomLocalWork([1] * 4, [3] * 4)
    with pytest.raises(ValueError, match=match):
        run_replicas(prob, "fednova", [sgd(0.1)], work, 3, **kwargs)


def test_run_replicas_checks_a_sampler_in_every_round():
    prob = _quadratic()
    work = RandomLocalWork([1] * 4, [3] * 4)

    def sampler(t):
        return Participation([0, 2], [2.0, 2.0]) if t < 3 else Participation([0, 4], [2.0, 2.0])

    with pytest.raises(ValueError, match="sampling\\(3\\): clients must lie in 0..3"):
        run_replicas(prob, "fednova", [sgd(0.1)], work, 5, sampling=sampler)


class _BadLater:
    """Good local work for two rounds, then a bad draw (steps 0, or a solver number out of range)."""

    def __init__(self, steps=(1, 2, 3, 1), numbers=(0, 0, 0, 0)):
        self.steps, self.numbers = steps, numbers

    def draw(self, t):
        if t < 2:
            return np.array([1, 2, 3, 1]), np.zeros(4, dtype=np.int64)
        return np.array(self.steps), np.array(self.numbers)


@pytest.mark.parametrize("work, match", [
    # no client a step: a participant without one whichever the round samples (a client left out may take none)
    (_BadLater(steps=(0, 0, 0, 0)), "work.draw\\(2\\): steps must be >= 1 for every participant"),
    (_BadLater(numbers=(0, 2, 0, 0)), "work.draw\\(2\\): solver numbers must be in 0..1"),
    (_BadLater(steps=(1, 2.5, 3, 1)), "work.draw\\(2\\): steps must hold whole numbers"),
])
@pytest.mark.parametrize("sampling, q", [("full", None), ("uniform", 2), ("with-replacement", 2)])
def test_run_replicas_refuses_a_bad_later_work_draw(work, match, sampling, q):
    with pytest.raises(ValueError, match=match):
        run_replicas(_quadratic(), "fedavg", [sgd(0.1), momentum_sgd(0.1, 0.5)], work, 4, sampling=sampling,
                     clients_per_round=q)


@pytest.mark.parametrize("aggregation, tau_eff", [("fedavg", None), ("fednova", None), ("fednova", "selected_p"),
                                                  ("fednova", 2.5)])
@pytest.mark.parametrize("sampling, q", [("full", None), ("uniform", 2), ("with-replacement", 3)])
def test_run_replicas_chi2_is_chi_square_of_the_round(aggregation, tau_eff, sampling, q):
    prob = _quadratic()
    work = RandomLocalWork([1, 2, 1, 4], [3, 5, 2, 8], num_solvers=2, seed=1)
    run = run_replicas(prob, aggregation, [sgd(0.1), momentum_sgd(0.1, 0.5)], work, 6, sampling=sampling,
                       clients_per_round=q, tau_eff=tau_eff, seed=2)
    assert np.isfinite(run.chi2).all() and (run.chi2 >= 0).all()
    if aggregation == "fednova":  # w = omega: no inconsistency in any round
        assert run.chi2.tolist() == [0.0] * 6
    else:
        assert run.chi2.max() > 0


def test_run_replicas_refuses_selected_p_of_zero_weight_participants():
    # p has zero entries: a round whose participants all weigh 0 in p has sum_S p_i ||a_i||_1 = 0, refused
    # (a sampler of client 2, then of client 0 alone: omega 1, p_0 = 0)
    prob = QuadraticProblem(H=np.stack([np.eye(1)] * 3), e=np.zeros((3, 1)), p=np.array([0.0, 0.0, 1.0]))
    work = RandomLocalWork([1] * 3, [2] * 3)
    with pytest.raises(ValueError, match="tau_eff must be a finite number > 0"):
        run_replicas(prob, "fednova", [sgd(0.1)], work, 3,
                     sampling=lambda t: Participation([2] if t < 2 else [0], [1.0]), tau_eff="selected_p")


@pytest.mark.parametrize("sigma", [-1.0, np.nan, np.inf, True, "0.1", None])
def test_gradient_noise_and_run_replicas_still_check_sigma(sigma):
    with pytest.raises(ValueError, match="sigma must be a finite number >= 0"):
        gradient_noise(0, 1, 2, 3, 4, 1, sigma)
    with pytest.raises(ValueError, match="sigma must be a finite number >= 0"):
        run_replicas(_quadratic(), "fednova", [sgd(0.1)], RandomLocalWork([1] * 4, [2] * 4), 2, sigma=sigma)


def test_chi_square_still_checks_its_arguments():
    with pytest.raises(ValueError, match="must sum to 1"):
        chi_square([0.5, 0.6], [0.5, 0.5])
    with pytest.raises(ValueError, match="chi-square is infinite"):
        chi_square([0.5, 0.5], [1.0, 0.0])
    assert chi_square([0.25, 0.75], [0.5, 0.5]) == 0.25


from fedlib.rule import _effective_weights_checked, effective_weights  # noqa: E402


@pytest.mark.parametrize("algorithm, tau_eff", [("fedavg", None), ("fednova", None), ("fednova", 2.5),
                                                ("fednova", 1e-300)])
def test_effective_weights_checked_gives_effective_weights_bits(algorithm, tau_eff):
    rng = np.random.default_rng(3)
    for _ in range(20):
        w = rng.random(7) * (rng.random(7) < 0.8)
        w[0] += 0.1  # a positive sum
        a = rng.random(7) * 10 + 1e-3
        want = effective_weights(algorithm, w, a, tau_eff=tau_eff)
        got = _effective_weights_checked(algorithm, w, a, tau_eff)
        assert type(got[0]) is float and got[0] == want[0] and got[1].tobytes() == want[1].tobytes()
        assert got[1] is not w  # a copy, as effective_weights returns


@pytest.mark.parametrize("bad_a, match", [([1.0, 0.0], "a_norms must be > 0"), ([1.0, np.nan], "NaN or inf"),
                                          ([1.0, np.inf], "NaN or inf"), ([1.0, -2.0], "non-negative")])
def test_effective_weights_still_refuses_bad_a_norms(bad_a, match):
    with pytest.raises(ValueError, match=match):
        effective_weights("fednova", [0.5, 0.5], np.array(bad_a))


# ---------------------------------------------------------------- FederatedAlgorithm.apply: chi2 without a second
# check of the weights aggregate checked

from fedlib.algorithms import ClientUpdate, make_algorithm  # noqa: E402


def _apply(name, weights, a_norms=(1.0, 2.0, 4.0)):
    algo = make_algorithm(name, sgd(0.1))
    state = algo.init(np.zeros(2), num_clients=3)
    updates = [ClientUpdate(i, np.full(2, -0.1 * (i + 1)), a, int(a)) for i, a in enumerate(a_norms)]
    return algo.apply(state, Participation([0, 1, 2], weights), updates, 0.1, [0.25, 0.25, 0.5])


@pytest.mark.parametrize("name", ["fedavg", "fednova"])
@pytest.mark.parametrize("weights", [[0.25, 0.25, 0.5], [1.0, 0.0, 2.0], [3e-320, 1e-320, 1e-320]])
def test_apply_chi2_is_chi_square_of_the_normalised_weights(name, weights):
    _, diag = _apply(name, weights)
    omega = np.array(weights) / np.sum(weights)
    assert diag.chi2 == chi_square(omega, diag.weights / diag.weights.sum())


@pytest.mark.parametrize("weights", [[0.5, np.nan, 0.5], [0.5, -0.5, 1.0], [0.0, 0.0, 0.0], [0.5, np.inf, 0.5]])
def test_apply_still_refuses_bad_participation_weights(weights):
    """Refused by as_participation, naming participation.weights (aggregate's message named client_weights, an
    argument of its own that apply's caller never passed)."""
    with pytest.raises(ValueError, match=r"^participation: weights must be finite and >= 0 with a positive sum, got "):
        _apply("fednova", weights)


def test_apply_refuses_weights_whose_sum_overflows():
    with pytest.raises((ValueError, FloatingPointError)), np.errstate(all="ignore"):
        _apply("fedavg", [1e308, 1e308, 1e308])


# ---------------------------------------------------------------- theory._round_chi_square: the one chi2 of a round
# (apply, distributed_apply and run_replicas each spelled out its own guard before; review of the day's diff)

from fedlib.theory import _round_chi_square  # noqa: E402


def test_round_chi_square_gives_chi_square_bits_of_the_normalised_weights():
    rng = np.random.default_rng(5)
    for _ in range(50):
        omega = rng.random(6) * (rng.random(6) < 0.8)
        omega[0] += 0.1  # a positive sum
        w = omega * (rng.random(6) * 10 + 1e-3)  # FedAvg-like: zero exactly where omega is
        assert _round_chi_square(omega, w) == chi_square(omega / omega.sum(), w / w.sum())


def test_round_chi_square_still_refuses_an_overflowing_sum_and_an_infinite_divergence():
    with pytest.raises(ValueError, match="must sum to 1"), np.errstate(all="ignore"):
        _round_chi_square(np.array([1e308, 1e308]), np.array([0.5, 0.5]))
    with pytest.raises(ValueError, match="chi-square is infinite"):
        _round_chi_square(np.array([0.5, 0.5]), np.array([1.0, 0.0]))
