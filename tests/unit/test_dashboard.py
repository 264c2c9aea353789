"""The Grafana dashboard's shape, without a Prometheus (the real-Prometheus test is
tests/integration/test_dashboard_prometheus.py): it imports (a data source variable, unique
panel ids), and every metric its queries name is one the proxy serves or llama-server does."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from spectui.core.proxy.prom import ProxyMetrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD: dict[str, Any] = json.loads((ROOT / "dashboards" / "spectui.json").read_text())
SERVER_METRICS = ROOT / "tests" / "fixtures" / "metrics-after-3-requests.prom"
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",)}


def _panels(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for panel in panels:
        out.append(panel)
        out += _panels(panel.get("panels", []))
    return out


def _exprs() -> list[str]:
    return [t["expr"] for p in _panels(DASHBOARD["panels"]) for t in p.get("targets", [])]


def _proxy_names() -> set[str]:
    names = set()
    for family in ProxyMetrics().registry.collect():
        for suffix in _SUFFIXES[family.type]:
            names.add(family.name + suffix)
    return names


def _server_names() -> set[str]:
    text = SERVER_METRICS.read_text()
    return {m.group(1) for m in re.finditer(r"^(llamacpp:\w+)", text, re.M)}


def test_imports_into_grafana() -> None:
    assert DASHBOARD["schemaVersion"] >= 36
    variables = {v["name"]: v for v in DASHBOARD["templating"]["list"]}
    assert variables["DS_PROMETHEUS"]["type"] == "datasource"
    panels = _panels(DASHBOARD["panels"])
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for panel in panels:
        assert set(panel["gridPos"]) == {"h", "w", "x", "y"}
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]
        assert panel["targets"], panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]


def test_every_metric_exists() -> None:
    known = _proxy_names() | _server_names()
    assert "spectui_proxy_ttft_seconds_bucket" in known
    assert "llamacpp:spec_decode_num_drafts_total" in known
    used = {name for expr in _exprs() for name in re.findall(r"(spectui_\w+|llamacpp:\w+)", expr)}
    assert used - known == set()
    # Every metric the proxy serves is on the dashboard (a new one wants a panel).
    bases = {re.sub(r"_(bucket|sum|count)$", "_bucket", n) for n in _proxy_names()}
    assert {n for n in bases if n.endswith(("_total", "_bucket"))} <= used


def test_every_variable_is_defined() -> None:
    defined = {v["name"] for v in DASHBOARD["templating"]["list"]}
    builtins = {"__rate_interval", "__interval", "__range"}
    for expr in _exprs():
        for name in re.findall(r"\$\{?(\w+)", expr):
            assert name in defined | builtins, f"${name} in {expr}"
