"""Run sources by capability (`spectui.core.engine.base`): each source offers what it can do and
lacks the rest (None), so a UI asks by attribute, never by class."""

from __future__ import annotations

from pathlib import Path

from helpers.engines import CaptureEngine, record_capture
from spectui.core.sessions.file import read_session
from spectui.core.sessions.follow import FollowEngine
from spectui.core.sessions.recording import RecordingEngine
from spectui.core.sessions.replay import ReplayClock, ReplayEngine
from spectui.core.sessions.tail import SessionFollower


def test_a_recording_engine_controls_its_server_and_records(tmp_path: Path) -> None:
    engine = RecordingEngine(CaptureEngine(), sessions_dir=tmp_path)
    assert engine.server_control is engine
    assert engine.recorder is engine
    assert engine.following is None


async def test_a_replay_runs_and_controls_nothing(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    await record_capture(path)
    engine = ReplayEngine(read_session(path), clock=ReplayClock(None))
    assert (engine.server_control, engine.recorder, engine.following) == (None, None, None)
    assert engine.info.mode == "replay"


def test_a_follower_follows_and_reports_its_own_mode(tmp_path: Path) -> None:
    follower = SessionFollower(tmp_path)
    engine = FollowEngine(follower)
    assert engine.following is follower
    assert engine.server_control is None and engine.recorder is None
    assert not hasattr(engine, "run") and not hasattr(engine, "switch_spec")
    assert engine.info.mode == "follow"  # not 'replay': nothing is replayed here
    assert engine.info.url.startswith("follow://")
    assert engine.ready_detail().startswith("following ")
