"""A Prometheus answer that repeats a timestamp with different values, or holds negative GPU counts, is
stored with a note saying so (the largest value of a repeat kept, as regularising does), never silently."""

from __future__ import annotations

import numpy as np
import pandas as pd

from capplan.prometheus.parse import combine
from capplan.sources.prometheus import ingest
from capplan.store.local import Store
from tests.capplan.prometheus.test_prometheus_faults import epoch, fake_server, send
from tests.capplan.prometheus.test_prometheus_tenants import body, cfg

DAY = pd.Timestamp("2024-03-04T00:00:00Z")
HOUR = DAY + pd.Timedelta(hours=1)


def test_combine_keeps_the_largest_of_a_repeated_timestamp_with_a_note():
    ts = np.array([0, 300_000, 300_000, 600_000, 600_000], np.int64)
    x = np.array([1.0, 3.0, 5.0, 2.0, 2.0])
    t, v, notes = combine([({}, ts, x)], None, "series a")
    assert t.tolist() == [0, 300_000, 600_000] and v.tolist() == [1.0, 5.0, 2.0]
    assert len(notes) == 1 and notes[0].startswith("1 timestamps were answered more than once with different")
    t, v, notes = combine([({}, ts[[0, 3, 4]], x[[0, 3, 4]])], None, "series a")  # equal repeats: one sample
    assert t.tolist() == [0, 600_000] and notes == []


def test_ingest_notes_repeats_and_negative_counts(tmp_path):
    t0 = epoch(DAY)

    def answer(h, q):
        vals = [[t0, "3"], [t0 + 300, "4"], [t0 + 300, "7"], [t0 + 600, "-2"], [t0 + 900, "1"]]
        send(h, 200, body([{"metric": {}, "values": vals}]))

    with fake_server(answer) as url:
        [r] = ingest(cfg(url, tmp_path / "s"), start=DAY.isoformat(), end=(DAY + pd.Timedelta("15min")).isoformat())
    assert r.status == "ok"
    assert any("answered more than once with different values" in n for n in r.notes)
    assert any(n.startswith("1 negative value(s) stored as pulled (first -2 at ") for n in r.notes)
    f, _, state = Store(tmp_path / "s").read_series("pool/a")
    assert f["value"].tolist() == [3.0, 7.0, -2.0, 1.0]
    assert any("negative" in n for n in state["notes"])
