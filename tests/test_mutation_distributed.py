"""Mutation-testing pass on :mod:`fedlib.distributed` and the multi-process parts of ``run synthetic``.

Most tests run in this process: the ranks of a world are threads whose collectives meet at a
barrier (:class:`thread_ranks.ThreadComm`), or ``torch.distributed`` is replaced by a recording fake, so
that each check takes milliseconds. The expected values come from the one-process engine
(:meth:`fedlib.algorithms.FederatedAlgorithm.apply`), from the paper's eq. 4 written out in
numpy, or from blocks of clients counted by hand. ``python -m fedlib run synthetic --distributed``
runs on thread ranks too (``init_from_env`` hands each thread its communicator, ``RANK`` is the
thread's). One test (marked ``slow``) starts two real gloo processes of the CLI to see that only
rank 0 writes ``--out`` and prints.

Mutants of efe3bcd..52ae29d, distributed_apply (pass described in tests/README.md, Mutation passes):
  DI1-DI3 distributed_apply: p checked only with VR; VR without p let through; p without its size.
  killed here: DI3.

Mutants of 2da6626..df82563 (distributed.py: distributed_apply's refusal of num_clients None, the runnable examples
of TorchCommunicator and init_from_env) (pass described in tests/README.md, Mutation passes): 17 mutants,
``pytest -x`` on test_distributed_state_checks.py and this file, survivors then on test_distributed.py and
``test_doctests.py -k distributed``: 10 killed by the suite, 7 killed here, 0 equivalent.
  NC1 the check dropped (owned_clients' "got None" instead), NC2 inverted, NC7 the fix hint
  (``state._replace(num_clients=m)``) dropped, NC8 the message owned_clients gave before, NC9 TypeError for
  ValueError: killed by the suite (test_distributed_state_checks.py).
  NC3 ``is None`` -> ``not state.num_clients`` (a state of 0 clients got the message for a missing field),
  NC4 the check before ``_check_state`` (a tuple or dict state: AttributeError), NC5 the check after all the
  argument checks, NC6 after the lr check (a bad lr named first): killed here.
  DT1, DT2 an example without its ``dist.destroy_process_group()`` (a group left alive in the doctest
  worker), DT3 torchrun's variables set in os.environ instead of under ``mock.patch.dict``: the examples
  still pass, killed here (test_the_torch_examples_leave_no_process_group_and_no_environment_behind).
  DB1 init_from_env's torchrun check inverted, DB2 no init_process_group, DB3 all_gather_object without the
  collective, DB4 TorchCommunicator's rank / world size fixed at 0 / 1, DB5 an initialised group initialised
  again (the behaviour the examples show; with one process DB3, DB4 pass the examples): killed by the suite
  (the fake torch.distributed tests above).

Mutants of a33e916..37f92d9, init_from_env's exit handler registered once per process (pass described in
tests/README.md, Mutation passes): 4 mutants, one at a time, ``pytest -x`` on test_distributed.py and this
file (``-k "init_from_env or example or process_group"``): 3 killed by the suite, 1 here, 0 equivalent.
  D1 no ``atexit.unregister`` (3 handlers for 3 groups), D4 a lambda registered (unregister misses it):
  killed by test_distributed.py::test_init_from_env_registers_its_exit_handler_once_per_process.
  D2 unregister after register (no handler): killed by
  test_distributed.py::test_init_from_env_destroys_its_process_group_at_exit.
  D3 the handler registered outside ``if not dist.is_initialized()`` (also for a group init_from_env did not
  start): killed here (test_init_from_env_leaves_a_group_it_did_not_start_to_its_owner).
  The pass found test_init_from_env_starts_one_group failing since 831946f (its fake ``atexit`` had no
  ``unregister``); the fixture's fake has one now.

Mutants of 37f92d9..d2bb791 (the changed hunks of fedlib/distributed.py) (pass described in tests/README.md,
Mutation passes): 15 mutants, one at a time, ``pytest -x`` on test_distributed_state_checks.py,
test_owned_clients_inputs.py, this file, ``tests/test_doctests.py -k fedlib.distributed`` and test_distributed.py:
13 killed by the suite, 2 here, 0 equivalent.
killed by the suite: DS1 owned_clients without ``clients is None``; DS2 ``owns`` without check_client_indices;
  DS3 allreduce_sum takes numpy integers (``"fc"`` -> ``"fciu"``); DS4 refuses complex tensors; DS5 no
  ``resolve_conj``; DS6 ``re + 1j * im`` (NaN real part of an infinite imaginary one); DS7 complex64 returned as
  complex128; DS8 no _check_communicator; DS9 no _check_state_kinds; DS10 rounds differing by one rank let
  through (``> 2``); DS11 the clients compared in the Participation's order; DS12 no world-size-1 shortcut
  (apply's sum, bit for bit); DS15 the round not gathered.
killed here (test_gather_variates_of_one_number_per_client_and_a_leaf_of_no_rows): DS13 a 0-d leaf let
  through (``rows_of <= {num_clients, None}``); DS14 rows read only of leaves of two or more dimensions.

Mutants of 2e0d04d..fb2fbe6 (fedlib/distributed.py: gather_variates checks num_clients with one process) (pass
described in tests/README.md, Mutation passes): G1 one process returns before the checks (the code before); G2
num_clients checked after the None pass-through; G3 the rows checked with several processes only. killed by the
suite: all.

Mutants of 1112cf7..24d535b (fedlib/cli/synthetic.py: _stop_together and the try/except around run_synthetic's setup)
(pass described in tests/README.md, Mutation passes):
  CL1 one process: the error not raised; CL2 every error by its message alone; CL3 the type named for a ValueError,
  not for others; CL4 the failing rank raises before the collective; CL5 the stopped ranks in reverse order; CL6 'a
  rank' for two; CL7 the failing rank raises the others' message; CL8 ``except Exception`` -> ``except CLIError``;
  CL9 a one-process run's error kept, not raised; CL10 ``device is None`` -> ``is not None``; CL11 no device to join
  with passed over (init_from_env(None)); CL12 init_from_env's error instead of the setup's outside torchrun; CL13 a
  rank stopped only for a non-empty message; CL14 ``world_size == 1`` -> ``== 0``; CL15 repr of the error; CL16 only
  a failed rank joins the collective. One at a time, ``pytest -x`` on
  test_distributed.py::test_ranks_that_stop_before_the_first_round_are_named_on_every_rank, test_distributed.py -k
  "stop or rank", this file and test_cli_synthetic.py. killed by the suite: CL3-CL7, CL9 (test_cli_synthetic.py),
  CL15, CL16. killed here: CL1, CL2, CL8, CL10-CL13. equivalent: CL14 (one process gathers its own message
  alone, then raises or goes on as the shortcut does).

Mutants of fb91484..97fac41 (fedlib/cli/synthetic.py: on_round_end shares a failed checkpoint write through
_stop_together) (pass described in tests/README.md, Mutation passes): 5 mutants, one at a time, ``pytest -x`` on
test_distributed.py -k "checkpoint or stop or rank" and this file (test_cli_synthetic.py too for SY2): 3 killed by the
suite, 2 here, 0 equivalent.
  killed by the suite (test_distributed.py::test_a_checkpoint_rank_0_cannot_write_stops_every_rank): SY1 only a
  failed rank joins the collective; SY4 the round named ``done - 1``; SY5 the error kept from ``failed``.
  killed here: SY2 one process: the failed write not raised (the run went on, exit 0); SY3 ``except Exception`` ->
  ``except OSError`` (a CheckpointError on rank 0 left rank 1 waiting in the next collective).

Mutants of a655138..81203bf (81203bf: fedlib/distributed.py's RankStopped, _failure_text, _stop_entry,
_raise_if_stopped, _stop_round and distributed_apply's check; fedlib/engines/batched.py's run_batched failed / together
logic; fedlib/cli/synthetic.py's RankStopped -> CLIError) (pass described in tests/README.md, Mutation passes):
  DS1 RankStopped's stops not sorted; DS2 no stops accepted; DS3 rounds checked >= 1; DS4 the one-round form only
  for one rank; DS5 'a rank' when one round; DS6 rank and round swapped in the several-rounds form; DS7 the error
  text by repr; DS8 ``except (TypeError, ValueError)`` -> ``except TypeError``; DS9 _failure_text: every error by
  its message; DS10 repr(failed); DS11 _stop_entry without its dict check; DS12 _raise_if_stopped for two stops or
  more only; DS13 ranks counted from 1; DS14 _stop_round: the failing rank's own raise dropped (it raised
  RankStopped naming itself); DS15 the round + 1; DS16 the failing rank raises before the collective; DS17
  distributed_apply's check dropped; DS18 its check after the updates' errors; DS19 ``world_size > 1`` -> ``>= 1``;
  DS20 together = False (raise alone, the code before); DS21 a training failure's round + 1; DS22 a rank that failed
  trains its next round all the same; DS23 the end-of-run collective skipped; DS24 the end-of-run collective
  without this rank's error; DS25 ``failed = failed or (t, exc)`` -> ``(t, exc)``; DS26 on_round_end without a
  record (``if recorded`` dropped); DS27 ``recorded = True`` after the callback; DS28 / DS29 / DS31 one process:
  the metrics-or-callback / on_round_end / training error not raised; DS30 a callback error's round - 1; DS32 the
  CLI lets RankStopped through (a traceback, status 1); DS33 the CLI's message without '--distributed: '; DS34
  _stop_together by str(failed); DS35 an on_round_end error's round + 1; DS36 _stop_round's payload round 0, not
  None. One at a time, ``pytest -x`` on test_distributed.py -k "stop or fail or one_process or callback or
  progress" first, then (for the mutants it let through) test_mutation_distributed.py, test_batched_engine.py,
  test_mutation_batched_reference.py, test_cli_synthetic.py and test_distributed.py whole.
  killed by the suite: DS2, DS4, DS5, DS6 (the doctest of RankStopped), DS7-DS10, DS12-DS17, DS19-DS21, DS23,
  DS24, DS27-DS34. killed here: DS1, DS3, DS18, DS22, DS25, DS26, DS35. equivalent: DS36 (a gather with a stop
  entry raises RankStopped before distributed_apply compares the rounds; the run's last one compares none); DS11
  equivalent at ee1d6fb (every gather read by _raise_if_stopped held dicts only), killed since b35d63a by
  tests/test_distributed.py::test_a_rank_whose_metrics_fail_in_a_checkpoint_round_stops_every_rank (_stop_together
  now reads its texts through _raise_if_stopped).
  Found: a rank whose metrics failed in a checkpoint round skipped on_round_end while the others met its hand-off in
  _stop_together's collective: they named it as a failed checkpoint write with the payload's dict, then waited for
  it in the next collective (fixed in b35d63a).
"""
import json
import os
import pickle
import re
import socket
import subprocess
import sys
import threading
import types
from pathlib import Path

