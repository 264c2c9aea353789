"""The token pane after a theme change: the wrapped text is built anew from the model, and the
next batch is shown once (it was appended to the rebuilt text, which already held it)."""

from __future__ import annotations

from textual.app import App, ComposeResult

from spectui.core.events import TokenEvent, TokenOrigin
from spectui.ui.themes import spec_variable_defaults
from spectui.ui.widgets.tokens import TokenView


def token(index: int) -> TokenEvent:
    return TokenEvent(index=index, text=f"w{index} ", origin=TokenOrigin.TARGET, t=index * 0.02)


class OnePane(App[None]):
    def get_theme_variable_defaults(self) -> dict[str, str]:
        return spec_variable_defaults(self.current_theme)

    def compose(self) -> ComposeResult:
        yield TokenView(id="tokens")


async def test_a_batch_after_a_theme_change_is_shown_once() -> None:
    app = OnePane()
    async with app.run_test(size=(30, 12)) as pilot:
        view = app.query_one(TokenView)
        view.add(tuple(token(i) for i in range(5)))
        await pilot.pause()
        view.notify_style_update()  # (the wrapped text is dropped, to be built anew)
        view.add(tuple(token(i) for i in range(5, 10)))
        await pilot.pause()
        shown = "".join(view.render_line(y).text for y in range(view.size.height))
        assert shown.count("w7 ") == 1 and shown.count("w2 ") == 1
