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
from capplan.cli.console import err, out
from capplan.config.prometheus import PrometheusConfig, parse_duration
from capplan.config.settings import load_config
from capplan.config.yaml_bounds import MAX_BYTES, describe
from capplan.errors import InputError, SourceError
from capplan.prometheus.client import PrometheusClient, PrometheusError
from capplan.prometheus.discover import check_out, discover, dump, fitted, header_env, starter_config
from capplan.prometheus.gpu_inventory import as_dict as gpu_doc
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
        prometheus_url: Optional[str] = typer.Option(None, "--prometheus-url", help="Prometheus-compatible URL "
                                                     "(Prometheus, VictoriaMetrics, Thanos, Mimir).",
                                                     show_default="prometheus.url of --config"),
        config: Optional[Path] = typer.Option(None, "--config", help="capplan.yaml whose prometheus: section "
                                              "(url, bearer_token_env, basic_auth, ca_file, verify_tls, headers) "
                                              "discover connects with and the written config keeps; "
                                              "--prometheus-url and --header override or add to it.",
                                              show_default="none"),
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
        scrape_interval: Optional[str] = typer.Option(None, "--scrape-interval", help="The exporters' scrape "
                                                      "interval.", show_default="prometheus.scrape_interval of "
                                                      "--config, else 1m"),
        fmt: Format = typer.Option(Format.table, "--format", help="table or json"),
        timeout: float = typer.Option(10.0, "--timeout", min=0.1, help="Seconds each query may take, answer "
                                      "included, before it counts as failed."),
        retries: int = typer.Option(2, "--retries", min=0, max=20, help="Retries of a query that timed out or got "
                                    "HTTP 5xx/429 (waits 1 s, then 2 s, ...); a connection refused fails at once."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines on stderr."),
    ):
        """Find what to plan: GPU namespaces, Volcano queues and Kueue ClusterQueues with demand in the
        last --lookback, with their peak GPUs, and the GPU models (normalised, with their GFD product labels
        and GPU counts), MIG resources and Kueue flavors the cluster reports; write a starter config that
        `capplan ingest` and `capplan plan` take without edits. Each query and retry is reported on stderr as it starts.

        Exit codes: 0 found something and wrote --out; 2 bad input, refused credentials (HTTP 401/403) or
        another 4xx, or nothing found; 1 the store unreachable (refused, unknown host) or failing (timeouts,
        5xx after --retries). Every failure is one `error:` line naming the URL and the cause."""
        headers = parse_headers(header)
        env = dict(os.environ)
        env.update({header_env(k): v for k, v in headers.items()})
        base = config_prometheus(config)
        cfg = connection(base, prometheus_url, scrape_interval, list(headers), timeout, retries)
        prometheus_url, scrape_interval = cfg.url, cfg.scrape_interval
        check_store_url(store, "--store")  # no secret in the URL the written config names
        check_out(out_file, force)  # before any query: a hand-written config is never replaced
        try:
            lb = parse_duration(lookback)
        except ValueError as exc:
            raise InputError(f"--lookback: {exc}") from None
        end = to_epoch(at, "--at") if at else int(time.time())

        def progress(line: str) -> None:
            if not quiet:
                err.print(line, highlight=False, markup=False)

        client = PrometheusClient(cfg, env=env, retry_connect=False, on_retry=progress)
        try:
            found = discover(client, end, lb, parse_duration(scrape_interval), progress=progress)
        except PrometheusError as exc:  # one line: the URL and the cause (never the query or a secret)
            line = f"Prometheus at {cfg.url}: {exc.reason}"
            if exc.bad_input:
                raise InputError(line) from None
            typer.echo(f"error: {line}", err=True)
            raise typer.Exit(1) from None
        except SourceError as exc:  # an answer that is not what a Prometheus API sends
            typer.echo(f"error: Prometheus at {cfg.url}: {exc}", err=True)
            raise typer.Exit(1) from None
        finally:
            client.close()
        doc = {"namespaces": found.namespaces, "volcano_queues": found.volcano, "kueue_cluster_queues": found.kueue,
               **gpu_doc(found.gpus), "config": str(out_file)}
        for origin in sorted(client.answered_by):  # said, never silent: another host's answers were read
            line = (f"answered by {origin}: {cfg.url} redirected there (another host or port), so the credentials "
                    "and secret headers were not sent; check prometheus.url if that host is not yours")
            doc.setdefault("notes", []).append(line)
            err.print(f"note: {line}", highlight=False, markup=False)
        if not (found.namespaces or found.volcano or found.kueue or found.gpus):
            raise InputError(f"{prometheus_url}: no GPU namespace, Volcano queue or Kueue ClusterQueue with demand "
                             f"in the {lookback} before {pd_iso(end)}; check --at/--lookback and that "
                             "kube-state-metrics, Volcano or Kueue metrics are scraped")
        def text(f) -> str:
            return dump(with_access(starter_config(f, prometheus_url, list(headers), store, scrape_interval), base))

        kept, left = fitted(found, lambda f: len(text(f).encode()) <= MAX_BYTES)  # capplan must read it back
        atomic.write_text(out_file, text(kept))
        if left:
            doc["left_out"] = left
            err.print(f"discover: {len(left)} left out of {out_file} (the smallest peaks) so that it stays within "
                      f"capplan's {MAX_BYTES // 1024} KiB config limit: {', '.join(left[:5])}"
                      + (" ..." if len(left) > 5 else "") + " (--format json lists them)", highlight=False,
                      markup=False)

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
            if found.gpus:
                g = Table(title="GPU models (GPU-equivalents allocatable), MIG resources and Kueue flavors")
                for c in ("kind", "name", "seen as", "GPUs"):
                    g.add_column(c, justify="right" if c == "GPUs" else "left")
                for name, m in sorted(found.gpus.models.items()):
                    g.add_row("gpu model", name, ", ".join(m["products"] + m["model_names"]), f"{m['gpus']:.2f}")
                for e in found.gpus.mig:
                    g.add_row("mig resource", e["resource"], f"{e['profile']} {e['strategy']} on "
                              f"{', '.join(e['gpu_models'])}", f"{e['units']:.0f} units")
                for name, f in sorted(found.gpus.flavors.items()):
                    g.add_row("kueue flavor", name, f["gpu_model"] or "?", f"{f['nominal_quota']:.2f} quota")
                console.print(g)
                for n in found.gpus.notes:
                    console.print(f"note: {n}", highlight=False, markup=False)
            console.print(f"wrote {out_file}" + (f"; export {', '.join(header_env(h) for h in headers)} before "
                                                 "`capplan ingest`" if headers else ""))

        def rows():
            r = [{"kind": "namespace", "name": ns, "resource": res, "peak_gpus": v}
                 for ns, per in sorted(found.namespaces.items()) for res, v in sorted(per.items())]
            r += [{"kind": "volcano_queue", "name": q, "resource": "", "peak_gpus": v}
                  for q, v in found.volcano.items()]
            r += [{"kind": "kueue_cluster_queue", "name": q, "resource": "", "peak_gpus": v}
                  for q, v in found.kueue.items()]
            r += [{"kind": "gpu_model", "name": name, "resource": "|".join(m["products"]), "peak_gpus": m["gpus"]}
                  for name, m in sorted(found.gpus.models.items())]
            r += [{"kind": "kueue_flavor", "name": name, "resource": f["gpu_model"] or "", "peak_gpus": f["peak_usage"]}
                  for name, f in sorted(found.gpus.flavors.items())]
            return r

        render(fmt, doc, rows, table, out, None)


