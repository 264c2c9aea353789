"""The run screens' footer: Textual's, recomposed only when the keys it would show change."""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer


class KeysFooter(Footer):
    """Textual's footer, recomposed only when the keys it would show changed.

    Every bindings signal recomposes the stock footer (its keys unmounted, remounted and styled
    again, tens of ms on a loaded machine), and a starting app sends several with the same keys
    (the screen pushed, resumed, focused): a first run, asked for right after the server is
    ready (``--run``), had its first tokens wait behind them.
    """

    _composed_for: object = None
    """The keys the last recompose was asked for (None: none asked yet)."""

    def bindings_changed(self, screen: Screen[object]) -> None:
        if self.app.app_focus and self.is_attached and screen is self.screen:
            keys = tuple(
                (key, bound.binding, bound.enabled, bound.tooltip)
                for key, bound in screen.active_bindings.items()
            )
            if keys == self._composed_for:
                return
            self._composed_for = keys
        super().bindings_changed(screen)


__all__ = ["KeysFooter"]
