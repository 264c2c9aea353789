"""Gates for the few places where spectui uses a library's private API (for speed, or for what
its public API cannot do).

Each override names the library, the exact version it was tested with (the one `pyproject.toml`
pins) and a check of the private names it needs. It is used only when that version is installed,
the check passes and `SPECTUI_STOCK` is not set; otherwise the caller takes the library's public
path and one line is logged saying why. The result is decided once per process.

Every `Override` created is listed by `defined()`, so a test can hold each tested version to the
pin in `pyproject.toml` (tests/unit/test_overrides.py).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from importlib import metadata

from pydantic import BaseModel, ConfigDict

STOCK_ENV = "SPECTUI_STOCK"
"""Environment variable: 1 forces every stock (public-API) path; a comma-separated list of
override names (`lean-compositor,lean-plot`) forces only theirs."""

log = logging.getLogger("spectui.overrides")


class Override(BaseModel):
    """One use of a library's internals, and what it needs to be safe."""

    model_config = ConfigDict(frozen=True)

    name: str
    """Short name shown in the log line, e.g. `lean-compositor`."""
    library: str
    """Distribution name whose internals are used, e.g. `textual`."""
    tested_version: str
    """The exact version the override was tested with (pinned in pyproject.toml)."""
    requires: dict[str, str] = {}
    """Other distributions whose internals it uses too, each with its exact tested version."""
    for_speed: bool = True
    """Whether it exists to save CPU: then bench/overrides.py holds it to saving at least 10 %
    of the whole process's CPU. False for one that borrows internals for what the public API
    cannot do at all (share's guard around textual-serve's handlers)."""

    def model_post_init(self, context: object, /) -> None:
        _defined[self.name] = self

    def libraries(self) -> dict[str, str]:
        """Every distribution it relies on, with the version it was tested with."""
        return {self.library: self.tested_version, **self.requires}


_defined: dict[str, Override] = {}


def defined() -> list[Override]:
    """The overrides created so far in this process (modules define theirs when imported)."""
    return list(_defined.values())


def stock_forced() -> bool:
    """Whether the user asked for every stock path (`SPECTUI_STOCK=1`)."""
    return os.environ.get(STOCK_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def _stock_named(name: str) -> bool:
    """Whether `SPECTUI_STOCK` lists this override by name."""
    return name in {part.strip() for part in os.environ.get(STOCK_ENV, "").split(",")}


_decided: dict[str, bool] = {}


def enabled(override: Override, check: Callable[[], bool]) -> bool:
    """Whether `override` may be used in this process (decided once, logged once if not).

    `check` looks for the private names and signatures the override relies on; an exception it
    raises counts as a failed check.
    """
    if override.name in _decided:
        return _decided[override.name]
    reason = _refusal(override, check)
    if reason is not None:
        # Asked for (SPECTUI_STOCK): said quietly. Not the tested set: a warning, on stderr where
        # no handler is set up (a TUI captures it while it runs).
        asked = reason.startswith(STOCK_ENV)
        log.log(
            logging.INFO if asked else logging.WARNING,
            "%s: using %s's public path (%s)",
            override.name,
            override.library,
            reason,
        )
    _decided[override.name] = reason is None
    _reasons[override.name] = reason
    return reason is None


_reasons: dict[str, str | None] = {}


def why_off(override: Override) -> str | None:
    """Why `enabled` said no to ``override`` in this process (None: it said yes, or not asked)."""
    return _reasons.get(override.name)


def _refusal(override: Override, check: Callable[[], bool]) -> str | None:
    if stock_forced():
        return f"{STOCK_ENV} is set"
    if _stock_named(override.name):
        return f"{STOCK_ENV} names it"
    for library, tested in override.libraries().items():
        try:
            installed = metadata.version(library)
        except metadata.PackageNotFoundError:
            return f"{library} is not installed"
        if installed != tested:
            return f"{library} {installed} is not the tested {tested}"
    try:
        ok = check()
    except Exception as exc:  # a renamed private name is exactly what this guards against
        return f"check failed: {type(exc).__name__}"
    return None if ok else "the private names it needs are missing"


def reset() -> None:
    """Forget every decision (tests switch `SPECTUI_STOCK` within one process)."""
    _decided.clear()
    _reasons.clear()