def config_prometheus(path: Path | None) -> PrometheusConfig | None:
    """The ``prometheus:`` section of the ``--config`` file (None without one). Raises InputError for a config
    that does not load (:func:`capplan.config.settings.load_config` names the key) or has no such section."""
    if path is None:
        return None
    cfg = load_config(path)
    if cfg.prometheus is None:
        raise InputError(f"--config {path}: has no prometheus: section; add one (url, and bearer_token_env, "
                         "basic_auth, ca_file or headers as the server needs) or give --prometheus-url")
    return cfg.prometheus


def connection(base: PrometheusConfig | None, url: str | None, scrape_interval: str | None, header_names: list[str],
               timeout: float, retries: int) -> PrometheusConfig:
    """How discover connects: the ``--config`` file's ``prometheus:`` section ``base`` (its credentials, headers
    and TLS options) with ``--prometheus-url`` and ``--scrape-interval`` over it when given, the ``--header``
    names added (values from ``$CAPPLAN_HEADER_<NAME>``) and discover's own ``--timeout``/``--retries``.
    Raises InputError without a URL, or naming the field a value fails."""
    url = url or (base.url if base is not None else None)
    if not url:
        raise InputError("--prometheus-url: required (or --config with a prometheus: section naming its url)")
    doc = base.model_dump(exclude_none=True) if base is not None else {}
    try:
        return PrometheusConfig.model_validate({
            **doc, "url": url, "scrape_interval": scrape_interval or doc.get("scrape_interval", "1m"),
            "headers": {**doc.get("headers", {}), **{k: {"env": header_env(k)} for k in header_names}},
            "timeout_s": timeout, "retries": retries})
    except ValidationError as exc:  # the field's own message (pydantic's last line is only a link)
        raise InputError(f"--prometheus-url/--header: {describe(exc.errors()[0], None)}") from None


#: the prometheus: keys that say how to reach the server, which a starter config keeps from --config
ACCESS_KEYS = ("bearer_token_env", "basic_auth", "ca_file", "verify_tls", "exported_labels", "partial_response")


def with_access(doc: dict, base: PrometheusConfig | None) -> dict:
    """The starter config ``doc`` (:func:`capplan.prometheus.discover.starter_config`) with the ``--config``
    file's access settings (:data:`ACCESS_KEYS`, set ones only, and its headers under those ``--header`` named),
    so that the written config connects as discover did; secrets stay names of variables or files."""
    if base is None:
        return doc
    prom = doc["prometheus"]
    set_keys = base.model_dump(exclude_none=True, exclude_defaults=True)
    prom.update({k: set_keys[k] for k in ACCESS_KEYS if k in set_keys})
    if base.headers:
        prom["headers"] = {**{k: v.model_dump(exclude_none=True) for k, v in base.headers.items()},
                           **prom.get("headers", {})}
    return doc


def pd_iso(epoch_s: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime(epoch_s))
