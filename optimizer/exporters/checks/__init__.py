"""Checks of what the exporters write: schema validation against the published CRD and Kubernetes schemas
(:mod:`.validate`, :mod:`.schemas`), the semantic lint rules that schemas cannot express (:mod:`.lint`,
:mod:`.lint_autoscalers`), the finding type they share (:mod:`.problem`), and reading the autoscaling parameters back
from written objects (:mod:`.readback`). ``capplan export --validate`` runs them on an output folder.
"""