import numpy as np
import pytest

import fedlib.distributed as fd
from fedlib.algorithms import ClientUpdate, make_algorithm
from fedlib.distributed import Communicator, LocalCommunicator, distributed_apply, gather_variates, owned_clients
from fedlib.sampling import Participation, full_participation
from fedlib.solvers import sgd
from fedlib.variance import ControlVariates
from thread_ranks import cli_on_ranks, on_ranks

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- an in-process world of threads

class _Replay(Communicator):
    """Rank ``rank`` of a world whose other ranks' parts are given: ``all_gather_array`` hands back
    the caller's own array itself (no copy) in its slot."""

    def __init__(self, rank, others):
        self.rank, self.others = rank, others
        self.world_size = len(others) + 1

    def all_gather_array(self, x):
        parts = [np.asarray(o) for o in self.others]
        parts.insert(self.rank, x)
        return parts


# ---------------------------------------------------------------- owned_clients, Communicator
def test_owned_clients_blocks_counted_by_hand():
    assert [owned_clients(7, 3, r).tolist() for r in range(3)] == [[0, 1, 2], [3, 4], [5, 6]]
    # as many processes as clients: one client each (the limit is allowed)
    assert [owned_clients(3, 3, r).tolist() for r in range(3)] == [[0], [1], [2]]
    assert owned_clients(1, 1, 0).tolist() == [0]
    with pytest.raises(ValueError, match=r"^world size: 4 processes but only 3 clients \(every rank needs at "
                                         r"least one client; use at most 3 processes\)$"):
        owned_clients(3, 4, 3)


def test_communicator_check_clients_and_owns():
    class Rank(Communicator):
        def __init__(self, rank, world_size):
            self.rank, self.world_size = rank, world_size

    with pytest.raises(ValueError, match=r"^world size: 4 processes but only 3 clients"):
        Rank(0, 4).check_clients(3)
    assert Rank(2, 3).check_clients(3) is None
    assert Rank(1, 3).owns(np.array([6, 3, 0, 4, 5]), 7).tolist() == [False, True, False, True, False]


def test_the_collectives_of_the_base_class_are_abstract():
    with pytest.raises(NotImplementedError):
        Communicator().all_gather_object(1)
    with pytest.raises(NotImplementedError):
        Communicator().all_gather_array(np.zeros(1))


def test_allreduce_sum_adds_the_ranks_parts_and_leaves_its_input_alone():
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    comm = _Replay(1, [np.full((2, 2), 10.0), np.full((2, 2), 100.0)])  # rank 1 of 3
    total = comm.allreduce_sum(x)
    np.testing.assert_array_equal(total, [[111.0, 112.0], [113.0, 114.0]])
    np.testing.assert_array_equal(x, [[1.0, 2.0], [3.0, 4.0]])  # the caller's array, not the running sum
    total0 = _Replay(0, [np.full((2, 2), 10.0)]).allreduce_sum(x)  # rank 0: its own array is parts[0]
    np.testing.assert_array_equal(total0, [[11.0, 12.0], [13.0, 14.0]])
    np.testing.assert_array_equal(x, [[1.0, 2.0], [3.0, 4.0]])


def test_allreduce_sum_keeps_shape_and_kind():
    comm = _Replay(0, [np.array([0.5])])
    out = comm.allreduce_sum(np.array(2.0))  # a 0-d leaf travels 1-d and comes back 0-d
    assert out.shape == () and float(out) == 2.5
    out32 = comm.allreduce_sum(np.array([1.0], np.float32))
    assert out32.dtype == np.float32 and out32.tolist() == [1.5]
    # a float32 leaf is summed in float64: in float32, 1 + 2**-24 + 2**-24 is 1 (each addition rounds to even)
    out64 = _Replay(0, [np.array([2.0 ** -24]), np.array([2.0 ** -24])]).allreduce_sum(np.array([1.0], np.float32))
    assert out64.dtype == np.float32 and out64.tolist() == [1.0 + 2.0 ** -23]
    torch = pytest.importorskip("torch")
    t = comm.allreduce_sum(torch.tensor([1.0], dtype=torch.float32))
    assert isinstance(t, torch.Tensor) and t.dtype == torch.float32 and t.tolist() == [1.5]


def test_local_communicator_hands_back_copies():
    x = np.array([1.0, 2.0])
    (got,) = LocalCommunicator().all_gather_array(x)
    got[0] = 99.0
    assert x.tolist() == [1.0, 2.0]
    assert LocalCommunicator().all_gather_object({"a": 1}) == [{"a": 1}]


# ---------------------------------------------------------------- TorchCommunicator, init_from_env (faked)
class _FakeDist:
    """Stands in for ``torch.distributed`` as rank 1 of 2 (rank 0's parts are fixed)."""

    def __init__(self, initialized=False, available=True):
        self.initialized, self.available, self.calls = initialized, available, []

    def is_available(self):
        return self.available

    def is_initialized(self):
        return self.initialized

    def init_process_group(self, backend, **kw):
        self.calls.append(("init_process_group", backend, kw))
        self.initialized = True

    def destroy_process_group(self):
        self.calls.append(("destroy_process_group",))
        self.initialized = False

    def get_rank(self):
        return 1

    def get_world_size(self):
        return 2

    def all_gather_object(self, out, obj):
        out[0], out[1] = "rank 0", obj

    def all_gather(self, out, t):
        out[0].copy_(t * 0 + 7.0)
        out[1].copy_(t)

    def barrier(self):
        self.calls.append(("barrier",))


@pytest.fixture
def fake_dist(monkeypatch):
    import torch
    import torch.distributed as dist

    fake = _FakeDist()
    for name in ("is_available", "is_initialized", "init_process_group", "destroy_process_group", "get_rank",
                 "get_world_size", "all_gather_object", "all_gather", "barrier"):
        monkeypatch.setattr(dist, name, getattr(fake, name))
    registered = []

    def unregister(handler):  # atexit.unregister: every registration of it, none an error
        registered[:] = [h for h in registered if h != handler]

    monkeypatch.setattr(fd, "atexit", types.SimpleNamespace(register=registered.append, unregister=unregister))
    fake.registered = registered
    monkeypatch.setattr(torch.cuda, "set_device", lambda i: fake.calls.append(("set_device", i)))
    for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    return fake


def test_torch_communicator_needs_a_group_and_runs_its_collectives(fake_dist):
    with pytest.raises(RuntimeError, match=r"^torch.distributed is not initialised \(use init_from_env\)$"):
        fd.TorchCommunicator()
    fake_dist.initialized = True
    comm = fd.TorchCommunicator()
    assert (comm.rank, comm.world_size) == (1, 2)
    assert comm.all_gather_object({"x": 1}) == ["rank 0", {"x": 1}]
    parts = comm.all_gather_array(np.array([1.5, -2.25]))
    assert [p.tolist() for p in parts] == [[7.0, 7.0], [1.5, -2.25]]
    comm.barrier()
    assert fake_dist.calls == [("barrier",)]


def test_init_from_env_refuses_outside_torchrun_and_without_distributed(fake_dist, monkeypatch):
    with pytest.raises(ValueError, match=r"^--distributed: WORLD_SIZE / RANK are not set; launch with torchrun "):
        fd.init_from_env()
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    fake_dist.available = False
    with pytest.raises(ValueError, match=r"^--distributed: this torch build has no torch.distributed$"):
        fd.init_from_env()
    assert fake_dist.calls == []


@pytest.mark.parametrize("device, backend, want_backend, want_device", [
    ("cpu", None, "gloo", "cpu"), ("cuda", None, "nccl", "cuda:1"), ("cpu", "mpi", "mpi", "cpu"),
    ("cuda:0", "gloo", "gloo", "cuda:1")])
