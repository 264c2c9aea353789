"""Does watching slow the server? Server tok/s watched ÷ the same request by `curl -N`, decided.

    python bench/watch_ratio.py [--rounds 15] [--n-predict 3500]

`gpu_rates.py` could not decide the goals (stream ≥ 0.98, proxy ≥ 0.97, TUI ≥ 0.95 of curl):
at 800 tokens a run lasts ~0.4 s, and curl against itself read 1.11 with its rounds spread
0.84–1.20. This benchmark changes the measurement, not the clients (the same tiny-model
llama-server, `--threads 1`, draft-mtp n-max 2, at ~2,000 tok/s; the same four clients):

* **a longer run**: 3,500 tokens (~2 s), so a run's rate is not a few scheduler slices;
* **three rates per run**: the server's own ``timings.predicted_per_second`` (its clock: a
  watcher can slow it only by taking CPU from it or by back-pressuring the socket); the
  client's **wall rate**, tokens ÷ (request sent → last token received) on the client's clock
  (curl: ``time_total``; spectui: the run's ``total_ms``), which shows a watcher that falls
  behind whether or not the server is slowed; and the **server's CPU rate**, tokens ÷ the
  server process's CPU seconds over the client's run (``/proc``), which a busy machine does not
  move (waiting for a core costs no CPU time) and a watcher moves only by making the server do
  more work per token (its polls, slow reads);
* **paired**: each round runs every client once, in a shuffled order (seeded); a client's ratio
  is its rate ÷ the same round's curl rate, so what the machine does between rounds cancels;
* **decided**: the figure is the median of the rounds' ratios with a 95 % bootstrap interval
  (rounds resampled, fixed seed); a goal is met when the interval's low end reaches it, missed
  when its high end is below it, else undecided. ``curl-again`` (curl once more) is the
  control: its interval should hold 1.0, and its width is what this run can resolve.

The TUI runs in tmux 120x36 (`gpu_rates_tap.Tmux`), its run's wall time read from its summary.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import median, round_orders, write_result
from gpu_rates import PROMPT, body, server_argv, spectui_argv, tiny_model
from gpu_rates_tap import Tmux, process

from spectui.core.llama.server import free_port

HERE = Path(__file__).resolve().parent
N_PREDICT = 3500
"""~2 s of generation at ~1,900 tok/s (the tiny target's context is 4,096)."""
GOALS = {"stream": 0.98, "proxy": 0.97, "tui": 0.95}
CLIENTS = ("curl", "stream", "proxy", "tui", "curl-again")
RATES = ("server", "wall", "server_cpu")
"""The server's own rate, the client's wall rate (tokens ÷ request → last token), and tokens per
second of the server's CPU over the client's run (its process's utime + stime from /proc)."""
RESAMPLES = 4000
SEED = 28


def run_curl(url: str, folder: Path, n: int) -> tuple[float, float]:
    """(server tok/s, wall tok/s) of one request by ``curl -sN``."""
    request = folder / "request.json"
    request.write_text(json.dumps(body(n)))
    out = folder / "curl.sse"
    argv = ["curl", "-sN", "-X", "POST", f"{url}/completion", "-o", str(out), "-w", "%{time_total}"]
    argv += ["-H", "Content-Type: application/json", "--data-binary", f"@{request}"]
    wall_s = float(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)
    last = [line for line in out.read_text().splitlines() if line.startswith("data: ")][-1]
    timings = json.loads(last[6:])["timings"]
    assert timings["predicted_n"] == n, timings
    return float(timings["predicted_per_second"]), n / wall_s


def run_stream(url: str, n: int) -> tuple[float, float]:
    """(server tok/s, wall tok/s) of one `spectui stream --url` run (its own process)."""
    argv = spectui_argv("stream", "--url", url, "--prompt", PROMPT, "--n-predict", str(n))
    done = subprocess.run([*argv, "--format", "jsonl"], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"watch_ratio.py: spectui stream failed: {done.stderr.strip()[-300:]}")
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["type"] == "summary" and summary["tokens"] == n, summary
    rate = float(summary["server_timings"]["predicted_per_second"])
    return rate, n / (float(summary["total_ms"]) / 1000)


class WallTmux(Tmux):
    """`Tmux` whose TUI child also writes its run's client-clock wall time (``total_ms``)."""

    def tui_rates(self, url: str, n: int) -> tuple[float, float]:
        """(server tok/s, wall tok/s) of one TUI run in tmux."""
        self.count += 1
        out = self.scratch / f"tui-{self.count}.json"
        args = ["--url", url, "--prompt", PROMPT, "--n-predict", str(n), "--run"]
        env = {
            "SPECTUI_CONFIG": str(self.scratch / "config.toml"),
            "XDG_STATE_HOME": str(self.scratch / "state"),
            "XDG_CACHE_HOME": str(self.scratch / "cache"),
            "SPECTUI_THEME": "spectui-dark",
        }
        command = " ".join(
            [f"cd {shlex.quote(str(HERE))} &&", *(f"{k}={shlex.quote(v)}" for k, v in env.items())]
            + ["exec", shlex.quote(sys.executable), "watch_ratio.py", "tui-child", str(out)]
            + [shlex.quote(arg) for arg in args]
        )
        session = f"tui{self.count}"
        self.tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "36", command)
        try:
            deadline = time.monotonic() + 120
            while not out.exists():
                if (
                    time.monotonic() > deadline
                    or self.tmux("has-session", "-t", session).returncode
                ):
                    raise SystemExit("watch_ratio.py: the TUI ended without a result")
                time.sleep(0.05)
        finally:
            self.tmux("kill-session", "-t", session)
        shown = json.loads(out.read_text())
        wall = json.loads(out.with_suffix(".wall").read_text())
        return float(shown["predicted_per_second"]), n / (wall["total_ms"] / 1000)


