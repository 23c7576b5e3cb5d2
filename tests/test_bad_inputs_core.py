"""Every public function of the core validates its inputs and raises ValueError naming
the offending parameter (never a numpy broadcasting error or a silent wrong result)."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from fedlib import algorithms as AL
from fedlib import rng as RNG
from fedlib import rule as R
from fedlib import sampling as SA
from fedlib import schedules as SC
from fedlib import server as SV
from fedlib import solvers as S
from fedlib import theory as TH
from fedlib import tree as T
from fedlib import variance as V
from fedlib.engines.augment import crop_flip_gather, crop_flip_params, dropout_key, seeded_dropout_mask
from fedlib.engines.grouped import GroupedNetwork
from fedlib.engines.im2col import stacked_conv2d, stacked_pool2d
from fedlib.engines.reference import run_sequential
from fedlib.engines.stacked import client_augment_params, client_batch_plan
from fedlib.models import count_parameters
from fedlib.problems import QuadraticProblem, random_quadratic
from fedlib.problems.logistic import pack_params, unpack_params

NAN, INF = float("nan"), float("inf")
P2 = [0.5, 0.5]
H2 = np.stack([np.eye(2), 2 * np.eye(2)])
E2 = np.ones((2, 2))
CV = V.ControlVariates(np.zeros((3, 2)), np.zeros(2), "scaffold")
STEP = lambda solver: solver.update(solver.init(np.zeros(2)), np.ones(2))  # noqa: E731

CASES = [
    # ------------------------------------------------------------ solvers: lr, mu, momentum, weight decay
    ("sgd lr=0", lambda: S.sgd(0.0), "lr"),
    ("sgd lr<0", lambda: S.sgd(-0.1), "lr"),
    ("sgd lr=nan", lambda: S.sgd(NAN), "lr"),
    ("sgd lr=inf", lambda: S.sgd(INF), "lr"),
    ("sgd lr=str", lambda: S.sgd("0.1"), "lr"),
    ("sgd lr=bool", lambda: S.sgd(True), "lr"),
    ("sgd weight_decay<0", lambda: S.sgd(0.1, weight_decay=-1e-4), "weight_decay"),
    ("prox mu<0", lambda: S.proximal_sgd(0.1, -0.5), "mu"),
    ("prox mu=nan", lambda: S.proximal_sgd(0.1, NAN), "mu"),
    ("prox lr*mu>1", lambda: S.proximal_sgd(0.5, 3.0), "mu"),
    ("momentum rho=1", lambda: S.momentum_sgd(0.1, 1.0), "momentum"),
    ("momentum rho=-0.1", lambda: S.momentum_sgd(0.1, -0.1), "momentum"),
    ("momentum rho=1.5", lambda: S.momentum_sgd(0.1, 1.5), "momentum"),
    ("momentum rho=nan", lambda: S.momentum_sgd(0.1, NAN), "momentum"),
    ("momentum-prox rho=1", lambda: S.momentum_proximal_sgd(0.1, 1.0, 0.1), "momentum"),
    ("momentum-prox mu<0", lambda: S.momentum_proximal_sgd(0.1, 0.5, -1.0), "mu"),
    ("momentum-prox lr<0", lambda: S.momentum_proximal_sgd(-0.1, 0.5, 1.0), "lr"),
    ("LocalSolver schedule not callable", lambda: S.LocalSolver(0.1, lr_schedule=0.5), "lr_schedule"),
    ("schedule factor 0", lambda: STEP(S.decayed_sgd(0.1, schedule=lambda k: 0.0)), "lr_schedule"),
    ("schedule lr*s*mu>1", lambda: STEP(S.LocalSolver(0.5, mu=1.5, lr_schedule=lambda k: 2.0)), "mu"),
    ("decayed gamma=0", lambda: S.decayed_sgd(0.1, gamma=0.0), "gamma"),
    ("decayed gamma<0", lambda: S.decayed_sgd(0.1, gamma=-0.5), "gamma"),
    ("decayed gamma>1", lambda: S.decayed_sgd(0.1, gamma=1.5), "gamma must lie in \\(0, 1\\]"),
    ("decayed both", lambda: S.decayed_sgd(0.1, gamma=0.5, schedule=lambda k: 1.0), "gamma"),
    ("decayed neither", lambda: S.decayed_sgd(0.1), "schedule"),
    ("make_solver unknown", lambda: S.make_solver("adam", 0.1), "solver"),
    ("make_solver prox mu=0", lambda: S.make_solver("prox", 0.1), "mu"),
    ("make_solver lr=0", lambda: S.make_solver("momentum", 0.0), "lr"),
    ("a_vector tau=0", lambda: S.sgd(0.1).a_vector(0), "tau"),
    ("a_norm tau=-1", lambda: S.momentum_sgd(0.1).a_norm(-1), "tau"),
    ("a_norm tau=2.5", lambda: S.momentum_sgd(0.1).a_norm(2.5), "tau"),
    ("run local_steps=0", lambda: S.sgd(0.1).run(np.zeros(2), lambda x, k: x, 0), "local_steps"),
    ("update grads shape", lambda: S.sgd(0.1).update(S.sgd(0.1).init(np.zeros(2)), np.ones((2, 1))), "grads"),
    ("update grads keys", lambda: S.sgd(0.1).update(S.sgd(0.1).init({"a": np.zeros(2)}), {"b": np.zeros(2)}), "grads"),
    ("init correction shape", lambda: S.sgd(0.1).init(np.zeros(2), np.zeros(3)), "correction"),
    # ------------------------------------------------------------ rule
    ("normalized_update lr=0", lambda: R.normalized_update(np.ones(2), 0.0, 1.0), "lr"),
    ("normalized_update a_norm=0", lambda: R.normalized_update(np.ones(2), 0.1, 0.0), "a_norm"),
    ("fedavg_weights p negative", lambda: R.fedavg_weights([1.2, -0.2], [1, 1]), "p"),
    ("fedavg_weights p sum", lambda: R.fedavg_weights([0.5, 0.6], [1, 1]), "p"),
    ("fedavg_weights p sum 1+1e-8", lambda: R.fedavg_weights([0.5, 0.5 + 1e-8], [1, 1]), "p"),
    ("fedavg_weights p nan", lambda: R.fedavg_weights([NAN, 0.5], [1, 1]), "p"),
    ("fedavg_weights p inf", lambda: R.fedavg_weights([INF, 0.5], [1, 1]), "p"),
    ("fedavg_weights p empty", lambda: R.fedavg_weights([], []), "p"),
    ("fedavg_weights p 2-d", lambda: R.fedavg_weights([[0.5, 0.5]], [1, 1]), "p"),
    ("fedavg_weights a_norms nan", lambda: R.fedavg_weights(P2, [1, NAN]), "a_norms"),
    ("fedavg_weights a_norms inf", lambda: R.fedavg_weights(P2, [INF, 1]), "a_norms"),
    ("fedavg_weights a_norms 0", lambda: R.fedavg_weights(P2, [0, 1]), "a_norms"),
    ("fedavg_weights a_norms count", lambda: R.fedavg_weights(P2, [1, 1, 1]), "a_norms"),
    ("fednova_weights tau_eff 0", lambda: R.fednova_weights(P2, [1, 2], 0.0), "tau_eff"),
    ("make_algorithm tau_eff -1", lambda: AL.make_algorithm("fednova", S.sgd(0.1), tau_eff=-1), "tau_eff"),
    ("make_algorithm tau_eff name", lambda: AL.make_algorithm("fednova", S.sgd(0.1), tau_eff="foo"), "tau_eff"),
    ("make_algorithm tau_eff nan", lambda: AL.make_algorithm("fednova-vr", S.sgd(0.1), tau_eff=NAN), "tau_eff"),
    ("check_tau_eff list", lambda: R.check_tau_eff([2.0]), "tau_eff"),
    ("quadratic params of another dimension", lambda: run_sequential(
        AL.make_algorithm("fedavg", S.sgd(0.1)), np.zeros(3), random_quadratic(2, 2, seed=0).grad_fn(), P2,
        SC.FixedSteps([1, 2]), 1), "dimension 2"),
    ("aggregate torch and numpy deltas", lambda: R.aggregate([np.ones(2), torch.ones(2)], P2, [1, 1], "fednova"),
     "torch tensor"),
    ("algorithm init 0 clients", lambda: AL.make_algorithm("fednova", S.sgd(0.1)).init(np.zeros(2), 0), "num_clients"),
    ("algorithm init nan params", lambda: AL.make_algorithm("fedavg", S.sgd(0.1)).init(np.array([0.0, NAN]), 2),
     "params"),
    ("algorithm init inf torch params", lambda: AL.make_algorithm("fedavg", S.sgd(0.1)).init(
        {"w": torch.tensor([INF])}, 2), "params"),
    ("run_sequential short schedule", lambda: run_sequential(AL.make_algorithm("fedavg", S.sgd(0.1)), np.zeros(2),
                                                             lambda x, i, t, k: x, [0.25] * 4, SC.FixedSteps([1, 2]), 1),
     "schedule is for 2 clients but p has 4"),
    ("run_sequential long schedule", lambda: run_sequential(AL.make_algorithm("fedavg", S.sgd(0.1)), np.zeros(2),
                                                            lambda x, i, t, k: x, P2, SC.FixedSteps([1, 2, 3]), 1),
     "schedule is for 3 clients but p has 2"),
    ("fednova_weights tau_eff -1", lambda: R.fednova_weights(P2, [1, 2], -1), "tau_eff"),
    ("fednova_weights tau_eff nan", lambda: R.fednova_weights(P2, [1, 2], NAN), "tau_eff"),
    ("fednova_weights tau_eff name", lambda: R.fednova_weights(P2, [1, 2], "harmonic"), "tau_eff"),
    ("fednova_weights tau_eff bool", lambda: R.fednova_weights(P2, [1, 2], True), "tau_eff"),
    ("fednova_weights local_steps missing", lambda: R.fednova_weights(P2, [1, 2], "local_steps"), "local_steps"),
    ("fednova_weights local_steps 0", lambda: R.fednova_weights(P2, [1, 2], "local_steps", [0, 2]), "local_steps"),
    ("fednova_weights local_steps count", lambda: R.fednova_weights(P2, [1, 2], "local_steps", [1, 2, 3]), "local_steps"),
    ("fednova_weights local_steps float", lambda: R.fednova_weights(P2, [1, 2], "local_steps", [1.5, 2]), "local_steps"),
    ("effective_weights algorithm", lambda: R.effective_weights("fedprox2", P2, [1, 1]), "algorithm"),
    ("effective_weights zero weights", lambda: R.effective_weights("fedavg", [0, 0], [1, 1]), "client_weights"),
    ("effective_weights negative", lambda: R.effective_weights("fednova", [-0.5, 1.5], [1, 1]), "client_weights"),
    ("aggregate unknown algorithm", lambda: R.aggregate([np.ones(2)] * 2, P2, [1, 1], "fedsgd"), "algorithm"),
    ("aggregate client count", lambda: R.aggregate([np.ones(2)] * 3, P2, [1, 1]), "deltas"),
    ("aggregate a_norms count", lambda: R.aggregate([np.ones(2)] * 2, P2, [1, 1, 1]), "a_norms"),
    ("aggregate weights nan", lambda: R.aggregate([np.ones(2)] * 2, [NAN, 1], [1, 1]), "client_weights"),
    ("aggregate delta shapes", lambda: R.aggregate([np.ones(2), np.ones(1)], P2, [1, 1]), "deltas"),
    ("aggregate delta torch shapes", lambda: R.aggregate([torch.ones(2), torch.ones(1)], P2, [1, 1]), "deltas"),
    ("aggregate delta keys", lambda: R.aggregate([{"a": np.ones(2)}, {"b": np.ones(2)}], P2, [1, 1]), "deltas"),
    ("aggregate fedavg tau_eff", lambda: R.aggregate([np.ones(2)] * 2, P2, [1, 1], "fedavg", tau_eff=2.0), "tau_eff"),
    ("aggregate_stacked client count", lambda: R.aggregate_stacked(np.ones((3, 2)), P2, [1, 1]), "deltas"),
    ("aggregation_coefficients tau_eff", lambda: R.aggregation_coefficients(0.0, P2, [1, 1]), "tau_eff"),
    ("aggregation_coefficients a_norms count", lambda: R.aggregation_coefficients(1.0, P2, [1]), "a_norms"),
    # ------------------------------------------------------------ server
    ("plain server_lr 0", lambda: SV.plain(0.0), "server_lr"),
    ("plain server_lr nan", lambda: SV.plain(NAN), "server_lr"),
    ("momentum beta 1", lambda: SV.momentum(1.0), "beta"),
    ("momentum beta -0.1", lambda: SV.momentum(-0.1), "beta"),
    ("momentum update lr 0", lambda: SV.momentum(0.9).update(np.ones(2), SV.momentum(0.9).init(np.ones(2)), np.ones(2), 0.0), "lr"),
    ("momentum update lr None", lambda: SV.momentum(0.9).update(np.ones(2), SV.momentum(0.9).init(np.ones(2)), np.ones(2), None), "lr"),
    ("adam server_lr -1", lambda: SV.adam(-1.0), "server_lr"),
    ("adam b1 1", lambda: SV.adam(0.1, b1=1.0), "b1"),
    ("adam b2 -1", lambda: SV.adam(0.1, b2=-1.0), "b2"),
    ("adam eps 0", lambda: SV.adam(0.1, eps=0.0), "eps"),
    ("make_server_optimizer unknown", lambda: SV.make_server_optimizer("sgd"), "server"),
    # ------------------------------------------------------------ variance
    ("init_control_variates kind", lambda: V.init_control_variates(np.zeros(2), 3, "mime"), "kind"),
    ("init_control_variates num_clients 0", lambda: V.init_control_variates(np.zeros(2), 0), "num_clients"),
    ("correction client out of range", lambda: V.correction(CV, 3), "client"),
    ("correction client negative", lambda: V.correction(CV, -1), "client"),
    ("update lr 0", lambda: V.update_control_variates(CV, [0], [np.ones(2)], 0.0, [1.0], [0.2, 0.3, 0.5]), "lr"),
    ("update p count", lambda: V.update_control_variates(CV, [0], [np.ones(2)], 0.1, [1.0], P2), "p"),
    ("update p sum", lambda: V.update_control_variates(CV, [0], [np.ones(2)], 0.1, [1.0], [0.2, 0.3, 0.6]), "p"),
    ("update p nan", lambda: V.update_control_variates(CV, [0], [np.ones(2)], 0.1, [1.0], [NAN, 0.5, 0.5]), "p"),
    ("update a_norms 0", lambda: V.update_control_variates(CV, [0], [np.ones(2)], 0.1, [0.0], [0.2, 0.3, 0.5]), "a_norms"),
    ("update a_norms inf", lambda: V.update_control_variates(CV, [0], [np.ones(2)], 0.1, [INF], [0.2, 0.3, 0.5]), "a_norms"),
    ("update a_norms count", lambda: V.update_control_variates(CV, [0], [np.ones(2)], 0.1, [1.0, 1.0], [0.2, 0.3, 0.5]), "a_norms"),
    ("update deltas count", lambda: V.update_control_variates(CV, [0, 1], [np.ones(2)], 0.1, [1.0, 1.0], [0.2, 0.3, 0.5]), "deltas"),
    ("update client out of range", lambda: V.update_control_variates(CV, [5], [np.ones(2)], 0.1, [1.0], [0.2, 0.3, 0.5]), "clients"),
    ("update duplicate clients", lambda: V.update_control_variates(CV, [1, 1], [np.ones(2)] * 2, 0.1, [1.0, 1.0], [0.2, 0.3, 0.5]), "clients"),
    ("vrlsgd local_steps 0", lambda: V.update_control_variates(CV._replace(kind="vrlsgd"), [0], [np.ones(2)], 0.1, [1.0],
                                                               [0.2, 0.3, 0.5], [0], np.zeros(2)), "local_steps"),
    # updated_client_variates (public; distributed_apply's per-rank step): checked as update_control_variates
    ("updated clients out of range", lambda: V.updated_client_variates(CV, [5], [np.ones(2)], 0.1, [1.0]), "^clients"),
    ("updated clients negative", lambda: V.updated_client_variates(CV, [-1], [np.ones(2)], 0.1, [1.0]), "^clients"),
    ("updated clients float", lambda: V.updated_client_variates(CV, [1.5], [np.ones(2)], 0.1, [1.0]), "^clients"),
    ("updated deltas count", lambda: V.updated_client_variates(CV, [0], [np.ones(2)] * 2, 0.1, [1.0]), "^deltas"),
    ("updated lr nan", lambda: V.updated_client_variates(CV, [0], [np.ones(2)], NAN, [1.0]), "^lr"),
    ("updated lr<0", lambda: V.updated_client_variates(CV, [0], [np.ones(2)], -0.1, [1.0]), "^lr"),
    ("updated a_norms 0", lambda: V.updated_client_variates(CV, [0], [np.ones(2)], 0.1, [0.0]), "^a_norms"),
    ("updated vrlsgd no local_steps", lambda: V.updated_client_variates(CV._replace(kind="vrlsgd"), [0], [np.ones(2)],
                                                                        0.1, [1.0]), "local_steps"),
    # ------------------------------------------------------------ sampling
    ("sample_clients unknown scheme", lambda: SA.sample_clients("poisson", P2, 1, 0, 0), "sampling"),
    ("sample_clients too many w/o replacement", lambda: SA.sample_clients("uniform", P2, 3, 0, 0), "clients_per_round"),
    ("sample_clients q=0", lambda: SA.sample_clients("with-replacement", P2, 0, 0, 0), "clients_per_round"),
    ("sample_clients q=None", lambda: SA.sample_clients("uniform", P2, None, 0, 0), "clients_per_round"),
    ("sample_clients q float", lambda: SA.sample_clients("uniform", P2, 1.0, 0, 0), "clients_per_round"),
    ("sample_clients p sum", lambda: SA.sample_clients("with-replacement", [0.5, 0.4], 1, 0, 0), "p"),
    ("sample_clients p negative", lambda: SA.sample_clients("uniform", [1.5, -0.5], 1, 0, 0), "p"),
    ("sample_clients p nan", lambda: SA.sample_clients("full", [NAN, 0.5], None, 0, 0), "p"),
    ("sample_clients full with q", lambda: SA.sample_clients("full", P2, 1, 0, 0), "clients_per_round"),
    ("run_sequential full with q", lambda: run_sequential(AL.make_algorithm("fedavg", S.sgd(0.1)), np.zeros(2),
                                                          lambda x, i, t, k: x, P2, SC.FixedSteps([1, 2]), 1,
                                                          clients_per_round=2), "clients_per_round"),
    ("sample_clients seed -1", lambda: SA.sample_clients("uniform", P2, 1, -1, 0), "seed"),
    ("sample_clients round -1", lambda: SA.sample_clients("uniform", P2, 1, 0, -1), "round_index"),
    ("full_participation p", lambda: SA.full_participation([0.3, 0.3]), "p"),
    ("expected_server_weights a 0", lambda: SA.expected_server_weights("with-replacement", P2, [0.0, 1.0], 2),
     "a_norms"),
    ("expected_server_weights a nan", lambda: SA.expected_server_weights("full", P2, [NAN, 1.0], None), "a_norms"),
    ("expected_server_weights tau_eff", lambda: SA.expected_server_weights("full", P2, [1.0, 2.0], None, "all"),
     "tau_eff"),
    # ------------------------------------------------------------ schedules
    ("steps_per_epoch no data", lambda: SC.steps_per_epoch(np.array([10, 0]), 32), "num_samples"),
    ("steps_per_epoch negative", lambda: SC.steps_per_epoch(np.array([-3]), 32), "num_samples"),
    ("steps_per_epoch float n", lambda: SC.steps_per_epoch(np.array([10.5]), 32), "num_samples"),
    ("steps_per_epoch batch 0", lambda: SC.steps_per_epoch(np.array([10]), 0), "batch_size"),
    # np.asarray([True, 64]) is [1, 64]: the bool was one sample (steps_per_epoch gave [1 2]), also in the epoch schedules
    ("steps_per_epoch bool entry", lambda: SC.steps_per_epoch([True, 64], 32), "^num_samples must hold integers, got the bool True"),
    ("steps_per_epoch np.bool_ entry", lambda: SC.steps_per_epoch((64, np.False_), 32), "^num_samples must hold integers"),
    ("FixedEpochs bool entry", lambda: SC.FixedEpochs([True, 64], 32, 1), "^num_samples must hold integers"),
    ("RandomEpochs bool entry", lambda: SC.RandomEpochs([64, True], 32), "^num_samples must hold integers"),
    ("FixedEpochs no data", lambda: SC.FixedEpochs([10, 0], 32, 2), "num_samples"),
    ("FixedEpochs epochs 0", lambda: SC.FixedEpochs([10], 32, 0), "epochs"),
    ("RandomEpochs low 0", lambda: SC.RandomEpochs([10], 32, 0, 5), "low"),
    ("RandomEpochs high<low", lambda: SC.RandomEpochs([10], 32, 5, 2), "high"),
    ("RandomEpochs seed -1", lambda: SC.RandomEpochs([10], 32, 2, 5, seed=-1), "seed"),
    ("RandomEpochs round -1", lambda: SC.RandomEpochs([10], 32, 2, 5).local_steps(-1), "round_index"),
    ("RandomSteps round -1", lambda: SC.RandomSteps(3, 1, 4).local_steps(-1), "round_index"),
    ("WallClock round -1", lambda: SC.WallClock([1.0], 1.0).local_steps(-1), "round_index"),
    # np.asarray ran before the bool check: [True, 2] took 1 step (1.0 s), as FixedSteps([True, 2]) refuses
    ("WallClock seconds_to_finish bool entry", lambda: SC.WallClock([1.0, 2.0], 10.0).seconds_to_finish([True, 2], 0),
     "^steps must hold whole numbers, got the bool True at index 0"),
    ("WallClock seconds_to_finish bool", lambda: SC.WallClock([1.0, 2.0], 10.0).seconds_to_finish(True, 0),
     "^steps must hold whole numbers"),
    ("FixedSteps tau 0", lambda: SC.FixedSteps([3, 0]), "steps"),
    ("FixedSteps tau 1.5", lambda: SC.FixedSteps([3, 1.5]), "steps"),
    ("RandomSteps low 0", lambda: SC.RandomSteps(3, 0, 4), "low"),
    ("RandomSteps num_clients 0", lambda: SC.RandomSteps(0, 1, 4), "num_clients"),
    ("RandomSteps high<low", lambda: SC.RandomSteps(3, 4, 2), "high"),
    ("WallClock speeds 0", lambda: SC.WallClock([1.0, 0.0], 1.0), "speeds"),
    ("WallClock speeds nan", lambda: SC.WallClock([1.0, NAN], 1.0), "speeds"),
    ("WallClock round_seconds 0", lambda: SC.WallClock([1.0], 0.0), "round_seconds"),
    ("WallClock jitter -1", lambda: SC.WallClock([1.0], 1.0, jitter=-1.0), "jitter"),
    ("WallClock straggler_prob 1.5", lambda: SC.WallClock([1.0], 1.0, straggler_prob=1.5), "straggler_prob"),
    ("WallClock straggler_prob nan", lambda: SC.WallClock([1.0], 1.0, straggler_prob=NAN), "straggler_prob"),
    ("WallClock straggler_factor 0", lambda: SC.WallClock([1.0], 1.0, straggler_factor=0.0), "straggler_factor"),
    ("WallClock straggler_factor 1.5", lambda: SC.WallClock([1.0], 1.0, straggler_factor=1.5), "straggler_factor"),
    ("parse_epochs 5-2", lambda: SC.parse_epochs("5-2"), "epochs"),
    ("parse_epochs 0", lambda: SC.parse_epochs("0"), "epochs"),
    ("parse_epochs text", lambda: SC.parse_epochs("two"), "epochs"),
    ("make_epoch_schedule no data", lambda: SC.make_epoch_schedule([0, 5], 32, "2"), "num_samples"),
    ("step_decay_lr base_lr 0", lambda: SC.step_decay_lr(0.0, 1, 100), "base_lr"),
    ("step_decay_lr base_lr -1", lambda: SC.step_decay_lr(-1.0, 1, 100), "base_lr"),
    ("step_decay_lr total 0", lambda: SC.step_decay_lr(0.1, 1, 0), "total_rounds"),
    ("step_decay_lr round -1", lambda: SC.step_decay_lr(0.1, -1, 10), "round_index"),
    # ------------------------------------------------------------ rng
    ("generator seed -1", lambda: RNG.generator(-1, "data"), "seed"),
    ("generator seed float", lambda: RNG.generator(1.5, "data"), "seed"),
    ("generator purpose empty", lambda: RNG.generator(0, ""), "purpose"),
    ("generator purpose int", lambda: RNG.generator(0, 3), "purpose"),
    # the GPU path's helpers: Python-number arguments only (no tensor is read, so nothing waits on the device). Before:
    # torch's "Invalid device string: 'gpu0'" (RuntimeError); "Trying to create tensor with negative dimension -1";
    # "kernel size should be greater than zero, but got kH: -1"; step=1.5 / '3' and shape 1.5 were cut by int() and
    # gave the mask of another step; layer=1.5 -> '"bitwise_and_cpu" not implemented for 'Float''; num_models=True
    # -> zeros()'s TypeError; a generator None -> AttributeError
    ("torch_generator device", lambda: RNG.torch_generator(0, "augment", 1, device="gpu0"), "^device: not a torch device"),
    ("GroupedNetwork device", lambda: GroupedNetwork(torch.nn.Flatten(), 2, device="gpu0"), "^device: not a torch device"),
    ("GroupedNetwork num_models True", lambda: GroupedNetwork(torch.nn.Flatten(), True, device="cpu"), "^num_models"),
    ("crop_flip_params shape -1", lambda: crop_flip_params(torch.Generator(), (-1,)), "^shape must be"),
    ("crop_flip_params shape 1.5", lambda: crop_flip_params(torch.Generator(), (1.5,)), "^shape must be"),
    ("crop_flip_params generator None", lambda: crop_flip_params(None, (2,)), "^generator must be a torch.Generator"),
    ("crop_flip_gather size -1", lambda: crop_flip_gather(torch.zeros(1, 8, 8, 3), torch.zeros(1, dtype=torch.int64),
                                                          *[torch.zeros(1, dtype=torch.int64)] * 3, (-1, 4)),
     r"^size must be 2 integers >= 1"),
    ("crop_flip_gather size short", lambda: crop_flip_gather(torch.zeros(1, 8, 8, 3), torch.zeros(1, dtype=torch.int64),
                                                             *[torch.zeros(1, dtype=torch.int64)] * 3, (4,)),
     r"^size must be 2 integers >= 1"),
    ("seeded_dropout_mask step 1.5", lambda: seeded_dropout_mask(torch.arange(2), 1.5, 0, (3,), 0.5), "^step must be"),
    ("seeded_dropout_mask step str", lambda: seeded_dropout_mask(torch.arange(2), "3", 0, (3,), 0.5), "^step must be"),
    ("seeded_dropout_mask layer 1.5", lambda: seeded_dropout_mask(torch.arange(2), 1, 1.5, (3,), 0.5), "^layer must be"),
    ("seeded_dropout_mask shape -1", lambda: seeded_dropout_mask(torch.arange(2), 1, 0, (-1,), 0.5), "^shape must be"),
    ("seeded_dropout_mask p None", lambda: seeded_dropout_mask(torch.arange(2), 1, 0, (3,), None), r"^p must lie in \[0, 1\)"),
    # float keys were cut to int64 (keys 2.7 and 2.0 gave the same mask), a float step tensor too; a list of keys
    # failed as "'list' object has no attribute 'device'"
    ("seeded_dropout_mask keys float", lambda: seeded_dropout_mask(torch.tensor([2.7, 3.0]), 1, 0, (3,), 0.5),
     r"^keys must be an integer tensor \(int64 keys from dropout_key\), got a torch.float32 tensor$"),
    ("seeded_dropout_mask keys list", lambda: seeded_dropout_mask([2, 3], 1, 0, (3,), 0.5), r"^keys must be an integer tensor"),
    ("seeded_dropout_mask keys bool", lambda: seeded_dropout_mask(torch.tensor([True]), 1, 0, (3,), 0.5), "^keys must be"),
    ("seeded_dropout_mask step float tensor", lambda: seeded_dropout_mask(torch.arange(2), torch.tensor(1.5), 0, (3,), 0.5),
     r"^step must be an integer tensor"),
    # operator.index(True) is 1: padding True ran as padding 1
    ("stacked_conv2d padding True", lambda: stacked_conv2d(torch.zeros(1, 1, 4, 4, 2), torch.zeros(1, 3, 3, 3, 2), None, True),
     "^padding must be"),
    ("stacked_conv2d padding (True, 1)",
     lambda: stacked_conv2d(torch.zeros(1, 1, 4, 4, 2), torch.zeros(1, 3, 3, 3, 2), None, (True, 1)), "^padding must be"),
    ("stacked_conv2d padding tensor",
     lambda: stacked_conv2d(torch.zeros(1, 1, 4, 4, 2), torch.zeros(1, 3, 3, 3, 2), None, torch.tensor([1, 1])),
     "^padding must be"),
    ("stacked_pool2d kernel -1", lambda: stacked_pool2d(torch.zeros(1, 1, 4, 4, 1), "max", kernel_size=-1), "^kernel_size"),
    ("stacked_pool2d stride 0", lambda: stacked_pool2d(torch.zeros(1, 1, 4, 4, 1), "avg", kernel_size=2, stride=0),
     "^stride must be"),
    ("generator key -1", lambda: RNG.generator(0, "data", -1), "key"),
    # ------------------------------------------------------------ theory
    ("chi_square p sum", lambda: TH.chi_square([0.5, 0.6], P2), "p"),
    ("chi_square w count", lambda: TH.chi_square(P2, [0.2, 0.3, 0.5]), "w"),
    ("chi_square w nan", lambda: TH.chi_square(P2, [NAN, 0.5]), "w"),
    ("chi_square w zero", lambda: TH.chi_square(P2, [1.0, 0.0]), "w"),
    ("slowdown tau 0", lambda: TH.slowdown([0, 2], 1.0), "local_steps"),
    ("slowdown tau_eff 0", lambda: TH.slowdown([1, 2], 0.0), "tau_eff"),
    ("theorem1 w nan", lambda: TH.theorem1_constants([NAN, 1], [np.ones(1)] * 2, 1.0), "w"),
    ("theorem1 a count", lambda: TH.theorem1_constants(P2, [np.ones(1)], 1.0), "a_vectors"),
    ("theorem1 a nan", lambda: TH.theorem1_constants(P2, [np.ones(1), np.array([NAN])], 1.0), "a_vectors"),
    ("theorem1 a negative", lambda: TH.theorem1_constants(P2, [np.ones(1), np.array([-1.0])], 1.0), "a_vectors"),
    ("theorem1 tau_eff 0", lambda: TH.theorem1_constants(P2, [np.ones(1)] * 2, 0.0), "tau_eff"),
    ("theorem1_bound m 0", lambda: TH.theorem1_bound(0, 1.0, 10, 1.0, 1, 1, 1), "m"),
    ("theorem1_bound rounds 0", lambda: TH.theorem1_bound(2, 1.0, 0, 1.0, 1, 1, 1), "rounds"),
    ("theorem1_bound tau_bar 0", lambda: TH.theorem1_bound(2, 0.0, 5, 1.0, 1, 1, 1), "tau_bar"),
    ("fedprox_weights alpha -0.1", lambda: TH.fedprox_weights(P2, [1, 2], -0.1), "alpha"),
    ("fedprox_weights alpha 1.5", lambda: TH.fedprox_weights(P2, [1, 2], 1.5), "alpha"),
    ("fedprox_weights alpha nan", lambda: TH.fedprox_weights(P2, [1, 2], NAN), "alpha"),
    ("fedprox_weights tau 0", lambda: TH.fedprox_weights(P2, [0, 2], 0.1), "local_steps"),
    ("fedprox_weights p negative", lambda: TH.fedprox_weights([-0.5, 1.5], [1, 2], 0.1), "p"),
    ("corollary2 tau_bar 0", lambda: TH.corollary2_best_alpha(2, 0.0, 10), "tau_bar"),
    ("corollary2 constant 0", lambda: TH.corollary2_best_alpha(2, 1.0, 10, constant=0.0), "constant"),
    ("two_client tau1 0", lambda: TH.two_client_lower_bound(0, 2), "tau1"),
    ("two_client tau2 -1", lambda: TH.two_client_lower_bound(1, -1), "tau2"),
    ("two_client a nan", lambda: TH.two_client_lower_bound(1, 2, NAN), "a"),
    ("global_optimum H nan", lambda: TH.quadratic_global_optimum(np.where(H2 == 2, NAN, H2), E2, P2), "H"),
    ("global_optimum H inf", lambda: TH.quadratic_global_optimum(np.where(H2 == 2, INF, H2), E2, P2), "H"),
    ("global_optimum H 2-d", lambda: TH.quadratic_global_optimum(np.eye(2), E2, P2), "H"),
    ("global_optimum H not square", lambda: TH.quadratic_global_optimum(np.ones((2, 2, 3)), E2, P2), "H"),
    ("global_optimum H asymmetric", lambda: TH.quadratic_global_optimum(np.stack([np.eye(2), [[1.0, 1.0], [0.0, 1.0]]]), E2, P2), "H"),
    ("global_optimum e nan", lambda: TH.quadratic_global_optimum(H2, np.array([[1.0, NAN], [0.0, 1.0]]), P2), "e"),
    ("global_optimum e shape", lambda: TH.quadratic_global_optimum(H2, np.ones((3, 2)), P2), "e"),
    ("global_optimum p count", lambda: TH.quadratic_global_optimum(H2, E2, [0.2, 0.3, 0.5]), "p"),
    ("global_optimum p nan", lambda: TH.quadratic_global_optimum(H2, E2, [NAN, 0.5]), "p"),
    ("local_operator H nan", lambda: TH.quadratic_local_operator(np.array([[NAN]]), 2, 0.1), "H_i"),
    ("local_operator tau 0", lambda: TH.quadratic_local_operator(np.eye(2), 0, 0.1), "local_steps"),
    ("local_operator lr 0", lambda: TH.quadratic_local_operator(np.eye(2), 2, 0.0), "lr"),
    ("local_operator mu -1", lambda: TH.quadratic_local_operator(np.eye(2), 2, 0.1, -1.0), "mu"),
    ("round_map algorithm", lambda: TH.quadratic_round_map(H2, E2, P2, [1, 2], 0.1, "scaffold"), "algorithm"),
    ("round_map tau 0", lambda: TH.quadratic_round_map(H2, E2, P2, [0, 2], 0.1, "fedavg"), "local_steps"),
    ("round_map tau count", lambda: TH.quadratic_round_map(H2, E2, P2, [1, 2, 3], 0.1, "fedavg"), "local_steps"),
    ("round_map lr -0.1", lambda: TH.quadratic_round_map(H2, E2, P2, [1, 2], -0.1, "fedavg"), "lr"),
    ("round_map lr*mu>1", lambda: TH.quadratic_round_map(H2, E2, P2, [1, 2], 0.5, "fedprox", mu=3.0), "mu"),
    ("round_map tau_eff 0", lambda: TH.quadratic_round_map(H2, E2, P2, [1, 2], 0.1, "fednova", tau_eff=0.0), "tau_eff"),
    ("fixed_point diverges", lambda: TH.quadratic_fixed_point(H2, E2, P2, [5, 5], 1.5, "fedavg"), "lr"),
    ("fixed_point e nan", lambda: TH.quadratic_fixed_point(H2, np.full((2, 2), NAN), P2, [1, 2], 0.1, "fedavg"), "e"),
    ("lemma1 e inf", lambda: TH.lemma1_small_lr_limit(np.array([[INF], [1.0]]), P2, [1, 2]), "e"),
    ("lemma1 p count", lambda: TH.lemma1_small_lr_limit(np.ones((2, 1)), [1.0], [1, 2]), "p"),
    ("lemma1 tau 0", lambda: TH.lemma1_small_lr_limit(np.ones((2, 1)), P2, [1, 0]), "local_steps"),
    # ------------------------------------------------------------ problems, algorithms, reference engine
    ("QuadraticProblem p", lambda: QuadraticProblem(H2, E2, np.array([0.7, 0.7])), "p"),
    ("QuadraticProblem H nan", lambda: QuadraticProblem(np.full((2, 2, 2), NAN), E2, np.array(P2)), "H"),
    ("random_quadratic num_clients 0", lambda: random_quadratic(0, 3), "num_clients"),
    ("random_quadratic dim 0", lambda: random_quadratic(2, 0), "dim"),
    ("random_quadratic spread 0", lambda: random_quadratic(2, 2, spread=0.0), "spread"),
    ("random_quadratic eig_range", lambda: random_quadratic(2, 2, eig_range=(2.0, 1.0)), "eig_range"),
    ("random_quadratic eig_range of 3", lambda: random_quadratic(2, 2, eig_range=(0.5, 1.0, 2.0)), "eig_range"),
    ("random_quadratic eig_range number", lambda: random_quadratic(2, 2, eig_range=2.0), "eig_range"),
    ("random_quadratic eig_range str", lambda: random_quadratic(2, 2, eig_range="12"), "eig_range"),
    ("pack_params key", lambda: pack_params({"w": np.zeros((2, 3)), "b": np.zeros(3)}), "params"),
    ("pack_params b shape", lambda: pack_params({"W": np.zeros((2, 3)), "b": np.zeros(2)}), "params"),
    ("pack_params W 1-d", lambda: pack_params({"W": np.zeros(3), "b": np.zeros(3)}), "params"),
    ("unpack_params 1-d", lambda: unpack_params(np.zeros(3)), "theta"),
    ("unpack_params one row", lambda: unpack_params(np.zeros((1, 3))), "theta"),
    ("count_parameters trainable_only str", lambda: count_parameters(torch.nn.Linear(2, 2), trainable_only="no"),
     "trainable_only"),
    ("make_algorithm unknown", lambda: AL.make_algorithm("fedopt", S.sgd(0.1)), "algorithm"),
    ("FederatedAlgorithm solver", lambda: AL.FederatedAlgorithm("fedavg", None), "solver"),
    ("FederatedAlgorithm fedprox mu 0", lambda: AL.FederatedAlgorithm("fedprox", S.momentum_sgd(0.1)), "mu"),
    ("run_sequential p", lambda: run_sequential(AL.make_algorithm("fedavg", S.sgd(0.1)), np.zeros(1), lambda *a: np.zeros(1),
                                               [0.5, 0.6], SC.FixedSteps([1, 1]), 1), "p"),
    ("run_sequential rounds -1", lambda: run_sequential(AL.make_algorithm("fedavg", S.sgd(0.1)), np.zeros(1), lambda *a: np.zeros(1),
                                                       P2, SC.FixedSteps([1, 1]), -1), "rounds"),
    ("run_sequential sampling", lambda: run_sequential(AL.make_algorithm("fedavg", S.sgd(0.1)), np.zeros(1), lambda *a: np.zeros(1),
                                                      P2, SC.FixedSteps([1, 1]), 1, sampling="random"), "sampling"),
    ("run_sequential too many clients", lambda: run_sequential(AL.make_algorithm("fedavg", S.sgd(0.1)), np.zeros(1),
                                                              lambda *a: np.zeros(1), P2, SC.FixedSteps([1, 1]), 1,
                                                              sampling="uniform", clients_per_round=3), "clients_per_round"),
    # ------------------------------------------------------------ tree
    ("tree_weighted_sum coefficient count", lambda: T.tree_weighted_sum([np.ones(2)], [1.0, 2.0]), "coefficients"),
    ("tree_weighted_sum shapes", lambda: T.tree_weighted_sum([np.ones(2), np.ones(1)], [1.0, 2.0]), "shape"),
    ("tree_map structure", lambda: T.tree_add({"a": 1.0}, {"a": 1.0, "b": 2.0}), "structures differ"),
    ("tree_stacked_weighted_sum size", lambda: T.tree_stacked_weighted_sum(np.ones((3, 2)), [1.0]), "coefficients"),
    # ------------------------------------------------------------ named as themselves, not as rng's 'key' / the
    # schedule's fault / a numpy IndexError (the bad-argument fuzz pass)
    ("dropout_key round_index<0", lambda: dropout_key(0, -1, 0), "^round_index must be an integer >= 0, got -1$"),
    ("dropout_key client nan", lambda: dropout_key(0, 0, NAN), "^client must be an integer >= 0, got nan$"),
    ("client_batch_plan round_index 1.5", lambda: client_batch_plan(0, 1.5, 0, 4, 2, 2), "^round_index must be"),
    ("client_batch_plan client None", lambda: client_batch_plan(0, 0, None, 4, 2, 2), "^client must be"),
    ("client_augment_params round_index True", lambda: client_augment_params(0, True, 0, 2, 2), "^round_index must"),
    ("client_augment_params client -1", lambda: client_augment_params(0, 0, -1, 2, 2), "^client must be"),
    ("round_local_steps num_clients nan", lambda: SC.round_local_steps(SC.FixedSteps([2, 4]), 0, NAN),
     "^num_clients must be an integer >= 1, got nan$"),
    ("round_local_steps num_clients 0", lambda: SC.round_local_steps(SC.FixedSteps([2, 4]), 0, 0), "^num_clients must"),
    ("round_local_steps round_index nan", lambda: SC.round_local_steps(SC.FixedSteps([2, 4]), NAN, 2),
     "^round_index must be an integer >= 0, got nan$"),
    ("check_participant_steps short steps", lambda: SC.check_participant_steps(np.array([2, 3]), np.array([0, 2]), 0),
     r"^clients must be indices into steps \(0\.\.1, one count per client\), got 0\.\.2$"),
    ("check_participant_steps client -1", lambda: SC.check_participant_steps(np.array([2, 0, 3]), np.array([-1]), 0),
     "^clients must be indices into steps"),
    ("check_participant_steps NaN count", lambda: SC.check_participant_steps(np.array([2.0, NAN]), np.array([1]), 0),
     "^steps must hold whole numbers"),
    ("check_participant_steps clients str", lambda: SC.check_participant_steps(np.array([2, 3]), "x", 0), "^clients must"),
    ("check_epoch_schedule num_samples NaN", lambda: SC.check_epoch_schedule(SC.FixedEpochs([64, 32], 32, 2), [64, NAN], 32),
     "^num_samples must hold whole numbers"),
    ("check_epoch_schedule num_samples None", lambda: SC.check_epoch_schedule(SC.FixedEpochs([64, 32], 32, 2), None, 32),
     "^num_samples must be"),
    ("check_shared_lr lr str", lambda: S.check_shared_lr("solvers", [S.sgd(0.1)], lr="0.1"),
     "^lr must be a finite number > 0, got '0.1'$"),
    ("check_shared_lr lr nan", lambda: S.check_shared_lr("solvers", [S.sgd(0.1)], lr=NAN), "^lr must be"),
    # ------------------------------------------------------------ counts: whole numbers (2.0 is 2), below 2**63
    # a count took 2.0 but refused 1.5 as 'must be an integer' / 'must hold integers'
    ("RandomSteps low 1.5", lambda: SC.RandomSteps(2, 1.5, 3), "^low must be a whole number >= 1, got 1.5$"),
    ("a_norm tau 2.5", lambda: S.sgd(0.1).a_norm(2.5), "^tau must be a whole number >= 1, got 2.5$"),
    ("FixedSteps 2.5", lambda: SC.FixedSteps([2.0, 2.5]), r"^steps must hold whole numbers, got array\(\[2\. , 2\.5\]\)$"),
    # no cap: RandomSteps was built and its draw raised numpy's 'high is out of bounds for int64'
    ("RandomSteps high 2**63", lambda: SC.RandomSteps(2, 1, 2 ** 63),
     r"^high must be a whole number below 2\*\*63 \(an int64\), got 9223372036854775808$"),
    ("a_norm tau 2**63", lambda: S.sgd(0.1).a_norm(2 ** 63), r"^tau must be a whole number below 2\*\*63"),
    ("FixedEpochs epochs 1e300", lambda: SC.FixedEpochs([64, 32], 32, 1e300),
     r"^epochs must be a whole number below 2\*\*63 \(an int64\), got 1e\+300$"),
    ("parse_epochs range past int64", lambda: SC.parse_epochs("2-" + "9" * 20), r"^epochs must be a whole number below 2\*\*63"),
    ("FixedSteps 2**63", lambda: SC.FixedSteps([1, 2 ** 63]), r"^steps must hold whole numbers below 2\*\*63"),
    # ------------------------------------------------------------ a bool among numbers (np.asarray([0.0, True]) is [0., 1.])
    ("full_participation p bool entry", lambda: SA.full_participation([0.0, True]),
     r"^p must be an array of numbers: got a bool \(True\) among its entries"),
    ("aggregate a_norms np.bool_ entry", lambda: R.aggregate([np.ones(2)] * 2, P2, [2.0, np.True_]),
     r"^a_norms must be an array of numbers: got a bool \(True\) among its entries"),
    ("expected_server_weights a bool entry", lambda: SA.expected_server_weights("full", P2, [1.0, True], None),
     r"^a_norms must be an array of numbers: got a bool \(True\)"),
    ("chi_square p nested bool", lambda: TH.chi_square((0.5, np.False_, 0.5), [0.5, 0.25, 0.25]),
     r"^p must be an array of numbers: got a bool \(False\)"),
]


@pytest.mark.parametrize("fn,match", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_value_error_naming_parameter(fn, match):
    # a bare parameter name must be a word of the message: searched as a plain regex, "p" and "e"
    # matched nearly any message, "mu" matched "must", "round" matched "round_index"
    if re.fullmatch(r"\w+", match):
        match = rf"(?<!\w){match}(?!\w)"
    with pytest.raises(ValueError, match=match):
        fn()


def test_valid_boundaries_are_accepted():
    """The edges of the valid ranges must not raise."""
    S.momentum_sgd(0.1, 0.0)                        # ρ = 0
    S.momentum_sgd(0.1, 0.999)                      # ρ < 1
    S.proximal_sgd(0.5, 2.0)                        # α = 1 exactly
    S.proximal_sgd(0.1, 0.0)                        # μ = 0
    R.fedavg_weights([0.5, 0.5 + 5e-10], [1, 1])   # within the 1e-9 tolerance
    R.fedavg_weights([1.0, 0.0], [1, 1])            # a client with zero weight
    SA.sample_clients("uniform", P2, 2, 0, 0)       # q = m
    SA.sample_clients("with-replacement", P2, 5, 0, 0)   # q > m with replacement is fine
    SC.WallClock([1.0], 1.0, straggler_prob=1.0, straggler_factor=1.0)
    TH.fedprox_weights(P2, [1, 2], 0.0)
    TH.fedprox_weights(P2, [1, 2], 1.0)
    SC.parse_epochs("1-1")
    for policy in (None, "a_norm", "local_steps", 3, 2.5):   # every tau_eff FedNova takes
        assert AL.make_algorithm("fednova", S.sgd(0.1), tau_eff=policy).tau_eff == policy


def test_numpy_integers_are_accepted_where_an_integer_is():
    """An integer is an int or a numpy integer (fedlib's convention, check_int): num_models=np.int64(2) was refused
    ("must be an integer >= 1, got np.int64(2)"); the padding, step and sample counts take them alike."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 2, 3), torch.nn.Flatten(), torch.nn.Linear(8, 2))
    net = GroupedNetwork(model, np.int64(2), device="cpu")
    assert net.num_models == 2 and type(net.num_models) is int
    assert {tuple(v.shape[:1]) for v in net.params.values()} == {(2,)}
    x, w = torch.randn(1, 1, 4, 4, 2, dtype=torch.float64), torch.randn(1, 3, 3, 3, 2, dtype=torch.float64)
    for padding in (np.int64(1), (np.int32(1), 1), np.array([1, 1])):
        assert torch.equal(stacked_conv2d(x, w, None, padding), stacked_conv2d(x, w, None, (1, 1)))
    clock = SC.WallClock([1.0, 2.0], 10.0)
    assert clock.seconds_to_finish([np.int64(2), 4], 0) == clock.seconds_to_finish(np.array([2, 4]), 0)
    assert clock.seconds_to_finish(np.int64(2), 0) == clock.seconds_to_finish(2, 0)
    assert SC.steps_per_epoch([np.int64(64), 65], 32).tolist() == [2, 3]
    assert SC.FixedEpochs((np.int64(64), 65), 32, 1).local_steps(0).tolist() == [2, 3]


def test_participation_given_as_lists():
    """apply takes a Participation whose fields are plain lists (the README builds rounds by hand)."""
    algo = AL.make_algorithm("fednova", S.sgd(0.1))
    state = algo.init(np.zeros(2), 2)
    updates = [algo.client_final(state, i, algo.solver.update(algo.client_init(state, i), np.ones(2))) for i in (0, 1)]
    listed, arrays = SA.Participation([0, 1], [0.5, 0.5]), SA.Participation(np.arange(2), np.array(P2))
    a, da = algo.apply(state, listed, updates, 0.1)
    b, db = algo.apply(state, arrays, updates, 0.1)
    assert np.array_equal(a.params, b.params) and da.chi2 == db.chi2


@pytest.mark.parametrize("name", ["fedavg", "fednova", "scaffold"])
def test_client_index_beyond_init(name):
    """A client index outside 0..m-1 (m given to init) is refused by client_init and apply,
    with or without control variates; a hand-built state without m is not checked."""
    algo = AL.make_algorithm(name, S.sgd(0.1))
    state = algo.init(np.zeros(2), 2)
    assert state.num_clients == 2
    with pytest.raises(ValueError, match="client 2 is not one of the 2 clients"):
        algo.client_init(state, 2)
    updates = [algo.client_final(state, i, algo.solver.update(algo.client_init(state, i), np.ones(2))) for i in (0, 1)]
    moved = [u._replace(client=c) for u, c in zip(updates, (0, 5))]
    with pytest.raises(ValueError, match="client 5 is not one of the 2 clients"):
        algo.apply(state, SA.Participation([0, 5], [0.5, 0.5]), moved, 0.1, p=P2)
    with pytest.raises(ValueError, match="client -1 is not one of"):
        algo.apply(state, SA.Participation([0, -1], [0.5, 0.5]), [updates[0], updates[1]._replace(client=-1)], 0.1, p=P2)
    new, _ = algo.apply(state, SA.Participation([0, 1], [0.5, 0.5]), updates, 0.1, p=P2)
    assert new.num_clients == 2 and new.round == 1
    if name != "scaffold":  # no variates to index: a state without m takes any index
        bare = state._replace(num_clients=None)
        algo.apply(bare, SA.Participation([0, 5], [0.5, 0.5]), moved, 0.1)


def test_normalize_refuses_a_zero_negative_or_non_finite_std_given_on_the_host():
    """``normalize``'s ``std`` (and ``mean``) given as numbers, a tuple, a numpy array or a CPU tensor are checked in
    the result's dtype: ``std`` finite and > 0, ``mean`` finite, a ValueError naming the entry. Before, a std of 0
    gave -inf / inf pixels, a negative one flipped the channel's sign, a NaN one NaN and an inf one 0, silently (and
    1e-50, 0 in float32, -inf). Tensors on another device are not read (no device synchronisation): ``meta``
    tensors, which hold no values, go through, their shape alone checked."""
    from fedlib.engines.augment import normalize

    imgs = torch.tensor([[[[0, 255, 51]]]], dtype=torch.uint8)  # (1, 1, 1, 3)
    mean, good = (0.5, 0.5, 0.5), (0.25, 0.5, 0.1)
    msg = r"^std must hold finite numbers > 0 \(one per channel, as torch\.float(32|64)\), got "
    for std, where in (((0.0, 0.5, 0.1), r"std\[0\] = 0$"), ((0.25, -0.5, 0.1), r"std\[1\] = -0\.5$"),
                       ((0.25, 0.5, NAN), r"std\[2\] = nan$"), ((INF, 0.5, 0.1), r"std\[0\] = inf$"),
                       (np.array([0.25, 0.0, 0.1]), r"std\[1\] = 0$"),
                       (torch.tensor([0.25, 0.5, 0.0]), r"std\[2\] = 0$"),
                       ((1e-50, 0.5, 0.1), r"std\[0\] = 0$")):  # 1e-50 is 0 in float32
        with pytest.raises(ValueError, match=msg + where):
            normalize(imgs, mean, std)
    with pytest.raises(ValueError, match=r"^mean must hold finite numbers \(one per channel, as torch\.float64\), "
                                         r"got mean\[1\] = nan$"):
        normalize(imgs, (0.5, NAN, 0.5), good, torch.float64)
    # 1e-50 is a float64 std: (0 - 0.5) / 1e-50 = -5e49; the others by hand: (1 - 0.5) / 0.5 = 1, (0.2 - 0.5) / 0.1 = -3
    got = normalize(imgs, mean, (1e-50, 0.5, 0.1), torch.float64)
    assert got.flatten().tolist() == pytest.approx([-5e49, 1.0, -3.0], rel=1e-12)
    meta = normalize(imgs.to("meta"), torch.zeros(3, device="meta"), torch.zeros(3, device="meta"))
    assert meta.device.type == "meta" and meta.shape == (1, 1, 1, 3)
    with pytest.raises(ValueError, match=r"^std must hold one number per channel \(3, the images' last axis\)"):
        normalize(imgs.to("meta"), torch.zeros(3, device="meta"), torch.zeros(2, device="meta"))
