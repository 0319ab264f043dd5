"""``capplan serve``'s HTTP server (standard library ``http.server``, one thread per request).

Routes:

* ``GET /metrics``: the served plan in the Prometheus exposition format
  (:mod:`capplan.serve.metrics`);
* ``GET /healthz``: 200 while the process serves requests (liveness);
* ``GET /readyz``: 200 once a plan is loaded and some forecast of it covers now, else 503 (readiness: no
  plan metrics yet, or a stale plan whose forecasts have all ended: it serves no forecast samples); the
  body names the served run, ``stale`` says why it is stale (:func:`capplan.serve.metrics.stale_reason`)
  and ``last_error`` why the newest ``LATEST`` failed to load;
* ``GET /api/v1/plans/latest``: the served run's typed report (:class:`capplan.report.model.Report`)
  as JSON; 503 before any plan is loaded.

``HEAD`` is answered on every route with the headers ``GET`` would send and no body (RFC 9110,
section 9.3.2); other methods get 405 with ``Allow: GET, HEAD``. A connection that sends no
complete request within ``idle_timeout_s`` (default :data:`IDLE_TIMEOUT_S`) is closed, so idle or
stalled clients never hold a thread; a client that goes away mid-answer (an aborted scrape) ends
that request quietly.

Binds ``127.0.0.1`` unless told otherwise (``--host 0.0.0.0`` inside a pod).
"""

from __future__ import annotations

import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from capplan.serve.metrics import PlanCollector, stale_reason
from capplan.serve.plan import PlanSource

API_LATEST = "/api/v1/plans/latest"
IDLE_TIMEOUT_S = 30.0
"""Seconds a connection may wait for (the rest of) a request before it is closed."""


def make_server(source: PlanSource, host: str = "127.0.0.1", port: int = 9464, predictive_lead_s: int = 150,
                idle_timeout_s: float = IDLE_TIMEOUT_S, clock=time.time) -> ThreadingHTTPServer:
    """A server (not started: call ``serve_forever``) for ``source`` on ``host:port`` (port 0: any free one);
    connections idle for ``idle_timeout_s`` seconds are closed; ``clock``: epoch seconds now (the metrics'
    and the staleness check's time)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PlanCollector(source, predictive_lead_s, clock))

    class Handler(BaseHTTPRequestHandler):
        server_version = "capplan"
        timeout = idle_timeout_s  # socket timeout of each connection (socketserver.StreamRequestHandler)

        def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
            try:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError, TimeoutError):  # the client went away
                self.close_connection = True

        def do_HEAD(self):  # noqa: N802 (http.server's name): GET's headers, no body
            self.do_GET()

        def _not_allowed(self):  # RFC 9110 15.5.6: 405 with the methods the resource takes
            body = b'{"error": "method not allowed; use GET or HEAD"}'
            try:
                self.send_response(405)
                self.send_header("Allow", "GET, HEAD")
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError, TimeoutError):
                self.close_connection = True

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _not_allowed  # noqa: N815 (http.server's names)

        def do_GET(self):  # noqa: N802 (http.server's name)
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, generate_latest(registry), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                self._send(200, b'{"status": "ok"}')
            elif path == "/readyz":
                plan = source.current()
                stale = stale_reason(plan, pd.Timestamp(clock(), unit="s", tz="UTC")) if plan is not None else None
                ready = plan is not None and stale is None
                doc = {"ready": ready, "run_id": plan.run_id if plan else None, "stale": stale,
                       "last_error": source.last_error}
                if plan is None:  # say why in one line: nothing published yet, or the newest LATEST failed
                    doc["reason"] = (f"the store's LATEST could not be loaded: {source.last_error}" if source.last_error
                                     else "no plan published in the store yet (runs/LATEST is missing): run "
                                     "`capplan plan --publish` or `capplan plan` on the whole source")
                self._send(200 if ready else 503, json.dumps(doc).encode())
            elif path == API_LATEST:
                plan = source.current()
                if plan is None:
                    self._send(503, json.dumps({"error": "no plan loaded yet", "last_error": source.last_error}
                                               ).encode())
                else:
                    self._send(200, plan.report.to_json().encode())
            else:
                self._send(404, b'{"error": "not found"}')

        def log_message(self, fmt, *args):  # access logs off: Prometheus scrapes every few seconds
            return

    return _Server((host, port), Handler)


class _Server(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` whose request threads end quietly when the client goes away (a reset or
    broken connection: no traceback per aborted scrape); other errors are reported as before."""

    daemon_threads = True

    def handle_error(self, request, client_address):
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


__all__ = ["make_server", "API_LATEST", "IDLE_TIMEOUT_S"]
