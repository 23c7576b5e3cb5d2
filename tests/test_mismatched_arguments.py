"""Arguments that must agree in a size (the clients of ``H``, ``e``, ``p`` and ``local_steps``, a weight per buffer, a
label per row...) and do not: the ``ValueError`` names both arguments and their sizes, or at least the one that was
changed, whichever of them is the wrong one. Before, a check measured the second argument against the first and named
the second alone, so a mistake in the first was blamed on the second ("e must have shape (3, 2), got (2, 2)" for an
``H`` with a client too many, where ``e`` was right).

Each case of the table breaks one argument of a valid call (one client too few or too many, a wrong trailing
dimension) and gives the expected message as a regex. Each case fails on the code before its fix."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fedlib import theory
from fedlib.algorithms import make_algorithm
from fedlib.anatomy import relative_error
from fedlib.data import FederatedDataset, synthetic
from fedlib.engines.stacked import RunSpec
from fedlib.experiments.custom import TensorEngine, train_clients
from fedlib.optim import average_buffers
from fedlib.problems import QuadraticProblem, random_quadratic
from fedlib.problems.logistic import LogisticRegression
from fedlib.rule import aggregate, fednova_weights
from fedlib.sampling import expected_server_weights
from fedlib.schedules import FixedSteps
from fedlib.solvers import sgd
from fedlib.tradeoff import fedprox_curves
from fedlib.tree import tree_add, tree_axpy, tree_sub, tree_vdot
from fedlib.variance import control_variates

# a valid two-client problem in d = 2, and the same arrays with a client too many / too few or a wrong d
H2 = np.stack([np.eye(2), 2 * np.eye(2)])
E2 = np.array([[1.0, 0.0], [0.0, 1.0]])
P2 = np.array([0.5, 0.5])
H3, H1, H_D3 = np.stack([np.eye(2)] * 3), H2[:1], np.stack([np.eye(3), 2 * np.eye(3)])
E3, E1, E_D3 = np.vstack([E2, [[1.0, 1.0]]]), E2[:1], np.hstack([E2, np.zeros((2, 1))])
P3, P1 = np.full(3, 1 / 3), np.array([1.0])
_BUFS = [torch.tensor([0.0, 1.0]), torch.tensor(1)]  # one client's buffers: a running mean, a batch count


_LR = LogisticRegression(num_features=2, num_classes=3)


def _stacked_params(q):
    return {"W": np.zeros((q, 2, 3)), "b": np.zeros((q, 3))}


_CX = [torch.zeros(3, 2), torch.zeros(2, 2)]
_CY = [torch.zeros(3, dtype=torch.long), torch.zeros(2, dtype=torch.long)]


def _train(client_x, client_y):
    return train_clients(torch.nn.Linear(2, 3), client_x, client_y, rounds=1, epochs=1, batch_size=2,
                         algorithms=("fedavg",))


def _tensor_engine(features, labels):
    run = RunSpec(make_algorithm("fedavg", sgd(0.1)), clients=[np.arange(3), np.arange(3, 5)],
                  schedule=FixedSteps([1, 1]), seed=0)
    return TensorEngine(torch.nn.Linear(2, 3), features, labels, [run], rounds=1, batch_size=2)


def _dataset(**change):
    """A valid two-client data set (3 and 2 training rows, 1 test row each, 2 features) with ``change`` applied."""
    parts = dict(train_x=[np.zeros((3, 2)), np.zeros((2, 2))], train_y=[np.zeros(3, int), np.zeros(2, int)],
                 test_x=[np.zeros((1, 2)), np.zeros((1, 2))], test_y=[np.zeros(1, int), np.zeros(1, int)])
    return FederatedDataset(**{**parts, **change}, num_classes=2, name="toy")

CASES = [
    # ---- H defines m and d; e, p (w) and local_steps are measured against it
    # was 'e must have shape (3, 2), got (2, 2)' (and '(1, 2)', '(2, 3)'): e blamed for H's extra client or d
    (lambda: theory.quadratic_kappa2(H3, E2, P2, 2.0), r"^e has 2 clients \(rows\) but H has 3$"),
    (lambda: theory.quadratic_global_optimum(H1, E2, P2), r"^e has 2 clients \(rows\) but H has 1$"),
    (lambda: theory.quadratic_round_map(H_D3, E2, P2, [1, 2], 0.1, "fedavg"), r"^e has 2 columns \(d\) but H has 3$"),
    (lambda: theory.quadratic_fixed_point(H2, E3, P2, [1, 2], 0.1, "fedavg"), r"^e has 3 clients \(rows\) but H has 2$"),
    (lambda: theory.quadratic_vr_round_map(H2, E1, P2, [1, 2], 0.1, "scaffold"),
     r"^e has 1 client \(rows\) but H has 2$"),
    (lambda: theory.quadratic_vr_fixed_point(H2, E_D3, P2, [1, 2], 0.1, "scaffold"),
     r"^e has 3 columns \(d\) but H has 2$"),
    (lambda: QuadraticProblem(H3, E2, P2), r"^e has 2 clients \(rows\) but H has 3$"),
    # was 'w must have 3 entries (one per client), got 2' / 'p must have 1 entries ...': w, p blamed for H's clients
    (lambda: theory.quadratic_min_beta2(H3, P2), r"^w has 2 clients but H has 3$"),
    (lambda: theory.quadratic_vr_round_operator(H1, P2, [1, 2], 0.1, "scaffold"), r"^p has 2 clients but H has 1$"),
    (lambda: theory.quadratic_vr_shift_invert(H3, P2, [1, 2], 0.1, "scaffold", 0.3), r"^p has 2 clients but H has 3$"),
    (lambda: theory.quadratic_vr_eigenvalues_near(H3, P2, [1, 2], 0.1, "scaffold", 0.3, k=1),
     r"^p has 2 clients but H has 3$"),
    (lambda: theory.quadratic_vr_count_outside(H3, P2, [1, 2], 0.1, "scaffold", 0.5), r"^p has 2 clients but H has 3$"),
    (lambda: theory.quadratic_global_optimum(H2, E2, P3), r"^p has 3 clients but H has 2$"),
    (lambda: QuadraticProblem(H2, E2, P1), r"^p has 1 client but H has 2$"),
    (lambda: theory.quadratic_round_map(H2, E2, P2, [1, 2, 3], 0.1, "fedavg"),
     r"^local_steps has 3 clients but H has 2$"),
    (lambda: theory.quadratic_vr_round_operator(H2, P2, [1], 0.1, "scaffold"), r"^local_steps has 1 client but H has 2$"),
    # was 'p must have 3 entries (one per client), got 2' (QuadraticProblem's check; now it would name H, built here)
    (lambda: random_quadratic(3, 2, p=P2), r"^p has 2 entries but num_clients is 3$"),
    (lambda: random_quadratic(2, 2, p=P1), r"^p has 1 entry but num_clients is 2$"),
    # ---- the other pairs of theory: the first argument is the reference, the message names both
    # was 'w must have 3 entries (one per client), got 2': w blamed for p's extra client
    (lambda: theory.chi_square(P3, P2), r"^w has 2 clients but p has 3$"),
    (lambda: theory.chi_square(P2, P1), r"^w has 1 client but p has 2$"),
    # was 'local_steps must have 3 entries (one per client), got 2' (also through tradeoff.fedprox_curves)
    (lambda: theory.fedprox_weights(P3, [1, 2], 0.5), r"^local_steps has 2 clients but p has 3$"),
    (lambda: theory.fedprox_theorem1_constants(P1, [1, 2], 0.5), r"^local_steps has 2 clients but p has 1$"),
    (lambda: fedprox_curves(P3, [1, 2], [0.0, 0.5]), r"^local_steps has 2 clients but p has 3$"),
    (lambda: theory.fedprox_weights(P2, [1, 2, 3], 0.5), r"^local_steps has 3 clients but p has 2$"),
    # was 'p must have 3 entries (one per client), got 2': p blamed for e's extra row
    (lambda: theory.lemma1_small_lr_limit(E3, P2, [1, 2]), r"^p has 2 clients but e has 3$"),
    (lambda: theory.lemma1_fixed_point(E1, P2, [1, 2], 0.1), r"^p has 2 clients but e has 1$"),
    (lambda: theory.lemma1_small_lr_limit(E2, P2, [1, 2, 3]), r"^local_steps has 3 clients but e has 2$"),
    # was 'b must have shape (3,), got (2,)': b blamed for M's size
    (lambda: theory.server_momentum_round_map(0.5 * np.eye(3), [1.0, 1.0], 0.5), r"^b has 2 entries but M has 3 rows$"),
    (lambda: theory.server_momentum_round_map(0.5 * np.eye(2), [1.0], 0.5), r"^b has 1 entry but M has 2 rows$"),
    # ---- sampling: was 'a_norms must have shape (3,), got (2,)' for a p of 3 clients
    (lambda: expected_server_weights("with-replacement", P3, [1.0, 3.0], 2), r"^a_norms has 2 clients but p has 3$"),
    (lambda: expected_server_weights("uniform", P2, [1.0], 2), r"^a_norms has 1 client but p has 2$"),
    # ---- variance: was 'p must have 3 entries (one per client), got 2' for client variates of 3 rows
    (lambda: control_variates(np.ones((3, 1)), P2), r"^p has 2 entries but client has 3 rows$"),
    (lambda: control_variates(np.ones((2, 1)), P1), r"^p has 1 entry but client has 2 rows$"),
    # ---- anatomy: was 'shapes differ: (3,) vs (2,)', naming neither argument
    (lambda: relative_error(np.ones(3), np.ones(2)), r"^x has shape \(3,\) but reference has \(2,\)$"),
    (lambda: relative_error(np.ones(2), np.ones((2, 1))), r"^x has shape \(2,\) but reference has \(2, 1\)$"),
    # ---- tree: were numpy's 'operands could not be broadcast together with shapes (3,) (2,)', torch's 'The size of
    # tensor a (3) must match the size of tensor b (2) ...' and 'tree_vdot: leaf shapes differ: (3,) vs (2,)'
    (lambda: tree_add({"w": np.zeros(3)}, {"w": np.zeros(2)}), r"^a has a leaf of shape \(3,\) but b has \(2,\)$"),
    (lambda: tree_sub([torch.zeros(2)], [torch.zeros(3)]), r"^a has a leaf of shape \(2,\) but b has \(3,\)$"),
    (lambda: tree_axpy(2.0, {"w": np.zeros(3)}, {"w": np.zeros(2)}), r"^x has a leaf of shape \(3,\) but y has \(2,\)$"),
    (lambda: tree_vdot({"w": np.zeros(2)}, {"w": np.zeros(3)}), r"^a has a leaf of shape \(2,\) but b has \(3,\)$"),
    (lambda: tree_vdot(torch.ones(3), torch.ones(1)), r"^a has a leaf of shape \(3,\) but b has \(1,\)$"),
    # ---- optim: was 'weights must be 3 finite numbers >= 0 with a positive sum' for a third client's buffers
    (lambda: average_buffers([_BUFS, _BUFS, _BUFS], [1, 3]), r"^weights has 2 clients but client_buffers has 3$"),
    (lambda: average_buffers([_BUFS, _BUFS], [1, 2, 3]), r"^weights has 3 clients but client_buffers has 2$"),
    # ---- data: were 'client 0 train y has shape (3,), expected (4,)' for a train x of 4 rows, 'client 0 test x has
    # 2 features, expected 3' for train x of 3 features, 'num_samples must have 3 entries (one per client), got 2'
    (lambda: _dataset(train_x=[np.zeros((4, 2)), np.zeros((2, 2))]),
     r"^toy: client 0 train y has 3 labels but its train x has 4 rows$"),
    (lambda: _dataset(test_y=[np.zeros(2, int), np.zeros(1, int)]),
     r"^toy: client 0 test y has 2 labels but its test x has 1 row$"),
    (lambda: _dataset(train_x=[np.zeros((3, 3)), np.zeros((2, 3))]),
     r"^toy: client 0 test x has 2 features but client 0 train x has 3$"),
    (lambda: _dataset(test_x=[np.zeros((1, 2)), np.zeros((1, 4))]),
     r"^toy: client 1 test x has 4 features but client 1 train x has 2$"),
    (lambda: synthetic(0.0, 0.0, num_clients=3, num_samples=[20, 30]), r"^num_samples has 2 entries but num_clients is 3$"),
    (lambda: synthetic(0.0, 0.0, num_clients=2, num_samples=[20]), r"^num_samples has 1 entry but num_clients is 2$"),
    # ---- logistic: were 'y must be integer labels of shape (5,), got (4,) int64' for an x of 5 rows (also (2, 5) in
    # the stacked form) and "x must have shape (3, 'B', 2), got (2, 4, 2)" for params of 3 clients
    (lambda: _LR.grad(_LR.init_params(), np.zeros((5, 2)), np.zeros(4, int)), r"^y has 4 labels but x has 5 rows$"),
    (lambda: _LR.loss(_LR.init_params(), np.zeros((4, 2)), np.zeros(5, int)), r"^y has 5 labels but x has 4 rows$"),
    (lambda: _LR.hessian(_LR.init_params(), np.zeros((1, 2)), np.zeros(2, int)), r"^y has 2 labels but x has 1 row$"),
    (lambda: _LR.loss_and_grad_stacked(_stacked_params(3), np.zeros((2, 4, 2)), np.zeros((2, 4), int)),
     r"^x has 2 clients \(axis 0\) but params has 3$"),
    (lambda: _LR.loss_and_grad_stacked(_stacked_params(2), np.zeros((2, 5, 2)), np.zeros((2, 4), int)),
     r"^y has 4 labels per client but x has 5 rows per client$"),
    (lambda: _LR.loss_and_grad_stacked(_stacked_params(2), np.zeros((2, 4, 2)), np.zeros((3, 4), int)),
     r"^y has 3 clients \(axis 0\) but x has 2$"),
    # ---- custom models: were 'client 0: needs n_i >= 1 samples and one label per sample, got (4, 2) / (3,)' (naming
    # neither argument) and 'labels must be 6 integers, got torch.int64 (5,)' for a feature row too many
    (lambda: _train([torch.zeros(4, 2), torch.zeros(2, 2)], _CY), r"^client_y\[0\] has 3 labels but client_x\[0\] has 4 "
                                                                  r"samples$"),
    (lambda: _train(_CX, [torch.zeros(3, dtype=torch.long), torch.zeros(1, dtype=torch.long)]),
     r"^client_y\[1\] has 1 label but client_x\[1\] has 2 samples$"),
    (lambda: _tensor_engine(torch.zeros(6, 2), torch.zeros(5, dtype=torch.long)),
     r"^labels has 5 entries but features has 6 rows$"),
    (lambda: _tensor_engine(torch.zeros(5, 2), torch.zeros(4, dtype=torch.long)),
     r"^labels has 4 entries but features has 5 rows$"),
    # fedlib.rule: local_steps against the weights (was 'local_steps must have 2 entries (one per client), got 3')
    (lambda: fednova_weights([0.5, 0.5], [2.0, 6.0], "local_steps", [1, 2, 3]),
     r"^local_steps has 3 clients but p has 2$"),
    (lambda: aggregate([np.ones(1)] * 2, [0.5, 0.5], [2.0, 6.0], "fednova", local_steps=[1]),
     r"^local_steps has 1 client but client_weights has 2$"),
]


@pytest.mark.parametrize("call,match", CASES)
def test_a_size_mismatch_names_both_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_an_array_of_the_wrong_rank_keeps_its_own_message():
    """e's and b's own shapes are still theirs: a 1-d e or a 2-d b is no mismatch with H or M."""
    with pytest.raises(ValueError, match=r"^e must have shape \(2, 2\), got \(2,\)$"):
        theory.quadratic_global_optimum(H2, [1.0, 0.0], P2)
    with pytest.raises(ValueError, match=r"^b must have shape \(2,\), got \(2, 1\)$"):
        theory.server_momentum_round_map(0.5 * np.eye(2), [[1.0], [1.0]], 0.5)
