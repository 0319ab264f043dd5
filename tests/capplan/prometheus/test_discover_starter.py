"""``capplan discover``'s starter config always loads: label values that collide or are not RFC 1123 names
get distinct ids, and thousands of namespaces are cut to what fits capplan's config size limit (the
largest peaks kept, the rest named). A fake Prometheus on 127.0.0.1."""

from __future__ import annotations

import json

import pandas as pd

from capplan.config.settings import load_config
from capplan.config.yaml_bounds import MAX_BYTES
from capplan.prometheus.discover import Found, fitted, starter_config
from tests.capplan.prometheus.test_prometheus_faults import epoch, fake_server, send
from tests.conftest import run_cli

DAY = pd.Timestamp("2024-03-04T00:00:00Z")


def _serve(namespaces: dict[str, float], queues: dict[str, float]):
    def answer(h, q):
        if "kube_pod_container_resource_requests" in q and "namespace, resource" in q:
            res = [{"metric": {"namespace": n, "resource": "nvidia_com_gpu"}, "values": [[epoch(DAY), str(v)]]}
                   for n, v in namespaces.items()]
        elif "volcano_queue_request_scalar_resources" in q:
            res = [{"metric": {"queue_name": n, "resource": "nvidia.com/gpu"}, "values": [[epoch(DAY), str(v)]]}
                   for n, v in queues.items()]
        else:
            res = []
        send(h, 200, json.dumps({"status": "success", "data": {"resultType": "matrix", "result": res}}).encode())
    return fake_server(answer)


def test_colliding_and_non_rfc1123_labels_make_a_loadable_config(tmp_path, capsys):
    ns = {"team-a": 2, "Team_A": 3, "team a": 1, "team%a": 1, "x" * 80: 1, "team\u00e9": 2}
    out_file = tmp_path / "c.yaml"
    with _serve(ns, {"q/1": 2, "q 1": 3}) as url:
        code, out, err = run_cli(["discover", "--prometheus-url", url, "--at", DAY.isoformat(), "--out",
                                  str(out_file)], capsys)
    assert code == 0, err
    cfg = load_config(out_file)  # loads: unique ids, no bad namespace
    ids = [s.id for s in cfg.series]
    assert len(ids) == len(set(ids)) and "pool/team-a" in ids
    pools = {s.selector["namespace"]: s for s in cfg.series if s.id.startswith("pool/")}
    assert set(pools) == set(ns) and pools["team-a"].namespace == "team-a" and pools["Team_A"].namespace is None


def test_thousands_of_namespaces_fit_the_config_limit(tmp_path, capsys):
    ns = {f"ns-{i:05d}": 1 + (i % 97) for i in range(3000)}
    out_file = tmp_path / "c.yaml"
    with _serve(ns, {}) as url:
        code, out, err = run_cli(["discover", "--prometheus-url", url, "--at", DAY.isoformat(), "--out",
                                  str(out_file), "--format", "json"], capsys)
    assert code == 0, err[-500:]
    assert out_file.stat().st_size <= MAX_BYTES
    cfg = load_config(out_file)
    doc = json.loads(out)
    left = doc["left_out"]
    kept = {s.selector["namespace"] for s in cfg.series if s.id.startswith("pool/")}
    assert left and len(kept) + len(left) == 3000 and "left out" in err
    assert min(ns[n] for n in kept) >= max(ns[n.removeprefix("namespace ")] for n in left)  # largest peaks kept


def test_fitted_keeps_all_when_it_fits():
    f = Found(namespaces={"a": {"nvidia_com_gpu": 1.0}}, volcano={"q": 2.0})
    kept, left = fitted(f, lambda x: True)
    assert kept is f and left == []
    kept, left = fitted(f, lambda x: len(starter_config(x, "http://h:1", [])["series"]) <= 2)
    assert kept.volcano == {"q": 2.0} and kept.namespaces == {} and left == ["namespace a"]
