"""Files spectui writes for the user alone: owner-only modes, and no planted link, FIFO or hard
link ever written through (record folder, workload, session files, logs, crash reports)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from helpers.engines import REQUEST, CaptureEngine
from spectui.core.engine.base import ServerInfo
from spectui.core.files import (
    UnsafeFileError,
    ensure_private_dir,
    open_append,
    open_new,
    open_replace,
    open_unique,
    write_new,
)
from spectui.core.llama.logbuffer import ServerLog, new_log_file
from spectui.core.proxy.record import WORKLOAD, RecordError, WorkloadRecorder, prepare_folder
from spectui.core.request import GenerationRequest
from spectui.core.sessions.file import SessionError, SessionWriter
from spectui.core.sessions.recording import RecordingEngine, header_for

INFO = ServerInfo(mode="attached", url="http://127.0.0.1:8080")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file a planted link points at; it must never change."""
    path = tmp_path / "victim.txt"
    path.write_text("untouched\n")
    return path


def test_new_folder_is_owner_only_and_a_wider_existing_one_is_warned_about(tmp_path: Path) -> None:
    assert ensure_private_dir(tmp_path / "a" / "b") is None
    assert mode(tmp_path / "a" / "b") == 0o700
    wide = tmp_path / "wide"
    wide.mkdir(mode=0o755)
    wide.chmod(0o755)
    warning = ensure_private_dir(wide)
    assert warning is not None and "0755" in warning and "\n" not in warning
    assert mode(wide) == 0o755  # warned about, not changed behind the user's back
    assert ensure_private_dir(tmp_path / "a" / "b") is None


def test_record_folder_is_0700_and_a_wide_one_gets_one_warning(tmp_path: Path) -> None:
    assert prepare_folder(tmp_path / "rec") is None
    assert mode(tmp_path / "rec") == 0o700
    wide = tmp_path / "shared"
    wide.mkdir()
    wide.chmod(0o777)
    recorder = WorkloadRecorder(wide, INFO)
    assert recorder.warning is not None and str(wide) in recorder.warning
    assert os.listdir(wide) == []  # the write test left nothing behind


def test_planted_symlink_at_the_workload_is_refused_at_start(tmp_path: Path, victim: Path) -> None:
    folder = tmp_path / "rec"
    folder.mkdir(mode=0o700)
    (folder / WORKLOAD).symlink_to(victim)
    with pytest.raises(RecordError, match="symbolic link") as caught:
        WorkloadRecorder(folder, INFO)
    assert "\n" not in str(caught.value)
    assert victim.read_text() == "untouched\n"


@pytest.mark.parametrize("dangling", [False, True])
def test_symlink_planted_later_is_refused_and_nothing_written_through(
    tmp_path: Path, victim: Path, dangling: bool
) -> None:
    target = tmp_path / "nowhere.txt" if dangling else victim
    (tmp_path / "l").symlink_to(target)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        os.close(open_append(tmp_path / "l"))
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        os.close(open_new(tmp_path / "l"))
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        open_unique(tmp_path / "l")
    assert victim.read_text() == "untouched\n"
    assert not (tmp_path / "nowhere.txt").exists()


def test_a_fifo_and_a_hard_link_are_refused(tmp_path: Path, victim: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(UnsafeFileError, match="not a regular file"):
        open_append(tmp_path / "fifo")  # returns at once: never blocks on a FIFO
    os.link(victim, tmp_path / "hard")
    with pytest.raises(UnsafeFileError, match="hard links"):
        open_replace(tmp_path / "hard")
    assert victim.read_text() == "untouched\n"


def test_another_users_file_is_refused(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file away")
    path = tmp_path / "theirs.jsonl"
    path.write_text("")
    os.chown(path, 65534, 65534)
    with pytest.raises(UnsafeFileError, match="another user"):
        open_append(path)


def test_an_existing_file_appended_to_is_made_0600(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    path.write_text("old\n")
    path.chmod(0o644)
    with os.fdopen(open_append(path), "a") as file:
        file.write("new\n")
    assert path.read_text() == "old\nnew\n" and mode(path) == 0o600


def test_unique_names_step_over_files_but_not_links(tmp_path: Path) -> None:
    (tmp_path / "s.jsonl").write_text("")
    path, fd = open_unique(tmp_path / "s.jsonl")
    os.close(fd)
    assert path.name == "s-2.jsonl" and mode(path) == 0o600


def test_session_file_at_a_planted_link_is_refused(tmp_path: Path, victim: Path) -> None:
    header = header_for(CaptureEngine().info, REQUEST)
    for dangling in (victim, tmp_path / "missing"):
        link = tmp_path / f"s-{dangling.name}.jsonl"
        link.symlink_to(dangling)
        for options in ({}, {"unique": True}, {"replace": True}):
            with pytest.raises(SessionError, match="symbolic link"):
                SessionWriter.open(link, header, **options)  # type: ignore[arg-type]  # bools
    assert victim.read_text() == "untouched\n"
    assert not (tmp_path / "missing").exists()


async def test_recording_engine_refuses_a_link_at_its_file_and_the_run_goes_on(
    tmp_path: Path, victim: Path
) -> None:
    (tmp_path / "run.jsonl").symlink_to(victim)
    engine = RecordingEngine(CaptureEngine(), sessions_dir=tmp_path, path=tmp_path / "run.jsonl")
    events = [event async for event in engine.run(REQUEST)]
    assert events and engine.problem is not None and "symbolic link" in engine.problem
    assert victim.read_bytes() == b"untouched\n"  # noqa: ASYNC240


async def test_recording_engine_rewrites_the_file_the_user_named(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text("old contents\n")
    engine = RecordingEngine(CaptureEngine(), sessions_dir=tmp_path, path=path)
    async for _ in engine.run(REQUEST):
        pass
    assert path.read_text().startswith('{"type":"header"') and mode(path) == 0o600


def test_session_names_taken_meanwhile_get_a_new_number(tmp_path: Path) -> None:
    header = header_for(INFO, GenerationRequest(prompt="x"))
    first = SessionWriter.open(tmp_path / "a.jsonl", header, unique=True)
    second = SessionWriter.open(tmp_path / "a.jsonl", header, unique=True)
    first.close()
    second.close()
    assert (first.path.name, second.path.name) == ("a.jsonl", "a-2.jsonl")
    with pytest.raises(SessionError, match="already exists"):
        SessionWriter.open(tmp_path / "a.jsonl", header)


def test_server_logs_are_0600_in_a_0700_folder_and_refuse_links(
    tmp_path: Path, victim: Path
) -> None:
    path = new_log_file(tmp_path / "logs")
    log = ServerLog(path)
    log.note("--api-key ***")
    log.close()
    assert mode(path) == 0o600 and mode(tmp_path / "logs") == 0o700
    link = tmp_path / "logs" / "llama-server-planted.log"
    link.symlink_to(victim)
    with pytest.raises(UnsafeFileError):
        ServerLog(link)
    assert victim.read_text() == "untouched\n"


def test_crash_reports_are_0600(tmp_path: Path) -> None:
    path = write_new(tmp_path / "crashes" / "crash.txt", "Traceback ...")
    again = write_new(tmp_path / "crashes" / "crash.txt", "Traceback ...")
    assert mode(path) == mode(again) == 0o600 and again.name == "crash-2.txt"
    assert mode(tmp_path / "crashes") == 0o700
