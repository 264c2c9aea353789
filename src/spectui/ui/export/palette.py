"""The theme's token styles for the text exports, as rich styles (no app runs for them)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.style import Style

from spectui.ui.widgets.drafters import DRAFTER_CLASSES, UNKNOWN_CLASS
from spectui.ui.widgets.token_looks import ORIGIN_UNKNOWN_CLASS, TokenStyles

LOOKS: dict[str, tuple[str, str | None, str | None]] = {
    "token--draft": ("spec-accepted", "spec-accepted-background", "underline"),
    "token--target": ("spec-target", None, None),
    "token--rejected": ("spec-rejected", None, "bold"),
    ORIGIN_UNKNOWN_CLASS: ("spec-drafter-unknown", None, "italic"),
    DRAFTER_CLASSES[1]: ("spec-drafter-2", "spec-drafter-2-background", "underline"),
    DRAFTER_CLASSES[2]: ("spec-drafter-3", "spec-drafter-3-background", "underline"),
    UNKNOWN_CLASS: ("spec-drafter-unknown", None, "underline"),
}
"""Each token component class of the TUI (`token_looks.TOKEN_CSS`) as (colour variable,
background variable, text style): the TUI's stylesheet resolved without a running app, so an
export needs no terminal. tests/unit/test_export_drafters.py holds it to the TUI's styles."""


@dataclass(frozen=True, slots=True)
class Palette:
    """The theme colours an export needs: the page's own, and each token class's style."""

    foreground: str
    """The theme's text colour (the html page's)."""
    background: str
    """The theme's background colour (the html page's)."""
    looks: dict[str, Style]
    """Rich style by token component class (the keys of `LOOKS`)."""

    @classmethod
    def for_theme(cls, name: str) -> Palette:
        """The colours of theme ``name`` (the default theme when it is unknown)."""
        from spectui.ui.themes import (
            DEFAULT_THEME,
            discover_themes,
            shipped_theme_dir,
            spec_variable_defaults,
            user_theme_dir,
        )

        themes = {t.name: t for t in discover_themes(shipped_theme_dir(), user_theme_dir())[0]}
        theme = themes.get(name) or themes[DEFAULT_THEME]
        base = theme.to_color_system().generate()
        colours = {**base, **spec_variable_defaults(theme), **theme.variables}

        def look(colour: str, background: str | None, text_style: str | None) -> Style:
            return Style(
                color=colours[colour],
                bgcolor=colours[background] if background else None,
                bold=True if text_style == "bold" else None,
                italic=True if text_style == "italic" else None,
                underline=True if text_style == "underline" else None,
            )

        return cls(
            foreground=base["foreground"],
            background=base["background"],
            looks={name: look(*parts) for name, parts in LOOKS.items()},
        )

    def token_styles(self) -> TokenStyles:
        """Fresh token styles (their drafter keys belong to one transcript)."""
        return TokenStyles(
            self.looks["token--draft"],
            self.looks["token--target"],
            self.looks["token--rejected"],
            {name: self.looks[name] for name in (*DRAFTER_CLASSES, UNKNOWN_CLASS)},
            self.looks[ORIGIN_UNKNOWN_CLASS],
        )