def test_init_from_env_starts_one_group(fake_dist, monkeypatch, device, backend, want_backend, want_device):
    """gloo on the CPU, NCCL on a GPU (``backend`` overrides); a GPU rank takes GPU LOCAL_RANK; the group
    is destroyed at exit; a group already started is reused, not started twice."""
    import datetime

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    comm = fd.init_from_env(device, backend=backend)
    assert isinstance(comm, fd.TorchCommunicator) and (comm.rank, comm.world_size) == (1, 2)
    assert str(comm.device) == want_device
    init = [c for c in fake_dist.calls if c[0] == "init_process_group"]
    assert init == [("init_process_group", want_backend,
                     {"init_method": "env://", "timeout": datetime.timedelta(seconds=600)})]
    assert [c for c in fake_dist.calls if c[0] == "set_device"] == ([("set_device", 1)] if "cuda" in device else [])
    assert fake_dist.registered == [fd._destroy_process_group]
    fd.init_from_env(device, backend=backend)  # already initialised: no second group, no second handler
    assert len([c for c in fake_dist.calls if c[0] == "init_process_group"]) == 1
    assert fake_dist.registered == [fd._destroy_process_group]


def test_init_from_env_leaves_a_group_it_did_not_start_to_its_owner(fake_dist, monkeypatch):
    """A group started before init_from_env (by the caller's own init_process_group) is kept and no exit
    handler is registered for it: its owner destroys it (an owner's own exit handler, registered earlier,
    would run after ours and find no group). Kills D3 (the handler registered outside the
    ``not dist.is_initialized()`` branch)."""
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    fake_dist.initialized = True
    assert isinstance(fd.init_from_env("cpu"), fd.TorchCommunicator)
    assert fake_dist.registered == [] and [c for c in fake_dist.calls if c[0] == "init_process_group"] == []


def test_destroy_process_group_at_exit_only_when_one_is_alive(fake_dist):
    fd._destroy_process_group()  # none: nothing to do
    assert fake_dist.calls == []
    fake_dist.initialized = True
    fd._destroy_process_group()
    assert fake_dist.calls == [("destroy_process_group",)] and not fake_dist.initialized


# ---------------------------------------------------------------- distributed_apply on thread ranks
def _updates(clients, d=3, seed=0):
    """Updates whose ||a_i||_1 and tau_i differ (a swap of the two shows)."""
    rng = np.random.default_rng(seed)
    return {int(c): ClientUpdate(int(c), rng.normal(size=d), 1.5 + 0.5 * int(c), 2 + 3 * int(c)) for c in clients}


def _split(comm, ups, m):
    own = set(owned_clients(m, comm.world_size, comm.rank).tolist())
    return [u for c, u in ups.items() if c in own]


def test_three_ranks_follow_eq_4_by_hand_with_tau_eff_from_the_local_steps():
    """FedNova with tau_eff = sum_i p_i tau_i and the plain server: x + tau_eff sum_i p_i Delta_i / ||a_i||_1
    written out in numpy (the ranks hand in their updates in reverse order)."""
    m, p = 5, np.array([0.1, 0.15, 0.2, 0.25, 0.3])
    algo = make_algorithm("fednova", sgd(0.1), tau_eff="local_steps")
    x0 = np.array([0.5, -1.0, 2.0])
    state = algo.init(x0.copy(), m)
    ups = _updates(range(m))
    a = np.array([ups[i].a_norm for i in range(m)])
    tau = np.array([ups[i].local_steps for i in range(m)])
    delta = np.stack([ups[i].delta for i in range(m)])
    tau_eff = float(p @ tau)
    want = x0 + tau_eff * ((p / a)[:, None] * delta).sum(axis=0)
    res = on_ranks(3, lambda c: distributed_apply(c, algo, state, full_participation(p), _split(c, ups, m)[::-1],
                                                   0.1, p))
    for s, d in res:
        np.testing.assert_allclose(s.params, want, rtol=0, atol=1e-13)
        assert d.tau_eff == pytest.approx(tau_eff, rel=1e-15) == 0.1 * 2 + 0.15 * 5 + 0.2 * 8 + 0.25 * 11 + 0.3 * 14
        assert d.clients.tolist() == [0, 1, 2, 3, 4] and d.local_steps.tolist() == [2, 5, 8, 11, 14]
        assert d.a_norms.tolist() == [1.5, 2.0, 2.5, 3.0, 3.5]
        np.testing.assert_allclose(d.weights, p, rtol=0, atol=0)
        assert d.chi2 == pytest.approx(0.0, abs=1e-15) and s.round == 1 and s.num_clients == m


@pytest.mark.parametrize("name", ["fedavg", "fednova", "scaffold", "vrlsgd", "fednova-vr"])
def test_three_ranks_under_sampling_are_the_one_process_round(name):
    """Clients 0, 3, 4 of 5 sampled (with weights that do not sum to one): rank 1 (clients 2, 3) has one
    participant, and two rounds match apply (parameters, every c_i, c_bar, momentum, diagnostics)."""
    from fedlib.server import momentum

    m, p = 5, np.array([0.1, 0.15, 0.2, 0.25, 0.3])
    algo = make_algorithm(name, sgd(0.1), momentum(0.9))
    one = algo.init(np.zeros(3), m)
    ranks = [one] * 3
    for t, clients in enumerate(([0, 3, 4], [1, 2, 4])):
        part = Participation(np.array(clients), np.array([0.6, 0.9, 1.2]))
        ups = _updates(clients, seed=t)
        one, d1 = algo.apply(one, part, [ups[c] for c in clients], 0.1, p)
        res = on_ranks(3, lambda c, ranks=ranks, part=part, ups=ups: distributed_apply(
            c, algo, ranks[c.rank], part, _split(c, ups, m), 0.1, p))
        ranks = [s for s, _ in res]
        for r, (s, d) in enumerate(res):
            np.testing.assert_allclose(s.params, one.params, rtol=0, atol=1e-13)
            np.testing.assert_allclose(s.server.buffer, one.server.buffer, rtol=0, atol=1e-12)
            assert d.tau_eff == pytest.approx(d1.tau_eff, rel=1e-14) and d.chi2 == pytest.approx(d1.chi2, abs=1e-14)
            np.testing.assert_allclose(d.weights, d1.weights, rtol=1e-15)
            assert d.local_steps.tolist() == d1.local_steps.tolist() and d.a_norms.tolist() == d1.a_norms.tolist()
            assert s.round == one.round == t + 1
            if one.variates is not None:
                own = owned_clients(m, 3, r)
                np.testing.assert_allclose(s.variates.client[own], one.variates.client[own], rtol=0, atol=1e-13)
                np.testing.assert_allclose(s.variates.mean, one.variates.mean, rtol=0, atol=1e-13)


def test_updates_may_come_as_any_iterable():
    algo = make_algorithm("fednova", sgd(0.1))
    p = np.full(2, 0.5)
    state = algo.init(np.zeros(3), 2)
    ups = list(_updates(range(2)).values())
    want, _ = algo.apply(state, full_participation(p), ups, 0.1, p)
    got, _ = distributed_apply(LocalCommunicator(), algo, state, full_participation(p), iter(ups), 0.1, p)
    np.testing.assert_allclose(got.params, want.params, rtol=0, atol=1e-15)


def test_a_participation_of_lists_is_taken_like_apply():
    """Participation([0, 1], [0.5, 0.5]) (a NamedTuple of lists): apply takes it, distributed_apply failed with
    AttributeError: 'list' object has no attribute 'sum'. FedNova by hand: tau_eff = 0.5 * 1 + 0.5 * 2 = 1.5,
    change = 1.5 * (0.5 / 1 + 0.5 / 2) * [1, 1] = [1.125, 1.125]."""
    algo = make_algorithm("fednova", sgd(0.1))
    state = algo.init(np.zeros(2), 2)
    ups = [ClientUpdate(0, np.ones(2), 1.0, 1), ClientUpdate(1, np.ones(2), 2.0, 2)]
    got, diag = distributed_apply(LocalCommunicator(), algo, state, Participation([0, 1], [0.5, 0.5]), ups, 0.1, None)
    np.testing.assert_allclose(got.params, [1.125, 1.125], rtol=0, atol=1e-15)
    assert diag.tau_eff == 1.5 and diag.clients.tolist() == [0, 1] and diag.chi2 == 0.0


def test_a_participant_beyond_the_clients_is_refused_like_apply():
    algo = make_algorithm("fednova", sgd(0.1))
    state = algo.init(np.zeros(3), 3)
    part = Participation(np.array([0, 3]), np.array([0.5, 0.5]))
    ups = list(_updates([0, 3]).values())
    with pytest.raises(ValueError, match=r"^client 3 is not one of the 3 clients given to init \(indices 0\.\.2\)$"):
        distributed_apply(LocalCommunicator(), algo, state, part, ups, 0.1, None)


def test_a_participant_no_rank_reports_stops_the_round_on_every_rank():
    """Rank 0 owns clients 0 and 1 but hands in client 0 only: the merged report misses client 1."""
    algo = make_algorithm("fednova", sgd(0.1))
    state = algo.init(np.zeros(3), 4)
    ups = _updates(range(4))

    def step(comm):
        mine = [ups[0]] if comm.rank == 0 else [ups[2], ups[3]]
        try:
            distributed_apply(comm, algo, state, full_participation(np.full(4, 0.25)), mine, 0.1, None)
        except RuntimeError as exc:
            return str(exc)

    assert on_ranks(2, step) == ["distributed round: ranks reported clients [0, 2, 3], expected [0, 1, 2, 3]"] * 2


