"""The search half of the store's cache (:mod:`capplan.run.cache`, which describes the entries):
whole search outcomes per series and tuned policies, so an hourly rerun searches only what
new data touched.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from capplan.run.cache import Entries, code_fingerprint, fingerprint
from optimizer.book.purchase_check import QuotaCheck
from optimizer.plan.policy import Metrics
from optimizer.rivals.perfect_foresight import OracleResult
from optimizer.search.tuning import SearchOutcome, Tuned, tune_key_parts


def _metrics_doc(m) -> dict | None:
    return None if m is None else {**m.model_dump(), "daily_coverage": m.daily_coverage}


#: the fields of :class:`optimizer.search.tuning.SearchOutcome` that :class:`SearchCache` stores and restores
#: (``tests/capplan/run/test_cache.py`` fails when the outcome gains one, so none is silently dropped)
OUTCOME_FIELDS = ("params", "recommended", "baseline", "random", "tuning", "trials", "replay", "notes", "peers",
                  "oracle", "recommended_policy", "searched", "quota")


class SearchCache:
    """Whole search outcomes per series (:func:`optimizer.search.tuning.search_one`), keyed by the task,
    and tuned policies (:func:`optimizer.search.tuning.tune_policy`), keyed by the tuning half's inputs."""

    def __init__(self, root: str | os.PathLike):
        self.entries = Entries(Path(root) / "cache" / "search")
        self.tuned = Entries(Path(root) / "cache" / "tuning")

    @staticmethod
    def tuned_key(task) -> str:
        """Fingerprint of :func:`optimizer.search.tuning.tune_key_parts` of ``task`` and the code."""
        return fingerprint("tuning", tune_key_parts(task), code_fingerprint("search"))

    def get_tuned(self, key: str):
        """``(Tuned, "")``, or ``(None, reason)`` (``reason`` empty when there is no entry)."""
        got = self.tuned.read(key)
        if got is None or isinstance(got, str):
            return None, got or ""
        try:
            return Tuned(**got[1]["payload"]), ""
        except (KeyError, TypeError) as exc:  # a document of another shape: recomputed
            return None, f"{type(exc).__name__}: {exc}"

    def put_tuned(self, key: str, tuned) -> None:
        self.tuned.write_doc(key, dataclasses.asdict(tuned))

    @staticmethod
    def key(task) -> str:
        """Fingerprint of a :class:`optimizer.search.tuning.SearchTask` and the code that runs it."""
        return fingerprint("search", task, code_fingerprint("search"))

    def get(self, key: str):
        """``(SearchOutcome, note)``: the stored outcome (note ``""``), or ``(None, reason)``
        (``reason`` empty when there is simply no entry)."""
        got = self.entries.read(key)
        if got is None or isinstance(got, str):
            return None, got or ""
        replay, doc = got
        try:
            o = doc["outcome"]
            met = {k: None if o[k] is None else Metrics(**o[k]) for k in ("recommended", "baseline", "random",
                                                                          "searched")}
            oc = SearchOutcome(params=o["params"], tuning=o["tuning"], trials=o["trials"], replay=replay,
                               notes=o["notes"], peers=None if o["peers"] is None else
                               {k: Metrics(**v) for k, v in o["peers"].items()},
                               oracle=None if o["oracle"] is None else OracleResult(**o["oracle"]),
                               recommended_policy=o["recommended_policy"],
                               quota=None if o.get("quota") is None else QuotaCheck(**o["quota"]), **met)
        except (KeyError, TypeError, ValueError) as exc:  # a document of another shape: recomputed
            return None, f"{type(exc).__name__}: {exc}"
        return oc, ""

    def put(self, key: str, oc) -> None:
        doc = {"params": oc.params, "tuning": oc.tuning, "trials": oc.trials, "notes": oc.notes,
               "recommended": _metrics_doc(oc.recommended), "baseline": _metrics_doc(oc.baseline),
               "random": _metrics_doc(oc.random), "searched": _metrics_doc(oc.searched),
               "peers": None if oc.peers is None else {k: _metrics_doc(m) for k, m in oc.peers.items()},
               "oracle": None if oc.oracle is None else oc.oracle.model_dump(),
               "recommended_policy": oc.recommended_policy,
               "quota": None if oc.quota is None else oc.quota.model_dump()}
        self.entries.write(key, oc.replay.reset_index(drop=True), {"outcome": doc})
