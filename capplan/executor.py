"""The parallel executor: one call maps a function over many series.

Work is spread over worker processes (``spawn`` context: safe after
TensorFlow or Prophet have started threads in the parent) with
``concurrent.futures``; ``workers=1`` runs in-process, in order. Results come
back in input order, so figures do not depend on scheduling.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def default_workers() -> int:
    """At most 2, and no more than the CPUs this process may use."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        n = os.cpu_count() or 1
    return max(1, min(2, n))


def map_series(fn: Callable[[T], R], items: Iterable[T], workers: int | None = None,
               on_done: Callable[[int, int], None] | None = None) -> list[R]:
    """``[fn(x) for x in items]``, in parallel when ``workers > 1``.

    ``fn`` and the items must be picklable (top-level functions, plain data).
    Exceptions propagate to the caller.
    """
    items = list(items)
    workers = default_workers() if workers is None else max(1, workers)
    if workers == 1 or len(items) <= 1:
        out = []
        for i, x in enumerate(items):
            out.append(fn(x))
            if on_done:
                on_done(i + 1, len(items))
        return out
    with ProcessPoolExecutor(max_workers=min(workers, len(items)), mp_context=mp.get_context("spawn")) as ex:
        futs = [ex.submit(fn, x) for x in items]
        out = []
        for i, f in enumerate(futs):
            out.append(f.result())
            if on_done:
                on_done(i + 1, len(items))
        return out
