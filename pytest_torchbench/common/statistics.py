"""Statistics shared by the engines and the metrics, pure and dependency-free.

Why here, low down: the profiler's engines and the Python-calls engine (which must not import torch)
both pick a representative iteration; time mode gives pytest-benchmark's ``Stats``; and a metric
imports only the shared vocabulary and this.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Sequence


def representative(counters: list[collections.Counter[str]]) -> collections.Counter[str]:
    """The per-iteration count to report: the counts most iterations agree on (ties go to the later
    iteration, which had more warm-up). For deterministic code every iteration agrees; taking a
    whole iteration's counts, rather than a per-op mean, keeps the numbers integers and consistent
    with each other when one iteration took a one-off path (a cache fill, a lazy init)."""
    frozen = [tuple(sorted(c.items())) for c in counters]
    tally = collections.Counter(frozen)
    best = max(range(len(frozen)), key=lambda i: (tally[frozen[i]], i))
    return counters[best]


class RoundStats:
    """pytest-benchmark's ``Stats`` of per-call times (seconds), with its field names and its
    definitions (quartiles by Wikipedia's methods 2 and 3, Tukey fences, ``ops`` = calls per
    second): suites that read ``benchmark.stats.stats.mean``, and tools that read its JSON, get
    the numbers they were written for. One datum per replicate block here (per-call time of the
    block), where pytest-benchmark has one per round.
    """

    fields = (
        "min",
        "max",
        "mean",
        "stddev",
        "rounds",
        "median",
        "iqr",
        "q1",
        "q3",
        "iqr_outliers",
        "stddev_outliers",
        "outliers",
        "ld15iqr",
        "hd15iqr",
        "ops",
        "total",
    )

    def __init__(self, data: Sequence[float]) -> None:
        if not data:
            raise ValueError("RoundStats needs at least one time")
        self.data = [float(value) for value in data]
        self.sorted_data = sorted(self.data)

    def __bool__(self) -> bool:
        return bool(self.data)

    def as_dict(self) -> dict[str, float | int | str]:
        return {field: getattr(self, field) for field in self.fields}

    @property
    def rounds(self) -> int:
        return len(self.data)

    @property
    def total(self) -> float:
        return math.fsum(self.data)

    @property
    def min(self) -> float:
        return self.sorted_data[0]

    @property
    def max(self) -> float:
        return self.sorted_data[-1]

    @property
    def mean(self) -> float:
        return self.total / self.rounds

    @property
    def stddev(self) -> float:
        if self.rounds < 2:
            return 0.0
        mean = self.mean
        return math.sqrt(math.fsum((value - mean) ** 2 for value in self.data) / (self.rounds - 1))

    @property
    def median(self) -> float:
        return _median(self.sorted_data)

    @property
    def q1(self) -> float:
        data, rounds = self.sorted_data, self.rounds
        if rounds == 1:
            return data[0]
        if rounds % 2:
            n, q = rounds // 4, rounds % 4
            return (
                0.25 * data[n - 1] + 0.75 * data[n]
                if q == 1
                else 0.75 * data[n] + 0.25 * data[n + 1]
            )
        return _median(data[: rounds // 2])

    @property
    def q3(self) -> float:
        data, rounds = self.sorted_data, self.rounds
        if rounds == 1:
            return data[0]
        if rounds % 2:
            n, q = rounds // 4, rounds % 4
            if q == 1:
                return 0.75 * data[3 * n] + 0.25 * data[3 * n + 1]
            return 0.25 * data[3 * n + 1] + 0.75 * data[3 * n + 2]
        return _median(data[rounds // 2 :])

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    @property
    def ld15iqr(self) -> float:
        """Tukey's lowest datum within 1.5 IQR under Q1."""
        fence = self.q1 - 1.5 * self.iqr
        return next(value for value in self.sorted_data if value >= fence)

    @property
    def hd15iqr(self) -> float:
        """Tukey's highest datum within 1.5 IQR over Q3."""
        fence = self.q3 + 1.5 * self.iqr
        return next(value for value in reversed(self.sorted_data) if value <= fence)

    @property
    def iqr_outliers(self) -> int:
        low, high = self.q1 - 1.5 * self.iqr, self.q3 + 1.5 * self.iqr
        return sum(1 for value in self.data if value < low or value > high)

    @property
    def stddev_outliers(self) -> int:
        low, high = self.mean - self.stddev, self.mean + self.stddev
        return sum(1 for value in self.data if value < low or value > high)

    @property
    def outliers(self) -> str:
        return f"{self.stddev_outliers};{self.iqr_outliers}"

    @property
    def ops(self) -> float:
        return self.rounds / self.total if self.total else 0.0


