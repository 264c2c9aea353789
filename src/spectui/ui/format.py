"""Number formatting for the panes: short, fixed-width friendly, and never from the wall clock.

Every time shown comes from event data (client-monotonic offsets and durations the engine
measured), so a replayed or seeded run renders identically.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

DASH = "–"
"""Shown where a number is not known (yet)."""


def ms(value: float | None) -> str:
    """Milliseconds, switching to seconds above 10 s: '412 ms', '12.3 s'."""
    if value is None:
        return DASH
    if value >= 10_000:
        return f"{value / 1000:.1f} s"
    return f"{value:.0f} ms"


def rate(value: float | None, unit: str = "t/s") -> str:
    """A rate with a precision that suits its size: '8.42 t/s', '84.2 t/s', '842 t/s'."""
    if value is None:
        return DASH
    if value >= 100:
        return f"{value:.0f} {unit}"
    if value >= 10:
        return f"{value:.1f} {unit}"
    return f"{value:.2f} {unit}"


def pct(value: float | None) -> str:
    """A fraction as a percentage: '62.5%'."""
    return DASH if value is None else f"{value * 100:.1f}%"


def num(value: float | int | None, digits: int = 0) -> str:
    """A plain number, or a dash."""
    if value is None:
        return DASH
    return f"{value:.{digits}f}" if digits else f"{value:,.0f}"


def size(value: int | None) -> str:
    """Bytes in binary units: '512 MiB', '1.25 GiB'."""
    if value is None:
        return DASH
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if amount < 1024 or unit == "GiB":
            return (
                f"{amount:.0f} {unit}" if amount >= 100 or unit == "B" else f"{amount:.2f} {unit}"
            )
        amount /= 1024
    return f"{amount:.2f} GiB"  # unreachable; keeps mypy sure of the return


def superscript(count: int) -> str:
    """A small count drawn next to a token: 3 -> '³'."""
    return str(count).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))


def speed_ratio(now: float | None, before: float | None) -> str:
    """This run's decode rate relative to the previous run's: '1.27× ▲', '0.80× ▼'.

    A glyph as well as the number, so faster and slower differ without colour.
    """
    if not now or not before:
        return DASH
    ratio = now / before
    if ratio >= 1.005:
        return f"{ratio:.2f}× ▲"
    if ratio <= 0.995:
        return f"{ratio:.2f}× ▼"
    return "1.00× ="


Formatter = Callable[[Any], str]
"""Any of the functions above."""
