"""Whether each private-API override earns its keep where a user pays for it: the CPU of the
whole spectui process.

Every override defined in `spectui.core.overrides` is measured in the client it speeds, run as
a process of its own against the paced stand-in server (`fake_server.py`) at a fixed token
rate, exactly as `client_cpu.py` measures clients (the TUI in tmux 120x40 writing to a real
terminal; `spectui stream`; `spectui proxy` with a `curl -N` client): CPU (user + system, all
threads, from /proc) over a window mid-stream, as a share of one core. The stock path is the
same client with ``SPECTUI_STOCK=<name>``: that override alone off, the others on. Within a
round the variants run one after another, their order rotating from round to round, so a busy
machine weighs on all alike; the figure is stock / override of the medians over the rounds.

An override earns its keep when, at one of the rates measured, its stock path costs at least
10 % more CPU (`WORTH`, medians) *and* every stock round cost more than every round with it (on
a shared machine a ratio of medians alone lets one noisy round decide); the script exits 1
naming each that does not, and 2 when an override is defined that it does not know how to
measure.

    python bench/overrides.py [--rate 50 --rate 1000] [--rounds 3] [--window 10] [--only NAME]
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from client_cpu import fake_server, proxy_cpu, stream_cpu, tui_cpu
from common import median, write_result

from spectui.core import overrides
from spectui.core.overrides import STOCK_ENV

SRC = Path(__file__).resolve().parent.parent / "src"
WORTH = 1.10
"""An override earns its keep when its stock path costs at least this much more CPU."""
RATES = (50.0, 1_000.0)
"""Tokens/s: the rate the performance guard is set at, and a fast GPU's."""

Measure = Callable[[str, Path, int, float, dict[str, str] | None], float]


def _tui(size: tuple[int, int]) -> Measure:
    def measure(
        url: str, src: Path, tokens: int, window: float, extra: dict[str, str] | None
    ) -> float:
        return tui_cpu(url, src, tokens, window, extra, size)[0]

    return measure


CLIENTS: dict[str, Measure] = {
    "tui 120x40": _tui((120, 40)),
    "stream": stream_cpu,
    "proxy": proxy_cpu,
}
"""How each client's CPU is measured."""

MEASURED_IN: dict[str, str] = {
    "lean-compositor": "tui 120x40",
    "asyncio-transport": "stream",
    "lean-uvicorn": "proxy",
}
"""Override name -> the client whose CPU it is meant to save (where what it draws is shown)."""

DEFINING_MODULES = (
    "spectui.ui.apps.live",
    "spectui.ui.apps.proxy",
    "spectui.core.llama.transport",
    "spectui.core.proxy.serve",
)
"""Imported so that every override the clients can use is defined (`overrides.defined()`)."""


def defined_overrides() -> list[str]:
    """The names of every override the clients define for speed, in a fixed order (share's
    gate exists for what textual-serve's public API cannot do, not to save CPU)."""
    for module in DEFINING_MODULES:
        importlib.import_module(module)
    return sorted(override.name for override in overrides.defined() if override.for_speed)


def variants(names: list[str]) -> dict[str, tuple[str, dict[str, str] | None]]:
    """Label -> (client, extra environment): each client with every override on, then each
    override's stock path (it alone off)."""
    out: dict[str, tuple[str, dict[str, str] | None]] = {}
    for client in sorted({MEASURED_IN[name] for name in names}):
        out[f"{client} overrides on"] = (client, None)
    for name in names:
        out[f"{MEASURED_IN[name]} stock {name}"] = (MEASURED_IN[name], {STOCK_ENV: name})
    return out


def measure(rate: float, rounds: int, window: float, names: list[str]) -> dict[str, list[float]]:
    """CPU % of each variant at ``rate``, one value per round."""
    runs: dict[str, list[float]] = {}
    labels = variants(names)
    order = list(labels)
    tokens = int(rate * (window + 30))  # (streams beyond the window: it starts once it flows)
    with fake_server(rate) as url:
        for index in range(rounds):
            shift = index % len(order)
            for label in order[shift:] + order[:shift]:
                client, extra = labels[label]
                cpu = CLIENTS[client](url, SRC, tokens, window, extra)
                runs.setdefault(label, []).append(cpu)
                print(f"{rate:g} tok/s round {index + 1}: {label}: {cpu:.2f} %", flush=True)
    return runs


def judge(names: list[str], per_rate: dict[str, dict[str, list[float]]]) -> dict[str, Any]:
    """Per override: CPU with it and without it at each rate, the ratios, and the verdict."""
    verdicts: dict[str, Any] = {}
    for name in names:
        client = MEASURED_IN[name]
        rates: dict[str, Any] = {}
        for rate, runs in per_rate.items():
            with_it, without = runs[f"{client} overrides on"], runs[f"{client} stock {name}"]
            on, off = median(with_it), median(without)
            ratio = off / on if on else 0.0
            rates[rate] = {
                "override_cpu_pct": round(on, 2),
                "stock_cpu_pct": round(off, 2),
                "stock_over_override": round(ratio, 3),
                "separated": min(without) > max(with_it),
                "earns": ratio >= WORTH and min(without) > max(with_it),
            }
        earns = any(r["earns"] for r in rates.values())
        verdicts[name] = {"client": client, "rates": rates, "earns_its_keep": earns}
    return verdicts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, action="append", help="tokens/s (50 and 1000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=10.0, help="seconds measured per run")
    parser.add_argument("--only", action="append", metavar="NAME", help="measure these only")
    args = parser.parse_args()
    if shutil.which("tmux") is None or shutil.which("curl") is None:
        raise SystemExit("overrides: needs tmux and curl")
    names = defined_overrides()
    unknown = sorted(set(names) - set(MEASURED_IN))
    if unknown:
        print(f"overrides: no client to measure {', '.join(unknown)} in", file=sys.stderr)
        return 2
    if args.only:
        wrong = sorted(set(args.only) - set(names))
        if wrong:
            raise SystemExit(f"overrides: no override named {', '.join(wrong)}")
        names = [name for name in names if name in args.only]
    rates = args.rate or list(RATES)
    per_rate = {f"{rate:g} tok/s": measure(rate, args.rounds, args.window, names) for rate in rates}
    verdicts = judge(names, per_rate)
    result = {
        "rule": (
            f"at one rate: stock / override >= {WORTH} (medians of whole-process CPU) and every"
            " stock round above every round with the override"
        ),
        "window_s": args.window,
        "rounds": args.rounds,
        "overrides": verdicts,
        "runs": per_rate,
        "machine": {"cpus": os.cpu_count(), "load_1min": os.getloadavg()[0]},
    }
    path = write_result("overrides", result)
    failed = []
    for name, verdict in verdicts.items():
        figures = " · ".join(
            f"{rate}: {r['override_cpu_pct']:.2f} % vs stock {r['stock_cpu_pct']:.2f} %"
            f" (x{r['stock_over_override']})"
            for rate, r in verdict["rates"].items()
        )
        keep = verdict["earns_its_keep"]
        print(f"{name} ({verdict['client']}): {figures} -> {'keep' if keep else 'does not earn'}")
        if not keep:
            failed.append(name)
    print(f"-> {path}")
    if failed:
        print(f"overrides: saving < 10 % of the process: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
