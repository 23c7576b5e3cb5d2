"""Server optimizers: plain, official server momentum (gmf), FedAdam — hand-computed rounds."""
from __future__ import annotations

import math

import numpy as np
import torch

from fedlib import server as SV

X0 = np.array([1.0, 2.0])
D1 = np.array([-0.2, 0.4])   # aggregated change x^{t+1} - x^t of round 1 (= -descent)
D2 = np.array([0.1, 0.1])


def test_plain_hand():
    opt = SV.plain(0.5)
    st = opt.init(X0)
    x1, st = opt.update(D1, st, X0)
    np.testing.assert_allclose(x1, [0.9, 2.2], atol=1e-15)
    x2, st = opt.update(D2, st, x1)
    np.testing.assert_allclose(x2, [0.95, 2.25], atol=1e-15)
    assert st.count == 2
    np.testing.assert_array_equal(X0, [1.0, 2.0])  # not in place
    # server_lr = 1 is eq. (4) itself
    x, _ = SV.plain().update(D1, SV.plain().init(X0), X0)
    np.testing.assert_array_equal(x, X0 + D1)


def test_momentum_hand_three_rounds():
    """Official gmf with descent D = -change: u ← βu + D/η, x ← x − η u (u = D/η in round 1)."""
    opt = SV.momentum(0.9)
    st = opt.init(X0)
    x1, st = opt.update(D1, st, X0, 0.1)
    np.testing.assert_allclose(st.buffer, [2.0, -4.0], atol=1e-14)       # -D1/0.1
    np.testing.assert_allclose(x1, [0.8, 2.4], atol=1e-14)               # = plain in round 1
    x2, st = opt.update(D2, st, x1, 0.1)
    np.testing.assert_allclose(st.buffer, [0.8, -4.6], atol=1e-14)       # 0.9*[2,-4] - [1,1]
    np.testing.assert_allclose(x2, [0.72, 2.86], atol=1e-14)             # x1 - 0.1*u2
    # round 3: no new change, the buffer alone keeps moving the model; lr decayed to 0.05
    x3, st = opt.update(np.zeros(2), st, x2, 0.05)
    np.testing.assert_allclose(st.buffer, [0.72, -4.14], atol=1e-14)
    np.testing.assert_allclose(x3, [0.684, 3.067], atol=1e-14)
    assert st.count == 3


def test_momentum_persists_and_beta_zero_is_plain():
    rng = np.random.default_rng(0)
    changes = [rng.standard_normal(3) for _ in range(4)]
    lrs = [0.1, 0.1, 0.05, 0.01]

    def run(opt):
        x = np.zeros(3)
        st = opt.init(x)
        xs = []
        for c, lr in zip(changes, lrs):
            x, st = opt.update(c, st, x, lr)
            xs.append(x)
        return xs

    plain = run(SV.plain())
    zero = run(SV.momentum(0.0))
    mom = run(SV.momentum(0.9))
    for a, b in zip(zero, plain):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=1e-15)
    np.testing.assert_allclose(mom[0], plain[0], rtol=1e-14)             # round 1: identical
    assert np.linalg.norm(mom[1] - plain[1]) > 0.1                        # round 2: the buffer acts


def test_momentum_torch_tree():
    opt = SV.momentum(0.5)
    x0 = {"w": torch.tensor([1.0, 2.0], dtype=torch.float64)}
    st = opt.init(x0)
    x1, st = opt.update({"w": torch.tensor([-0.2, 0.4], dtype=torch.float64)}, st, x0, 0.1)
    x2, st = opt.update({"w": torch.tensor([0.1, 0.1], dtype=torch.float64)}, st, x1, 0.1)
    # u1 = [2, -4]; u2 = 0.5 u1 - [1, 1] = [0, -3]; x2 = [0.8, 2.4] - 0.1 u2
    torch.testing.assert_close(x2["w"], torch.tensor([0.8, 2.7], dtype=torch.float64))


def test_adam_hand_two_steps():
    lr, b1, b2, eps = 0.1, 0.9, 0.99, 1e-3
    opt = SV.adam(lr, b1, b2, eps)
    st = opt.init(X0)
    x1, st = opt.update(D1, st, X0)
    # m1 = 0.1*D1 = [-0.02, 0.04]; v1 = 0.01*D1^2 = [4e-4, 1.6e-3]; sqrt(v1) = [0.02, 0.04]
    np.testing.assert_allclose(st.m, [-0.02, 0.04], atol=1e-16)
    np.testing.assert_allclose(st.v, [4e-4, 1.6e-3], atol=1e-16)
    exp1 = np.array([1.0 + 0.1 * (-0.02) / 0.021, 2.0 + 0.1 * 0.04 / 0.041])
    np.testing.assert_allclose(x1, exp1, rtol=0, atol=1e-14)
    x2, st = opt.update(D2, st, x1)
    # m2 = 0.9 m1 + 0.1 D2 = [-0.008, 0.046]; v2 = 0.99 v1 + 0.01 D2^2 = [4.96e-4, 1.684e-3]
    np.testing.assert_allclose(st.m, [-0.008, 0.046], atol=1e-16)
    np.testing.assert_allclose(st.v, [4.96e-4, 1.684e-3], atol=1e-16)
    exp2 = exp1 + 0.1 * np.array([-0.008 / (math.sqrt(4.96e-4) + 1e-3), 0.046 / (math.sqrt(1.684e-3) + 1e-3)])
    np.testing.assert_allclose(x2, exp2, rtol=0, atol=1e-14)
    assert st.count == 2
    # torch leaves work too
    xt, _ = opt.update(torch.as_tensor(D1), opt.init(torch.as_tensor(X0)), torch.as_tensor(X0))
    np.testing.assert_allclose(xt.numpy(), exp1, atol=1e-14)


def test_make_server_optimizer():
    assert SV.make_server_optimizer("plain").name == "plain"
    assert SV.make_server_optimizer("momentum", beta=0.5).name == "momentum"
    assert SV.make_server_optimizer("adam", server_lr=0.1).name == "adam"
    x, _ = SV.make_server_optimizer("plain", server_lr=2.0).update(D1, SV.PlainState(0), X0)
    np.testing.assert_allclose(x, X0 + 2 * D1)
    # states are NamedTuples (checkpointable)
    assert SV.momentum(0.9).init(X0)._fields == ("buffer", "count")
