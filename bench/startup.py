"""Start-up: from starting the `spectui` process to its first frame on the terminal. Goal: <= 1 s.

Runs the demo command (`spectui --builtin table-row`: the packaged llama-server and Gemma 3 270M,
launched in the background) in a pseudo-terminal of 120x36 and times the moment the main screen's
footer ("Quit") reaches the terminal. The first start, which also writes Python's bytecode caches,
is not counted (PYTHONDONTWRITEBYTECODE is cleared for the child, as on a user's machine).
Each start is ended with SIGTERM, which also stops its server.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from common import gemma_model, llama_binary, median, write_result

GOAL_S = 1.0
MARKER = b"Quit"
SPECTUI = Path(sys.executable).with_name("spectui")


def one_start(argv: list[str]) -> float:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["TERM"] = "xterm-256color"

    def controlling_tty() -> None:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    started = time.monotonic()
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=env, preexec_fn=controlling_tty
    )
    os.close(slave)
    seen = b""
    first_frame = float("nan")
    try:
        deadline = started + 60
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if not ready:
                continue
            try:
                seen += os.read(master, 65536)
            except OSError:
                break
            if MARKER in seen:
                first_frame = time.monotonic() - started
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        end = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    os.read(master, 65536)
                except OSError:
                    break
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        os.close(master)
    if first_frame != first_frame:  # nan: never drawn
        raise RuntimeError(f"no frame with {MARKER!r}; output: {seen[-500:]!r}")
    return first_frame


def main(reps: int = 5) -> dict[str, object]:
    # The demo's server and model: one line if they are missing, not a TUI that waits for them.
    llama_binary()
    gemma_model()
    argv = [str(SPECTUI), "--builtin", "table-row"]
    one_start(argv)  # warm-up: bytecode caches, the demo model assembled
    times = []
    for _ in range(reps):
        times.append(one_start(argv))
        print(f"first frame after {times[-1]:.3f} s")
    result: dict[str, object] = {
        "first_frame_s": median(times),
        "runs": times,
        "command": " ".join(["spectui", *argv[1:]]),
        "goal_s": GOAL_S,
        "met": median(times) <= GOAL_S,
    }
    path = write_result("startup", result)
    print(f"startup: first frame {median(times):.3f} s (goal <= {GOAL_S}) -> {path}")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=5)
    main(parser.parse_args().reps)
