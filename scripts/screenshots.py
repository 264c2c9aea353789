"""Render the pictures in README.md and docs/ from checked-in recordings: `make screenshots`.

Every picture is spectui's own screen, drawn headless by Textual at a fixed size and theme and
saved with its SVG export (the same one `spectui export --to svg` uses), from files in the
repository — nothing is run against a server, so the same checkout draws the same pictures
(the browser's PNG but for the browser's own font rendering):

- ``tui.svg``: the live TUI after `docs/recordings/table-row-ngram-simple.jsonl` has replayed
  at max speed (a run with accepted drafts, rejections and a target token after each step);
- ``tui-midrun.svg``: the same session stopped part-way, token by token with the replay clock;
- ``compare.svg``: the Compare screen over `docs/recordings/compare.json` (a finished compare);
- ``tune.svg``: the Tune screen's leaderboard over `docs/recordings/tune.json`;
- ``proxy.svg``: the proxy screen fed the real llama-server captures in `tests/fixtures`
  through the proxy's own hub (two finished requests and one still streaming).
- ``spec-draft-mtp.svg``, ``spec-chain.svg``: the live TUI after a recorded run of the tiny
  constructed model (`spectui.testing`): draft-mtp, and the chain ngram-simple,draft-mtp.
- ``follow-terminal.svg``, ``follow-ssh.svg``: `spectui follow --live` while a presenter's run is
  written into the live folder from the same recording (the second on the presenter's second
  run, the first run's numbers beside it; `follow_shots.py`);
- ``follow-browser.png``: `spectui share --live` of a finished recorded run, opened in headless
  Chromium (Debian's ``chromium``; `follow_shots.py`). ``--no-browser`` leaves it out.

Usage: ``python scripts/screenshots.py [--out docs/images] [--theme spectui-dark] [--no-browser]
[NAME ...]``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RECORDINGS = ROOT / "docs" / "recordings"
CAPTURES = ROOT / "tests" / "fixtures"
SIZE = (120, 36)
"""Terminal size of every picture: the TUI's wide layout (full charts)."""
MIDRUN_TOKENS = 120
"""Where the mid-run picture stops: tokens released before the clock is frozen."""
ROUNDS = 5000
"""Idle turns a screen gets to settle before the script gives up on it."""


def _isolate() -> None:
    """Keep the developer's settings, themes and SPECTUI_* out; times on screen in UTC."""
    for name in list(os.environ):
        if name.startswith("SPECTUI_"):
            del os.environ[name]
    scratch = Path(tempfile.mkdtemp(prefix="spectui-shots-"))
    os.environ["SPECTUI_CONFIG"] = str(scratch / "config.toml")
    for name in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        os.environ[name] = str(scratch / name.lower())
    # A follower's banner names its folder from the home folder: the broadcast folder then reads
    # as on a machine without XDG_RUNTIME_DIR (~/.local/state/spectui/live), not as a temp path.
    os.environ["HOME"] = str(scratch)
    os.environ["XDG_STATE_HOME"] = str(scratch / ".local" / "state")
    os.environ.pop("XDG_RUNTIME_DIR", None)
    os.environ["TZ"] = "UTC"
    time.tzset()


_isolate()

import follow_shots  # noqa: E402  (after the environment is fixed)
from textual.app import App  # noqa: E402
from textual.pilot import Pilot  # noqa: E402

from spectui.config import Settings  # noqa: E402
from spectui.core.compare.runner import CompareEvent, CompareFinished  # noqa: E402
from spectui.core.compare.store import CompareDocument, load_document  # noqa: E402
from spectui.core.events import MemoryEvent, TokenEvent  # noqa: E402
from spectui.core.proxy.chunks import PreparedBody  # noqa: E402
from spectui.core.proxy.hub import ProxyHub  # noqa: E402
from spectui.core.proxy.models import EndpointKind, RequestStatus  # noqa: E402
from spectui.core.sessions.file import Session, read_session  # noqa: E402
from spectui.core.sessions.replay import ReplayClock, ReplayEngine  # noqa: E402
from spectui.core.tune.models import TuneDocument  # noqa: E402
from spectui.core.tune.runner import TuneEvent, TuneFinished  # noqa: E402
from spectui.ui.apps.base import headless_svg  # noqa: E402
from spectui.ui.apps.compare import CompareApp  # noqa: E402
from spectui.ui.apps.proxy import ProxyApp  # noqa: E402
from spectui.ui.apps.replay import ReplayApp  # noqa: E402
from spectui.ui.apps.tune import TuneApp  # noqa: E402
from spectui.ui.screens.proxy import ProxyScreen  # noqa: E402

SESSION = RECORDINGS / "table-row-ngram-simple.jsonl"


class FinishedCompare:
    """A compare source that is already done: its document, and one 'finished' event."""

    def __init__(self, document: CompareDocument) -> None:
        self._document = document

    @property
    def document(self) -> CompareDocument:
        return self._document

    async def run(self) -> AsyncIterator[CompareEvent]:
        yield CompareFinished(document=self._document)


