"""``capplan dashboard``: start the Streamlit planning dashboard.

Runs ``streamlit run <dashboards/app.py>`` (located through the installed
``dashboards`` package) headless, bound to 127.0.0.1:8501 unless ``--host`` /
``--port`` say otherwise. The store it reads is passed in the environment
(``CAPPLAN_STORE``, ``CAPPLAN_CONFIG``, ``CAPPLAN_CONFIG_DIR``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import typer

from capplan.errors import InputError


def streamlit_command(host: str, port: int) -> list[str]:
    """The ``streamlit run`` command line for the dashboard."""
    from dashboards import APP

    return [sys.executable, "-m", "streamlit", "run", str(APP),
            "--server.address", host, "--server.port", str(port), "--server.headless", "true",
            "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
            "--global.developmentMode", "false",
            "--client.toolbarMode", "minimal"]


def register(app: typer.Typer) -> None:
    @app.command("dashboard")
    def dashboard(
        host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (default: local only)."),
        port: int = typer.Option(8501, "--port", min=1, max=65535, help="Port to listen on."),
        store: Optional[Path] = typer.Option(None, "--store", help="Store folder to read runs from "
                                             "(default: the config's store, else .capplan/store)."),
        config: Optional[Path] = typer.Option(None, "--config", help="capplan.yaml: its store, prices and plan "
                                              "settings (used by What-if and by new runs)."),
        config_dir: Optional[Path] = typer.Option(None, "--config-dir", help="Folder whose *.yaml configs the "
                                                  "sidebar's New run may use (besides --config); no other server "
                                                  "path can be chosen from the browser."),
    ):
        """Open the planning dashboard: Fleet, Forecasts, Plan, Manifests and What-if on the latest run."""
        from capplan.config import load_config

        env = dict(os.environ)
        if config is not None:
            cfg = load_config(config)  # fail early, exit 2, on a bad config
            env["CAPPLAN_CONFIG"] = str(config.resolve())
            env["CAPPLAN_STORE"] = cfg.store
        if config_dir is not None:
            if not config_dir.is_dir():
                raise InputError(f"--config-dir {config_dir}: not a folder")
            env["CAPPLAN_CONFIG_DIR"] = str(config_dir.resolve())
        if store is not None:
            if store.exists() and not store.is_dir():
                raise InputError(f"--store {store}: not a folder")
            env["CAPPLAN_STORE"] = str(store.resolve())
        cmd = streamlit_command(host, port)
        typer.echo(f"capplan dashboard on http://{host}:{port} (store: "
                   f"{env.get('CAPPLAN_STORE') or Path('.capplan/store').resolve()})", err=True)
        sys.stderr.flush()
        sys.stdout.flush()
        # replace this process: signals (Ctrl-C, SIGTERM) reach the server directly
        os.execve(cmd[0], cmd, env)
