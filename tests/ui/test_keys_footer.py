"""The run screens' footer recomposes only when the keys it shows change (`KeysFooter`)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.widgets._footer import FooterKey

from helpers.engines import FakeEngine
from spectui.core.events import ServerState
from spectui.ui.apps.live import SpectuiApp
from spectui.ui.widgets.footer import KeysFooter

from .ui_helpers import main_screen, settle


async def test_the_footer_recomposes_for_new_keys_only(
    engine: FakeEngine, make_app: Callable[..., SpectuiApp], monkeypatch: pytest.MonkeyPatch
) -> None:
    app = make_app(engine)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = main_screen(app)
        await settle(pilot, lambda: screen.state is ServerState.READY and screen.query(FooterKey))
        footer = screen.query_one(KeysFooter)
        recomposes: list[None] = []
        recompose = footer.recompose

        async def counted() -> None:
            recomposes.append(None)
            await recompose()

        monkeypatch.setattr(footer, "recompose", counted)
        screen.refresh_bindings()  # the same keys: nothing to rebuild

        # Then the stop key greyed out: one recompose, after the first signal's (if it had one).
        def check_action(action: str, parameters: tuple[object, ...]) -> bool | None:
            return None if action == "stop" else True

        monkeypatch.setattr(screen, "check_action", check_action)
        screen.refresh_bindings()

        def stop_greyed() -> bool:
            keys = [key for key in screen.query(FooterKey) if key.action == "stop"]
            return len(keys) == 1 and keys[0].has_class("-disabled")

        await settle(pilot, stop_greyed, "the footer's stop key greyed out")
        assert len(recomposes) == 1
