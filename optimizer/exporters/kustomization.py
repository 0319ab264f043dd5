"""``manifests/kustomization.yaml`` listing every manifest, so that
``kubectl apply -k manifests/`` applies the set (Kubernetes docs "Declarative
Management of Kubernetes Objects Using Kustomize"). ``policy.yaml``,
``adapter/`` and ``alternatives/`` are not cluster objects of this set and
are not listed.
"""

from __future__ import annotations

from optimizer.exporters.base import Doc

PATH = "manifests/kustomization.yaml"


def kustomization(docs: list[Doc]) -> Doc:
    files = sorted(d.path.split("/", 1)[1] for d in docs if d.path.startswith("manifests/") and "/" not in
                   d.path.split("/", 1)[1])
    return Doc(PATH, {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                      "resources": files},
               header="kubectl apply -k manifests/")
