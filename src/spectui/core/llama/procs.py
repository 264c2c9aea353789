"""Process-wide safety net: every llama-server spectui launches is registered here until reaped.

`kill_all_sync` kills every registered process group; it runs from ``atexit`` and from
`spectui.lifecycle`'s watchdog, so no server outlives spectui. On Linux the child also
asks the kernel for SIGTERM when spectui dies (`die_with_parent`), which covers ``kill -9``.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import sys
import threading
import time

import psutil

_lock = threading.Lock()
_live: dict[int, str] = {}  # pid (== its process group id: start_new_session) -> what it is

KILL_GRACE_S = 3.0
"""How long the synchronous kill waits after SIGTERM before SIGKILL."""

_PR_SET_PDEATHSIG = 1
_libc: ctypes.CDLL | None = None
if sys.platform.startswith("linux"):
    try:
        _libc = ctypes.CDLL(None, use_errno=True)
    except OSError:  # no libc symbols reachable: only the atexit net remains
        _libc = None


def die_with_parent() -> None:
    """``preexec_fn`` of a launched server: SIGTERM it when the launching thread dies.

    The kernel ties this to the *thread* that forked, so servers must be launched from the
    event-loop thread, which lives as long as spectui does (never from a worker thread).
    """
    if _libc is not None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def register(pid: int, what: str = "llama-server") -> None:
    """Track a launched process (the leader of its own process group)."""
    with _lock:
        _live[pid] = what


def unregister(pid: int) -> None:
    """Stop tracking a process that has exited and been reaped."""
    with _lock:
        _live.pop(pid, None)


def live_pids() -> list[int]:
    """Registered processes that are still running (zombies count as gone)."""
    with _lock:
        pids = list(_live)
    return [pid for pid in pids if _alive(pid)]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def kill_all_sync(grace_s: float = KILL_GRACE_S) -> list[int]:
    """SIGTERM every registered process group, SIGKILL what is left after ``grace_s``.

    Blocking and loop-free, so it works from ``atexit`` and signal handlers. Returns the pids
    that were still running.
    """
    pids = live_pids()
    for pid in pids:
        _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in pids:
        # SIGKILL the group even if the leader went: a helper it spawned may still hold on.
        _signal_group(pid, signal.SIGKILL)
    with _lock:
        for pid in pids:
            _live.pop(pid, None)
    return pids


atexit.register(kill_all_sync)
