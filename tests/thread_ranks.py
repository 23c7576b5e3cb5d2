"""An in-process world of ranks for the distributed tests (imported by the test modules that need
one): each rank is a thread, and the collectives of :class:`fedlib.distributed.Communicator` run
over a barrier, so ``distributed_apply``, ``run_batched(comm=...)`` and the CLI's ``--distributed``
path are exercised without a process group."""
from __future__ import annotations

import threading

import numpy as np

from fedlib.distributed import Communicator


class Hub:
    """The slots and the barrier that ``n`` thread ranks share; ``timeout`` (seconds) bounds a
    wait for a rank that never arrives."""

    def __init__(self, n: int, timeout: float = 60):
        self.n, self.slots = n, [None] * n
        self.barrier = threading.Barrier(n, timeout=timeout)

    def gather(self, rank: int, obj):
        self.slots[rank] = obj
        self.barrier.wait()
        out = list(self.slots)
        self.barrier.wait()
        return out


class ThreadComm(Communicator):
    """Rank ``rank`` of a world of threads: the base class's collectives over ``hub``; counts its
    array collectives in ``array_calls``."""

    def __init__(self, hub: Hub, rank: int):
        self.hub, self.rank, self.world_size, self.array_calls = hub, rank, hub.n, 0

    def all_gather_object(self, obj):
        return self.hub.gather(self.rank, obj)

    def all_gather_array(self, x):
        self.array_calls += 1
        return [np.array(a, copy=True) for a in self.hub.gather(self.rank, np.array(x, copy=True))]


def on_ranks(n: int, fn, *, keeps_barrier: tuple = ()) -> list:
    """``fn(comm)`` on ``n`` thread ranks; their results. A rank's error breaks the barrier, so that
    the other ranks stop waiting, unless it is an instance of ``keeps_barrier`` (a simulated kill of
    one rank whose peer goes on); the first error that is not such a broken barrier is raised, else
    the first error."""
    hub, results, errors = Hub(n), [None] * n, [None] * n

    def target(r):
        try:
            results[r] = fn(ThreadComm(hub, r))
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            errors[r] = exc
            if not isinstance(exc, keeps_barrier):
                hub.barrier.abort()

    threads = [threading.Thread(target=target, args=(r,)) for r in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for e in errors:
        if e is not None and not isinstance(e, threading.BrokenBarrierError):
            raise e
    for e in errors:
        if e is not None:
            raise e
    return results


def cli_on_ranks(monkeypatch, argvs, *, keeps_barrier: tuple = (), devices: list | None = None) -> list:
    """``python -m fedlib <argvs[r]> --distributed`` on rank ``r`` of ``len(argvs)`` thread ranks; their
    exit statuses (``fedlib.distributed.init_from_env`` hands each thread its rank's communicator,
    ``run synthetic`` reads ``RANK`` of its own thread; the patches are undone on return).
    ``keeps_barrier`` as in :func:`on_ranks`; ``devices``, a list: ``(rank, device)`` appended for each
    call of ``init_from_env``, the device the rank joins the process group on."""
    import os

    import fedlib.cli.synthetic
    import fedlib.distributed
    from fedlib.cli import main

    mine = threading.local()

    class OsOfThisRank:  # ``os`` as run synthetic sees it: os.environ with this thread's RANK
        def __getattr__(self, name):
            return getattr(os, name)

        @property
        def environ(self):
            return {**os.environ, "RANK": str(mine.comm.rank)}

    with monkeypatch.context() as mp:
        def init_from_env(device="cpu", **kw):
            if devices is not None:
                devices.append((mine.comm.rank, device))
            return mine.comm

        mp.setattr(fedlib.distributed, "init_from_env", init_from_env)
        mp.setattr(fedlib.cli.synthetic, "os", OsOfThisRank())
        mp.setenv("WORLD_SIZE", str(len(argvs)))
        mp.delenv("RANK", raising=False)

        def rank(comm):
            mine.comm = comm
            return main(list(argvs[comm.rank]) + ["--distributed"])

        return on_ranks(len(argvs), rank, keeps_barrier=keeps_barrier)