def test_a_diverged_round_raises():
    algo = make_algorithm("fednova", sgd(0.1))
    state = algo.init(np.zeros(2), 2)
    ups = [ClientUpdate(0, np.array([np.inf, 0.0]), 1.0, 1), ClientUpdate(1, np.zeros(2), 1.0, 1)]
    with pytest.raises(FloatingPointError, match=r"^round 0: the aggregated update is not finite \(diverged\)$"):
        distributed_apply(LocalCommunicator(), algo, state, full_participation(np.full(2, 0.5)), ups, 0.1, None)


# ---------------------------------------------------------------- gather_variates
def _rank_variates(rank, m=5, world=3, torch=None):
    """Rank ``rank``'s view: its own rows hold 10 * (client + 1) (+ 0, 1, 2 along the row), the other
    rows -1 (stale)."""
    own = owned_clients(m, world, rank)
    w = np.full((m, 3), -1.0)
    w[own] = 10.0 * (own[:, None] + 1) + np.arange(3)
    b = np.full((m, 2), -1.0)
    b[own] = -(own[:, None] + 1.0) * np.ones(2)
    if torch is not None:
        w = torch.tensor(w, dtype=torch.float32)
    return ControlVariates({"W": w, "b": b}, {"W": np.zeros(3), "b": np.zeros(2)}, "scaffold")


def test_gather_variates_assembles_every_ranks_own_rows():
    want_w = 10.0 * (np.arange(5)[:, None] + 1) + np.arange(3)
    want_b = -(np.arange(5)[:, None] + 1.0) * np.ones(2)
    inputs = [_rank_variates(r) for r in range(3)]
    res = on_ranks(3, lambda c: gather_variates(c, inputs[c.rank], 5))
    for r, v in enumerate(res):
        np.testing.assert_array_equal(v.client["W"], want_w)
        np.testing.assert_array_equal(v.client["b"], want_b)
        assert v.mean is inputs[r].mean and v.kind == "scaffold"
    for r in range(3):  # the ranks' own stacks are left as they were
        np.testing.assert_array_equal(inputs[r].client["W"], _rank_variates(r).client["W"])


def test_gather_variates_keeps_a_torch_stack_a_torch_stack():
    torch = pytest.importorskip("torch")
    res = on_ranks(3, lambda c: gather_variates(c, _rank_variates(c.rank, torch=torch), 5))
    for v in res:
        assert isinstance(v.client["W"], torch.Tensor) and v.client["W"].dtype == torch.float32
        np.testing.assert_array_equal(v.client["W"].numpy(), 10.0 * (np.arange(5)[:, None] + 1) + np.arange(3))


def test_gather_variates_passes_through_without_collectives():
    v = _rank_variates(0, world=1)
    assert gather_variates(None, v, 5) is v
    assert on_ranks(1, lambda c: (gather_variates(c, v, 5) is v, c.array_calls)) == [(True, 0)]  # one process
    assert on_ranks(2, lambda c: (gather_variates(c, None, 5), c.array_calls)) == [(None, 0), (None, 0)]


# ---------------------------------------------------------------- run synthetic on thread ranks
SYN = ["run", "synthetic", "--num-clients", "5", "--rounds", "3", "--epochs", "1-3", "--algorithm", "fednova-vr",
       "--sampling", "uniform", "--clients-per-round", "3", "--tau-eff", "population"]


def _keep_checkpoints(monkeypatch):
    """From now on every checkpoint written is also copied to ``<path>.r<round>``."""
    import shutil

    import fedlib.checkpoint as ckpt

    real = ckpt.save_checkpoint

    def save_and_keep(path, **kw):
        real(path, **kw)
        shutil.copyfile(path, f"{path}.r{kw['round_done']}")

    monkeypatch.setattr(ckpt, "save_checkpoint", save_and_keep)


@pytest.fixture
def one_commit(monkeypatch):
    monkeypatch.setenv("FEDLIB_GIT_COMMIT", "c" * 40)  # every segment the same commit: no commit warning


def test_only_rank_0_writes_and_prints_and_the_run_is_the_one_process_run(tmp_path, monkeypatch, capsys, one_commit):
    from fedlib.cli import main

    assert main(SYN + ["--quiet", "--out", str(tmp_path / "one.json")]) == 0
    ref = json.loads((tmp_path / "one.json").read_text())
    for r in range(2):
        (tmp_path / f"m{r}").mkdir()
    capsys.readouterr()
    argvs = [SYN + ["--out", str(tmp_path / f"m{r}" / "run.json"), "--checkpoint-every", "2"] for r in range(2)]
    assert cli_on_ranks(monkeypatch, argvs) == [0, 0]
    out, err = capsys.readouterr()
    assert err == "" and len(out.splitlines()) == 1
    assert out.startswith("fednova-vr: final training loss ") and out.rstrip().endswith(f"; wrote {argvs[0][-3]}")
    assert sorted(p.name for p in (tmp_path / "m0").iterdir()) == ["run.json", "run.json.ckpt"]
    assert list((tmp_path / "m1").iterdir()) == []
    res = json.loads((tmp_path / "m0" / "run.json").read_text())
    assert res["config"]["world_size"] == 2 and "world_size" not in ref["config"]
    for a, b in zip(res["history"], ref["history"], strict=True):
        assert a["clients"] == b["clients"] and a["local_steps"] == b["local_steps"]
        for k in ("train_loss", "tau_eff", "chi2"):
            assert abs(a[k] - b[k]) <= 1e-12, k
    ckpt = pickle.loads((tmp_path / "m0" / "run.json.ckpt").read_bytes())
    assert ckpt["round"] == 3 and ckpt["extra"]["segments"][0]["world_size"] == 2


def test_ranks_started_with_other_settings_are_refused(tmp_path, monkeypatch, capsys, one_commit):
    """A fresh run (no --resume, no checkpoint) whose ranks got other flags: the message named --resume and
    checkpoint files ("the ranks resumed from different checkpoints (rounds [0, 0])")."""
    argvs = [SYN + ["--quiet", "--out", str(tmp_path / "run.json")], SYN + ["--quiet", "--lr", "0.05", "--seed", "3"]]
    assert cli_on_ranks(monkeypatch, argvs) == [2, 2]
    err = capsys.readouterr().err.splitlines()
    assert err == ["python -m fedlib run synthetic: error: --distributed: the ranks were started with different "
                   "settings (differing keys: lr, seed); every rank must run the same command on the same data"] * 2
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("rank1, shown", [
    (("b" * 40, False, "0.1.0"), f"rank 1: commit {'b' * 40}, fedlib 0.1.0"),
    (("a" * 40, True, "0.1.0"), f"rank 1: commit {'a' * 40} (uncommitted changes), fedlib 0.1.0"),
    (("a" * 40, False, "0.2.0"), f"rank 1: commit {'a' * 40}, fedlib 0.2.0")])
def test_ranks_running_other_code_are_refused_on_every_rank(tmp_path, monkeypatch, capsys, rank1, shown):
    """Two machines, two checkouts: rank 1 at another commit, with uncommitted changes, or another fedlib version.
    Before, the run went on, each rank training its own clients with its own code, and the result's provenance named
    rank 0's commit alone."""
    import fedlib.cli.synthetic as cs
    import fedlib.results

    def commit_of_rank(root=None):
        return ("a" * 40, False) if cs.os.environ["RANK"] == "0" else rank1[:2]

    monkeypatch.setattr(fedlib.results, "git_commit", commit_of_rank)
    monkeypatch.setattr("fedlib.__version__", "0.1.0")
    real_start = cs._segment_start

    def segment_start(first_round):
        out = real_start(first_round)
        return out if cs.os.environ["RANK"] == "0" else {**out, "fedlib": rank1[2]}

    monkeypatch.setattr(cs, "_segment_start", segment_start)
    argvs = [SYN + ["--quiet", "--out", str(tmp_path / "run.json")]] * 2
    assert cli_on_ranks(monkeypatch, argvs) == [2, 2]
    err = capsys.readouterr().err.splitlines()
    assert err == [f"python -m fedlib run synthetic: error: --distributed: the ranks run different code (rank 0: commit "
                   f"{'a' * 40}, fedlib 0.1.0; {shown}); every rank must run the same fedlib checkout (the result's "
                   "provenance records rank 0's alone)"] * 2
    assert list(tmp_path.iterdir()) == []