def tui_child(out: Path, args: list[str]) -> int:
    """`gpu_rates_tap.tui_child_main`, with the run's wall time written beside its result."""
    from gpu_rates_tap import tui_child_main

    from spectui.ui.widgets.run_display import RunDisplay

    original = RunDisplay.finished

    def finished(display: RunDisplay, summary: Any) -> None:
        wall = {"total_ms": summary.metrics.total_ms}
        out.with_suffix(".wall").write_text(json.dumps(wall))  # before the result appears
        original(display, summary)

    RunDisplay.finished = finished  # type: ignore[method-assign,assignment]  # (a bench probe)
    return tui_child_main(out, args)


def interval(ratios: list[float]) -> dict[str, float]:
    """The median of the rounds' ratios and its 95 % bootstrap interval (rounds resampled)."""
    rng = random.Random(SEED)
    medians = sorted(
        statistics.median(rng.choices(ratios, k=len(ratios))) for _ in range(RESAMPLES)
    )
    low, high = medians[int(0.025 * RESAMPLES)], medians[int(0.975 * RESAMPLES) - 1]
    return {"median": statistics.median(ratios), "low": low, "high": high}


def decide(figure: dict[str, float], goal: float) -> str:
    if figure["low"] >= goal:
        return "met"
    return "missed" if figure["high"] < goal else "undecided"


def cpu_s(pid: int) -> float:
    """A process's CPU seconds so far (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    url: str, proxy_url: str, server: int, tmux: WallTmux, folder: Path, rounds: int, n: int
) -> Any:
    runs: dict[str, dict[str, list[float]]] = {c: {r: [] for r in RATES} for c in CLIENTS}
    run_curl(url, folder, n)  # warm-up, not counted
    # Shuffled, not rotated: in a rotation each client always follows the same one (curl
    # followed curl-again every round), and that neighbour's after-effects biased the pair.
    for round_, order in enumerate(round_orders(CLIENTS, rounds, SEED)):
        for client in order:
            before = cpu_s(server)
            if client in ("curl", "curl-again"):
                got = run_curl(url, folder, n)
            elif client == "stream":
                got = run_stream(url, n)
            elif client == "proxy":
                got = run_curl(proxy_url, folder, n)
            else:
                got = tmux.tui_rates(url, n)
            cpu_rate = n / max(cpu_s(server) - before, 1e-3)
            for rate, value in zip(RATES, (*got, cpu_rate), strict=True):
                runs[client][rate].append(value)
        print(
            f"round {round_ + 1}: "
            + ", ".join(
                f"{c} " + "/".join(f"{runs[c][r][-1]:.0f}" for r in RATES) for c in CLIENTS
            ),
            flush=True,
        )
    return runs


def main(rounds: int, n: int) -> dict[str, object]:
    if shutil.which("tmux") is None or shutil.which("curl") is None:
        raise SystemExit("watch_ratio.py: needs tmux and curl")
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="spectui-watch-ratio-") as tmp:
        scratch = Path(tmp)
        model = tiny_model(scratch)
        port, proxy_port = free_port(), free_port()
        url, proxy_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{proxy_port}"
        proxy = spectui_argv("proxy", "--url", url, "--listen", f"127.0.0.1:{proxy_port}")
        tmux = WallTmux(scratch)
        try:
            with (
                process(server_argv(model, port), url) as server,
                process([*proxy, "--format", "jsonl"], proxy_url),
            ):
                runs = measure(url, proxy_url, server.pid, tmux, scratch, rounds, n)
        finally:
            tmux.close()
    figures: dict[str, dict[str, dict[str, float]]] = {rate: {} for rate in RATES}
    for rate in RATES:
        base = runs["curl"][rate]
        for client in CLIENTS[1:]:
            paired = [r / b for r, b in zip(runs[client][rate], base, strict=True)]
            figures[rate][client] = interval(paired)
    calls = {
        rate: {client: decide(figures[rate][client], goal) for client, goal in GOALS.items()}
        for rate in RATES
    }
    curl_rate = median(runs["curl"]["server"])
    result: dict[str, object] = {
        "ratio": figures,
        "decided": calls,
        "goals": GOALS,
        "server_tokens_per_second": curl_rate,
        "runs": runs,
        "rounds": rounds,
        "n_predict": n,
        "resamples": RESAMPLES,
        "server": "llama-server, tiny qwen35 target (MTP head partial), draft-mtp n-max 2, -t 1",
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }
    path = write_result("watch_ratio", result)
    print(f"server {curl_rate:,.0f} tok/s (curl median), {rounds} rounds of {n} tokens")
    for rate in RATES:
        for client in CLIENTS[1:]:
            f = figures[rate][client]
            call = calls[rate].get(client, "control")
            print(
                f"  {rate:6} {client:10} {f['median']:.3f} [{f['low']:.3f}, {f['high']:.3f}] {call}"
            )
    print(f"-> {path}")
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["tui-child"]:
        sys.exit(tui_child(Path(sys.argv[2]), sys.argv[3:]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--n-predict", type=int, default=N_PREDICT)
    args = parser.parse_args()
    main(args.rounds, args.n_predict)
