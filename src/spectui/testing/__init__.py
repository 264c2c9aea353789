"""Test and benchmark helpers that ship with spectui (tiny constructed models); the engine, UI
and commands never import this package (an import-linter contract)."""

from spectui.testing.tiny_models import (
    ACCEPTANCES,
    DRAFTER_KINDS,
    TinyModels,
    build_all,
    build_drafter,
    build_target,
)

__all__ = [
    "ACCEPTANCES",
    "DRAFTER_KINDS",
    "TinyModels",
    "build_all",
    "build_drafter",
    "build_target",
]
