"""``capplan serve``: the store's latest plan as Prometheus metrics and JSON (:mod:`capplan.serve.server`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from capplan.cli.console import err
from capplan.config.settings import load_config
from capplan.errors import InputError
from capplan.serve.plan import PlanSource
from capplan.serve.server import make_server
from capplan.store.remote import check_store_url
from optimizer.inference.predictive import predictive_lead_s


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        host: str = typer.Option("127.0.0.1", "--host", help="Address to bind: 127.0.0.1 (local only), or 0.0.0.0 "
                                 "inside a pod."),
        port: int = typer.Option(9464, "--port", min=0, max=65535, help="Port to listen on (0: any free port)."),
        config: Optional[Path] = typer.Option(None, "--config", help="capplan.yaml: its store and the predictive "
                                              "lead (plan.cold_start_s + plan.metrics_lag_s).", show_default="none"),
        store: Optional[str] = typer.Option(None, "--store", help="Store folder or s3://, gs://, file:// URL.",
                                            show_default="the config's store, else .capplan/store"),
        poll_s: float = typer.Option(5.0, "--poll", min=0.0, help="Re-read the store's LATEST at most this often "
                                     "(seconds)."),
    ):
        """Serve the store's latest plan: /metrics (Prometheus), /healthz, /readyz and /api/v1/plans/latest.

        It re-reads the store when LATEST moves, never serves a half-written run, and keeps serving the last
        good plan when a newer run does not load.
        """
        cfg = load_config(config)
        root = check_store_url(store, "--store") if store else cfg.store
        lead = predictive_lead_s(cfg.plan.cold_start_s, cfg.plan.metrics_lag_s)
        source = PlanSource(root, poll_s=poll_s)
        try:
            server = make_server(source, host, port, lead)
        except OSError as exc:
            raise InputError(f"--host {host} --port {port}: cannot bind ({exc.strerror or exc})") from None
        source.current(force=True)
        h, p = server.server_address[:2]
        err.print(f"capplan serve: http://{h}:{p}/metrics (store {root}; plan "
                  f"{source.plan.run_id if source.plan else 'none yet'})", highlight=False, markup=False)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
