"""Server memory: RSS and RSS-minus-shared over the process tree, GPU memory via NVML if present.

llama-server mmaps the model, so its RSS includes file-backed pages shared with the page cache;
RSS minus shared is what the process really owns. Both are reported, summed over the process
and its children.
"""

from __future__ import annotations

import contextlib
import time
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


MIN_CPU_INTERVAL_S = 0.25
"""CPU shares are measured over at least this long (the kernel counts CPU in 10 ms ticks)."""

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
        self._cpu_since: float | None = None
        """Wall clock of the sample the CPU shares are measured from (None: none yet)."""
        self._own_cpu_since = 0.0

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
        # CPU shares need an interval: a sample right after another (a run's last one) keeps
        # measuring from the earlier one and reports none, rather than a meaningless 0 %.
        now = time.monotonic()
        measure_cpu = self._cpu_since is None or now - self._cpu_since >= MIN_CPU_INTERVAL_S
        rss = owned = 0
        server_cpu = 0.0
        pids: set[int] = set()
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                with proc.oneshot():
                    info = proc.memory_info()
                    if measure_cpu:  # (psutil measures from its own previous call)
                        server_cpu += proc.cpu_percent()
                rss += info.rss
                owned += info.rss - getattr(info, "shared", 0)
                pids.add(proc.pid)
        if self.pid not in pids:
            self._tree_t = None  # the server went (or restarted): walk again next time
            return None
        gpu = nvml().process_bytes(pids) if self._use_gpu else None
        client: float | None = None
        server: float | None = None
        if measure_cpu:
            own = time.process_time()  # this process, all threads, at full resolution
            if self._cpu_since is not None:
                client = round((own - self._own_cpu_since) / (now - self._cpu_since) * 100, 2)
                server = server_cpu
            self._cpu_since, self._own_cpu_since = now, own
        return MemoryEvent(
            t=t,
            rss_bytes=rss,
            rss_minus_shared_bytes=owned,
            gpu_bytes=gpu,
            server_cpu_percent=server,
            client_cpu_percent=client,
        )
