"""The statistics behind "faster": paired speedups, a bootstrap interval, and the noise floor.

Method (stated in the README and in every verdict):

- Each round, a config's run of a prompt is paired with the baseline's run of that prompt in the
  same round; the speedup is the ratio of their end-to-end throughputs.
- The interval is a 95 % percentile bootstrap of the median of those paired speedups
  (`BOOTSTRAP_RESAMPLES` resamples, fixed seed, so the same data always gives the same verdict).
  With two or three rounds it is simply the min–max range.
- The noise floor is measured in the same comparison: every config against itself, round to
  round (each config × prompt's throughput in one round over the previous round's, pooled over
  configs and prompts: a candidate's unsteady runs are noise as much as the baseline's); the
  floor is the median of those changes, never below `MIN_NOISE`. A config is "faster" only when
  the whole interval lies above 1 + floor, "slower" only when it lies below 1 / (1 + floor);
  anything else is not yet known — and "too noisy to call" when the floor exceeds `TOO_NOISY`,
  or when the interval does not clear the band and that config's own change on the prompt (or
  the baseline's) exceeds it.
"""

from __future__ import annotations

import functools
import itertools
import math
import random
import statistics
from collections.abc import Sequence

BOOTSTRAP_RESAMPLES = 1000
"""Resamples per interval: plenty for a 95 % percentile interval of a handful of rounds."""
CONFIDENCE = 0.95
"""Coverage of the interval."""
MIN_NOISE = 0.02
"""The floor never goes below 2 %: two identical baseline runs do not prove the clock exact."""
TOO_NOISY = 0.25
"""Runs that move more than this between rounds (a neighbour's load) decide nothing."""
MAX_ROUNDS_HINT = 20
"""Past this many extra rounds a difference is called a tie, not 'needs more rounds'."""


@functools.lru_cache(maxsize=4096)
def _interval(values: tuple[float, ...]) -> tuple[float, float]:
    # Cached: summaries are recomputed after every run, with mostly the same rows.
    if len(values) == 1:
        return values[0], values[0]
    rng = random.Random(0)
    n = len(values)
    medians = sorted(
        statistics.median(rng.choices(values, k=n)) for _ in range(BOOTSTRAP_RESAMPLES)
    )
    tail = (1 - CONFIDENCE) / 2
    low = medians[int(tail * (BOOTSTRAP_RESAMPLES - 1))]
    high = medians[math.ceil((1 - tail) * (BOOTSTRAP_RESAMPLES - 1))]
    return low, high


def bootstrap_interval(values: Sequence[float]) -> tuple[float, float] | None:
    """The 95 % percentile bootstrap interval of the median of ``values`` (None when empty)."""
    if not values:
        return None
    return _interval(tuple(sorted(round(v, 9) for v in values)))


def noise_floor(series: Sequence[Sequence[float]]) -> float | None:
    """The typical round-to-round change, as a fraction (0.03: ±3 %).

    ``series``: per config × prompt, its values in round order. None when no series has two
    rounds (the noise cannot be measured yet).
    """
    changes = [
        abs(math.log(later / earlier))
        for values in series
        for earlier, later in itertools.pairwise(values)
        if earlier > 0 and later > 0
    ]
    if not changes:
        return None
    return max(math.exp(statistics.median(changes)) - 1, MIN_NOISE)


def rounds_to_settle(
    values: Sequence[float], interval: tuple[float, float], noise: float
) -> int | None:
    """Extra rounds that would likely settle faster/slower, or None for a tie.

    The interval narrows like 1/sqrt(rounds); it has to clear the noise band around 1 by the
    distance between the median and that band. None when the median sits inside the band (a tie:
    no number of rounds turns it into a gain worth having) or when it would take more than
    `MAX_ROUNDS_HINT` rounds.
    """
    centre = math.log(statistics.median(values))
    margin = abs(centre) - math.log(1 + noise)
    if margin <= 0:
        return None
    half = (math.log(interval[1]) - math.log(interval[0])) / 2
    n = len(values)
    if half <= 0:
        # Identical ratios so far: the spread is unknown, one more round shows it.
        return 1
    needed = math.ceil(n * (half / margin) ** 2) - n
    extra = max(needed, 1)
    return extra if extra <= MAX_ROUNDS_HINT else None
