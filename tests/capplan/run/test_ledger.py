"""The per-series ledger: every stage writes notes, warnings, failures and cache reuse to it in
order, and the load stage puts the source's notes and suspect-spike warnings there, so every
entry point (the CLI, the Airflow plan, the backtest) reports them the same way."""

from __future__ import annotations

import numpy as np
import pandas as pd

from capplan.config.settings import CapplanConfig
from capplan.run.stages.load import load
from capplan.run.state import Ledger, PlanState


def test_ledger_keeps_every_line_in_order_and_failures_in_failing_order():
    led = Ledger()
    for i in range(25):  # no cap: the report shows them all
        led.warn("a", f"w{i}")
    led.note("a", "n1")
    led.note("b", "n2")
    led.fail("c", "forecast", "ValueError: x", "f.py:1")
    led.fail("b", "search", "RuntimeError: y")
    led.reuse("a", "search", "reused")
    assert led.warnings("a") == [f"w{i}" for i in range(25)]
    assert led.notes("a") == ["n1"] and led.notes("b") == ["n2"] and led.notes("zzz") == []
    assert list(led.failed) == ["c", "b"] and led.failed["c"] == {"stage": "forecast", "error": "ValueError: x",
                                                                   "where": "f.py:1"}
    assert led.reused("a") == {"search": "reused"} and led.reused("b") == {}
    assert "c: ValueError: x" in led.failures()
    led.warnings("a").append("not stored")  # readers get copies
    assert len(led.warnings("a")) == 25


def test_load_stage_writes_source_notes_and_spike_warnings_to_the_ledger(tmp_path):
    ts = pd.date_range("2024-01-01", periods=4 * 288, freq="5min", tz="UTC")
    rng = np.random.default_rng(0)
    a = np.round(8 + rng.uniform(0, 1, len(ts)), 1)
    a[100] = 900000.0  # a suspect spike: kept, with a warning
    b = np.round(3 + rng.uniform(0, 1, len(ts)), 1)
    f = pd.concat([pd.DataFrame({"timestamp": ts, "series_id": "a", "value": a}),
                   pd.DataFrame({"timestamp": ts, "series_id": "b", "value": b})])
    p = tmp_path / "d.csv"
    f.to_csv(p, index=False)
    state = PlanState(CapplanConfig(), f"csv:{p}")
    load(state)
    assert set(state.prep.windows) == {"a", "b"}
    wa = state.ledger.warnings("a")
    assert len(wa) == 1 and wa[0].startswith("data: 1 value(s) above") and "900000" in wa[0]
    assert state.ledger.warnings("b") == []
    # the source's assumption (no kind column: training) and the short history's window rule, per series
    for sid in ("a", "b"):
        notes = " ".join(state.ledger.notes(sid))
        assert "training" in notes and "thirds" in notes, notes
    assert state.ledger.failed == {}
