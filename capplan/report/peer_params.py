"""The parameters of a policy that a report names but does not parametrise: the peers
(:mod:`optimizer.rivals.peers`) and the baseline (the rules of thumb).

When a peer or the baseline is recommended instead of the searched policy, the report's
``recommended`` figures are that policy's, while ``recommended.params`` stay the searched
policy's. A reader showing parameters beside figures takes them from here, so both belong
to one policy.
"""

from __future__ import annotations

from typing import Any

from optimizer.rivals.peers import CONFORMAL_LEVEL, CONFORMAL_WINDOW, EMPIRICAL_PARAMS, PEERS, REACTIVE_FACTOR

#: the fixed settings of each peer (optimizer.rivals.peers): none of them is tuned
_SETTINGS: dict[str, dict[str, Any]] = {
    "reactive": {"factor": REACTIVE_FACTOR, "window": "1 hour", "purchase": "on demand"},
    "naive_conformal": {"level": CONFORMAL_LEVEL, "window": f"{CONFORMAL_WINDOW.days} days",
                        "lead": "1 hour (training); metrics lag + cold start (inference)",
                        "purchase": "on demand"},
    "empirical": {**EMPIRICAL_PARAMS, "window": f"{CONFORMAL_WINDOW.days} days",
                  "purchase": "daily spot + hourly on demand"},
}


def policy_parameters(name: str, report_entry: dict | None = None, baseline: dict | None = None) -> dict[str, Any]:
    """Parameters of the policy ``name`` as a flat dict for display.

    ``name``: ``searched`` (returns ``report_entry["params"]``), ``baseline`` (returns
    ``baseline``: the series plan's ``baseline`` dict, e.g. ``capacity_gpus``,
    ``reserved_gpus``) or a peer of :data:`optimizer.rivals.peers.PEERS` (its rule and fixed
    settings, or the ``params`` its report entry carries when it has them).

    Raises KeyError for a name that is none of these.
    """
    entry = report_entry or {}
    if name == "searched":
        return dict(entry.get("params") or {})
    if name == "baseline":
        return {"rule": "the baseline: the rules of thumb (current capacity and HPA settings)", **(baseline or {})}
    if isinstance(entry.get("params"), dict) and entry["params"]:
        return {"rule": PEERS[name].description if name in PEERS else name, **entry["params"]}
    if name not in PEERS:
        raise KeyError(f"{name}: not a peer policy (known: {', '.join(sorted(PEERS))})")
    return {"rule": PEERS[name].description, **_SETTINGS.get(name, {})}
