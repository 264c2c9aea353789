"""Overhead: does watching slow the server down? Goals: TUI >= 0.96, `stream` >= 0.985 of curl.

One llama-server (Gemma 3 270M, ngram-simple, as spectui launches it) serves the same request
(prompt, n_predict, temperature 0, seed, no prompt cache) to three clients in turn:

* ``curl``: ``curl -sN`` with the request's JSON, output to a file: the plain client;
* ``stream``: ``spectui stream --url ... --format jsonl``, a separate process, as a user runs it;
* ``tui``: the TUI under Pilot in this process (headless), attached to the server, the run
  started as the ``r`` key does.

The figure is the server's own generation rate (``timings.predicted_per_second`` of the final
chunk), so only a slowdown of the server counts, not the client's own latency. Rounds rotate the
order of the clients; each round's ratios are client / curl of that round; medians reported.

By default the server uses every core (llama-server's own default), so any CPU a client spends
is taken from generation: on a 2-core machine this measures contention. ``--pin`` gives the
server one thread on CPU 0 and every client CPU 1: what watching costs when the server has its
core to itself.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from common import gemma_model, llama_binary, median, until, write_result
from textual.message import Message

from spectui.app_setup import build_engine, recorder
from spectui.config import Settings
from spectui.core.events import ServerState
from spectui.core.llama.server import free_port
from spectui.core.prompts import builtin_prompt
from spectui.core.request import GenerationRequest
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.messages import RunEnded

GOAL_TUI = 0.96
GOAL_STREAM = 0.985
PROMPT_KEY = "code-edit"
N_PREDICT = builtin_prompt(PROMPT_KEY).n_predict
"""The built-in prompt's own length: the TUI runs a built-in prompt with it."""
CLIENTS = ("curl", "stream", "tui")


SERVER_CPU, CLIENT_CPU = 0, 1
"""With ``--pin``: where the server and the clients run."""


def pinned(argv: list[str], cpu: int | None) -> list[str]:
    return argv if cpu is None else ["taskset", "-c", str(cpu), *argv]


@contextlib.contextmanager
def server(pin: bool = False) -> Iterator[str]:
    port = free_port()
    argv = [str(llama_binary()), "-m", str(gemma_model()), "--host", "127.0.0.1"]
    argv += ["--port", str(port), "--ctx-size", "4096", "--parallel", "1", "--metrics"]
    argv += ["--slots", "--spec-type", "ngram-simple"]
    if pin:
        argv = pinned([*argv, "--threads", "1"], SERVER_CPU)
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def request() -> GenerationRequest:
    return GenerationRequest(prompt=builtin_prompt(PROMPT_KEY).text, n_predict=N_PREDICT)


def run_curl(url: str, folder: Path, cpu: int | None = None) -> float:
    body = folder / "request.json"
    body.write_text(json.dumps(request().payload()))
    out = folder / "curl.sse"
    curl = ["curl", "-sN", "-X", "POST", f"{url}/completion"]
    curl += ["-H", "Content-Type: application/json", "--data-binary", f"@{body}", "-o", str(out)]
    subprocess.run(pinned(curl, cpu), check=True)
    last = [line for line in out.read_text().splitlines() if line.startswith("data: ")][-1]
    final = json.loads(last[6:])
    assert final["timings"]["predicted_n"] == N_PREDICT, final["timings"]
    return float(final["timings"]["predicted_per_second"])


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_stream(
    url: str, folder: Path, cpu: int | None = None, n_predict: int = N_PREDICT
) -> tuple[float, float, float]:
    """(server tok/s, the process's CPU seconds, the generation's seconds)."""
    prompt = folder / "prompt.txt"
    prompt.write_text(request().prompt)
    argv = [sys.executable, "-m", "spectui.cli", "stream", "--url", url]
    argv += ["--prompt-file", str(prompt), "--n-predict", str(n_predict), "--format", "jsonl"]
    cpu_before = children_cpu_s()
    result = subprocess.run(
        pinned(argv, cpu),
        capture_output=True,
        text=True,
        check=True,
    )
    summary = json.loads(result.stdout.splitlines()[-1])
    assert summary["type"] == "summary" and summary["tokens"] == n_predict, summary
    timings = summary["server_timings"]
    generation_s = timings["predicted_ms"] / 1000
    return float(timings["predicted_per_second"]), children_cpu_s() - cpu_before, generation_s


