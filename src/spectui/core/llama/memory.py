"""Server memory: RSS and RSS-minus-shared over the process tree, GPU memory via NVML if present.

llama-server mmaps the model, so its RSS includes file-backed pages shared with the page cache;
RSS minus shared is what the process really owns. Both are reported, summed over the process
and its children.
"""

from __future__ import annotations

import contextlib
from typing import Any

import psutil

from spectui.core.events import MemoryEvent


class _Nvml:
    """Lazy NVML access; ``available`` is False (with a reason) where there is no GPU or library."""

    def __init__(self) -> None:
        self.available = False
        self.reason = "not initialised"
        self._lib: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
        except ImportError:
            self.reason = "nvidia-ml-py not installed (pip install 'spectui[gpu]')"
        except Exception as error:  # NVMLError has many subclasses; any means "no GPU here"
            self.reason = f"NVML unavailable: {error}"
        else:
            self._lib = pynvml
            self.available = True
            self.reason = "ok"

    def process_bytes(self, pids: set[int]) -> int | None:
        """GPU memory used by these processes over all devices."""
        if not self.available:
            return None
        lib = self._lib
        total = 0
        for index in range(lib.nvmlDeviceGetCount()):
            handle = lib.nvmlDeviceGetHandleByIndex(index)
            for proc in lib.nvmlDeviceGetComputeRunningProcesses(handle):
                if proc.pid in pids and proc.usedGpuMemory:
                    total += int(proc.usedGpuMemory)
        return total


_nvml: _Nvml | None = None


def nvml() -> _Nvml:
    """The process-wide NVML handle (initialised on first use)."""
    global _nvml
    if _nvml is None:
        _nvml = _Nvml()
    return _nvml


TREE_REFRESH_S = 30.0
"""How often the sampler looks for new child processes: finding them walks all of /proc (every
process's parent), which cost more than the rest of a sample together (llama-server starts no
children of its own; this is for wrappers that do)."""


class MemorySampler:
    """Samples one process tree's memory and CPU, and this process's own CPU.

    Cheap enough to call at 2 Hz: the `psutil.Process` objects are kept between samples (the
    tree is re-walked every `TREE_REFRESH_S`), which also lets ``cpu_percent`` measure the
    interval since the previous sample.
    """

    def __init__(self, pid: int, *, use_gpu: bool = True) -> None:
        self.pid = pid
        self._use_gpu = use_gpu
        self._procs: list[psutil.Process] = []
        self._tree_t: float | None = None
        self._self = psutil.Process()
        self._self.cpu_percent()  # the first call only starts the interval

    def _tree(self, t: float) -> list[psutil.Process]:
        if self._tree_t is None or t - self._tree_t >= TREE_REFRESH_S or t < self._tree_t:
            root = psutil.Process(self.pid)
            known = {proc.pid: proc for proc in self._procs}
            fresh = [root, *root.children(recursive=True)]
            # Keep the objects already known: their cpu_percent intervals continue.
            self._procs = [known.get(proc.pid, proc) for proc in fresh]
            self._tree_t = t
        return self._procs

    def sample(self, t: float = 0.0) -> MemoryEvent | None:
        """One sample, or None when the process is gone or not ours to inspect."""
        try:
            procs = self._tree(t)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None
        rss = owned = 0
        cpu = 0.0
        pids: set[int] = set()
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                with proc.oneshot():
                    info = proc.memory_info()
                    cpu += proc.cpu_percent()
                rss += info.rss
                owned += info.rss - getattr(info, "shared", 0)
                pids.add(proc.pid)
        if self.pid not in pids:
            self._tree_t = None  # the server went (or restarted): walk again next time
            return None
        gpu = nvml().process_bytes(pids) if self._use_gpu else None
        return MemoryEvent(
            t=t,
            rss_bytes=rss,
            rss_minus_shared_bytes=owned,
            gpu_bytes=gpu,
            server_cpu_percent=cpu,
            client_cpu_percent=self._self.cpu_percent(),
        )
