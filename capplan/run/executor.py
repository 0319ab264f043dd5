"""Executors: one call maps a per-series function over many series, on any engine.

``plan.executor`` (``capplan plan --executor``) picks one:

* ``local`` — in this process, in order;
* ``processes`` — a pool of worker processes on this machine
  (``concurrent.futures`` with the ``spawn`` context, safe after TensorFlow or
  Prophet have started threads in the parent); the default, with up to 2 workers;
* ``dask`` — a ``dask.distributed`` cluster: the one at ``plan.scheduler``
  (``tcp://HOST:8786``), or a ``LocalCluster`` of ``plan.workers`` processes
  started for the run and closed after it.

What every executor guarantees:

* results come back in input order, so figures do not depend on scheduling;
* an exception inside one item fails only that item: it comes back as a
  :class:`Failed` with the error (type and message), and the rest completes;
* a worker that dies mid-task has its task retried on another worker (dask:
  the scheduler's ``distributed.scheduler.allowed-failures``, default 3;
  processes: the pool is restarted and unfinished items rerun, up to
  :data:`POOL_RESTARTS` times); an item that keeps killing workers fails;
* progress: ``on_done(done, total, label)`` after each finished item;
* :meth:`Executor.submit` starts the work and returns a function that waits for it,
  so the driver can train the global LSTM while the workers run the per-series tasks;
* worker processes run numpy, statsmodels, Prophet and scikit-learn single-threaded
  (:data:`SINGLE_THREAD_ENV`: OpenMP, MKL and OpenBLAS pools of 1, as dask's nanny
  also sets them, ``distributed.nanny.pre-spawn-environ``), so ``--workers N`` uses N
  cores; the global LSTM's fits are tasks too, with TensorFlow's thread pools of one
  thread (:func:`single_threaded_tensorflow`), and the driver only orchestrates.

``fn`` and the items must be picklable (top-level functions, plain data).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import traceback
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterable, Literal, TypeVar

from capplan.errors import InputError

T = TypeVar("T")
R = TypeVar("R")
ExecutorName = Literal["local", "processes", "dask"]
EXECUTORS: tuple[str, ...] = ("local", "processes", "dask")
POOL_RESTARTS = 2
OnDone = Callable[[int, int, str], None]
#: set in every worker process before it imports numpy, TensorFlow or Prophet
SINGLE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def single_threaded() -> None:
    """Make this (worker) process single-threaded: :data:`SINGLE_THREAD_ENV` for libraries
    not yet loaded, ``threadpoolctl`` limits for BLAS/OpenMP pools already loaded.
    The ``initializer`` of the process pool; top-level so that it pickles. A worker also ignores
    SIGINT: Ctrl-C reaches the whole process group, and only the parent answers it (one line, no
    traceback per worker; :meth:`ProcessExecutor.abort` ends the workers)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.update(SINGLE_THREAD_ENV)
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def single_threaded_tensorflow() -> bool:
    """TensorFlow's intra- and inter-op thread pools of one thread in this process, so a
    network trains with the same arithmetic on every executor (and a worker uses one core).
    Possible only before TensorFlow's runtime starts in the process; returns whether the
    pools are (now) of one thread. Where the runtime already started with other pools
    (e.g. an earlier in-process run), they stay as they are: False."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # as forecasting.tiers.daily_lstm sets it
    import tensorflow as tf

    th = tf.config.threading
    if th.get_intra_op_parallelism_threads() == 1 and th.get_inter_op_parallelism_threads() == 1:
        return True
    try:
        th.set_intra_op_parallelism_threads(1)
        th.set_inter_op_parallelism_threads(1)
    except RuntimeError:  # "cannot be modified after initialization": the pools stay as they are
        return False
    return True


@contextmanager
def private_keras_seeds(seed: int):
    """Within the block, Keras draws seeds for unseeded initializers and seed generators
    from its own ``random.Random(seed)`` instead of Python's process-wide ``random``.

    Why: Keras (``keras.src.random.seed_generator``) draws them from the ``random``
    module, which ``keras.utils.set_random_seed`` seeds; in a Dask worker the event
    loop's thread draws from the same module meanwhile (timer jitter), so a network's
    initial weights would depend on timing. A fresh ``Random(seed)`` gives the draws a
    process that nothing else disturbs gets after ``set_random_seed(seed)``, so every
    executor builds the same network (``tests/e2e/test_executor.py``). One task at a time per
    process (workers are single-threaded)."""
    from keras.src.random import seed_generator

    saved = seed_generator.python_random
    seed_generator.python_random = random.Random(seed)
    try:
        yield
    finally:
        seed_generator.python_random = saved


@dataclass(frozen=True)
class Failed:
    """An item that raised (``error``: ``"Type: message"``; ``where``: the last frame of the traceback)."""

    error: str
    where: str = ""

    @classmethod
    def of(cls, exc: BaseException) -> "Failed":
        tb = traceback.extract_tb(exc.__traceback__)
        where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""
        return cls(f"{type(exc).__name__}: {exc}", where)


def guarded(fn: Callable[[T], R], x: T) -> "R | Failed":
    """``fn(x)``, or a :class:`Failed` holding the exception it raised (the item's own failure,
    recorded in the report, never a stand-in value). Top-level so that it pickles."""
    try:
        return fn(x)
    except Exception as exc:  # noqa: BLE001  (one item's failure is reported, not hidden)
        return Failed.of(exc)


def default_workers() -> int:
    """At most 2, and no more than the CPUs this process may use."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    return max(1, min(2, n))


