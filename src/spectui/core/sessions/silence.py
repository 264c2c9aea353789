"""How long a followed run may stay silent before a follower says so.

`spectui follow` and `spectui share` print these as their flags' defaults, so they live apart
from the follower itself (`tail`): building the command line, which every spectui process
does, then never loads the follower and the session modules below it.
"""

from __future__ import annotations

WAITING_AFTER_S = 3.0
"""A run whose file has not grown for this long, without a summary, shows as 'waiting…' (a live
run writes a memory sample every second, so a long prompt does not trip it)."""

STOPPED_AFTER_S = 20.0
"""... and after this long as 'presenter stopped'."""
