"""How many rounds in turns a benchmark needs: its recorded rounds drawn again, judged by the gate's
own rule at several caps on the rounds (issue 48, item 3: green when nothing changed).

Reads the ``--bench-json`` files that ``figures_time_cost.py --keep DIR`` keeps, takes the round
figures of the named benchmarks from their verdicts' round lines (``round 3 (base first): base
43.99 us, head 42.02 us``: kept for verdicts that needed more than the rounds at once), and pools
both sides of every A/A run into one distribution per benchmark. Then, many times over, draws a
base and a head figure per round from it (the head's times a factor: 1.0 for A/A, 1.12 and 1.2
for slowdowns) and judges the rounds as ``pytest/base.py`` sends them and
``common/statistics.py`` decides them: 2 rounds at once (unchanged at 70% of the limit, strictly),
4 strictly (anything but unchanged is measured again), then passes of 2 up to the cap, each
judged at the limit and at the benchmark's own limit. Printed per benchmark, factor and cap:
how often the rounds end too noisy, how often they pass (unchanged, at the limit or an own one)
and how many rounds they took on average.

What it does not model: the pairing of a round (both sides drawn independently, which is what
a process's own speed state is, but not the machine's moments that turns share), so its rates
are the pessimistic side of a real run's; and only the benchmarks whose rounds were recorded.

Run from the repository root, after ``figures_time_cost.py --suite kornia --aa 20 --keep DIR``::

    python benchmarks/figures_rounds_drawn.py DIR 'yuv_to_rgb-1x3x32x32' 'rgb_to_rgba-1x3x128x128'

``--tiny``: a made-up two-speed benchmark, few draws: a check that the script runs.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_torchbench.common.statistics import SAME, UNDECIDED, AlternatedRounds  # noqa: E402
from pytest_torchbench.pytest import base  # noqa: E402

ROUND_LINE = re.compile(r"base ([\d.]+) (\w+), head ([\d.]+) (\w+)")
#: Two speeds 12% apart, drawn 60/40, and a rare 70% one: the shape of the small calls that
#: straddled the limit (for --tiny only).
TINY_POOL = [41.5, 42.0, 43.0, 43.5, 44.0, 46.5, 47.0, 48.0, 72.0]


def pooled(folder: Path, name: str) -> list[float]:
    """Both sides' round figures of the benchmark whose key ends with ``[name]`` (or is ``name``),
    over every kept run in ``folder``."""
    values: list[float] = []
    for path in sorted(folder.glob("*.json")):
        for verdict in json.loads(path.read_text(encoding="utf-8")).get("verdicts", []):
            key = verdict.get("key", "")
            if verdict.get("metric") != "time" or not (key == name or key.endswith(f"[{name}]")):
                continue
            for line in verdict.get("details", []):
                found = ROUND_LINE.search(line)
                if found is not None and found[2] == found[4]:
                    values += [float(found[1]), float(found[3])]
    return values


def judged(pool: Sequence[float], factor: float, cap: int, draw: random.Random) -> tuple[str, int]:
    """One comparison's outcome ("pass", "slower", "faster", "too noisy") and its rounds."""
    limit, first = 0.1, 4
    pairs: list[tuple[float, float]] = []
    steps = [base.at_once_rounds(first), first, *range(first + 2, cap + 1, 2)]
    for count in steps:
        while len(pairs) < count:
            pairs.append((draw.choice(pool), draw.choice(pool) * factor))
        rounds = AlternatedRounds(pairs, in_turns=True)
        if count < first:
            if rounds.decide(limit * base.AT_ONCE, strict=True) == SAME:
                return "pass", count
            continue
        decided = rounds.decide(limit, strict=count == first)
        if decided == SAME or (decided == UNDECIDED and rounds.own_limit(limit) is not None):
            return "pass", count
        if decided != UNDECIDED and count > first:  # a change in the first rounds: again
            return decided, count
    return "too noisy", len(pairs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, nargs="?", help="figures_time_cost.py's --keep")
    parser.add_argument("names", nargs="*", help="benchmarks: a parameter id or a whole key")
    parser.add_argument("--draws", type=int, default=4000)
    parser.add_argument("--caps", default="12,16,20")
    parser.add_argument("--tiny", action="store_true")
    args = parser.parse_args()
    if args.tiny:
        pools = {"two speeds (made up)": TINY_POOL}
        args.draws = 50
    else:
        if args.folder is None or not args.names:
            parser.error("give the kept folder and at least one benchmark")
        pools = {name: pooled(args.folder, name) for name in args.names}
    caps = [int(cap) for cap in args.caps.split(",")]
    for name, pool in pools.items():
        if len(pool) < 4:
            print(f"{name}: {len(pool)} round figures recorded, too few to draw from")
            continue
        print(f"{name}: {len(pool)} round figures, {min(pool):.4g}..{max(pool):.4g}")
        for factor in (1.0, 1.12, 1.2):
            for cap in caps:
                draw = random.Random(1)
                outcomes = collections.Counter[str]()
                rounds = 0
                for _ in range(args.draws):
                    outcome, used = judged(pool, factor, cap, draw)
                    outcomes[outcome] += 1
                    rounds += used
                share = {k: f"{100 * v / args.draws:.1f}%" for k, v in sorted(outcomes.items())}
                print(
                    f"  head x{factor:<4} up to {cap:2} rounds: {share}; "
                    f"{rounds / args.draws:.1f} rounds on average"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
