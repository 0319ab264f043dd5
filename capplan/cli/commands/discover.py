"""``capplan discover``: list GPU namespaces, Volcano queues and Kueue ClusterQueues with recent
demand in a Prometheus-compatible store, and write a starter ``capplan.yaml`` for them."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Optional

import typer
from pydantic import ValidationError
from rich.table import Table

from capplan.cli.commands.output import Format, render
from capplan.cli.console import out
from capplan.config.prometheus import PrometheusConfig, parse_duration
from capplan.config.yaml_bounds import describe
from capplan.errors import InputError
from capplan.prometheus.client import PrometheusClient
from capplan.prometheus.discover import check_out, discover, dump, header_env, starter_config
from capplan.sources.prometheus import to_epoch
from capplan.store import atomic
from capplan.store.remote import check_store_url


def parse_headers(pairs: list[str] | None) -> dict[str, str]:
    """``["Name=value", ...]`` -> {name: value}. Raises InputError naming the bad item (never its value)."""
    outd = {}
    for i, item in enumerate(pairs or [], 1):
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value:
            raise InputError(f"--header #{i}: expected NAME=VALUE (e.g. X-Scope-OrgID=<tenant>)")
        outd[name.strip()] = value
    return outd


def register(app: typer.Typer) -> None:
    @app.command("discover")
    def discover_cmd(
        prometheus_url: str = typer.Option(..., "--prometheus-url", help="Prometheus-compatible URL (Prometheus, "
                                           "VictoriaMetrics, Thanos, Mimir)."),
        header: Optional[list[str]] = typer.Option(None, "--header", metavar="NAME=VALUE", help="Extra header for "
                                                   "every request, e.g. X-Scope-OrgID=<tenant>; the written config "
                                                   "reads it from $CAPPLAN_HEADER_<NAME> (values are never written "
                                                   "or printed)."),
        out_file: Path = typer.Option(Path("capplan.yaml"), "--out", help="Starter config to write (replaced "
                                      "atomically; an existing file only if discover wrote it, or with --force)."),
        force: bool = typer.Option(False, "--force", help="Replace --out even if capplan discover did not write it."),
        store: str = typer.Option("store", "--store", help="store folder the written config names"),
        lookback: str = typer.Option("7d", "--lookback", help="How far back demand counts as recent."),
        at: Optional[str] = typer.Option(None, "--at", help="ISO 8601 end of the lookback (default: now)."),
        scrape_interval: str = typer.Option("1m", "--scrape-interval", help="The exporters' scrape interval."),
        fmt: Format = typer.Option(Format.table, "--format", help="table or json"),
    ):
        """Find what to plan: GPU namespaces, Volcano queues and Kueue ClusterQueues with demand in the
        last --lookback, with their peak GPUs; write a starter config that `capplan ingest` and
        `capplan plan` take without edits.

        Exit codes: 0 found something and wrote --out; 2 bad input, refused credentials or nothing found;
        1 the store unreachable or failing."""
        headers = parse_headers(header)
        env = dict(os.environ)
        env.update({header_env(k): v for k, v in headers.items()})
        try:
            cfg = PrometheusConfig.model_validate({"url": prometheus_url, "scrape_interval": scrape_interval,
                                                   "headers": {k: {"env": header_env(k)} for k in headers}})
        except ValidationError as exc:  # the field's own message (pydantic's last line is only a link)
            raise InputError(f"--prometheus-url/--header: {describe(exc.errors()[0], None)}") from None
        check_store_url(store, "--store")  # no secret in the URL the written config names
        check_out(out_file, force)  # before any query: a hand-written config is never replaced
        lb = parse_duration(lookback)
        end = to_epoch(at, "--at") if at else int(time.time())
        client = PrometheusClient(cfg, env=env)
        try:
            found = discover(client, end, lb, parse_duration(scrape_interval))
        finally:
            client.close()
        doc = {"namespaces": found.namespaces, "volcano_queues": found.volcano, "kueue_cluster_queues": found.kueue,
               "config": str(out_file)}
        if not (found.namespaces or found.volcano or found.kueue):
            raise InputError(f"{prometheus_url}: no GPU namespace, Volcano queue or Kueue ClusterQueue with demand "
                             f"in the {lookback} before {pd_iso(end)}; check --at/--lookback and that "
                             "kube-state-metrics, Volcano or Kueue metrics are scraped")
        atomic.write_text(out_file, dump(starter_config(found, prometheus_url, list(headers), store,
                                                        scrape_interval)))

        def table(console):
            t = Table(title=f"capplan discover: peak GPUs in the {lookback} before {pd_iso(end)}")
            for c in ("kind", "name", "peak GPUs"):
                t.add_column(c, justify="right" if c == "peak GPUs" else "left")
            for ns, per in sorted(found.namespaces.items()):
                for res, v in sorted(per.items()):
                    t.add_row("namespace", ns + ("" if res == "nvidia_com_gpu" else f" ({res})"), f"{v:.2f}")
            for q, v in sorted(found.volcano.items()):
                t.add_row("volcano queue", q, f"{v:.2f}")
            for q, v in sorted(found.kueue.items()):
                t.add_row("kueue clusterqueue", q, f"{v:.2f}")
            console.print(t)
            console.print(f"wrote {out_file}" + (f"; export {', '.join(header_env(h) for h in headers)} before "
                                                 "`capplan ingest`" if headers else ""))

        def rows():
            r = [{"kind": "namespace", "name": ns, "resource": res, "peak_gpus": v}
                 for ns, per in sorted(found.namespaces.items()) for res, v in sorted(per.items())]
            r += [{"kind": "volcano_queue", "name": q, "resource": "", "peak_gpus": v}
                  for q, v in found.volcano.items()]
            r += [{"kind": "kueue_cluster_queue", "name": q, "resource": "", "peak_gpus": v}
                  for q, v in found.kueue.items()]
            return r

        render(fmt, doc, rows, table, out, None)


def pd_iso(epoch_s: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(epoch_s))