class Executor:
    """Base: :meth:`map` in this process, in order (``local``)."""

    name = "local"

    def map(self, fn: Callable[[T], R], items: Iterable[T], labels: list[str] | None = None,
            on_done: OnDone | None = None) -> list["R | Failed"]:
        """``[fn(x) for x in items]`` with per-item failures as :class:`Failed`, in input order."""
        return self.submit(fn, items, labels, on_done)()

    def submit(self, fn: Callable[[T], R], items: Iterable[T], labels: list[str] | None = None,
               on_done: OnDone | None = None) -> Callable[[], list["R | Failed"]]:
        """Start :meth:`map`'s work and return a function that waits for its results, so
        the caller can work meanwhile (here: nothing starts before that function is called)."""
        items = list(items)
        labels = labels or [str(i) for i in range(len(items))]

        def gather():
            out = []
            for i, x in enumerate(items):
                out.append(guarded(fn, x))
                if on_done:
                    on_done(i + 1, len(items), labels[i])
            return out

        return gather

    def close(self) -> None:
        """Release workers (a no-op here)."""

    def abort(self) -> None:
        """Release workers at once, dropping queued work (Ctrl-C); :meth:`close` unless overridden."""
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ProcessExecutor(Executor):
    """Worker processes on this machine (one pool for the executor's life)."""

    name = "processes"

    def __init__(self, workers: int | None = None):
        self.workers = default_workers() if workers is None else max(1, workers)
        self._pool: ProcessPoolExecutor | None = None

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=mp.get_context("spawn"),
                                             initializer=single_threaded)
        return self._pool

    def submit(self, fn, items, labels=None, on_done=None):
        items = list(items)
        if self.workers == 1 or len(items) <= 1:
            return super().submit(fn, items, labels, on_done)
        labels = labels or [str(i) for i in range(len(items))]
        pool = self._get_pool()
        first = {pool.submit(guarded, fn, x): i for i, x in enumerate(items)}
        return lambda: self._gather(fn, items, labels, on_done, first)

    def _gather(self, fn, items, labels, on_done, futs):
        out: list = [None] * len(items)
        done = 0
        todo: list[int] = []
        for attempt in range(POOL_RESTARTS + 1):
            if attempt:
                pool = self._get_pool()
                futs = {pool.submit(guarded, fn, items[i]): i for i in todo}
            broken = []
            pending = set(futs)
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    i = futs[f]
                    try:
                        out[i] = f.result()
                    except BrokenProcessPool:
                        broken.append(i)
                        continue
                    done += 1
                    if on_done:
                        on_done(done, len(items), labels[i])
            if not broken:
                return out
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
            todo = sorted(broken)
        for i in todo:
            out[i] = Failed(f"worker process died {POOL_RESTARTS + 1} times on this item")
            done += 1
            if on_done:
                on_done(done, len(items), labels[i])
        return out

    def abort(self) -> None:
        """End the pool now (Ctrl-C): queued items are cancelled and running workers terminated."""
        if self._pool is not None:
            procs = list((getattr(self._pool, "_processes", None) or {}).values())
            self._pool.shutdown(wait=False, cancel_futures=True)
            for p in procs:
                p.terminate()
            self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