class FinishedTune:
    """A tune source that is already done: its document, and one 'finished' event."""

    def __init__(self, document: TuneDocument) -> None:
        self._document = document

    @property
    def document(self) -> TuneDocument:
        return self._document

    async def run(self) -> AsyncIterator[CompareEvent | TuneEvent]:
        yield TuneFinished(document=self._document)


async def _shoot(
    app: App[Any],
    ready: Callable[[Pilot[object]], Awaitable[bool]],
    title: str,
    size: tuple[int, int] = SIZE,
    settle: Callable[[], None] | None = None,
) -> str:
    """Run ``app`` headless until ``ready`` says so, let it settle, then its SVG screenshot.

    ``settle`` runs after the pause, before every widget is redrawn: what the screen would show
    at that point of the run however its updates were batched (a replay at max speed merges
    snapshots as the machine's speed allows; the picture must not depend on it).
    """

    async def before(pilot: Pilot[object]) -> None:
        await pilot.pause(0.5)  # batched tokens and throttled panes arrive
        if settle is not None:
            settle()
        for widget in app.screen.query("*"):
            widget.refresh()
        await pilot.pause()

    shot = await headless_svg(app, ready, title=title, size=size, rounds=ROUNDS, before=before)
    if shot is None:
        raise SystemExit(f"screenshots: {title}: the screen never got ready")
    return shot


def _settle_replay(app: ReplayApp, session: Session, until: float) -> Callable[[], None]:
    """Charts redrawn now; the server bar's CPU from the last sample up to ``until`` (the live
    screen shows the newest sample; which one a fast replay delivered last is a race)."""

    def settle() -> None:
        screen = app.main_screen
        assert screen is not None
        screen.charts.replot()
        samples = [
            e for e in session.events
            if isinstance(e, MemoryEvent) and e.t <= until and e.client_cpu_percent is not None
        ]  # fmt: skip
        if samples:
            screen.server.bar.set_cpu(samples[-1])

    return settle


async def tui(settings: Settings) -> str:
    """The live TUI at the end of the recorded run (as `spectui export --to svg` draws it)."""
    session = read_session(SESSION)
    engine = ReplayEngine(session, clock=ReplayClock(None))
    app = ReplayApp([engine], settings)

    async def ready(pilot: Pilot[object]) -> bool:
        screen = app.main_screen
        return screen is not None and engine.finished and not screen.running

    settle = _settle_replay(app, session, math.inf)
    return await _shoot(app, ready, session.header.title, settle=settle)


async def _replayed(settings: Settings, path: Path) -> str:
    """The live TUI at the end of the run recorded in ``path``, replayed at max speed."""
    session = read_session(path)
    engine = ReplayEngine(session, clock=ReplayClock(None))
    app = ReplayApp([engine], settings)

    async def ready(pilot: Pilot[object]) -> bool:
        screen = app.main_screen
        return screen is not None and engine.finished and not screen.running

    settle = _settle_replay(app, session, math.inf)
    return await _shoot(app, ready, session.header.title, settle=settle)


async def spec_mtp(settings: Settings) -> str:
    """A draft-mtp run of the tiny model at ~2,000 tok/s (docs/spec-types.md)."""
    return await _replayed(settings, RECORDINGS / "tiny-draft-mtp.jsonl")


async def spec_chain(settings: Settings) -> str:
    """A chain, ngram-simple then draft-mtp, each step named by its drafter."""
    return await _replayed(settings, RECORDINGS / "tiny-ngram-simple-draft-mtp.jsonl")


async def tui_midrun(settings: Settings) -> str:
    """The live TUI part-way through the run: the replay clock stepped token by token."""
    session = read_session(SESSION)
    tokens = [e.t for e in session.events if isinstance(e, TokenEvent)]
    stop_at = tokens[min(MIDRUN_TOKENS, len(tokens)) - 1]
    clock = ReplayClock(None)
    clock.pause()
    app = ReplayApp([ReplayEngine(session, clock=clock)], settings)

    async def ready(pilot: Pilot[object]) -> bool:
        if clock.now() >= stop_at:
            return True
        clock.step()  # on to the next token (taken when the replay waits for it)
        return False

    settle = _settle_replay(app, session, stop_at)
    return await _shoot(app, ready, session.header.title, settle=settle)


COMPARE_SIZE = (172, 16)
"""The Compare screen's picture: wide enough for every column, verdicts included."""
COMPARE_ROW = 2
"""The row highlighted in it (its verdict's sentence shows below the table)."""


async def compare(settings: Settings) -> str:
    """The Compare screen over a finished comparison, a config's row highlighted."""
    session = read_session(SESSION)
    app = CompareApp(
        ReplayEngine(session), settings, FinishedCompare(load_document(_path("compare")))
    )

    async def ready(pilot: Pilot[object]) -> bool:
        if not getattr(app.screen, "finished", False):
            return False
        await pilot.press(*["down"] * COMPARE_ROW)
        return True

    return await _shoot(app, ready, "spectui compare", COMPARE_SIZE)