def _median(sorted_values: Sequence[float]) -> float:
    middle = len(sorted_values) // 2
    if len(sorted_values) % 2:
        return float(sorted_values[middle])
    return (sorted_values[middle - 1] + sorted_values[middle]) / 2.0


class RoundPairs(list):  # type: ignore[type-arg]
    """(base, head) values of one benchmark measured alternately, in round order, with each
    pair's round number in the session (``numbers``, from 1; the base ran first in odd rounds).

    Why the numbers travel with the pairs: a benchmark missing from a round (its test failed or
    was skipped there) leaves a gap, and its round lines must name the round the user can find in
    the session's output, not the pair's position."""

    def __init__(
        self, pairs: Sequence[tuple[object, object]] = (), numbers: Sequence[int] | None = None
    ) -> None:
        super().__init__(pairs)
        self.numbers = list(numbers) if numbers is not None else list(range(1, len(self) + 1))
        if len(self.numbers) != len(self):
            raise ValueError(f"{len(self)} pairs but {len(self.numbers)} round numbers")


#: What :meth:`AlternatedRounds.decide` answers.
SLOWER, FASTER, SAME, UNDECIDED = "slower", "faster", "same", "undecided"


#: The widest own limit (``AlternatedRounds.own_limit``), as a multiple of the limit asked for.
OWN_LIMIT_WIDEST = 1.5


