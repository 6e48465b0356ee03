"""Mergeable percentile sketches (DDSketch's log buckets): a distribution kept as counts per
bucket, with every value of a bucket within RELATIVE_ACCURACY of the bucket's estimate.

Sketches of disjoint sets add up to the sketch of their union, so percentiles of any range of
days and any set of repositories come from the per-(repository, day) sketches of the rollups,
at a cost that depends on the number of buckets, not of values. A percentile read from a sketch
(percentile_cont's interpolation between the two closest ranks, as PostgreSQL's) is within
RELATIVE_ACCURACY of the exact one; values within MIN_VALUE of zero count as zero.

Small sets stay exact: a sketch of at most EXACT_MAX values also keeps the values
(`encode_exact`), and a merge of such sketches that holds at most MERGED_EXACT_MAX values reads
its percentiles from them, exactly as percentile_cont does.

Stored form: the counts of a span of lanes as little-endian uint32 and the first lane's
number. Merged by adding Python integers whose 32-bit lanes hold the counts, so a merge costs
one big-integer addition per sketch; a lane cannot carry into the next while fewer than 2**32
values are merged (`Merged.add` refuses more).
"""

from __future__ import annotations

import math
import sys
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from itertools import accumulate

RELATIVE_ACCURACY = 0.01
GAMMA = (1 + RELATIVE_ACCURACY) / (1 - RELATIVE_ACCURACY)
_LOG_GAMMA = math.log(GAMMA)
MIN_VALUE = 1e-3  # below this (in absolute value), a value counts as zero
MAX_VALUE = 1e10  # above this, as this (ms and seconds both stay far below)
# Lane ZERO holds zero; ZERO + k the values in (MIN_VALUE * GAMMA**(k-1), MIN_VALUE * GAMMA**k],
# ZERO - k their negatives.
ZERO = math.ceil(math.log(MAX_VALUE / MIN_VALUE) / _LOG_GAMMA)
LANES = 2 * ZERO + 1
EXACT_MAX = 64  # a stored sketch keeps its values when it holds at most this many
MERGED_EXACT_MAX = 4096  # a merge stays exact while it holds at most this many
_BITS = 32
_LITTLE = sys.byteorder == "little"


def lane_of(value: float) -> int:
    magnitude = abs(value)
    if magnitude <= MIN_VALUE:
        return ZERO
    k = min(ZERO, max(1, math.ceil(math.log(magnitude / MIN_VALUE) / _LOG_GAMMA)))
    return ZERO + k if value > 0 else ZERO - k


def estimate(lane: int) -> float:
    """The value a lane stands for: within RELATIVE_ACCURACY of every value it holds."""
    k = lane - ZERO
    if k == 0:
        return 0.0
    value = MIN_VALUE * 2 * GAMMA ** abs(k) / (GAMMA + 1)
    return value if k > 0 else -value


def _to_bytes(counts: array) -> bytes:
    if not _LITTLE:
        counts = array("I", counts)
        counts.byteswap()
    return counts.tobytes()


def encode(values: Iterable[float]) -> tuple[int, bytes]:
    """The sketch of `values`: (first lane, counts of the lanes from it as uint32 LE)."""
    lanes = Counter(lane_of(v) for v in values)
    if not lanes:
        return 0, b""
    first, last = min(lanes), max(lanes)
    counts = array("I", (lanes.get(lane, 0) for lane in range(first, last + 1)))
    return first, _to_bytes(counts)


def encode_exact(values: list[float]) -> bytes:
    """The values themselves (float64, little-endian) when there are at most EXACT_MAX."""
    if len(values) > EXACT_MAX:
        return b""
    exact = array("d", sorted(values))  # sorted: the same set, the same bytes
    if not _LITTLE:
        exact.byteswap()
    return exact.tobytes()


class Stored:
    """One stored sketch, decoded once (a row adds to several merges)."""

    __slots__ = ("count", "exact_bytes", "first", "lanes")

    def __init__(self, first: int, counts_bytes, count: int, exact=b"") -> None:
        self.first = first
        self.lanes = int.from_bytes(counts_bytes, "little")  # bytes or a memoryview
        self.count = count
        self.exact_bytes = exact  # decoded only by a merge that stays exact

    @property
    def exact(self) -> array | None:
        if not self.exact_bytes:
            return None
        values = array("d")
        values.frombytes(self.exact_bytes)
        if not _LITTLE:
            values.byteswap()
        return values


