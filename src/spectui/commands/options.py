"""Typed command-line options: one pydantic model per command, built once from argparse.

Subcommands parse with ``argument_default=SUPPRESS`` (an option given before the command, as in
`spectui --model X stream`, must survive the subparser), so a flag not given is missing from the
namespace rather than None: `CommandOptions.from_namespace` reads ``vars(args)``, and a missing
flag takes the field's default. Past that point nothing reads an argparse namespace. The flags
that are settings (`launch_options.flag_settings`) go to `Settings`, not into these models.
"""

from __future__ import annotations

import argparse
from typing import Self

from pydantic import BaseModel, ConfigDict


class CommandOptions(BaseModel):
    """A command's own options; each subclass names its fields, with a docstring under each."""

    # Extra names are ignored: the namespace also holds the top-level flags and the settings.
    model_config = ConfigDict(
        extra="ignore", frozen=True, arbitrary_types_allowed=True, populate_by_name=True
    )

    @classmethod
    def from_namespace(cls, args: argparse.Namespace) -> Self:
        """The options of a parsed command line; a flag not given takes the field's default."""
        return cls.model_validate(vars(args))
