"""At the rates a GPU reaches: a real llama-server at ~2,000 tok/s, watched by every client.

    python bench/gpu_rates.py [--rounds 7] [--lag-runs 5] [--n-predict 800]
    python bench/gpu_rates.py --lag-only [--lag-runs 5] [--src DIR=LABEL ...]

The server is llama-server itself with a tiny constructed model (`spectui.testing`: the qwen35
target whose MTP head is wrong after every fifth word, `--spec-type draft-mtp
--spec-draft-n-max 2`, `--threads 1`), which generates a few thousand tokens a second on this
CPU: a run of N_PREDICT tokens lasts a few tenths of a second, as on a GPU.

* **ratios**: the same request (prompt, n_predict, temperature 0, no prompt cache) served to
  ``curl -sN`` (the plain client), ``spectui stream --url`` (its own process), a ``curl -sN``
  client through ``spectui proxy --format jsonl`` (one proxy for the whole run) and the TUI in a
  real terminal (tmux 120x36, ``spectui --url … --run``). The figure is the server's own
  ``timings.predicted_per_second``; each round's ratio is client ÷ that round's curl; each
  round runs the clients in a shuffled order (seeded); medians, with the spread of the rounds
  as the noise. ``curl-again`` (curl once more, paired the same way) is the noise floor: what a
  client that costs nothing reads.
* **lag**: the TUI in tmux attached through a relay (its own process) that stamps every read
  from the server with CLOCK_MONOTONIC: the time a token's bytes left the server. A token's lag
  = when the token pane first drew it (`tui.PaintLog`, installed in the TUI's process) minus
  that stamp. The relay's own forwarding delay is counted in the lag.
* **follow**: the same TUI, recording its run (`--record`, the presenter's path), and a
  follower (the full `spectui follow` app, headless, in this process) on that folder: the lag of
  a token from the relay's stamp to the follower's drawing it.

``--lag-only`` measures the TUI's lag alone, alternating this tree with each ``--src`` source tree
(a before/after in one run), run by run.

Goals (#28): stream ≥ 0.98, proxy ≥ 0.97, TUI ≥ 0.95 of curl; TUI lag p95 ≤ 100 ms; a
follower's lag p95 ≤ 500 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from common import llama_binary, median, round_orders, until, write_result
from gpu_rates_tap import Relay, Tmux, lags_ms, process, written_lags, written_times
from tui import SIZE

from spectui.core.llama.server import free_port
from spectui.core.request import GenerationRequest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PROMPT = "Hello alpha beta"
"""The tiny target continues the word cycle from the prompt's last word."""
N_PREDICT = 800
"""~0.3-0.5 s of generation at this CPU's rates: a run as short as a GPU's."""
GOALS = {"stream": 0.98, "proxy": 0.97, "tui": 0.95}
LAG_GOAL_MS = 100.0
FOLLOW_GOAL_MS = 500.0
RATE_FLOOR = 1500.0
"""The curl runs' median server rate must reach this for the figures to be 'GPU rates'."""
CLIENTS = ("curl", "stream", "proxy", "tui", "curl-again")
"""`curl-again` is curl once more: its ratio to curl is the noise floor of a ratio in this run
(what a client that costs nothing reads as)."""
WATCHERS = ("stream", "proxy", "tui")
SEED = 28
"""The rounds' shuffled orders (`common.round_orders`): the same every run."""


def tiny_model(folder: Path) -> Path:
    try:
        from spectui.testing.tiny_models import build_target
    except ImportError:
        raise SystemExit("gpu_rates.py: needs the dev dependencies gguf and numpy") from None
    return build_target(folder / "target-mtp-partial.gguf", "partial")