TUNE_SIZE = (150, 24)
"""The Tune screen's picture: every leaderboard column and the candidate's detail."""


async def tune(settings: Settings) -> str:
    """The Tune screen's overall leaderboard over a tune, its leader highlighted."""
    document = TuneDocument.model_validate_json(_path("tune").read_bytes())
    app = TuneApp(ReplayEngine(read_session(SESSION)), settings, FinishedTune(document))

    async def ready(pilot: Pilot[object]) -> bool:
        return bool(getattr(app.screen, "finished", False))

    return await _shoot(app, ready, "spectui tune", TUNE_SIZE)


START = datetime(2026, 1, 2, 10, 0, 0, tzinfo=UTC)


class _Clocks:
    """The hub's monotonic and wall clocks, moved only by the script (times on screen fixed)."""

    def __init__(self) -> None:
        self.t = 100.0

    def clock(self) -> float:
        return self.t

    def wall(self) -> datetime:
        return START + timedelta(seconds=self.t - 100.0)


TRAFFIC_SIZE = (120, 18)
"""The proxy screen's picture: a few requests need no full screen."""
_TRAFFIC = [
    ("/completion", EndpointKind.NATIVE, "completion-ngram-simple-2.sse", "10.0.0.7", None, 0.02),
    (
        "/v1/chat/completions",
        EndpointKind.OAI_CHAT,
        "chat-ngram-simple.sse",
        "10.0.0.7",
        None,
        0.011,
    ),
    ("/completion", EndpointKind.NATIVE, "completion-draft-simple.sse", "10.0.0.12", None, 0.016),
    (
        "/v1/completions",
        EndpointKind.OAI_COMPLETION,
        "v1-completions-ngram-mod.sse",
        "10.0.0.9",
        70,
        0.013,
    ),
]
"""(path, kind, capture, client, lines fed before the picture (None: all, then finished),
seconds between lines on the request's clock)."""


async def proxy(settings: Settings) -> str:
    """The proxy screen: real captures fed through the proxy's hub as clients would."""
    clocks = _Clocks()
    hub = ProxyHub(keep_events=True, clock=clocks.clock, wall=clocks.wall)
    app = ProxyApp(None, settings, hub=hub)
    fed = False

    async def ready(pilot: Pilot[object]) -> bool:
        nonlocal fed
        if fed:
            return True
        for path, kind, capture, client, upto, step_s in _TRAFFIC:
            body = PreparedBody(upstream=b"", streamed=True, strip=True, prompt="p", n_predict=120)
            live = hub.start(path, kind, f"{client}:50000", body)
            assert live.attribution is not None
            lines = (CAPTURES / capture).read_bytes().splitlines(keepends=True)
            data = [line for line in lines if line.startswith(b"data:")]
            for index, line in enumerate(data[:upto]):
                live.attribution.line(line, 0.3 + index * step_s)
            if upto is None:
                clocks.t += 3.0
                hub.finish(live, status=RequestStatus.DONE, http_status=200)
        app.screen_proxy.post_message(
            ProxyScreen.StatusChanged("proxy http://127.0.0.1:8081 → http://127.0.0.1:8080")
        )
        fed = True
        return False

    return await _shoot(app, ready, "spectui proxy", TRAFFIC_SIZE)


PICTURES: dict[str, Callable[[Settings], Coroutine[Any, Any, str]]] = {
    "tui": tui,
    "tui-midrun": tui_midrun,
    "compare": compare,
    "tune": tune,
    "proxy": proxy,
    "spec-draft-mtp": spec_mtp,
    "spec-chain": spec_chain,
    "follow-terminal": lambda settings: follow_shots.follow_terminal(settings, _shoot),
    "follow-ssh": lambda settings: follow_shots.follow_ssh(settings, _shoot),
}
"""Picture name (the file is NAME.svg) → how it is drawn."""
BROWSER_PICTURES: dict[str, Callable[[Settings], Coroutine[Any, Any, bytes]]] = {
    "follow-browser": follow_shots.follow_browser,
}
"""Pictures taken in a browser (the file is NAME.png): they need Chromium."""


def _path(name: str) -> Path:
    return RECORDINGS / f"{name}.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    parser.add_argument("--theme", default="spectui-dark")
    parser.add_argument(
        "--no-browser", action="store_true", help=f"leave out {list(BROWSER_PICTURES)} (Chromium)"
    )
    every = [*PICTURES, *BROWSER_PICTURES]
    parser.add_argument("only", nargs="*", help=f"pictures to draw (default: all of {every})")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.only) - set(every))
    if unknown:
        parser.error(f"no such picture: {', '.join(unknown)}")
    settings = Settings(theme=args.theme)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only or every:
        if name in PICTURES:
            target = args.out / f"{name}.svg"
            target.write_text(asyncio.run(PICTURES[name](settings)), encoding="utf-8")
        elif args.no_browser:
            continue
        else:
            target = args.out / f"{name}.png"
            target.write_bytes(asyncio.run(BROWSER_PICTURES[name](settings)))
        print(f"screenshots: wrote {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
