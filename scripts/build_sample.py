"""Derive the embedded sample (``data/sample/``) from the real traces in ``../shared/data``.

Run from the repository root::

    python scripts/build_sample.py [--shared ../shared/data] [--out data/sample]

Output
------
``history.parquet``
    Tidy frame ``series_id, timestamp (datetime64[ns, UTC]), value (float64)``.
``series.json``
    Per-series metadata: ``kind``, ``unit``, ``gpu_model``, ``timezone`` and
    source-specific facts (``quota_gpus`` for training pools,
    ``gpus_per_replica`` and the per-replica throughput for inference).

Derivation (also documented in the README)
------------------------------------------
* **Helios** (``helios/<vc>_cluster_sequence_vc.csv.gz``, one row per minute, local
  time of a cluster in China, UTC+8): demand = ``running_gpu_num + pending_gpu_num``
  (GPUs), aggregated to 5 minutes with ``max`` (the pool must hold the peak of the
  window, like PromQL ``max_over_time(...[5m])``). The team's quota
  ``total_gpu_num`` on the last day is stored as ``quota_gpus`` (today's capacity).
  Series id ``train/<vc>``.
* **NASA HTTP** (``nasa_http/workload.tbz2``, one integer per second from
  1995-07-01 00:00 US/Eastern): the first 58 days of seconds are kept and timed by
  counting seconds (the trace has no timestamps; after the ~1.6-day outage of
  early August the derived dates drift, as the data README warns). The request
  rate (req/s) per 5 minutes is its mean; replicas needed =
  ``ceil(rate / NASA_RPS_PER_REPLICA)`` with ``NASA_RPS_PER_REPLICA = 0.1`` req/s,
  i.e. one replica of a GPU model server handles one request every 10 s
  (an LLM-style request of several seconds of generation). Series id
  ``infer/nasa-http``.
* **Azure LLM conversation trace** (one hour, 2023-11-16): tokens per minute
  (context + generated); replicas needed = ``ceil(tokens_per_s /
  AZURE_TOKENS_PER_S_PER_REPLICA)`` with 1,000 tokens/s per replica. Kept at 1-minute
  resolution (60 points); the pipeline aggregates it to the 5-minute planning grid.
  Series id ``infer/azure-llm-conv``: short and bursty, it exercises the fallbacks.
"""

from __future__ import annotations

import argparse
import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd

NASA_RPS_PER_REPLICA = 0.1
NASA_DAYS = 58
AZURE_TOKENS_PER_S_PER_REPLICA = 1000.0
HELIOS_TZ = "Asia/Shanghai"


def helios_series(path: Path) -> tuple[str, pd.DataFrame, dict]:
    vc = path.name.split("_")[0]
    raw = pd.read_csv(path, usecols=["time", "total_gpu_num", "running_gpu_num", "pending_gpu_num"])
    ts = pd.to_datetime(raw["time"]).dt.tz_localize(HELIOS_TZ).dt.tz_convert("UTC")
    demand = (raw["running_gpu_num"] + raw["pending_gpu_num"]).astype("float64")
    s = pd.Series(demand.to_numpy(), index=pd.DatetimeIndex(ts)).resample("5min").max()
    sid = f"train/{vc}"
    frame = pd.DataFrame({"series_id": sid, "timestamp": s.index, "value": s.to_numpy()})
    meta = {
        "kind": "training",
        "unit": "gpu",
        "gpu_model": "V100-32GB",
        "timezone": HELIOS_TZ,
        "quota_gpus": int(raw["total_gpu_num"].iloc[-1]),
        "source": f"helios/{path.name}",
    }
    return sid, frame, meta


def nasa_series(path: Path) -> tuple[str, pd.DataFrame, dict]:
    with tarfile.open(path, "r:bz2") as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("workload.txt"))
        text = tar.extractfile(member).read()
    counts = np.loadtxt(io.BytesIO(text), dtype=np.int64).ravel()
    counts = counts[: NASA_DAYS * 86400]
    start = pd.Timestamp("1995-07-01 00:00", tz="US/Eastern").tz_convert("UTC")
    per5 = counts[: len(counts) // 300 * 300].reshape(-1, 300).mean(axis=1)
    replicas = np.ceil(per5 / NASA_RPS_PER_REPLICA)
    idx = pd.date_range(start, periods=len(replicas), freq="5min")
    sid = "infer/nasa-http"
    frame = pd.DataFrame({"series_id": sid, "timestamp": idx, "value": replicas.astype("float64")})
    meta = {
        "kind": "inference",
        "unit": "replica",
        "gpu_model": "A10G-24GB",
        "gpus_per_replica": 1,
        "timezone": "America/New_York",
        "throughput_per_replica": f"{NASA_RPS_PER_REPLICA} requests/s",
        "source": "nasa_http/workload.tbz2",
    }
    return sid, frame, meta


def azure_series(path: Path) -> tuple[str, pd.DataFrame, dict]:
    raw = pd.read_csv(path)
    ts = pd.to_datetime(raw["TIMESTAMP"]).dt.tz_localize("UTC")
    tokens = (raw["ContextTokens"] + raw["GeneratedTokens"]).astype("float64")
    per_min = pd.Series(tokens.to_numpy(), index=pd.DatetimeIndex(ts)).resample("1min").sum()
    replicas = np.ceil(per_min.to_numpy() / 60.0 / AZURE_TOKENS_PER_S_PER_REPLICA)
    sid = "infer/azure-llm-conv"
    frame = pd.DataFrame({"series_id": sid, "timestamp": per_min.index, "value": replicas})
    meta = {
        "kind": "inference",
        "unit": "replica",
        "gpu_model": "A100-80GB",
        "gpus_per_replica": 1,
        "timezone": "UTC",
        "throughput_per_replica": f"{AZURE_TOKENS_PER_S_PER_REPLICA:g} tokens/s",
        "source": "azure_llm_2023/AzureLLMInferenceTrace_conv.csv",
    }
    return sid, frame, meta


def build(shared: Path, out: Path) -> pd.DataFrame:
    parts, meta = [], {}
    for p in sorted((shared / "helios").glob("*_cluster_sequence_vc.csv.gz")):
        sid, f, m = helios_series(p)
        parts.append(f)
        meta[sid] = m
    for fn, p in ((nasa_series, shared / "nasa_http" / "workload.tbz2"),
                  (azure_series, shared / "azure_llm_2023" / "AzureLLMInferenceTrace_conv.csv")):
        sid, f, m = fn(p)
        parts.append(f)
        meta[sid] = m
    hist = pd.concat(parts, ignore_index=True)
    hist["timestamp"] = pd.to_datetime(hist["timestamp"], utc=True).astype("datetime64[ns, UTC]")
    hist["value"] = hist["value"].astype("float64")
    out.mkdir(parents=True, exist_ok=True)
    hist.to_parquet(out / "history.parquet", index=False, compression="zstd")
    (out / "series.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return hist


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    root = Path(__file__).resolve().parents[1]
    ap.add_argument("--shared", type=Path, default=root.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=root / "data" / "sample")
    a = ap.parse_args()
    hist = build(a.shared, a.out)
    summary = hist.groupby("series_id")["value"].agg(["size", "mean", "max"])
    print(summary.to_string())
    print(f"wrote {a.out}/history.parquet ({(a.out / 'history.parquet').stat().st_size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