def test_ranks_reading_the_same_data_from_other_paths_run_and_other_data_is_refused(tmp_path, monkeypatch, capsys,
                                                                                     one_commit):
    """Two machines, the same LEAF file at other paths (each its own checkout): the data's SHA-256 identifies it.
    Before, they were refused with '--distributed: the ranks were started with different settings (differing keys:
    data)', config.data.source (the resolved path) differing; the run now equals the one-process run and rank 0's
    result names its own path. Other contents at those paths are still refused."""
    import json as json_

    from fedlib.cli import main

    from leafutil import leaf_doc, write_leaf

    rng = np.random.default_rng(0)
    sizes = (6, 8, 10)
    doc = leaf_doc(["u0", "u1", "u2"], [rng.normal(size=(n, 4)).round(6).tolist() for n in sizes],
                   [rng.integers(0, 3, size=n).tolist() for n in sizes])
    paths = [write_leaf(tmp_path / "m0" / "train.json", doc), write_leaf(tmp_path / "m1" / "data" / "train.json", doc)]
    flags = ["run", "synthetic", "--rounds", "2", "--quiet", "--data"]
    assert main(flags + [str(paths[0]), "--out", str(tmp_path / "one.json")]) == 0
    argvs = [flags + [str(path), "--out", str(tmp_path / f"two{r}.json")] for r, path in enumerate(paths)]
    assert cli_on_ranks(monkeypatch, argvs) == [0, 0]
    one, two = (json_.loads((tmp_path / name).read_text()) for name in ("one.json", "two0.json"))
    assert not (tmp_path / "two1.json").exists()
    assert two["config"]["data"]["source"] == str(paths[0]) and two["config"]["world_size"] == 2
    assert [h["train_loss"] for h in two["history"]] == pytest.approx([h["train_loss"] for h in one["history"]],
                                                                      rel=1e-14, abs=0)
    doc["user_data"]["u0"]["y"][0] = (doc["user_data"]["u0"]["y"][0] + 1) % 3
    write_leaf(paths[1], doc)
    capsys.readouterr()
    assert cli_on_ranks(monkeypatch, argvs) == [2, 2]
    assert capsys.readouterr().err.splitlines() == [
        "python -m fedlib run synthetic: error: --distributed: the ranks were started with different settings "
        "(differing keys: data); every rank must run the same command on the same data"] * 2


def test_ranks_reading_the_same_data_from_other_paths_resume_together(tmp_path, monkeypatch, capsys, one_commit):
    """The README's two machines, each with the same --data file at its own path and the checkpoint on a shared
    filesystem, continue a run with --resume. Before, only rank 0's path (the one the checkpoint records) resumed:
    rank 1 stopped alone with "--resume: checkpoint ... was written by another configuration; differing keys:
    data.source (checkpoint '.../m0/train.json', now '.../m1/data/train.json')" while rank 0 waited for it in the
    first collective. The resumed run equals the straight one, bit for bit; other contents are still refused."""
    import json as json_

    import thread_ranks

    from leafutil import leaf_doc, write_leaf

    monkeypatch.setattr(thread_ranks.Hub.__init__, "__defaults__", (10,))  # a rank stopped alone: fail fast
    rng = np.random.default_rng(1)
    sizes = (6, 8, 10)
    doc = leaf_doc(["u0", "u1", "u2"], [rng.normal(size=(n, 4)).round(6).tolist() for n in sizes],
                   [rng.integers(0, 3, size=n).tolist() for n in sizes])
    paths = [write_leaf(tmp_path / "m0" / "train.json", doc), write_leaf(tmp_path / "m1" / "data" / "train.json", doc)]
    (tmp_path / "shared").mkdir()
    ckpt = tmp_path / "shared" / "run.ckpt"

    def argvs(rounds, name, *more):
        return [["run", "synthetic", "--algorithm", "scaffold", "--quiet", "--data", str(path), "--rounds", str(rounds),
                 "--checkpoint", str(ckpt), "--checkpoint-every", "1", "--out", str(tmp_path / f"m{r}" / name), *more]
                for r, path in enumerate(paths)]

    assert cli_on_ranks(monkeypatch, argvs(3, "straight.json")) == [0, 0]
    ckpt.unlink()
    assert cli_on_ranks(monkeypatch, argvs(2, "first.json")) == [0, 0]
    capsys.readouterr()
    assert cli_on_ranks(monkeypatch, argvs(3, "resumed.json", "--resume")) == [0, 0]
    assert capsys.readouterr().err == ""
    straight, resumed = (json_.loads((tmp_path / "m0" / name).read_text()) for name in ("straight.json", "resumed.json"))
    assert [h["train_loss"] for h in resumed["history"]] == [h["train_loss"] for h in straight["history"]]
    assert resumed["config"]["data"]["source"] == str(paths[0])
    doc["user_data"]["u0"]["y"][0] = (doc["user_data"]["u0"]["y"][0] + 1) % 3
    for path in paths:  # other contents than the checkpoint's: refused (on both ranks, which both read them)
        write_leaf(path, doc)
    capsys.readouterr()
    assert cli_on_ranks(monkeypatch, argvs(4, "other.json", "--resume")) == [2, 2]
    assert all("differing keys: data.sha256" in line for line in capsys.readouterr().err.splitlines())


@pytest.mark.parametrize("rank1", [[], ["--checkpoint-every", "2"]])
def test_ranks_checkpointing_at_other_rounds_are_refused(tmp_path, monkeypatch, capsys, one_commit, rank1):
    """Rank 0 with --checkpoint-every 1, rank 1 without it or every 2 rounds: a checkpoint round gathers the control
    variates from every rank (a collective), so the ranks' collectives no longer matched. Before, on two gloo
    processes, rank 1 died after round 1 with "terminate called after throwing an instance of 'gloo::EnforceNotMet'
    ... Received data size doesn't match expected size. Is there a distributed collective mismatch in your code?"
    (SIGABRT) and rank 0 with gloo's 'Connection reset by peer'."""
    (tmp_path / "m1").mkdir()
    argvs = [SYN + ["--quiet", "--out", str(tmp_path / "run.json"), "--checkpoint-every", "1"],
             SYN + ["--quiet", "--out", str(tmp_path / "m1" / "run.json")] + rank1]
    assert cli_on_ranks(monkeypatch, argvs) == [2, 2]
    assert capsys.readouterr().err.splitlines() == [
        "python -m fedlib run synthetic: error: --distributed: the ranks were started with different settings "
        "(differing keys: checkpoint_every); every rank must run the same command on the same data"] * 2
    assert list(tmp_path.iterdir()) == [tmp_path / "m1"] and list((tmp_path / "m1").iterdir()) == []


@pytest.mark.parametrize("codes, differ", [([("a" * 40, False, "1"), ("unknown", None, "1")], False),
                                           ([("a" * 40, True, "1"), ("a" * 40, True, "1")], False),
                                           ([("a" * 40, None, "1"), ("a" * 40, False, "1")], False),
                                           ([("a" * 40, False, "1"), ("b" * 40, None, "1")], True)])
def test_a_checkout_without_git_agrees_with_any_commit(codes, differ):
    """A copy without .git (commit "unknown", dirty None) cannot be told apart; known values must agree."""
    from fedlib.cli.synthetic import _different_code

    assert _different_code(codes) is differ


def test_resuming_on_more_processes_at_another_commit_warns_once_and_goes_on(tmp_path, monkeypatch, capsys):
    """A one-process run's round-1 checkpoint (commit a) resumed on 2 thread ranks (commit b): rank 0 alone
    prints both warnings; rank 0 alone writes; the rounds are the one-process run's."""
    from fedlib.cli import main

    flags = SYN + ["--quiet", "--checkpoint-every", "1"]
    monkeypatch.setenv("FEDLIB_GIT_COMMIT", "a" * 40)
    _keep_checkpoints(monkeypatch)
    assert main(flags + ["--out", str(tmp_path / "full.json")]) == 0
    ref = json.loads((tmp_path / "full.json").read_text())
    for r in range(2):
        (tmp_path / f"m{r}").mkdir()
        (tmp_path / f"m{r}" / "run.json.ckpt").write_bytes((tmp_path / "full.json.ckpt.r1").read_bytes())
    monkeypatch.setenv("FEDLIB_GIT_COMMIT", "b" * 40)
    capsys.readouterr()
    argvs = [flags + ["--out", str(tmp_path / f"m{r}" / "run.json"), "--resume"] for r in range(2)]
    assert cli_on_ranks(monkeypatch, argvs) == [0, 0]
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        f"warning: --resume: rounds before 1 were computed by commit(s) {'a' * 40}, this process runs {'b' * 40} "
        "(recorded in the result's provenance.resumed)",
        "warning: --resume: earlier rounds ran on [1] process(es), these on 2: the sums add in another order "
        "(differences near 1e-16 relative)"]
    res = json.loads((tmp_path / "m0" / "run.json").read_text())
    assert not (tmp_path / "m1" / "run.json").exists()
    assert [(s["world_size"], s["git_commit"]) for s in res["provenance"]["resumed"]["earlier_segments"]] \
        == [(1, "a" * 40)]
    for a, b in zip(res["history"], ref["history"], strict=True):
        assert a["clients"] == b["clients"] and abs(a["train_loss"] - b["train_loss"]) <= 1e-12
    doc = pickle.loads((tmp_path / "m0" / "run.json.ckpt").read_bytes())
    assert [s["world_size"] for s in doc["extra"]["segments"]] == [1, 2]


