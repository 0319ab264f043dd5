"""The exporters of a fleet plan: Kueue ResourceFlavors, ClusterQueues in one cohort and LocalQueues (:mod:`.kueue`),
and the ``spec.fleet`` block of ``policy.yaml`` that carries the fleet's mix and quotas so a re-render keeps them
(:mod:`.policy_block`).
"""
