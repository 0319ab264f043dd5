"""``capplan dashboard``: start the Streamlit planning dashboard.

Runs ``streamlit run <dashboards/app.py>`` (located through the installed
``dashboards`` package) headless, bound to 127.0.0.1:8501 unless ``--host`` /
``--port`` say otherwise. The store it reads is passed in the environment
(``CAPPLAN_STORE``, ``CAPPLAN_CONFIG``, ``CAPPLAN_CONFIG_DIR``,
``CAPPLAN_DASHBOARD_READ_ONLY``).

Only the host it serves is accepted on the app's WebSocket (Streamlit's
``server.allowedHosts``; :func:`allowed_hosts`), so a page on another site cannot
reach it through DNS rebinding; ``--allowed-host`` adds a reverse proxy's name.
What the dashboard trusts is in docs/dashboard.md.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
from pathlib import Path
from typing import Optional

import typer

from capplan.config.settings import load_config
from capplan.errors import InputError

LOOPBACK = ("localhost", "127.0.0.1", "::1")
ANY = ("0.0.0.0", "::", "")


def allowed_hosts(host: str, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The ``Host`` names the app's WebSocket accepts (ports ignored): the loopback names, the
    bound address (for ``0.0.0.0``/``::``: this machine's host name and FQDN instead) and
    ``extra`` (names a reverse proxy forwards, e.g. ``capplan.example.com`` or ``*.example.com``).

    Raises InputError for ``*`` (any host: what this list exists to prevent) or an empty name."""
    names = list(LOOPBACK)
    names += [socket.gethostname(), socket.getfqdn()] if host in ANY else [host.strip("[]")]
    for e in extra:
        if e.strip() in ("", "*"):
            raise InputError(f"--allowed-host {e!r}: name a host (a wildcard subdomain such as *.example.com "
                             "is fine); '*' would accept any site's DNS rebinding")
        names.append(e.strip())
    return list(dict.fromkeys(n.lower() for n in names if n))


def streamlit_command(host: str, port: int, extra_hosts: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The ``streamlit run`` command line for the dashboard (``server.allowedHosts`` from
    :func:`allowed_hosts`; XSRF protection and CORS stay on, Streamlit's defaults)."""
    app = Path(importlib.util.find_spec("dashboards").origin).parent / "app.py"  # located, not imported

    hosts = [a for h in allowed_hosts(host, extra_hosts) for a in ("--server.allowedHosts", h)]
    return [sys.executable, "-m", "streamlit", "run", str(app), *hosts,
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
        read_only: bool = typer.Option(False, "--read-only", help="Hide the New run form (no run can be started "
                                       "from the browser) and show no absolute server path."),
        allowed_host: list[str] = typer.Option([], "--allowed-host", metavar="HOST",
                                               help="Also accept this Host name (a reverse proxy's, e.g. "
                                               "capplan.example.com or *.example.com); repeatable. "
                                               "The bound address and localhost are always accepted."),
    ):
        """Open the planning dashboard: Fleet, Forecasts, Plan, Manifests and What-if on the latest run."""

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
        if read_only:
            env["CAPPLAN_DASHBOARD_READ_ONLY"] = "1"
        else:
            env.pop("CAPPLAN_DASHBOARD_READ_ONLY", None)
        cmd = streamlit_command(host, port, allowed_host)
        typer.echo(f"capplan dashboard on http://{host}:{port} (store: "
                   f"{env.get('CAPPLAN_STORE') or Path('.capplan/store').resolve()})", err=True)
        sys.stderr.flush()
        sys.stdout.flush()
        # replace this process: signals (Ctrl-C, SIGTERM) reach the server directly
        os.execve(cmd[0], cmd, env)