def test_ranks_resuming_from_different_rounds_are_refused_on_every_rank(tmp_path, monkeypatch, capsys, one_commit):
    """Each rank reads its own checkpoint file (no shared filesystem): rank 0 holds round 2, rank 1 round 1."""
    from fedlib.cli import main

    flags = SYN + ["--quiet", "--checkpoint-every", "1"]
    _keep_checkpoints(monkeypatch)
    assert main(flags + ["--out", str(tmp_path / "full.json")]) == 0
    for r, done in ((0, 2), (1, 1)):
        (tmp_path / f"m{r}").mkdir()
        (tmp_path / f"m{r}" / "run.json.ckpt").write_bytes((tmp_path / f"full.json.ckpt.r{done}").read_bytes())
    capsys.readouterr()
    argvs = [flags + ["--out", str(tmp_path / f"m{r}" / "run.json"), "--resume"] for r in range(2)]
    assert cli_on_ranks(monkeypatch, argvs) == [2, 2]
    assert capsys.readouterr().err.splitlines() == [
        "python -m fedlib run synthetic: error: --resume: the ranks resumed from different checkpoints (rounds "
        "[2, 1]); every rank must read the same checkpoint file, e.g. on a shared filesystem"] * 2
    assert [sorted(p.name for p in (tmp_path / f"m{r}").iterdir()) for r in range(2)] == [["run.json.ckpt"]] * 2


def test_resuming_a_two_process_checkpoint_on_one_process_warns(tmp_path, monkeypatch, capsys, one_commit):
    """2 -> 1 processes changes the order of the additions as 1 -> 2 does: the warning was printed only when
    the resuming run had more than one process."""
    from fedlib.cli import main

    flags = SYN + ["--quiet", "--checkpoint-every", "1"]
    _keep_checkpoints(monkeypatch)
    for r in range(2):
        (tmp_path / f"m{r}").mkdir()
    assert cli_on_ranks(monkeypatch, [flags + ["--out", str(tmp_path / f"m{r}" / "run.json")] for r in range(2)]) \
        == [0, 0]
    two = json.loads((tmp_path / "m0" / "run.json").read_text())
    monkeypatch.undo()  # one plain process again (no thread ranks, no copies)
    monkeypatch.setenv("FEDLIB_GIT_COMMIT", "c" * 40)
    (tmp_path / "one.json.ckpt").write_bytes((tmp_path / "m0" / "run.json.ckpt.r1").read_bytes())
    capsys.readouterr()
    assert main(flags + ["--out", str(tmp_path / "one.json"), "--resume"]) == 0
    assert capsys.readouterr().err == ("warning: --resume: earlier rounds ran on [2] process(es), these on 1: the sums "
                                       "add in another order (differences near 1e-16 relative)\n")
    res = json.loads((tmp_path / "one.json").read_text())
    assert "world_size" not in res["config"]
    for a, b in zip(res["history"], two["history"], strict=True):
        assert a["clients"] == b["clients"] and abs(a["train_loss"] - b["train_loss"]) <= 1e-12


# ---------------------------------------------------------------- two real gloo processes
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# torch 2.8 to (at least) 2.9 print this line from gloo's C++ on every process that starts a gloo group (the pinned
# torch does not): torch's output, not fedlib's, left out of what the tests compare
_GLOO_BANNER = re.compile(r"^\[Gloo\] Rank \d+ is connected to \d+ peer ranks\. "
                          r"Expected number of connected peer ranks is : \d+\n?", re.MULTILINE)


def _without_gloo_banner(text: str) -> str:
    return _GLOO_BANNER.sub("", text)


