"""The Grafana dashboard against a real Prometheus: it scrapes a real `spectui proxy` and the real
llama-server behind it while the test sends traffic through the proxy (openai SDK and httpx),
then every PromQL expression of every panel (and every variable's label query) is evaluated
through Prometheus' HTTP API: each must return a number, on series that carry the labels its
legend names.

Prometheus is Debian's `prometheus` (on PATH, or `SPECTUI_PROMETHEUS`); `.ci/run` installs it.
Locally the test skips when it is absent; under CI it fails instead.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from helpers.wait import wait_until
from spectui.core.llama.server import free_port

from .outside import outside_server, wait_healthy

pytestmark = pytest.mark.server

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "dashboards" / "spectui.json"
SCRAPE_CONFIG = ROOT / "dashboards" / "prometheus.yml"
PROMPT = "Count: 1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 1, 2,"
TOKENS = 24
"""Tokens per generation: the counting prompt drafts within a few, and every series the
dashboard reads exists after one request."""
GIVE_UP_S = 180
"""How long a wait may take before the test fails on what it finds (never a pass condition)."""
WINDOW = "1m"
"""What $__rate_interval, $__interval and $__range stand for: every sample of the test fits."""
BUILTINS = ("__rate_interval", "__interval", "__range")


def _missing(what: str) -> None:
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(f"{what} — CI must install it (.ci/run does, with apt-get)")
    pytest.skip(what)


@pytest.fixture(scope="module")
def prometheus_bin() -> Path:
    found = os.environ.get("SPECTUI_PROMETHEUS") or shutil.which("prometheus")
    if not found:
        _missing("prometheus is not installed (apt-get install prometheus, or SPECTUI_PROMETHEUS)")
    return Path(str(found))


@contextlib.contextmanager
def _process(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A child process, its output in ``log``; always stopped (SIGTERM, then SIGKILL)."""
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _scrape_config(proxy: str, server: str) -> dict[str, Any]:
    """The shipped config's two jobs (same names and paths), pointed at the test's targets and
    scraped every second. JSON is YAML, so Prometheus reads this as written."""
    shipped = SCRAPE_CONFIG.read_text()
    for needed in ("job_name: spectui-proxy", "metrics_path: /spectui/metrics", "/metrics"):
        assert needed in shipped
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {
                "job_name": "spectui-proxy",
                "metrics_path": "/spectui/metrics",
                "static_configs": [{"targets": [proxy]}],
            },
            {
                "job_name": "llama-server",
                "metrics_path": "/metrics",
                "static_configs": [{"targets": [server]}],
            },
        ],
    }


class Prometheus:
    """The HTTP API of the test's Prometheus."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _get(self, path: str, **params: Any) -> Any:
        try:
            reply = httpx.get(self.url + path, params=params, timeout=10)
        except httpx.TransportError:
            return None
        body = reply.json()
        assert body["status"] == "success", (path, params, body)
        return body["data"]

    def ready(self) -> bool:
        """Whether it serves queries (it answers 503 while it starts)."""
        try:
            return httpx.get(self.url + "/-/ready", timeout=5).status_code == 200
        except httpx.TransportError:
            return False

    def targets_up(self) -> bool:
        if not self.ready():
            return False
        data = self._get("/api/v1/targets")
        if data is None:
            return False
        health = [t["health"] for t in data["activeTargets"]]
        return len(health) == 2 and all(h == "up" for h in health)

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = at
        data = self._get("/api/v1/query", **params)
        assert data is not None, "Prometheus stopped answering"
        assert data["resultType"] == "vector", (expr, data)
        result: list[dict[str, Any]] = data["result"]
        return result

    def value(self, expr: str) -> float:
        """The one value of an instant query (0 when it has no series yet)."""
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else 0.0

    def label_values(self, label: str, match: str) -> list[str]:
        data = self._get(f"/api/v1/label/{label}/values", **{"match[]": match})
        return list(data or [])


def _traffic(proxy_url: str) -> int:
    """One round of streamed generations through the proxy; returns how many were sent."""
    client = openai.OpenAI(base_url=proxy_url + "/v1", api_key="none", max_retries=0)
    completion = client.completions.create(
        model="gemma", prompt=PROMPT, max_tokens=TOKENS, temperature=0, stream=True
    )
    assert "".join(c.choices[0].text for c in completion if c.choices)
    chat = client.chat.completions.create(
        model="gemma",
        messages=[{"role": "user", "content": "Repeat exactly, twice: " + PROMPT}],
        max_tokens=TOKENS, temperature=0, stream=True,
    )  # fmt: skip
    assert "".join(c.choices[0].delta.content or "" for c in chat if c.choices)
    body = {"prompt": PROMPT, "n_predict": TOKENS, "stream": True, "temperature": 0}
    with httpx.stream("POST", proxy_url + "/completion", json=body, timeout=120) as reply:
        assert reply.status_code == 200
        assert b"content" in reply.read()
    return 3


def _server_counter(server_url: str, name: str) -> float:
    text = httpx.get(server_url + "/metrics", timeout=10).text
    values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " ")]
    return values[0] if values else 0.0


def _seen(prom: Prometheus, requests: float, steps: float) -> Callable[[], bool]:
    """Whether Prometheus' latest samples hold this many proxy requests and server steps."""

    def check() -> bool:
        return (
            prom.value("sum(spectui_proxy_requests_total)") >= requests
            and prom.value("sum(llamacpp:spec_decode_num_drafts_total)") >= steps
        )

    return check