class AlternatedRounds:
    """A figure of base and head measured alternately in rounds, judged so that a few rounds the
    machine slowed cannot decide.

    Why: on a shared machine noise only ever adds time, and it comes in windows. On this
    project's VM a tight loop's fastest call came in one of two speeds, as the window of time it
    was measured in drew it (another VM on the same physical core, presumably), and some calls (a
    large ``torch.add``) kept a slower fast state for a whole process (docs/design/time-gate.md,
    "Against a base measured alternately"). So any one round of either side can be far off, in
    the ratio's either direction; what a real change does, every undisturbed round shows.

    Two views, each setting aside ``depth - 1`` rounds (a quarter of them, rounded down):

    * **paired**: per round, head / base (rounds seconds apart: drift of the machine over
      minutes divides out); the central ratios, from the ``depth``-th lowest to the
      ``depth``-th highest, all beyond the limit, or all within it;
    * **sides**: each side's ``depth`` fastest rounds (noise adds time, so the fastest rounds are
      the least disturbed): the head's fastest beyond the base's band by more than the limit, or
      both bands within the limit of each other.

    ``decide`` says slower / faster only when both views do, same when one says same and the other
    cannot tell but points within the limit, undecided otherwise: then more rounds (``depth``
    grows with them) or "too noisy".

    Rounds measured **in turns** (``in_turns``: each round's base and head handing one CPU to each
    other every 10 ms, engines/duet.py) are judged on the paired view alone. Why: their pairs
    share the machine's moments, so the speed of a window or a minute divides out of every ratio,
    while the sides view compares rounds of different minutes: a change every round agreed on,
    on a machine that was faster in the first rounds of both sides, was left undecided by the
    sides view (docs/design/time-gate.md, "Measured in turns").
    """

    def __init__(
        self,
        pairs: Sequence[tuple[float, float]],
        numbers: Sequence[int] | None = None,
        in_turns: bool = False,
    ) -> None:
        """``numbers``: each pair's round number in the session (default 1, 2, ...); ``numbers``
        keeps those of the usable pairs, beside ``pairs``. ``in_turns``: every pair was measured
        in turns."""
        self.in_turns = in_turns
        numbered = zip(numbers if numbers is not None else range(1, len(pairs) + 1), pairs)
        kept = [
            (n, (float(b), float(h)))
            for n, (b, h) in numbered
            if b > 0 and h > 0 and math.isfinite(b) and math.isfinite(h)
        ]
        if not kept:
            raise ValueError("AlternatedRounds needs at least one pair of positive figures")
        self.numbers = [n for n, _ in kept]
        self.pairs = usable = [pair for _, pair in kept]
        self.ratios = sorted(h / b for b, h in usable)
        self.base = sorted(b for b, _ in usable)
        self.head = sorted(h for _, h in usable)

    @property
    def rounds(self) -> int:
        return len(self.pairs)

    @property
    def depth(self) -> int:
        """The rank each view judges by: 1 (every round counts) below 4 rounds, 2 for 4-7, 3 for
        8-11."""
        return 1 + self.rounds // 4

    @property
    def change(self) -> float:
        """The paired estimate of the change: the median head/base ratio, minus 1."""
        return _median(self.ratios) - 1.0

    @property
    def central(self) -> tuple[float, float]:
        """The lowest and highest head/base ratio once ``depth - 1`` rounds are set aside at each
        end."""
        return self.ratios[self.depth - 1], self.ratios[self.rounds - self.depth]

    @property
    def spread(self) -> float:
        """Half the range of the central ratios over the median ratio."""
        low, high = self.central
        return (high - low) / 2.0 / (self.change + 1.0)

    def band(self, side: str) -> tuple[float, float]:
        """The fastest and the ``depth``-th fastest figure of ``side`` ("base" or "head")."""
        values = self.base if side == "base" else self.head
        return values[0], values[self.depth - 1]

    def _paired(self, limit: float) -> str:
        low, high = self.central
        if low > 1.0 + limit:
            return SLOWER
        if high < 1.0 - limit:
            return FASTER
        if low >= 1.0 - limit and high <= 1.0 + limit:
            return SAME
        return UNDECIDED

    def _sides(self, limit: float) -> str:
        (base_fast, base_band), (head_fast, head_band) = self.band("base"), self.band("head")
        if head_fast > base_band * (1.0 + limit):
            return SLOWER
        if head_band < base_fast * (1.0 - limit):
            return FASTER
        if head_band <= base_fast * (1.0 + limit) and head_fast >= base_band * (1.0 - limit):
            return SAME
        return UNDECIDED

    def decide(self, limit: float, strict: bool = False) -> str:
        """Slower, faster or same where both views say so; same where one says same and the
        other cannot tell but points within the limit; undecided otherwise. ``strict``: same only
        where both views say so (the first rounds: what one view cannot tell is measured again).

        Why not "same" whenever one view says same: a slowdown whose base was slow in most rounds
        (three of four slow windows) shows as same in the pairs, while the head's fastest round
        is still beyond the base's fastest by the whole change. Passing it would be a silent pass;
        undecided measures it again. Why strict first: four rounds of a benchmark whose speed
        flips between two states can point within the limit by chance for a real slowdown; more
        rounds rarely do (docs/design/time-gate.md). In turns: the paired view alone."""
        if self.in_turns:
            return self._paired(limit)
        paired, sides = self._paired(limit), self._sides(limit)
        if paired == sides:
            return paired
        if strict:
            return UNDECIDED
        # the undecided view still points within the limit: the head's fastest round against the
        # base's fastest (sides), or the median ratio (paired)
        if (
            paired == SAME
            and sides == UNDECIDED
            and abs(self.head[0] / self.base[0] - 1.0) <= limit
        ):
            return SAME
        if sides == SAME and paired == UNDECIDED and abs(self.change) <= limit:
            return SAME
        return UNDECIDED

    def own_limit(self, limit: float) -> float | None:
        """A wider limit at which these rounds, undecided at ``limit``, call the benchmark
        unchanged, where they may: at least 4 rounds (some set aside), the median change within
        half of ``limit``, each side's fastest rounds within ``limit`` of the other's (the sides
        view says same), and the deciding limit at most :data:`OWN_LIMIT_WIDEST` x ``limit``;
        else None.

        Why: a benchmark whose processes draw one of two speeds (one side's own placement, which
        turns cannot cancel) straddled the limit in A/A runs with a median of a few percent, and
        failed CI as "too noisy" where nothing changed. Why the sides view too: noise only adds
        time, so each side's fastest rounds are its undisturbed ones; a real change past the
        limit whose base drew the slow state in half the rounds can bring the median within half
        the limit, but the head's fastest rounds stay past the base's by the whole change
        (docs/design/time-gate.md, "At once")."""
        if self.rounds < 4 or abs(self.change) > limit / 2 or self._sides(limit) != SAME:
            return None
        deciding = self.deciding_limit(limit, widest=limit * OWN_LIMIT_WIDEST)
        if deciding is None or self.decide(deciding) != SAME:
            return None
        return deciding

    def deciding_limit(
        self, limit: float, step: float = 0.005, widest: float = 10.0
    ) -> float | None:
        """The smallest limit from ``limit`` up (in ``step``s) at which these rounds decide, or
        None below ``widest``: what a user must raise a too noisy benchmark's limit to for these
        rounds to be judged, in the rule's own terms."""
        candidate, widest = limit, max(widest, limit)
        while candidate <= widest:
            if self.decide(candidate) != UNDECIDED:
                return candidate
            candidate = round(candidate + step, 6)
        return None
