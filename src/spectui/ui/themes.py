"""Theme files: shipped ones in the repository's top-level ``themes/``, user ones in
``config_dir()/themes``. A file that fails to load is reported and skipped, never fatal.

The lookup order (docs/tui.md says the same): the shipped folder first — ``spectui/themes``
inside an installed wheel (the build copies ``themes/`` there), else the source tree's
``themes/`` (an editable install or a checkout) — then the user's folder, whose files replace a
shipped theme of the same name.

A theme file is TOML (or JSON) with Textual's theme fields at the top level and app variables
under ``variables``; spectui's own variables (`SPEC_VARIABLES`) fall back to colours derived from
the theme when a file leaves them out, so any Textual theme can drive the token styles.
"""

from __future__ import annotations

import json
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from textual.color import Color, ColorParseError
from textual.theme import Theme

from spectui.config import config_dir
from spectui.core.errors import SpectuiError

DEFAULT_THEME = "spectui-dark"
"""Used when the configured theme is unknown or broken."""

SHIPPED_THEMES = ("spectui-dark", "spectui-light", "spectui-projector", "spectui-okabe-ito")
"""The themes in the top-level ``themes/`` folder, in the order the docs list them."""

SPEC_VARIABLES = (
    "spec-accepted",
    "spec-accepted-background",
    "spec-target",
    "spec-rejected",
    "spec-chart",
    "spec-drafter-2",
    "spec-drafter-2-background",
    "spec-drafter-3",
    "spec-drafter-3-background",
    "spec-drafter-unknown",
)
"""App variables the token and chart styles read (see the widgets' DEFAULT_CSS); the
``spec-drafter-*`` ones tell a chain's drafters apart (`widgets.drafters`)."""

THEME_SUFFIXES = (".toml", ".json")


class ThemeError(SpectuiError):
    """A theme file could not be used."""

    title = "Theme problem"


def _check_colour(value: str) -> str:
    try:
        Color.parse(value)
    except ColorParseError as error:
        raise ValueError(f"{value!r} is not a colour") from error
    return value


class ThemeFile(BaseModel):
    """The contents of one theme file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    """Theme name as used by ``--theme`` and the settings file."""
    dark: bool = True
    """Whether this is a dark theme (drives Textual's derived shades)."""
    primary: str
    """Main accent colour; every other colour is optional."""
    secondary: str | None = None
    warning: str | None = None
    error: str | None = None
    success: str | None = None
    accent: str | None = None
    foreground: str | None = None
    background: str | None = None
    surface: str | None = None
    panel: str | None = None
    boost: str | None = None
    luminosity_spread: float = 0.15
    text_alpha: float = Field(default=0.95, ge=0.0, le=1.0)
    variables: dict[str, str] = Field(default_factory=dict)
    """App variables, e.g. ``spec-accepted``; spectui's own must be colours."""

    @field_validator(
        "primary",
        "secondary",
        "warning",
        "error",
        "success",
        "accent",
        "foreground",
        "background",
        "surface",
        "panel",
        "boost",
    )
    @classmethod
    def _colour(cls, value: str | None) -> str | None:
        return None if value is None else _check_colour(value)

    @field_validator("variables")
    @classmethod
    def _spec_colours(cls, value: dict[str, str]) -> dict[str, str]:
        for key in SPEC_VARIABLES:
            if key in value:
                _check_colour(value[key])
        return value

    def to_theme(self) -> Theme:
        """The Textual theme."""
        return Theme(**self.model_dump())


def load_theme(path: Path) -> Theme:
    """Read one theme file; ThemeError says what is wrong with it in one line."""
    try:
        raw = path.read_text(encoding="utf-8")
        data: Any = json.loads(raw) if path.suffix == ".json" else tomllib.loads(raw)
    except (OSError, UnicodeDecodeError, ValueError) as error:  # TOMLDecodeError is a ValueError
        raise ThemeError(f"{path}: cannot read theme: {error}") from error
    try:
        return ThemeFile.model_validate(data).to_theme()
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "file"
        raise ThemeError(f"{path}: {where}: {first['msg']}") from error


PACKAGED_THEME_DIR = "themes"
"""The shipped themes' folder inside the installed ``spectui`` package (pyproject.toml's
``force-include`` puts the top-level ``themes/`` there in the wheel)."""


def shipped_theme_dir() -> Path:
    """The shipped themes: in the installed package, else the source tree's ``themes/``.

    An editable install imports ``spectui`` from ``src/``, where the wheel's copy does not
    exist, so the checkout's own folder (two levels above the package) is the one to read.
    """
    packaged = Path(str(resources.files("spectui"))) / PACKAGED_THEME_DIR
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "themes"


def user_theme_dir() -> Path:
    """Where users put their own theme files."""
    return config_dir() / "themes"


def discover_themes(*folders: Path) -> tuple[list[Theme], list[str]]:
    """Load every theme file in ``folders`` (later folders override earlier names).

    Returns the themes and one message per file that could not be loaded.
    """
    themes: dict[str, Theme] = {}
    problems: list[str] = []
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.suffix not in THEME_SUFFIXES or not path.is_file():
                continue
            try:
                theme = load_theme(path)
            except ThemeError as error:
                problems.append(str(error))
                continue
            themes[theme.name] = theme
    return list(themes.values()), problems


def spec_variable_defaults(theme: Theme) -> dict[str, str]:
    """Token colours for a theme that does not define them, derived from its own palette."""
    colours = theme.to_color_system().generate()
    return {
        "spec-accepted": colours["success"],
        "spec-accepted-background": colours["success-muted"],
        "spec-target": colours["foreground"],
        "spec-rejected": colours["error"],
        "spec-chart": colours["success"],
        "spec-drafter-2": colours["secondary"],
        "spec-drafter-2-background": colours["secondary-muted"],
        "spec-drafter-3": colours["accent"],
        "spec-drafter-3-background": colours["accent-muted"],
        "spec-drafter-unknown": colours["foreground-darken-2"],
    }