def _dashboard_targets() -> list[tuple[str, str, str]]:
    """(panel title, expr, legendFormat) of every query in the dashboard, rows' panels too."""
    found = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            for target in panel.get("targets", []):
                found.append((panel["title"], target["expr"], target.get("legendFormat", "")))
            walk(panel.get("panels", []))

    walk(json.loads(DASHBOARD.read_text())["panels"])
    return found


def _variables() -> list[dict[str, Any]]:
    variables: list[dict[str, Any]] = json.loads(DASHBOARD.read_text())["templating"]["list"]
    return variables


def _substitute(expr: str) -> str:
    """Grafana's part: the interval variables become a window, the label pickers 'All' (.*)."""
    for name in BUILTINS:
        expr = expr.replace("${" + name + "}", WINDOW).replace("$" + name, WINDOW)
    for variable in _variables():
        if variable["type"] == "query":
            value = variable.get("allValue") or ".*"
            name = variable["name"]
            expr = expr.replace("${" + name + "}", value)
            expr = re.sub(rf"\${name}\b", value, expr)
    assert "$" not in expr, f"a variable the test does not know: {expr}"
    return expr


def test_every_dashboard_query_returns_data(
    llama_binary: Path, gemma_model: Path, prometheus_bin: Path, tmp_path: Path
) -> None:
    server_args = ("--metrics", "--spec-type", "ngram-simple", "--parallel", "1")
    with contextlib.ExitStack() as stack:
        server_url, _pid = stack.enter_context(
            outside_server(llama_binary, gemma_model, *server_args)
        )
        wait_healthy(server_url, GIVE_UP_S)
        proxy_port = free_port()
        proxy_url = f"http://127.0.0.1:{proxy_port}"
        proxy_cmd = [
            sys.executable, "-m", "spectui.cli", "proxy", "--format", "jsonl",
            "--listen", f"127.0.0.1:{proxy_port}", "--url", server_url,
        ]  # fmt: skip
        proxy = stack.enter_context(_process(proxy_cmd, tmp_path / "proxy.log"))

        def proxy_up() -> bool:
            assert proxy.poll() is None, (tmp_path / "proxy.log").read_text()
            with contextlib.suppress(httpx.TransportError):
                return httpx.get(proxy_url + "/spectui/metrics", timeout=2).status_code == 200
            return False

        wait_until(proxy_up, "the proxy to listen", give_up_s=GIVE_UP_S, interval=0.25)

        prom_port = free_port()
        config = tmp_path / "prometheus.yml"
        targets = (f"127.0.0.1:{proxy_port}", server_url.removeprefix("http://"))
        config.write_text(json.dumps(_scrape_config(*targets)))
        prom_cmd = [
            str(prometheus_bin), f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn",
        ]  # fmt: skip
        prom_proc = stack.enter_context(_process(prom_cmd, tmp_path / "prometheus.log"))
        prom = Prometheus(f"http://127.0.0.1:{prom_port}")

        def scraping() -> bool:
            assert prom_proc.poll() is None, (tmp_path / "prometheus.log").read_text()
            return prom.targets_up()

        wait_until(
            scraping,
            "Prometheus to scrape the proxy and llama-server",
            give_up_s=GIVE_UP_S,
            interval=0.25,
        )

        # Two rounds, each seen by Prometheus before the next: every counter the first round
        # creates is then sampled before and after the second, so each rate has an increase.
        sent = 0
        for round_ in (1, 2):
            sent += _traffic(proxy_url)
            steps = _server_counter(server_url, "llamacpp:spec_decode_num_drafts_total")
            assert steps > 0, "the counting prompt should draft"
            wait_until(
                _seen(prom, sent, steps),
                f"round {round_} in Prometheus",
                give_up_s=GIVE_UP_S,
                interval=0.25,
            )
        at = time.time()

        for title, expr, legend in _dashboard_targets():
            query = _substitute(expr)
            result = prom.query(query, at)
            assert result, f"{title}: no series for {query}"
            values = [float(series["value"][1]) for series in result]
            assert any(math.isfinite(v) for v in values), f"{title}: {query} gave {values}"
            wanted = set(re.findall(r"{{\s*(\w+)\s*}}", legend))
            labelled = [s for s in result if wanted <= set(s["metric"])]
            assert labelled, f"{title}: no series of {query} has the labels {sorted(wanted)}"

        for variable in _variables():
            if variable["type"] != "query":
                continue
            match = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", variable["definition"])
            assert match, variable["definition"]
            selector = _substitute(match.group(1))
            assert prom.label_values(match.group(2), selector), variable["name"]

        promtool = prometheus_bin.with_name("promtool")
        if promtool.exists():
            checked = subprocess.run(
                [str(promtool), "check", "config", str(SCRAPE_CONFIG)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            assert checked.returncode == 0, checked.stdout + checked.stderr
