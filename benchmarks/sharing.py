"""Stranded GPUs of the Alibaba openb pods on the openb node inventory: whole-GPU placement against sharing as
capplan recommends it (target: sharing strands >= 30 % fewer GPUs).

Data: ``../shared/data/alibaba_openb/`` (Alibaba GPU trace v2023, the FGD paper's: Weng et al., "Beware of
Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation Gradient Descent", USENIX ATC '23; study and
research use, read in place, not copied). The node list (1,213 GPU nodes, 6,212 GPUs of 7 models) and each pod
list (``default``: no GPU-type constraint; ``gpuspec33``: constraints on about a third of the GPU pods).

Per pod list, two placements by :func:`optimizer.fleet.sharing.place` (protocol and definitions in its module
docstring: pods in arrival order, each tried once, FGD node choice, no pod leaves):

* whole-GPU: every pod asking for a share of a GPU holds a whole GPU;
* shared: fractional pods share GPUs by MPS, with the per-model ``replicas`` that
  :func:`optimizer.fleet.mig.recommend_sharing` derives from the shares of the pods allowed on that model (none of
  the openb models has MIG).

Printed per model and in total: GPUs, stranded GPUs (idle share of exclusively held GPUs + free capacity no request
shape can use), placed and unplaced pods, and the reduction of stranded GPUs against the target.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from benchmarks import common
from optimizer.fleet.mig import recommend_sharing
from optimizer.fleet.sharing import place, read_openb_nodes, read_openb_pods, shares_by_model

TARGET = 0.30  #: sharing strands at least this share fewer GPUs than whole-GPU placement
DATA = common.REPO.parent / "shared" / "data" / "alibaba_openb"
LISTS = ("default", "gpuspec33")


def run(data: Path, pod_list: str) -> tuple[pd.DataFrame, dict]:
    """Both placements of one pod list: the per-model table (whole/shared columns) and the totals."""
    nodes = read_openb_nodes(data / "openb_node_list_gpu_node.csv")
    pods = read_openb_pods(data / f"openb_pod_list_{pod_list}.csv.gz")
    models = sorted(nodes["model"].unique())
    settings = {m: recommend_sharing(m, s) for m, s in shares_by_model(pods, models).items()}
    t = time.perf_counter()
    whole = place(nodes, pods, "whole")
    shared = place(nodes, pods, "shared", settings=settings)
    seconds = time.perf_counter() - t
    w, s = whole.per_model.set_index("model"), shared.per_model.set_index("model")
    table = pd.DataFrame({
        "gpus": w["gpus"],
        "whole_idle_excl": w["idle_exclusive_gpus"], "whole_fragmented": w["fragmented_gpus"],
        "whole_stranded": w["stranded_gpus"],
        "shared_fragmented": s["fragmented_gpus"], "shared_stranded": s["stranded_gpus"],
        "replicas": pd.Series({m: settings[m].replicas for m in models}),
        "shared_pods_per_gpu_max": s["max_pods_per_gpu"],
    })
    totals = {"whole": whole, "shared": shared, "seconds": seconds,
              "reduction": 1 - shared.stranded_gpus / whole.stranded_gpus if whole.stranded_gpus else 0.0}
    return table, totals


def main(argv: list[str] | None = None) -> None:
    ap = common.parser(__doc__, "sharing")
    ap.add_argument("--data", type=Path, default=DATA, help=f"the alibaba_openb folder (default {DATA})")
    ap.add_argument("--lists", nargs="+", default=list(LISTS), choices=LISTS, help="pod lists to place")
    a = ap.parse_args(argv)
    if not (a.data / "openb_node_list_gpu_node.csv").is_file():
        ap.error(f"--data {a.data}: no openb_node_list_gpu_node.csv there (the shared data folder)")
    met_all = True
    for name in a.lists:
        table, tot = run(a.data, name)
        w, s = tot["whole"], tot["shared"]
        print(f"\n## openb pod list {name!r} on the openb node inventory ({tot['seconds']:.1f} s for both placements)")
        print(table.round(2).to_string())
        print(f"placed pods: whole {w.placed_pods}, shared {s.placed_pods} (unplaced {w.unplaced_pods} asking "
              f"{w.unplaced_gpus:.1f} GPUs, {s.unplaced_pods} asking {s.unplaced_gpus:.1f})")
        print(f"demand placed (sum of the placed pods' shares, GPUs): whole {w.per_model['placed_gpus'].sum():.1f}, "
              f"shared {s.per_model['placed_gpus'].sum():.1f}")
        idle, frag = w.per_model["idle_exclusive_gpus"].sum(), w.per_model["fragmented_gpus"].sum()
        print(f"stranded GPUs: whole {w.stranded_gpus:.1f} (idle share of exclusive GPUs {idle:.1f} + fragmented "
              f"{frag:.1f}), shared {s.stranded_gpus:.1f} (fragmented)")
        met = tot["reduction"] >= TARGET
        met_all &= met
        print(f"target: sharing strands >= {TARGET:.0%} fewer GPUs than whole-GPU placement: "
              f"{'met' if met else 'NOT met'} ({tot['reduction']:.1%} fewer)")
    print(f"\nall pod lists: {'met' if met_all else 'NOT met'}")