async def run_tui(url: str) -> tuple[float, float, float]:
    """(server tok/s, this process's CPU seconds during the run, the run's seconds)."""
    settings = Settings(url=url, n_predict=N_PREDICT)
    engine = recorder(build_engine(settings), settings, recording=False)
    finished: list[RunEnded] = []

    def hook(message: Message) -> None:
        if isinstance(message, RunEnded):
            finished.append(message)

    app = SpectuiApp(engine, settings, prompt=request().prompt)
    try:
        async with app.run_test(size=(120, 36), message_hook=hook):
            screen = app.main_screen
            assert screen is not None
            await until(lambda: screen.state is ServerState.READY)
            cpu_before, wall_before = time.process_time(), time.monotonic()
            screen.action_run()
            await until(lambda: bool(finished))
            cpu_s, wall_s = time.process_time() - cpu_before, time.monotonic() - wall_before
    finally:
        await engine.aclose()
    summary = finished[0].summary
    assert summary.metrics.tokens == N_PREDICT, summary.metrics
    return summary.server_timings["predicted_per_second"], cpu_s, wall_s


def main(rounds: int = 5, pin: bool = False) -> dict[str, object]:
    rates: dict[str, list[float]] = {client: [] for client in CLIENTS}
    cpu = CLIENT_CPU if pin else None
    affinity = os.sched_getaffinity(0)
    with server(pin) as url, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        run_curl(url, folder, cpu)  # warm-up, not counted
        # What `stream` spends starting and stopping (imports, connecting): subtracted from each
        # run's CPU to estimate what it spends while the server generates.
        startup_cpu = min(run_stream(url, folder, cpu, n_predict=1)[1] for _ in range(2))
        client_cpu: dict[str, list[float]] = {"stream": [], "tui": []}
        for round_ in range(rounds):
            order = CLIENTS[round_ % 3 :] + CLIENTS[: round_ % 3]
            for client in order:
                if client == "curl":
                    rates[client].append(run_curl(url, folder, cpu))
                elif client == "stream":
                    rate, cpu_s, generation_s = run_stream(url, folder, cpu)
                    rates[client].append(rate)
                    client_cpu[client].append(max(0.0, cpu_s - startup_cpu) / generation_s)
                else:
                    if cpu is not None:
                        os.sched_setaffinity(0, {cpu})
                    try:
                        rate, cpu_s, run_s = asyncio.run(run_tui(url))
                    finally:
                        os.sched_setaffinity(0, affinity)
                    rates[client].append(rate)
                    client_cpu[client].append(cpu_s / run_s)
            print(f"round {round_ + 1}: " + ", ".join(f"{c} {rates[c][-1]:.1f}" for c in CLIENTS))
    ratios = {
        client: [rate / base for rate, base in zip(rates[client], rates["curl"], strict=True)]
        for client in ("stream", "tui")
    }
    result: dict[str, object] = {
        "stream_ratio": median(ratios["stream"]),
        "tui_ratio": median(ratios["tui"]),
        "tokens_per_second": {client: median(values) for client, values in rates.items()},
        "runs": rates,
        "ratios": ratios,
        "client_cpu_fraction": {client: median(v) for client, v in client_cpu.items()},
        "client_cpu_runs": client_cpu,
        "prompt": PROMPT_KEY,
        "n_predict": N_PREDICT,
        "spec": "ngram-simple",
        "pinned": pin,
        "goal_tui": GOAL_TUI,
        "goal_stream": GOAL_STREAM,
        "met": median(ratios["stream"]) >= GOAL_STREAM and median(ratios["tui"]) >= GOAL_TUI,
        "load": os.getloadavg(),
    }
    path = write_result("overhead-pinned" if pin else "overhead", result)
    print(
        f"overhead: server tok/s with spectui stream / curl = {result['stream_ratio']:.3f}, "
        f"TUI / curl = {result['tui_ratio']:.3f} (goals {GOAL_STREAM} / {GOAL_TUI}); client CPU: "
        f"stream {median(client_cpu['stream']):.1%}, TUI {median(client_cpu['tui']):.1%} of a core"
        f" -> {path}"
    )
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pin", action="store_true", help="server on CPU 0, clients on CPU 1")
    args = parser.parse_args()
    main(args.rounds, args.pin)
