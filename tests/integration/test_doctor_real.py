"""`spectui doctor` and `doctor --try` on the real llama-server (#28 items 4 and 5)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil
import pytest

from helpers.cli import spectui
from helpers.wait import wait_until

from .outside import FAST

if TYPE_CHECKING:
    from spectui.testing.tiny_models import TinyModels

pytestmark = pytest.mark.server

TINY_PROMPT = ("--prompt", "Hello alpha beta", "--n-predict", "24")


def with_marker(*args: str) -> tuple[list[str], str]:
    """``args`` plus extra server arguments that name this run, to find its servers by."""
    marker = f"doctor-{uuid.uuid4().hex[:8]}"
    return [*args, "--", *FAST, "--alias", marker], marker


def servers_named(marker: str) -> list[psutil.Process]:
    """Live llama-servers (the real one, or the fake script) launched with ``marker``: not the
    spectui process, whose own command line carries it too."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = proc.info["cmdline"] or []
        server = any(Path(part).name == "llama-server" for part in cmdline[:2])
        if server and marker in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def trials(result: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    return {trial["type"]: trial for trial in report["trials"]}


def test_doctor_names_what_gemma_cannot_run(gemma_model: Path) -> None:
    result = spectui("doctor", "--model", str(gemma_model))
    assert result.returncode == 0, result.stderr
    mtp = next(line for line in result.stdout.splitlines() if line.strip().startswith("draft-mtp"))
    assert "not offered: no MTP layers in this GGUF" in mtp
    assert "auto-detection off" in result.stdout


def test_try_on_gemma_runs_every_type_and_leaves_no_server(gemma_model: Path) -> None:
    args, marker = with_marker(
        "doctor", "--try", "--json", "--model", str(gemma_model), "--n-predict", "8"
    )
    result = spectui(*args)
    found = trials(result)
    assert next(iter(found)) == "none" and found["none"]["outcome"] == "works"
    assert found["draft-mtp"]["outcome"] == "not applicable"
    assert "no MTP layers in this GGUF" in found["draft-mtp"]["reason"]
    assert found["draft-eagle3"]["outcome"] == "not applicable"
    for name in ("ngram-simple", "ngram-mod", "ngram-map-k"):
        assert found[name]["outcome"] == "works", found[name]
    assert not servers_named(marker)


def test_try_on_the_tiny_mtp_model(tiny_models: TinyModels) -> None:
    args, marker = with_marker(
        "doctor",
        "--try",
        "--json",
        "--model",
        str(tiny_models.target),
        "--spec-type",
        "ngram-mod,draft-mtp",
        *TINY_PROMPT,
    )
    found = trials(spectui(*args))
    mtp = found["draft-mtp"]
    assert mtp["outcome"] == "works", mtp
    assert mtp["drafted"] > 0 and mtp["accepted"] == mtp["drafted"]  # a full-acceptance head
    assert mtp["tokens_per_second"] and mtp["speedup"]
    eagle = found["draft-eagle3"]
    assert eagle["outcome"] == "not applicable"
    assert "none given" in eagle["reason"]
    assert found["ngram-mod,draft-mtp"]["outcome"] == "works"
    assert not servers_named(marker)


def test_try_with_an_eagle3_drafter(tiny_models: TinyModels) -> None:
    drafter = tiny_models.drafter("eagle3")
    args, marker = with_marker(
        "doctor",
        "--try",
        "--json",
        "--model",
        str(tiny_models.target),
        "--draft-model",
        str(drafter),
        *TINY_PROMPT,
    )
    found = trials(spectui(*args))
    assert found["draft-eagle3"]["outcome"] == "works", found["draft-eagle3"]
    assert found["draft-eagle3"]["drafted"] > 0
    assert "not a DFlash/DSpark drafter" in found["draft-dflash"]["reason"]
    assert "standalone" in found["draft-simple"]["reason"]
    assert not servers_named(marker)


def test_a_type_that_hangs_is_stopped_and_reported(tmp_path: Path) -> None:
    """A llama-server that never becomes ready: each type counts as hung once the guard runs
    out (a guard, not a speed limit: this server never answers), and none is left behind."""
    from helpers.gguf_files import target

    help_text = Path(__file__).parent.parent / "fixtures" / "help.txt"
    fake = tmp_path / "llama-server"
    fake.write_text(
        "#!/bin/sh\n"
        f'case "$1" in --help) cat "{help_text}";; --version) echo "version: 1 (fake)";;\n'
        "*) while true; do sleep 1; done;; esac\n"
    )
    fake.chmod(0o755)
    model = target(tmp_path / "m.gguf", "qwen35", mtp_layers=1)
    args, marker = with_marker(
        "doctor", "--try", "--json", "--server-bin", str(fake), "--model", str(model),
        # (half a second: the guard is met whatever the speed, this server never answers)
        "--try-timeout", "0.5", *TINY_PROMPT,
    )  # fmt: skip
    result = spectui(*args)
    assert result.returncode == 1  # not even the baseline runs: a script should see it
    found = {trial["type"]: trial for trial in json.loads(result.stdout)["trials"]}
    assert found["none"]["outcome"] == "hung"
    assert "no ready server and finished run within 0.5 s; stopped" in found["none"]["reason"]
    assert found["draft-mtp"]["outcome"] == "hung"
    assert found["draft-dflash"]["outcome"] == "not applicable"
    assert not servers_named(marker)


def test_a_type_the_server_refuses_gives_its_own_reason(
    tiny_models: TinyModels, gemma_model: Path
) -> None:
    """Gemma as the tiny target's draft model: the headers cannot tell the vocabularies apart,
    the server can (it starts, then runs without speculation and says why in its log)."""
    args, marker = with_marker(
        "doctor",
        "--try",
        "--model",
        str(tiny_models.target),
        "--draft-model",
        str(gemma_model),
        *TINY_PROMPT,
    )
    result = spectui(*args)
    assert result.returncode == 0, result.stderr
    line = next(x for x in result.stdout.splitlines() if x.startswith("draft-simple"))
    assert "refused" in line
    assert "draft model vocab type must match target model" in line
    assert "not applicable" in next(
        x for x in result.stdout.splitlines() if x.startswith("draft-eagle3")
    )
    assert not servers_named(marker)


def test_sigterm_during_try_stops_the_server_it_runs(gemma_model: Path) -> None:
    args, marker = with_marker("doctor", "--try", "--model", str(gemma_model))
    proc = subprocess.Popen(
        [sys.executable, "-m", "spectui.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:

        def started() -> bool:
            assert proc.poll() is None, proc.communicate()
            return bool(servers_named(marker))

        wait_until(started, "doctor --try started its first server")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    assert not servers_named(marker)
