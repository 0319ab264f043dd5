"""The replay core: real demand stepped against a policy at the data's resolution (:mod:`.replay`), the
inputs and decision-time forecast lookups it reads (:mod:`.inputs`), and the Kubernetes HPA algorithm
(:mod:`.hpa_controller`).
"""