class Merged:
    """Sketches added up; `percentiles` reads the result.

    The counts are one Python int whose 32-bit lane i is lane `base + i`: `base` is the lowest
    lane seen, so the int spans the values' lanes only (a few hundred), not every lane."""

    def __init__(self) -> None:
        self.lanes = 0
        self.base = 0
        self.count = 0
        self.exact: array | None = array("d")  # every value, while all were kept and few

    def add(self, sketch: Stored | Merged) -> None:
        """Add a stored sketch or another merge."""
        if not sketch.count:
            return
        first = sketch.first if isinstance(sketch, Stored) else sketch.base
        if not self.count:
            self.base = first
        elif first < self.base:
            self.lanes <<= _BITS * (self.base - first)
            self.base = first
        self.count += sketch.count
        if self.count >= 2**_BITS:
            raise OverflowError("a sketch merges fewer than 2**32 values")
        self.lanes += sketch.lanes << (_BITS * (first - self.base))
        if self.exact is not None:
            if sketch.exact is not None and self.count <= MERGED_EXACT_MAX:
                self.exact.extend(sketch.exact)
            else:
                self.exact = None

    def percentiles(self, fractions: Iterable[float]) -> list[float | None]:
        """percentile_cont of each fraction (None for an empty sketch)."""
        fractions = list(fractions)
        if not self.count:
            return [None] * len(fractions)
        if self.exact is not None:
            ordered = sorted(self.exact)
            return [_interpolate(ordered.__getitem__, len(ordered), q) for q in fractions]
        raw = self.lanes.to_bytes((self.lanes.bit_length() + _BITS - 1) // _BITS * 4, "little")
        counts = array("I")
        counts.frombytes(raw)
        if not _LITTLE:
            counts.byteswap()
        cumulative = list(accumulate(counts))

        def at_rank(rank: int) -> float:
            return estimate(self.base + bisect_right(cumulative, rank))

        return [_interpolate(at_rank, self.count, q) for q in fractions]


class GroupedMerge:
    """Stored sketches added up per group as they are read: each decoded and shifted once, to
    `base` (the lowest first lane of all that will be added), and added to each of its groups;
    no object per sketch (a 180-day range per day reads about 10,000 of them).

    A group's merge stays exact while every sketch added to it kept its values and it holds at
    most MERGED_EXACT_MAX values, as Merged.add."""

    def __init__(self, base: int) -> None:
        self.base = base
        self._groups: dict[Hashable, list] = {}  # group: [lanes, count, exact values or None]

    def add(
        self, groups: Iterable[Hashable], first: int, counts_bytes, count: int, exact_bytes
    ) -> None:
        """Add one stored sketch (first lane, counts, count > 0, its values or b"")."""
        lanes = int.from_bytes(counts_bytes, "little") << (_BITS * (first - self.base))
        for group in groups:
            state = self._groups.get(group)
            if state is None:
                state = self._groups[group] = [0, 0, array("d")]
            state[0] += lanes
            state[1] += count
            if state[2] is not None:
                if exact_bytes and state[1] <= MERGED_EXACT_MAX:
                    state[2].frombytes(exact_bytes)
                else:
                    state[2] = None

    def merged(self) -> dict[Hashable, Merged]:
        out = {}
        for group, (lanes, count, exact) in self._groups.items():
            if count >= 2**_BITS:
                raise OverflowError("a sketch merges fewer than 2**32 values")
            if exact is not None and not _LITTLE:
                exact.byteswap()
            merged = out[group] = Merged()
            merged.base, merged.lanes, merged.count, merged.exact = self.base, lanes, count, exact
        return out


def _interpolate(at_rank: Callable[[int], float], count: int, q: float) -> float:
    # percentile_cont: linear interpolation between the two closest ranks.
    position = q * (count - 1)
    low, high = math.floor(position), math.ceil(position)
    lower = at_rank(low)
    return lower + (at_rank(high) - lower) * (position - low)