@pytest.mark.slow
def test_two_gloo_processes_only_rank_0_writes_and_prints(tmp_path):
    """Ranks started as torchrun does (WORLD_SIZE, RANK, MASTER_*), each in its own folder: rank 0 prints
    the tau_eff warning and the final line and writes --out and its checkpoint; rank 1 prints nothing,
    writes nothing and exits 0."""
    port = str(_free_port())
    argv = [sys.executable, "-m", "fedlib", "run", "synthetic", "--num-clients", "4", "--rounds", "2",
            "--sampling", "uniform", "--clients-per-round", "2", "--out", "run.json", "--checkpoint-every", "1"]
    procs = []
    for rank in range(2):
        (tmp_path / f"m{rank}").mkdir()
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT), WORLD_SIZE="2", RANK=str(rank),
                   LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1", MASTER_PORT=port, FEDLIB_GIT_COMMIT="c" * 40)
        procs.append(subprocess.Popen(argv, cwd=tmp_path / f"m{rank}", env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    (out0, err0), (out1, err1) = [p.communicate(timeout=120) for p in procs]
    out0, out1 = _without_gloo_banner(out0), _without_gloo_banner(out1)
    rc0, rc1 = (p.returncode for p in procs)
    assert (rc0, rc1) == (0, 0), err0[-2000:] + err1[-2000:]
    assert (out1, err1) == ("", "")
    assert len(out0.splitlines()) == 1 and out0.startswith("fednova: final training loss ") \
        and out0.rstrip().endswith("; wrote run.json")
    assert err0.startswith("warning: fednova with --sampling uniform takes tau_eff from each round's sample") \
        and len(err0.splitlines()) == 1
    assert sorted(p.name for p in (tmp_path / "m0").iterdir()) == ["run.json", "run.json.ckpt"]
    assert list((tmp_path / "m1").iterdir()) == []
    assert json.loads((tmp_path / "m0" / "run.json").read_text())["config"]["world_size"] == 2


# -------------------------------------------------------------------- review and mutants of efe3bcd..52ae29d
def test_distributed_apply_checks_the_size_of_p_without_variance_reduction():
    # mutant DI3 (p checked without size=state.num_clients): the weights of another number of clients were
    # taken silently by FedAvg / FedNova, which do not use them (apply refuses them by name)
    from fedlib.algorithms import ClientUpdate, make_algorithm
    from fedlib.distributed import LocalCommunicator, distributed_apply
    from fedlib.sampling import full_participation
    from fedlib.solvers import sgd

    algo = make_algorithm("fednova", sgd(1.0))
    state = algo.init(np.zeros(1), num_clients=2)
    updates = [ClientUpdate(0, np.array([-1.0]), a_norm=1.0, local_steps=1),
               ClientUpdate(1, np.array([2.0]), a_norm=2.0, local_steps=2)]
    with pytest.raises(ValueError, match=r"^p must have 2 entries"):
        distributed_apply(LocalCommunicator(), algo, state, full_participation([0.5, 0.5]), updates, 1.0,
                          [0.25, 0.25, 0.5])


# ---------------------------------------------------------------- mutants of 2da6626..df82563 (distributed.py)
def _two_clients(name="fedavg", **replace):
    algorithm = make_algorithm(name, sgd(1.0))
    state = algorithm.init(np.zeros(1), num_clients=2)._replace(**replace)
    updates = [ClientUpdate(0, np.array([-1.0]), a_norm=1.0, local_steps=1),
               ClientUpdate(1, np.array([2.0]), a_norm=2.0, local_steps=2)]
    return algorithm, state, full_participation([0.5, 0.5]), updates


def test_a_state_of_zero_clients_is_refused_as_apply_refuses_it():
    """Mutant NC3 (``state.num_clients is None`` -> ``not state.num_clients``): a state with ``num_clients``
    0 (built by hand) is no state without the field; distributed_apply refuses it with apply's words, not
    with the message for a missing ``num_clients``."""
    algorithm, state, part, updates = _two_clients(num_clients=0)
    with pytest.raises(ValueError) as whole:
        algorithm.apply(state, part, updates, 1.0, None)
    with pytest.raises(ValueError) as split:
        distributed_apply(LocalCommunicator(), algorithm, state, part, updates, 1.0, None)
    assert str(split.value) == str(whole.value) == "num_clients must be an integer >= 1, got 0"


@pytest.mark.parametrize("as_", [tuple, dict])
def test_a_state_that_is_no_server_state_is_named_before_its_num_clients(as_):
    """Mutant NC4 (the num_clients check moved before ``_check_state``): a tuple or dict given as the
    state raised ``AttributeError`` (it has no ``num_clients``) instead of apply's ``ValueError`` naming
    ``state`` and how to make one."""
    algorithm, state, part, updates = _two_clients()
    bad = tuple(state) if as_ is tuple else state._asdict()
    with pytest.raises(ValueError, match=r"^state must be a fedlib\.algorithms\.ServerState .*got " + as_.__name__):
        distributed_apply(LocalCommunicator(), algorithm, bad, part, updates, 1.0, None)


@pytest.mark.parametrize("lr, p", [(0.0, None), (-1.0, None), (1.0, [0.5, 0.4])])
def test_a_state_without_num_clients_is_named_before_the_other_arguments(lr, p):
    """Mutants NC5, NC6 (the num_clients check moved after all the argument checks, just before
    ``owned_clients``, or just after the lr check): the state's checks come first, as in apply and as the docstring orders them; with a bad
    ``lr`` as well, the error named ``lr`` and left the state's problem for the next call."""
    algorithm, state, part, updates = _two_clients(num_clients=None)
    with pytest.raises(ValueError, match=r"^state\.num_clients is None "):
        distributed_apply(LocalCommunicator(), algorithm, state, part, updates, lr, p)


def test_the_torch_examples_leave_no_process_group_and_no_environment_behind():
    """Mutants DT1, DT2 (an example without its ``dist.destroy_process_group()``) and DT3 (torchrun's
    variables set in ``os.environ`` instead of under ``mock.patch.dict``): tests/test_doctests.py runs every
    example of a module in one process, and the xdist worker goes on with other tests; a group left alive
    made the next ``init_process_group`` fail, and a ``WORLD_SIZE`` / ``RANK`` left set made ``under_torchrun``
    true for every later CLI run and subprocess of that worker. Each example must pass and leave neither."""
    import doctest

    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available():
        pytest.skip("this torch build has no torch.distributed")
    assert not dist.is_initialized(), "a process group was alive before the examples ran"
    before = dict(os.environ)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    examples = {t.name: t for t in doctest.DocTestFinder().find(fd)}
    try:
        for name in ("fedlib.distributed.TorchCommunicator", "fedlib.distributed.init_from_env"):
            report = []
            result = runner.run(examples[name], out=report.append)
            assert result.attempted >= 6 and result.failed == 0, "".join(report)
            assert not dist.is_initialized(), f"{name}'s example leaves its process group alive"
            assert dict(os.environ) == before, f"{name}'s example changes os.environ"
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        os.environ.clear()
        os.environ.update(before)


# ------------------------------------------------------------------------ mutants of 37f92d9..d2bb791
def test_gather_variates_of_one_number_per_client_and_a_leaf_of_no_rows():
    """Every leaf of the stack has one row per client, whatever its dimensions: a 1-d leaf of shape ``(m,)`` (a
    scalar parameter, one number per client) is gathered like the others (mutant DS14, rows read only of leaves
    of 2 or more dimensions: refused, 'the stacked c_i have [None] rows'); a 0-d leaf beside the rows has none and
    is refused naming ``num_clients`` before any collective (mutant DS13, such a leaf let through)."""
    m = 5

    def stack(rank):
        own = owned_clients(m, 2, rank)
        s = np.full(m, -1.0)
        s[own] = 10.0 * (own + 1)  # each rank's own rows, the others stale
        return ControlVariates({"s": s}, {"s": np.zeros(())}, "scaffold")

    for v in on_ranks(2, lambda c: gather_variates(c, stack(c.rank), m)):
        np.testing.assert_array_equal(v.client["s"], 10.0 * (np.arange(m) + 1))
    bad = ControlVariates({"W": np.zeros((m, 2)), "t": np.zeros(())}, {"W": np.zeros(2), "t": np.zeros(())},
                          "scaffold")

    def refused(c):
        with pytest.raises(ValueError) as err:
            gather_variates(c, bad, m)
        return str(err.value), c.array_calls

    assert on_ranks(2, refused) == [("num_clients: the stacked c_i have [5, None] rows, got num_clients=5", 0)] * 2


# ---------------------------------------------------------------- mutants of 1112cf7..24d535b: a rank that stops before
# the first round (run synthetic's setup, _stop_together)
def test_one_rank_that_stops_before_the_first_round_says_why_and_stops(tmp_path, monkeypatch, capsys):
    """--distributed with a world of one process: no other rank to tell, the rank's own error, status 2. Mutant
    CL1 of 1112cf7..24d535b: _stop_together returns on one process without raising the error (the run went on
    without its settings: UnboundLocalError)."""
    out = tmp_path / "missing" / "run.json"
    assert cli_on_ranks(monkeypatch, [SYN + ["--quiet", "--out", str(out)]]) == [2]
    assert capsys.readouterr().err.splitlines() == [f"python -m fedlib run synthetic: error: --out {out}: folder "
                                                    f"{out.parent} does not exist"]


def test_a_rank_that_fails_with_another_error_is_named_with_its_type(tmp_path, monkeypatch, capsys, one_commit):
    """Three ranks: rank 1's data fail to load with an error of another kind than a bad flag (a RuntimeError, raised
    again on rank 1 as it came), rank 2's with a ValueError without a message. Each joins the group to tell the
    others: rank 0 names both, in rank order, the RuntimeError with its type (a ValueError's message alone is the
    CLI's error line) and rank 2 with its empty message; rank 2 prints its own (empty) error. Mutants of
    1112cf7..24d535b: CL2 every error by its message alone ('rank 1: disk on fire'); CL8 only a CLIError caught
    (the RuntimeError and ValueError stopped their ranks alone, and rank 0 waited for them); CL13 a rank counted as
    stopped only for a non-empty message (rank 2 left out). (CL8 is seen after the thread world's 60 s barrier
    timeout: rank 0 waits for ranks that never join.)"""
    import fedlib.cli.synthetic as cs

    real = cs.load_dataset

    def load_dataset(args):
        rank = cs.os.environ["RANK"]  # the thread's own rank (cli_on_ranks)
        if rank == "1":
            raise RuntimeError("disk on fire")
        if rank == "2":
            raise ValueError()
        return real(args)

    monkeypatch.setattr(cs, "load_dataset", load_dataset)
    argvs = [SYN + ["--quiet", "--out", str(tmp_path / f"m{r}.json")] for r in range(3)]
    # rank 1's own error, raised out of main after the collective (kept from breaking the barrier: rank 0 may still
    # be leaving it)
    with pytest.raises(RuntimeError, match="^disk on fire$"):
        cli_on_ranks(monkeypatch, argvs, keeps_barrier=(RuntimeError,))
    prefix = "python -m fedlib run synthetic: error: "
    assert sorted(capsys.readouterr().err.splitlines()) == sorted(
        [f"{prefix}--distributed: ranks stopped before the first round (rank 1: RuntimeError: disk on fire; rank 2: ); "
         "every rank stops", prefix])
    assert list(tmp_path.iterdir()) == []


def test_a_rank_that_stops_before_choosing_its_device_joins_on_the_device_its_flags_choose(tmp_path, monkeypatch,
                                                                                           capsys):
    """Rank 1 stops before its device is chosen (its --out folder does not exist): it joins the process group on the
    device its flags choose, 'cpu' as rank 0 does (a GPU run's ranks would otherwise meet on another backend).
    Mutant CL10 of 1112cf7..24d535b: ``device is None`` -> ``is not None`` (rank 1 joined on None)."""
    devices = []
    argvs = [SYN + ["--quiet", "--out", str(tmp_path / "run.json")],
             SYN + ["--quiet", "--out", str(tmp_path / "missing" / "run.json")]]
    assert cli_on_ranks(monkeypatch, argvs, devices=devices) == [2, 2]
    assert sorted(devices) == [(0, "cpu"), (1, "cpu")]
    assert list(tmp_path.iterdir()) == []


def test_a_rank_whose_flags_choose_no_device_stops_without_joining(monkeypatch, capsys):
    """--device cuda with the numpy backend: no device to join the process group on, so the rank stops alone with its
    own error and never calls init_from_env. Mutant CL11 of 1112cf7..24d535b: the failed second choice passed over
    (init_from_env called with device None)."""
    devices = []
    assert cli_on_ranks(monkeypatch, [SYN + ["--quiet", "--device", "cuda"]], devices=devices) == [2]
    assert devices == []
    assert capsys.readouterr().err.splitlines() == [
        "python -m fedlib run synthetic: error: --device: the numpy backend runs on the CPU only, got 'cuda' (use "
        "--backend torch)"]


def test_distributed_outside_torchrun_reports_the_ranks_own_error_first(tmp_path, monkeypatch, capsys):
    """--distributed without torchrun's variables and a flag that fails before the group: the flag's error, not
    init_from_env's 'WORLD_SIZE / RANK are not set' (with no group there is no other rank to tell). Mutant CL12 of
    1112cf7..24d535b: the setup's error dropped when init_from_env fails."""
    from fedlib.cli import main

    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "missing" / "run.json"
    assert main(SYN + ["--quiet", "--distributed", "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [f"python -m fedlib run synthetic: error: --out {out}: folder "
                                                    f"{out.parent} does not exist"]


# ------------------------------------------- mutants of fb91484..97fac41 (cli/synthetic.py: a checkpoint write fails)
def test_a_checkpoint_that_one_process_cannot_write_stops_the_run(tmp_path, monkeypatch, capsys):
    """Without --distributed a failed checkpoint write stops the run as before: the error's one line, status 1, no
    result, the checkpoint of round 2 kept (mutant SY2: the error was kept for the other ranks, of which there are
    none, and the run went on to write its result, exit 0)."""
    from cliutil import full_disk_at_round
    from fedlib.cli import main

    full_disk_at_round(monkeypatch, 4)
    out = tmp_path / "run.json"
    capsys.readouterr()
    assert main(["run", "synthetic", "--num-clients", "4", "--rounds", "6", "--quiet", "--checkpoint-every", "2",
                 "--out", str(out)]) == 1
    assert capsys.readouterr().err == (f"python -m fedlib run synthetic: error: [Errno 28] No space left on device: "
                                       f"'{tmp_path / 'run.json.ckpt'}'\n")
    assert pickle.loads((tmp_path / "run.json.ckpt").read_bytes())["round"] == 2 and not out.exists()


def test_a_checkpoint_write_that_fails_otherwise_than_by_the_disk_stops_every_rank(tmp_path, monkeypatch, capsys):
    """The checkpoint's folder removed during the run: rank 0's save_checkpoint raises its CheckpointError (a
    ValueError, no OSError), which every rank learns of after the round as of a full disk: rank 0 prints it, the
    other names it, both status 2 (mutant SY3: only an OSError was shared; rank 0 stopped alone and rank 1 waited
    in the next collective until the thread world's 60 s barrier broke)."""
    import shutil

    import fedlib.checkpoint as ckpt

    real = ckpt.save_checkpoint
    folder = tmp_path / "ck"
    folder.mkdir()

    def folder_gone_at_round_4(path, **kw):
        if kw["round_done"] == 4:
            shutil.rmtree(folder)
        real(path, **kw)

    monkeypatch.setattr(ckpt, "save_checkpoint", folder_gone_at_round_4)
    flags = ["run", "synthetic", "--num-clients", "4", "--rounds", "6", "--quiet", "--checkpoint-every", "2",
             "--checkpoint", str(folder / "run.ckpt"), "--out", str(tmp_path / "run.json")]
    capsys.readouterr()
    assert cli_on_ranks(monkeypatch, [flags, flags]) == [2, 2]
    own = f"--checkpoint {folder / 'run.ckpt'}: folder {folder} does not exist"
    assert sorted(capsys.readouterr().err.splitlines()) == sorted([
        f"python -m fedlib run synthetic: error: {own}",
        f"python -m fedlib run synthetic: error: --distributed: a rank could not write the checkpoint of round 4 "
        f"(rank 0: {own}); every rank stops"])
    assert not (tmp_path / "run.json").exists()


# -------------------------------- mutants of a655138..81203bf (a rank whose own round fails: RankStopped, run_batched)
def test_rank_stopped_lists_the_stops_in_rank_order_whatever_order_they_come_in():
    """RankStopped's ``stops`` and ``ranks`` are in rank order, and so is its message, for stops given in another
    order (its doctest gives them sorted, as _raise_if_stopped does). Mutant DS1 of a655138..81203bf
    (``sorted(entries)`` -> ``entries``)."""
    err = fd.RankStopped([(2, 4, "KeyError: 'x'"), (0, 3, "OSError: disk full")])
    assert err.stops == [(0, 3, "OSError: disk full"), (2, 4, "KeyError: 'x'")]
    assert err.ranks == [0, 2]
    assert str(err) == ("ranks stopped in rounds 3, 4 (rank 0 in round 3: OSError: disk full; rank 2 in round 4: "
                        "KeyError: 'x'); every rank stops")


def _run_on_rank(comm, hooks, rounds=3):
    """A 3-round FedAvg run_batched on thread rank ``comm`` (4 clients, 2 ranks); the rounds its on_round_end saw and
    what it raised, as ``(type name, message)``. ``hooks(rank, ends)``: run_batched's hooks of that rank (an
    on_round_end of its own replaces the one that appends ``len(history)`` to ``ends``)."""
    from fedlib.data import synthetic
    from fedlib.engines.batched import run_batched
    from fedlib.problems.logistic import LogisticProblem
    from fedlib.schedules import FixedSteps

    prob = LogisticProblem(synthetic(num_clients=4, dim=3, num_classes=2, num_samples=[10, 20, 15, 12], seed=0))
    ends = []
    kw = {"on_round_end": lambda state, history, initial: ends.append(len(history)), **hooks(comm.rank, ends)}
    try:
        run_batched(make_algorithm("fedavg", sgd(0.1)), prob, FixedSteps([1, 2, 3, 2]), rounds, batch_size=5, comm=comm,
                    **kw)
        return ends, None
    except Exception as exc:  # noqa: BLE001 - compared below
        return ends, (type(exc).__name__, str(exc))


def test_a_rank_whose_first_round_fails_is_named_with_round_0():
    """Thread ranks: rank 1's lr_at raises in round 0, before any client trains. Rank 0 names rank 1 and round 0 (a
    round index >= 0, as RankStopped's docstring says); rank 1 raises its own error; neither reaches on_round_end.
    Mutant DS3 of a655138..81203bf (RankStopped's rounds checked >= 1: rank 0 raised 'stops must be (rank, round,
    error) triples ...' instead)."""
    def hooks(rank, ends):
        def lr_at(t):
            if rank == 1:
                raise RuntimeError(f"no rate for round {t}")
            return 0.1
        return {"lr_at": lr_at}

    assert on_ranks(2, lambda comm: _run_on_rank(comm, hooks)) == [
        ([], ("RankStopped", "a rank stopped in round 0 (rank 1: RuntimeError: no rate for round 0); every rank stops")),
        ([], ("RuntimeError", "no rate for round 0"))]


def test_a_rank_is_named_with_its_first_error_when_its_next_round_would_fail_too():
    """Thread ranks: rank 0's callback raises after round 1, and its lr_at would raise in round 2. The callback's
    error is handed on at round 2's first collective without training round 2 (the rank has stopped): rank 1 names
    round 1 and the KeyError, rank 0 raises the KeyError; both saw rounds 0 and 1 end. Mutant DS22 of
    a655138..81203bf (round 2 trained all the same: its lr_at's error replaced the callback's)."""
    def hooks(rank, ends):
        def callback(rec):
            if rank == 0 and rec["round"] == 1:
                raise KeyError("bar")

        def lr_at(t):
            if rank == 0 and t == 2:
                raise RuntimeError("no rate for round 2")
            return 0.1
        return {"callback": callback, "lr_at": lr_at}

    assert on_ranks(2, lambda comm: _run_on_rank(comm, hooks)) == [
        ([1, 2], ("KeyError", "'bar'")),
        ([1, 2], ("RankStopped", "a rank stopped in round 1 (rank 0: KeyError: 'bar'); every rank stops"))]


def test_a_round_whose_callback_and_on_round_end_both_fail_hands_on_the_callbacks_error():
    """Thread ranks: in round 1, rank 0's callback raises and then its on_round_end (still called: the round is
    recorded) raises too. The first error of the round is the one handed on and raised (the rank stopped there).
    Mutant DS25 of a655138..81203bf (``failed = failed or (t, exc)`` -> ``(t, exc)``: on_round_end's error replaced
    the callback's)."""
    def hooks(rank, ends):
        def callback(rec):
            if rank == 0 and rec["round"] == 1:
                raise KeyError("bar")

        def on_round_end(state, history, initial):
            ends.append(len(history))
            if rank == 0 and len(history) == 2:
                raise OSError(28, "No space left on device")
        return {"callback": callback, "on_round_end": on_round_end}

    assert on_ranks(2, lambda comm: _run_on_rank(comm, hooks)) == [
        ([1, 2], ("KeyError", "'bar'")),
        ([1, 2], ("RankStopped", "a rank stopped in round 1 (rank 0: KeyError: 'bar'); every rank stops"))]


def test_a_rank_whose_metrics_fail_does_not_hand_the_round_to_on_round_end(monkeypatch):
    """Thread ranks: rank 1's metrics of round 1 raise, so it has no record of round 1: its on_round_end sees round
    0 only (a checkpoint of it would miss the round), rank 0's rounds 0 and 1; then both stop in round 2's first
    collective. Mutant DS26 of a655138..81203bf (``if recorded`` dropped: rank 1's on_round_end saw a history
    of one round twice)."""
    import fedlib.engines.batched as batched

    real, mine = batched._metrics, threading.local()

    def metrics(problem, params, t, evaluate):
        if t == 1 and mine.rank == 1:
            raise OSError(5, "Input/output error")
        return real(problem, params, t, evaluate)

    monkeypatch.setattr(batched, "_metrics", metrics)

    def hooks(rank, ends):
        mine.rank = rank
        return {}

    assert on_ranks(2, lambda comm: _run_on_rank(comm, hooks)) == [
        ([1, 2], ("RankStopped", "a rank stopped in round 1 (rank 1: OSError: [Errno 5] Input/output error); every "
                                 "rank stops")),
        ([1], ("OSError", "[Errno 5] Input/output error"))]


def test_a_rank_that_stopped_is_named_before_another_ranks_bad_updates():
    """Thread ranks: rank 1 stopped (its round 2 failed: _stop_round), and rank 0 hands distributed_apply an update
    of client 2, which rank 1 owns. Rank 0 raises RankStopped naming rank 1 (its updates are moot: every rank
    stops), rank 1 its own error. Mutant DS18 of a655138..81203bf (the stopped check after the updates' errors: rank
    0 raised the ValueError about client 2, not naming rank 1)."""
    algo = make_algorithm("fednova", sgd(0.1))
    state = algo.init(np.zeros(3), 4)
    ups = _updates(range(4))

    def step(comm):
        try:
            if comm.rank == 1:
                fd._stop_round(comm, (2, KeyError("x")))
            distributed_apply(comm, algo, state, full_participation(np.full(4, 0.25)), [ups[0], ups[2]], 0.1, None)
        except Exception as exc:  # noqa: BLE001 - compared below
            return type(exc).__name__, str(exc)

    assert on_ranks(2, step) == [("RankStopped", "a rank stopped in round 2 (rank 1: KeyError: 'x'); every rank stops"),
                                 ("KeyError", "'x'")]


def test_a_rank_whose_on_round_end_fails_is_named_with_that_round():
    """Thread ranks: rank 0's on_round_end raises after round 1 (of 3; its callback is fine). Rank 1 names round 1
    and the error at round 2's first collective; rank 0 raises it. Mutant DS35 of a655138..81203bf (on_round_end's
    error handed on as round 2's)."""
    def hooks(rank, ends):
        def on_round_end(state, history, initial):
            ends.append(len(history))
            if rank == 0 and len(history) == 2:
                raise OSError(28, "No space left on device")
        return {"on_round_end": on_round_end}

    assert on_ranks(2, lambda comm: _run_on_rank(comm, hooks)) == [
        ([1, 2], ("OSError", "[Errno 28] No space left on device")),
        ([1, 2], ("RankStopped", "a rank stopped in round 1 (rank 0: OSError: [Errno 28] No space left on device); "
                                 "every rank stops"))]