CONNECT_TIMEOUT_S = 30.0
"""Seconds to wait for an existing Dask scheduler to answer (dask's own default,
``distributed.comm.timeouts.connect``)."""


class DaskExecutor(Executor):
    """A ``dask.distributed`` cluster: ``scheduler`` (an address), an existing ``client``,
    or a ``LocalCluster`` of ``workers`` single-threaded processes started here.

    Raises :class:`capplan.errors.InputError` (exit 2) when no scheduler answers at
    ``scheduler`` within :data:`CONNECT_TIMEOUT_S`."""

    name = "dask"

    def __init__(self, scheduler: str | None = None, workers: int | None = None, client=None):
        from dask.distributed import Client, LocalCluster

        self._own = []
        if client is not None:
            self.client = client
        elif scheduler:
            try:
                self.client = Client(scheduler, timeout=CONNECT_TIMEOUT_S)
            except OSError as exc:  # dask raises OSError (a TimeoutError among them) when nothing answers
                raise InputError(
                    f"--scheduler / plan.scheduler {scheduler}: no Dask scheduler answered within "
                    f"{CONNECT_TIMEOUT_S:g} s ({type(exc).__name__}); check the address and that the scheduler is "
                    "running and reachable, or leave the scheduler out to start a LocalCluster here") from None
            self._own = [self.client]
        else:
            cluster = LocalCluster(n_workers=default_workers() if workers is None else max(1, workers),
                                   threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0",
                                   host="127.0.0.1", env=dict(SINGLE_THREAD_ENV))
            self.client = Client(cluster)
            self._own = [self.client, cluster]

    def submit(self, fn, items, labels=None, on_done=None):
        items = list(items)
        if not items:
            return list
        labels = labels or [str(i) for i in range(len(items))]
        futs = self.client.map(guarded, [fn] * len(items), items, pure=False)
        return lambda: self._gather(futs, labels, on_done)

    @staticmethod
    def _gather(futs, labels, on_done):
        from dask.distributed import as_completed

        index = {f.key: i for i, f in enumerate(futs)}
        out: list = [None] * len(futs)
        for n, f in enumerate(as_completed(futs), start=1):
            i = index[f.key]
            try:
                out[i] = f.result()
            except Exception as exc:  # noqa: BLE001  (KilledWorker & co: this item's failure, reported)
                out[i] = Failed.of(exc)
            if on_done:
                on_done(n, len(futs), labels[i])
        return out

    def close(self) -> None:
        for o in self._own:
            o.close()
        self._own = []


def make_executor(name: str = "processes", workers: int | None = None, scheduler: str | None = None) -> Executor:
    """The executor called ``name`` (:data:`EXECUTORS`).

    Raises ValueError for an unknown name, or ``scheduler`` with another executor than ``dask``.
    """
    if scheduler and name != "dask":
        raise ValueError(f"a scheduler address ({scheduler}) needs executor 'dask', not {name!r}")
    if name == "local":
        return Executor()
    if name == "processes":
        return ProcessExecutor(workers)
    if name == "dask":
        return DaskExecutor(scheduler, workers)
    raise ValueError(f"unknown executor {name!r}; use one of {', '.join(EXECUTORS)}")
