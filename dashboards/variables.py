"""Fleet selection template variables shared by the dashboards, and the matchers they expand to."""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as db

from . import panels, recording
from . import promql as q
from . import vocabulary as v

# Grafana's time windows, as used in queries (queries.py substitutes them for the end-to-end proof).
RANGE = "$__range"  # the dashboard's time range: instant panels summarise it
INTERVAL = "$__interval"  # one bar of a bar time series
RATE_INTERVAL = "$__rate_interval"  # rate() of the sampled resource fingerprint
HOUR = "1h"  # sliding window of "per hour" time series

# (variable name, label, display name): the ways to select a fleet, in dependency order.
FLEET_FILTERS: tuple[tuple[str, str, str], ...] = (
    ("cluster", v.CLUSTER, "Cluster"),
    ("namespace", v.NAMESPACE, "Namespace"),
    ("model", v.MODEL, "Model"),
    ("device_model", v.DEVICE_MODEL, "Device model"),
    ("vllm_version", v.VLLM_VERSION, "vLLM version"),
    ("mode", v.MODE, "Start mode"),
)
# Variable values come from the recorded starts (every start, both ingest paths, with every label a fleet filter
# selects by): a handful of series per fleet key, not one per start over the dashboard's range.
VALUES_FROM = recording.Recording(v.LAST_START, "count").record


def fleet_matchers(prefix: str = "") -> list[str]:
    return [q.re(lbl, f"${prefix}{name}") for name, lbl, _ in FLEET_FILTERS]


def fleet_variables(prefix: str = "", display_prefix: str = "") -> list[db.QueryVariable]:
    """One multi-select per fleet filter, each offering the values left by the filters before it."""
    out, before = [], []
    for name, lbl, display in FLEET_FILTERS:
        out.append(panels.label_variable(prefix + name, display_prefix + display, q.selector(VALUES_FROM, before),
                                         lbl))
        before.append(q.re(lbl, f"${prefix}{name}"))
    return out
