"""``capplan serve`` on a plan whose forecasts have ended (the sample's end in 2020): ``/readyz`` answers 503
and says why in one line, and ``/metrics`` carries ``capplan_plan_stale_seconds``; a fresh plan is ready and
0 s stale. In-process, on 127.0.0.1."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
import requests

from capplan.serve.plan import PlanSource
from capplan.serve.server import make_server
from capplan.store.local import Store
from tests.serve_fixture import write_run

WRITTEN = dt.datetime(2020, 5, 31, tzinfo=dt.timezone.utc)  # forecasts from then, 7 days long


def _serve(store, now: float):
    server = make_server(PlanSource(str(store.root), poll_s=0), "127.0.0.1", 0, 150, clock=lambda: now)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _stale_gauge(text: str) -> float:
    line = next(x for x in text.splitlines() if x.startswith("capplan_plan_stale_seconds "))
    return float(line.split()[1])


@pytest.mark.parametrize(("later", "ready"), [(dt.timedelta(days=2), True), (dt.timedelta(days=6.5 * 365), False)])
def test_readyz_is_503_with_the_reason_once_every_forecast_has_ended(tmp_path, later, ready):
    store = Store(tmp_path / "store")
    rid = write_run(store, 10.0, now=WRITTEN)
    server, url = _serve(store, (WRITTEN + later).timestamp())
    try:
        r = requests.get(url + "/readyz", timeout=5)
        doc = r.json()
        assert (r.status_code, doc["ready"], doc["run_id"]) == (200 if ready else 503, ready, rid)
        metrics = requests.get(url + "/metrics", timeout=5).text
        if ready:
            assert doc["stale"] is None and _stale_gauge(metrics) == 0.0
            assert "capplan_forecast_demand{" in metrics
        else:
            assert doc["stale"].startswith(f"no forecast covers now: the forecasts of run {rid} end at "
                                           "2020-06-06T23:55:00+00:00, ")
            assert "6.5 years before now" in doc["stale"] and "capplan plan --source store --publish" in doc["stale"]
            assert "\n" not in doc["stale"]
            assert _stale_gauge(metrics) == pytest.approx((later - dt.timedelta(days=7)).total_seconds(), abs=600)
            assert "capplan_forecast_demand{" not in metrics  # nothing to serve: hence not ready
    finally:
        server.shutdown()
        server.server_close()