def server_argv(model: Path, port: int) -> list[str]:
    argv = [str(llama_binary()), "-m", str(model), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["--ctx-size", "4096", "--parallel", "1", "--threads", "1", "--metrics", "--slots"]
    return [*argv, "--spec-type", "draft-mtp", "--spec-draft-n-max", "2"]


def body(n_predict: int) -> dict[str, object]:
    return GenerationRequest(prompt=PROMPT, n_predict=n_predict).payload()


def run_curl(url: str, folder: Path, n_predict: int) -> float:
    request = folder / "request.json"
    request.write_text(json.dumps(body(n_predict)))
    out = folder / "curl.sse"
    argv = ["curl", "-sN", "-X", "POST", f"{url}/completion", "-o", str(out)]
    argv += ["-H", "Content-Type: application/json", "--data-binary", f"@{request}"]
    subprocess.run(argv, check=True)
    last = [line for line in out.read_text().splitlines() if line.startswith("data: ")][-1]
    timings = json.loads(last[6:])["timings"]
    assert timings["predicted_n"] == n_predict, timings
    return float(timings["predicted_per_second"])


def spectui_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "spectui.cli", *args]


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_stream(url: str, n_predict: int) -> tuple[float, float]:
    """(server tok/s, the process's CPU seconds from its first record to its summary: the
    generation's share, not its start-up)."""
    argv = spectui_argv("stream", "--url", url, "--prompt", PROMPT, "--n-predict", str(n_predict))
    proc = subprocess.Popen([*argv, "--format", "jsonl"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first: float | None = None
    lines = []
    for line in proc.stdout:  # (the process is read before it is reaped: /proc still has it)
        if first is None:
            first = proc_cpu_s(proc.pid)
        lines.append(line)
    last = proc_cpu_s(proc.pid)
    if proc.wait() != 0:
        raise SystemExit(f"gpu_rates.py: spectui stream failed (exit {proc.returncode})")
    summary = json.loads(lines[-1])
    assert summary["type"] == "summary" and summary["tokens"] == n_predict, summary
    return float(summary["server_timings"]["predicted_per_second"]), last - (first or last)


def spread(values: list[float]) -> dict[str, float]:
    """The rounds' lowest, quartiles and highest."""
    ordered = sorted(values)
    q1, _, q3 = statistics.quantiles(ordered, n=4) if len(ordered) > 1 else ordered * 3
    return {"min": ordered[0], "q1": q1, "q3": q3, "max": ordered[-1]}


def ratios(
    url: str, proxy: tuple[str, int], tmux: Tmux, folder: Path, rounds: int, n: int
) -> dict[str, Any]:
    """Every client in turn, each round in a shuffled order; the server's rate, and each spectui
    client's CPU per 1,000 tokens (what it takes from the server on a busy machine)."""
    rates: dict[str, list[float]] = {client: [] for client in CLIENTS}
    cpu: dict[str, list[float]] = {client: [] for client in WATCHERS}
    proxy_url, proxy_pid = proxy
    run_curl(url, folder, n)  # warm-up, not counted
    # Shuffled per round, not rotated: in a rotation each client always follows the same one,
    # whose after-effects biased the pair (watch_ratio.py).
    for round_, order in enumerate(round_orders(CLIENTS, rounds, SEED)):
        for client in order:
            if client in ("curl", "curl-again"):
                rates[client].append(run_curl(url, folder, n))
            elif client == "stream":
                rate, cpu_s = run_stream(url, n)
                rates[client].append(rate)
                cpu[client].append(cpu_s * 1000 / n)
            elif client == "proxy":
                before = proc_cpu_s(proxy_pid)
                rates[client].append(run_curl(proxy_url, folder, n))
                cpu[client].append((proc_cpu_s(proxy_pid) - before) * 1000 / n)
            else:
                shown = tmux.tui(url, PROMPT, n)
                rates[client].append(float(shown["predicted_per_second"]))
                cpu[client].append(float(shown["run_cpu_s"]) * 1000 / n)
        print(f"round {round_ + 1}: " + ", ".join(f"{c} {rates[c][-1]:.0f}" for c in CLIENTS))
    paired = {
        client: [r / base for r, base in zip(rates[client], rates["curl"], strict=True)]
        for client in CLIENTS[1:]
    }
    # The noise: curl-again's ratio (a client that costs nothing), and how far curl's own rate
    # wanders between rounds; a watcher's ratio is read against them.
    return {
        "ratio": {client: median(values) for client, values in paired.items()},
        "ratio_spread": {client: spread(values) for client, values in paired.items()},
        "curl_spread": spread([r / median(rates["curl"]) for r in rates["curl"]]),
        "tokens_per_second": {client: median(values) for client, values in rates.items()},
        "runs": rates,
        "paired_ratios": paired,
        "client_cpu_s_per_1000_tokens": {client: median(values) for client, values in cpu.items()},
        "client_cpu_runs": cpu,
    }


async def follow_run(
    relay_url: str, tmux: Tmux, relay: Relay, folder: Path, n: int
) -> dict[str, Any]:
    """The TUI records its run into ``folder`` (via the relay); a follower here draws it."""
    from tui import PaintLog

    from spectui.config import Settings
    from spectui.core.sessions.tail import FollowOptions, FollowState
    from spectui.ui.apps.follow import FollowApp, follow_engine
    from spectui.ui.screens.follow import FollowScreen

    app = FollowApp(follow_engine(FollowOptions(target=folder)), Settings())
    with PaintLog() as log:
        async with app.run_test(size=SIZE):
            screen = app.main_screen
            assert isinstance(screen, FollowScreen)
            await until(lambda: screen.follower.state is FollowState.IDLE)
            relay.reset()
            presenter = asyncio.create_task(
                asyncio.to_thread(
                    tmux.tui, relay_url, PROMPT, n, "--record", str(folder / "run.jsonl")
                )
            )
            await until(lambda: presenter.done() or screen.follower.state is FollowState.FINISHED)
            shown = await presenter
            await until(lambda: screen.follower.state is FollowState.FINISHED, give_up_s=60)
            with contextlib.suppress(RuntimeError):
                await until(lambda: bool(log.painted) and log.painted[-1][1] >= n, give_up_s=5)
    written = written_times(relay.collect())
    return {
        "follower": lags_ms(log.lags(written[:n])),
        "presenter": lags_ms(written_lags(shown, written, n)),
        "predicted_per_second": shown["predicted_per_second"],
    }


def lag_phase(url: str, tmux: Tmux, scratch: Path, runs: int, n: int) -> dict[str, Any]:
    tui_runs: list[dict[str, float]] = []
    follow_runs: list[dict[str, float]] = []
    presenter_runs: list[dict[str, float]] = []
    with Relay(url) as relay:
        for index in range(runs):
            for kind in ("tui", "follow") if index % 2 == 0 else ("follow", "tui"):
                if kind == "tui":
                    relay.reset()
                    shown = tmux.tui(relay.url, PROMPT, n)
                    written = written_times(relay.collect())
                    tui_runs.append(lags_ms(written_lags(shown, written, n)))
                    tui_runs[-1]["predicted_per_second"] = float(shown["predicted_per_second"])
                else:
                    folder = scratch / f"follow-{index}"
                    folder.mkdir()
                    got = asyncio.run(follow_run(relay.url, tmux, relay, folder, n))
                    follow_runs.append(got["follower"])
                    presenter_runs.append(got["presenter"])
            print(
                f"lag run {index + 1}: TUI p95 {tui_runs[-1]['p95_ms']:.0f} ms, follower p95 "
                f"{follow_runs[-1]['p95_ms']:.0f} ms"
            )

    def medians(found: list[dict[str, float]]) -> dict[str, float]:
        return {key: median([r[key] for r in found]) for key in found[0]}

    return {
        "tui_lag": {**medians(tui_runs), "runs": tui_runs},
        "follow_lag": {**medians(follow_runs), "runs": follow_runs},
        "presenter_lag_while_followed": medians(presenter_runs),
    }


def lag_only(runs: int, n: int, sources: list[tuple[Path | None, str]]) -> None:
    """The TUI's lag from each source tree, alternating run by run (nothing else measured)."""
    if shutil.which("tmux") is None:
        raise SystemExit("gpu_rates.py: needs tmux")
    found: dict[str, list[dict[str, float]]] = {label: [] for _, label in sources}
    with tempfile.TemporaryDirectory(prefix="spectui-gpu-rates-") as tmp:
        scratch = Path(tmp)
        model = tiny_model(scratch)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        tmux = Tmux(scratch)
        try:
            with process(server_argv(model, port), url), Relay(url) as relay:
                for index in range(runs):
                    order = sources if index % 2 == 0 else sources[::-1]
                    for src, label in order:
                        relay.reset()
                        shown = tmux.tui(relay.url, PROMPT, n, src=src)
                        lag = lags_ms(written_lags(shown, written_times(relay.collect()), n))
                        lag["predicted_per_second"] = float(shown["predicted_per_second"])
                        found[label].append(lag)
                        print(f"run {index + 1} {label}: p50 {lag['p50_ms']:.0f} ms, p95 "
                              f"{lag['p95_ms']:.0f} ms, {lag['predicted_per_second']:,.0f} tok/s, "
                              f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        finally:
            tmux.close()
    figures = {
        label: {key: median([run[key] for run in runs_]) for key in runs_[0]}
        for label, runs_ in found.items()
    }
    for label, figure in figures.items():
        print(f"{label}: TUI lag p50 {figure['p50_ms']:.0f} ms, p95 {figure['p95_ms']:.0f} ms "
              f"(goal p95 <= {LAG_GOAL_MS:.0f})")  # fmt: skip
    write_result("gpu_rates_lag", {"median": figures, "runs": found, "n_predict": n})


def main(rounds: int, lag_runs: int, n: int) -> dict[str, object]:
    if shutil.which("tmux") is None or shutil.which("curl") is None:
        raise SystemExit("gpu_rates.py: needs tmux and curl")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="spectui-gpu-rates-") as tmp:
        scratch = Path(tmp)
        model = tiny_model(scratch)
        port, proxy_port = free_port(), free_port()
        url, proxy_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{proxy_port}"
        proxy = spectui_argv("proxy", "--url", url, "--listen", f"127.0.0.1:{proxy_port}")
        tmux = Tmux(scratch)
        try:
            with (
                process(server_argv(model, port), url),
                process([*proxy, "--format", "jsonl"], proxy_url) as proxy_proc,
            ):
                figures = ratios(url, (proxy_url, proxy_proc.pid), tmux, scratch, rounds, n)
                lag = lag_phase(url, tmux, scratch, lag_runs, n)
        finally:
            tmux.close()
    ratio, curl_rate = figures["ratio"], figures["tokens_per_second"]["curl"]
    met = {client: ratio[client] >= goal for client, goal in GOALS.items()}
    met["tui_lag"] = lag["tui_lag"]["p95_ms"] <= LAG_GOAL_MS
    met["follow_lag"] = lag["follow_lag"]["p95_ms"] <= FOLLOW_GOAL_MS
    met["rate"] = curl_rate >= RATE_FLOOR
    result: dict[str, object] = {
        **figures,
        **lag,
        "met": met,
        "goals": {
            **GOALS,
            "tui_lag_p95_ms": LAG_GOAL_MS,
            "follow_lag_p95_ms": FOLLOW_GOAL_MS,
            "server_tokens_per_second": RATE_FLOOR,
        },
        "n_predict": n,
        "prompt": PROMPT,
        "server": "llama-server, tiny qwen35 target (MTP head partial), draft-mtp n-max 2, -t 1",
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }
    path = write_result("gpu_rates", result)
    print(
        f"server {curl_rate:,.0f} tok/s (curl median); ratios: stream {ratio['stream']:.3f}, "
        f"proxy {ratio['proxy']:.3f}, TUI {ratio['tui']:.3f}; TUI lag p95 "
        f"{lag['tui_lag']['p95_ms']:.0f} ms, follower p95 {lag['follow_lag']['p95_ms']:.0f} ms"
        f" -> {path}"
    )
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--lag-runs", type=int, default=5)
    parser.add_argument("--n-predict", type=int, default=N_PREDICT)
    parser.add_argument("--lag-only", action="store_true", help="the TUI's lag alone")
    parser.add_argument("--src", action="append", default=[], metavar="DIR=LABEL")
    args = parser.parse_args()
    if args.lag_only:
        trees: list[tuple[Path | None, str]] = [(None, "now")]
        for spec in args.src:
            folder, _, label = spec.partition("=")
            trees.append((Path(folder), label or folder))
        lag_only(args.lag_runs, args.n_predict, trees)
    else:
        main(args.rounds, args.lag_runs, args.n_predict)
