"""The lean compositor, behind its gate: Textual's own compositor wherever the gate says no.

`lean_compositor.LeanCompositor` subclasses Textual's private `Compositor`, overrides its
`_get_renders`, reads its `_dirty_regions` and replaces `Screen._compositor`. It is used only with
the Textual it was tested with, when those names are there and `SPECTUI_STOCK` is not set
(`spectui.core.overrides`); otherwise a screen keeps the compositor Textual gave it, and draws
the same cells, slower. bench/overrides.py (bench/results/overrides.json), the whole process in
tmux 120x40 at 50 tokens/s: 9.5 % of a core with Textual's own, 8.1 % with this one (1.17x,
every stock round above every lean one); at 1,000 tokens/s, where the token pane scrolls every
frame and most of the screen changes, 1.05x (within noise).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from textual.screen import Screen

from spectui.core.overrides import Override, enabled

LEAN_COMPOSITOR = Override(name="lean-compositor", library="textual", tested_version="8.2.8")
"""`LeanCompositor`: Textual's compositor internals (see the module docstring)."""


def _internals_present() -> bool:
    """Whether Textual's compositor has the private names `LeanCompositor` relies on."""
    module = importlib.import_module("textual._compositor")
    base = module.Compositor
    renders = list(inspect.signature(base._get_renders).parameters)
    return (
        hasattr(module, "ChopsUpdate")
        and renders == ["self", "crop"]
        and callable(getattr(base, "render_partial_update", None))
        and isinstance(getattr(base, "visible_widgets", None), property)
        and isinstance(vars(base()).get("_dirty_regions"), set)
    )


def lean_compositor_enabled() -> bool:
    """Whether screens get the lean compositor in this process (decided once)."""
    return enabled(LEAN_COMPOSITOR, _internals_present)


def use_lean_compositor(screen: Screen[Any]) -> None:
    """Give ``screen`` the lean compositor (call from its ``__init__``); no-op if gated off."""
    if not lean_compositor_enabled():
        return
    from textual._compositor import Compositor

    from spectui.ui.lean_compositor import LeanCompositor

    if isinstance(vars(screen).get("_compositor"), Compositor):  # (the one Screen.__init__ made)
        screen._compositor = LeanCompositor()
