"""The memory budget: how much extra peak memory a config may cost before it is dropped for it.

Memory is a price, not a veto: every verdict shows a config's extra peak memory over the
baseline ("+99 MiB, +28 %"), and only a config whose extra exceeds the budget is dropped for it.
The budget is absolute ('512MiB') or a share of the machine ('10%': of the total RAM for the
server's RSS, of the GPU's memory for its VRAM where it uses a GPU).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from spectui.core.errors import SpectuiError

DEFAULT_MEMORY_BUDGET = "10%"
"""A tenth of the machine: speculation's usual price (an n-gram type's logits rows, ~100–150 MiB
with a 262k vocabulary; a small draft model) fits many times over, while a config that would
take a tenth of the RAM from everything else running there has to be asked for."""

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1000,
    "kb": 1000,
    "kib": 2**10,
    "m": 1000**2,
    "mb": 1000**2,
    "mib": 2**20,
    "g": 1000**3,
    "gb": 1000**3,
    "gib": 2**30,
}
_BUDGET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z%]*)\s*$")


class MemoryBudgetError(SpectuiError):
    """A memory budget that cannot be read."""

    title = "Bad memory budget"
    exit_code = 2


class MemoryBudget(BaseModel):
    """The extra peak memory over the baseline a config may cost before it is dropped for it."""

    model_config = ConfigDict(frozen=True)

    text: str = DEFAULT_MEMORY_BUDGET
    """The budget as given: '512MiB', '1.5GiB', '10%'."""
    limit_bytes: int | None = Field(default=None, ge=0)
    """An absolute budget in bytes (None: a percentage, see ``percent``)."""
    percent: float | None = Field(default=10.0, ge=0)
    """A budget as a share of the machine's memory (None: absolute)."""
    ram_total_bytes: int | None = None
    """Total RAM of the machine that measured the runs (for a percentage of RSS)."""
    gpu_total_bytes: int | None = None
    """Total memory of the GPU the server used (for a percentage of VRAM); None without one."""

    @classmethod
    def parse(
        cls, text: str, *, ram_total_bytes: int | None, gpu_total_bytes: int | None = None
    ) -> MemoryBudget:
        """Read '512MiB', '2GB', '10%' (raises `MemoryBudgetError`, one line)."""
        match = _BUDGET.match(text)
        unit = match.group(2).lower() if match else ""
        if match is None or (unit != "%" and unit not in _UNITS):
            raise MemoryBudgetError(
                f"--memory-budget {text!r}: give a size like 512MiB or 2GiB, or a share like 10%"
            )
        number = float(match.group(1))
        common = {"text": text.strip(), "ram_total_bytes": ram_total_bytes}
        if unit == "%":
            if number > 100:
                raise MemoryBudgetError(f"--memory-budget {text!r}: a share is at most 100%")
            return cls(percent=number, gpu_total_bytes=gpu_total_bytes, **common)
        return cls(limit_bytes=int(number * _UNITS[unit]), percent=None, **common)

    def limit(self, *, gpu: bool) -> int | None:
        """The budget in bytes for RSS (``gpu`` False) or VRAM; None when it cannot be known."""
        if self.limit_bytes is not None:
            return self.limit_bytes
        total = self.gpu_total_bytes if gpu else self.ram_total_bytes
        if self.percent is None or total is None:
            return None
        return int(total * self.percent / 100)

    def describe(self, *, gpu: bool) -> str:
        """'512 MiB' or '10 % of 23.4 GiB RAM (2.3 GiB)'."""
        limit = self.limit(gpu=gpu)
        if self.limit_bytes is not None or self.percent is None:
            return fmt_bytes(self.limit_bytes or 0)
        what = "VRAM" if gpu else "RAM"
        if limit is None:
            return f"{self.percent:g} % of {what} (total unknown)"
        total = self.gpu_total_bytes if gpu else self.ram_total_bytes
        return f"{self.percent:g} % of {fmt_bytes(total or 0)} {what} ({fmt_bytes(limit)})"


def fmt_bytes(value: float) -> str:
    """'99 MiB', '2.3 GiB'."""
    if abs(value) >= 2**30:
        return f"{value / 2**30:.1f} GiB"
    return f"{value / 2**20:.0f} MiB"


def machine_memory() -> tuple[int | None, int | None]:
    """(total RAM, total memory of the first GPU NVML sees): what a percentage budget is of."""
    import psutil

    try:
        ram: int | None = int(psutil.virtual_memory().total)
    except OSError:
        ram = None
    return ram, _gpu_total()


def _gpu_total() -> int | None:
    try:
        import pynvml  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError and its subclasses: no driver, no GPU
        return None
    try:
        if int(pynvml.nvmlDeviceGetCount()) == 0:
            return None
        info = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByIndex(0))
        return int(info.total)
    except Exception:  # a GPU NVML cannot read is a GPU without a known total
        return None
    finally:
        pynvml.nvmlShutdown()


def resolve_budget(text: str | None) -> MemoryBudget:
    """``text`` (default `DEFAULT_MEMORY_BUDGET`) against this machine's memory."""
    ram, gpu = machine_memory()
    return MemoryBudget.parse(
        text or DEFAULT_MEMORY_BUDGET, ram_total_bytes=ram, gpu_total_bytes=gpu
    )
