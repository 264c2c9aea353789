"""Run every benchmark, each in a process of its own, then print one table of figures vs goals.

    python bench/run_all.py [--quick]      (or: make bench)

Results go to bench/results/NAME.json. Figures are noisy on a shared machine: run it when the
machine is quiet (`uptime`), and compare ratios measured within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from common import RESULTS

HERE = Path(__file__).resolve().parent

# (script and arguments, arguments with --quick)
BENCHMARKS: list[tuple[list[str], list[str]]] = [
    (["pipeline.py"], []),
    (["tui.py", "lag"], []),
    (["tui.py", "memory"], []),
    (["startup.py"], ["--reps", "3"]),
    (["switch.py"], ["--reps", "3"]),
    (["client_cpu.py"], ["--reps", "1"]),
    (["overhead.py"], ["--rounds", "3"]),
    (["overhead.py", "--pin"], ["--rounds", "3"]),
    (["overrides.py"], ["--rounds", "1"]),
    (["gpu_rates.py"], ["--rounds", "3", "--lag-runs", "1"]),
    (["watch_ratio.py"], ["--rounds", "5"]),
    (["slots_view.py"], ["--reps", "1"]),
    (["concurrent_cpu.py"], ["--reps", "1"]),
    (["costmodel_levels.py"], ["--reps", "1"]),
]


def load(name: str) -> dict[str, Any]:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def ok(met: object) -> str:
    return "met" if met else "NOT met"


def table() -> list[str]:
    rows: list[tuple[str, str, str, str]] = []
    p = load("pipeline")
    if p:
        rows.append(
            (
                "pipeline (SSE+parse+attribution+metrics)",
                f"{p['tokens_per_second']:,.0f} tok/s",
                ">= 100,000 tok/s",
                ok(p["met"]),
            )
        )
        core, run = p["core_tokens_per_second"], p["stream_run_tokens_per_second"]
        rows.append(("  ChunkProcessor alone", f"{core:,.0f} tok/s", "", ""))
        rows.append(("  whole StreamRun", f"{run:,.0f} tok/s", "", ""))
    t = load("tui_lag_cpu")
    if t:
        lag = f"p50 {t['lag_p50_ms']:.0f} / p95 {t['lag_p95_ms']:.0f} / max {t['lag_max_ms']:.0f}"
        rows.append(("TUI lag at 5,000 tok/s (ms)", lag, "<= 100 ms (p95)", ok(t["lag_met"])))
        cpu = f"{100 * t['cpu_fraction']:.0f}% of a core"
        rows.append(("TUI CPU at 5,000 tok/s", cpu, "<= 35%", ok(t["cpu_met"])))
    m = load("memory")
    if m:
        growth = f"{m['peak_growth_mb']:.1f} MB"
        rows.append(("RSS growth, 100,000 tokens", growth, "<= 50 MB", ok(m["met"])))
    s = load("switch")
    if s:
        rest = f"{s['overhead_s']:.3f} s (load {s['load_s']:.3f} s)"
        rows.append(("spec switch minus model load", rest, "<= 0.5 s", ok(s["met"])))
    u = load("startup")
    if u:
        first = f"{u['first_frame_s']:.3f} s"
        rows.append(("start-up to first frame", first, "<= 1 s", ok(u["met"])))
    c = load("client_cpu")
    if c:
        med = c["median"]
        rows.append(
            (
                f"client CPU at {c['rate']:.0f} tok/s (tmux TUI / stream)",
                f"TUI {med['tui now']:.1f}%, stream {med['stream now']:.1f}%",
                "<= 5% / <= 1.5%",
                ok(med["tui now"] <= 5 and med["stream now"] <= 1.5),
            )
        )
    for name, label in (("overhead", "all cores"), ("overhead-pinned", "server on its own core")):
        o = load(name)
        if o:
            ratios = f"stream {o['stream_ratio']:.3f}, TUI {o['tui_ratio']:.3f}"
            goal = f">= {o.get('goal_tui', 0.96)} TUI, {o.get('goal_stream', 0.985)} stream"
            rows.append((f"overhead ({label})", ratios, goal, ok(o["met"])))
    g = load("gpu_rates")
    if g:
        ratio, goals, met = g["ratio"], g["goals"], g["met"]
        rate = f"{g['tokens_per_second']['curl']:,.0f} tok/s"
        rows.append(("GPU rates: the tiny-model server (curl)", rate, ">= 1,500", ok(met["rate"])))
        for client in ("stream", "proxy", "tui"):
            figure = f"{ratio[client]:.3f} of curl"
            rows.append((f"  server tok/s watched by {client}", figure, f">= {goals[client]}",
                         ok(met[client])))  # fmt: skip
        if "curl-again" in ratio:
            rows.append(("  noise floor: curl again", f"{ratio['curl-again']:.3f} of curl", "", ""))
        for key, label in (("tui_lag", "TUI lag"), ("follow_lag", "follower lag")):
            lag = f"p50 {g[key]['p50_ms']:.0f} / p95 {g[key]['p95_ms']:.0f} ms"
            goal = f"<= {goals[key + '_p95_ms']:.0f} ms (p95)"
            rows.append((f"  {label} (server wrote -> drawn)", lag, goal, ok(met[key])))
    w = load("watch_ratio")
    if w:
        for client, goal in w["goals"].items():
            f = w["ratio"]["server"][client]
            figure = f"{f['median']:.3f} [{f['low']:.3f}, {f['high']:.3f}] of curl"
            call = w["decided"]["server"][client]
            rows.append((f"watch ratio: server tok/s by {client}", figure, f">= {goal}", call))
    sv = load("slots_view")
    if sv and "slots 120x36" in sv["median"]:
        cpu, goal = sv["median"]["slots 120x36"], sv["goal_percent"]
        label = f"slots view, {sv['streams']} lanes at {sv['rate']:g} tok/s (CPU)"
        rows.append((label, f"{cpu:.1f}% of a core", f"<= {goal:g}%", ok(cpu <= goal)))
    cc = load("concurrent_cpu")
    for name, ratio in cc.get("ratio", {}).items():
        if "," in name or ratio is None:
            continue  # another source tree's (--src: 'before, proxy tui'), or no figure
        label = f"{name}: CPU {cc['streams']} streams / 1 at the same tok/s"
        goal = cc["goal_ratio"]
        rows.append((label, f"{ratio:.3f}", f"<= {goal:g}", ok(ratio <= goal)))
    cl = load("costmodel_levels")
    for level, fit in cl.get("levels", {}).items():
        # The goal's figure is the paired one (each block predicted from the block just before
        # it: the machine's speed drift hits both alike), beside the floor of identical work.
        paired = fit.get("paired", {}).get("median_in_sample", fit["median_abs_error"])
        floor = fit.get("wave_floor", {}).get("median")
        shown = f"{paired:.1%}" + (f" (floor {floor:.0%})" if floor is not None else "")
        goal = f"<= {cl['goal']:.0%} at N = 4" if level == "4" else ""
        met = ok(paired <= cl["goal"]) if level == "4" else ""
        rows.append((f"cost model at {level} stream(s): paired median error", shown, goal, met))
    v = load("overrides")
    for name, verdict in v.get("overrides", {}).items():
        rates = verdict["rates"]
        ratio = " / ".join(f"{r['stock_over_override']:.2f}" for r in rates.values())
        label = f"override {name}: {verdict['client']} CPU stock / override ({' / '.join(rates)})"
        rows.append((label, ratio, ">= 1.10 at one rate", ok(verdict["earns_its_keep"])))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--table", action="store_true", help="only print the table of results")
    args = parser.parse_args()
    failed = []
    if not args.table:
        print(f"load average: {os.getloadavg()}")
        for script, quick in BENCHMARKS:
            argv = [sys.executable, str(HERE / script[0]), *script[1:]]
            if args.quick:
                argv += quick
            print(f"== {' '.join(script)}", flush=True)
            if subprocess.run(argv, cwd=HERE).returncode != 0:
                failed.append(" ".join(script))
    print()
    print("\n".join(table()))
    if failed:
        print(f"failed to run: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
