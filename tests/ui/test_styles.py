"""Styles live with their widgets: each widget's component classes are styled in its own
DEFAULT_CSS, the app stylesheet holds layout only, and no style names a literal colour."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

from textual.dom import DOMNode

import spectui.ui

APP_TCSS = Path(spectui.ui.__file__).parent / "apps" / "app.tcss"
LITERAL_COLOUR = re.compile(r":[^;{}]*(#[0-9a-fA-F]{3,8}\b|\brgba?\(|\bhsla?\()")
"""A declaration whose value is a hex, rgb() or hsl() colour (not a theme variable)."""


def spectui_nodes() -> list[type[DOMNode]]:
    """Every widget and screen class spectui's UI defines."""
    found: dict[str, type[DOMNode]] = {}
    for module in pkgutil.walk_packages(spectui.ui.__path__, "spectui.ui."):
        loaded = importlib.import_module(module.name)
        for _, cls in inspect.getmembers(loaded, inspect.isclass):
            if issubclass(cls, DOMNode) and cls.__module__ == module.name:
                found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return list(found.values())


def own_css(cls: type[DOMNode]) -> str:
    """The DEFAULT_CSS of ``cls`` and of its spectui bases."""
    return "\n".join(
        str(base.__dict__.get("DEFAULT_CSS", ""))
        for base in cls.__mro__
        if base.__module__.startswith("spectui.")
    )


def test_component_classes_are_styled_by_their_widget() -> None:
    nodes = spectui_nodes()
    assert len(nodes) > 20
    unstyled = [
        f"{cls.__name__} .{name}"
        for cls in nodes
        for name in sorted(cls.__dict__.get("COMPONENT_CLASSES", set()))
        if f".{name}" not in own_css(cls)
    ]
    assert unstyled == []
    # ... and the app's stylesheet styles none of them: it is layout only.
    assert not re.search(r"\.[a-z]+--[a-z-]+", APP_TCSS.read_text(encoding="utf-8"))


def test_styles_use_theme_variables_only() -> None:
    sources = {"app.tcss": APP_TCSS.read_text(encoding="utf-8")}
    sources |= {cls.__qualname__: own_css(cls) for cls in spectui_nodes()}
    literal = {name: LITERAL_COLOUR.findall(css) for name, css in sources.items()}
    assert {name: found for name, found in literal.items() if found} == {}
