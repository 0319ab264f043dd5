"""The image and the kustomize base: hadolint on the Dockerfile, `kubectl kustomize deploy/`
validated with kubernetes-validate --strict, and what the objects must hold."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from capplan.config.settings import CapplanConfig
from tests.ci import unavailable

REPO = Path(__file__).resolve().parents[2]
LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/part-of",
          "app.kubernetes.io/managed-by")


def _tool(name: str) -> str:
    p = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if not p:
        unavailable(f"{name} not found (scripts/setup.sh test installs it)")
    return p


def _rendered() -> list[dict]:
    r = subprocess.run([_tool("kubectl"), "kustomize", str(REPO / "deploy")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def test_dockerfile_passes_hadolint_and_is_multi_stage_non_root():
    r = subprocess.run([_tool("hadolint"), "--failure-threshold", "info", str(REPO / "Dockerfile")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    text = (REPO / "Dockerfile").read_text()
    froms = [ln for ln in text.splitlines() if ln.startswith("FROM ")]
    assert len(froms) == 2 and all("python:3.11-slim" in f for f in froms)
    final = text.split(froms[-1], 1)[1]
    assert "build-essential" not in final and "apt-get install" not in final
    assert "USER 10001" in final and 'ENTRYPOINT ["capplan"]' in final
    assert "tensorflow-cpu" in (REPO / "pyproject.toml").read_text()


def test_kustomize_output_passes_kubernetes_validate_strict(tmp_path):
    docs = _rendered()
    out = tmp_path / "all.yaml"
    out.write_text(yaml.safe_dump_all(docs))
    r = subprocess.run([sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert {d["kind"] for d in docs} >= {"CronJob", "Deployment", "Service", "ConfigMap", "Secret",
                                         "PersistentVolumeClaim", "ServiceAccount"}


def test_objects_carry_labels_requests_and_least_privilege():
    docs = _rendered()
    by_kind = {d["kind"]: d for d in docs}
    for d in docs:
        assert all(k in d["metadata"]["labels"] for k in LABELS), d["metadata"]["name"]
    # no API access: no Role, ClusterRole or binding, no token in the pods
    assert not {"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"} & set(by_kind)
    assert by_kind["ServiceAccount"]["automountServiceAccountToken"] is False
    cron = by_kind["CronJob"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    serve = by_kind["Deployment"]["spec"]["template"]["spec"]
    for pod in (cron, serve):
        assert pod["automountServiceAccountToken"] is False and pod["securityContext"]["runAsNonRoot"] is True
        c = pod["containers"][0]
        assert c["resources"]["requests"]["cpu"] and c["resources"]["requests"]["memory"]
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert {e["secretRef"]["name"] for e in c["envFrom"]} == {"capplan-credentials"}
    assert cron["containers"][0]["args"][0] == "plan"
    args = serve["containers"][0]["args"]
    assert args[0] == "serve" and args[args.index("--host") + 1] == "0.0.0.0"
    probes = serve["containers"][0]
    assert probes["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert probes["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert [c["args"][0] for c in cron["initContainers"]] == ["ingest"]  # history first, then the plan
    cfg = CapplanConfig.model_validate(yaml.safe_load(by_kind["ConfigMap"]["data"]["capplan.yaml"]))
    assert cfg.store.startswith("/var/lib/capplan") and cfg.series and cfg.prometheus is not None
    assert cfg.retention.keep_runs >= 1
    assert by_kind["Service"]["spec"]["selector"] == by_kind["Deployment"]["spec"]["selector"]["matchLabels"]
    # the Secret in the repository holds no value
    assert all(v == "" for v in by_kind["Secret"]["stringData"].values())
