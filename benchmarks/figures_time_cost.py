"""The time gate in turns: what it costs against a plain run, and whether an unchanged pull
request is green (issue 48, item 3), printed against the targets.

A temporary git repository holds a suite in three commits: the base, an unchanged head (a comment
changes: A/A) and, for the synthetic suite, a head where every benchmark does 6 repetitions of its
operation instead of 5 (+20%: A/B). Two suites:

* ``--suite kornia``: a real library's public API, about 100 benchmarks: 24 of kornia's colour
  conversions x 4 image shapes (``pip install kornia`` first); A/A only;
* ``--suite synthetic`` (``--benchmarks N``): benchmarks_time_paired.py's Python loops, small and
  large ``torch.add`` and ``torch.mm`` from about 10 us to 10 ms a call; A/A and A/B.

Each comparison is a plain ``pytest --bench-mode=time`` session of the head (its wall time is the
cost's unit), then the gate as CI runs it::

    CI=true pytest --bench-mode=time --bench-compare=base --bench-base=measure --bench-rounds=R

Printed per comparison: the gate's exit status and verdicts, both sessions' wall time and their
ratio, the load; then the totals against the targets:

* cost: the gate at most 3x a plain run of the same selection at the same load;
* green when nothing changed: an unchanged pull request exits 0 in at least 19 of 20 runs, with
  no false regression;
* a 20% slowdown caught in at least 95% of benchmarks (docs/design/time-gate.md's figures).

Run from the repository root (the machine otherwise idle: the targets are for a quiet machine)::

    python benchmarks/figures_time_cost.py --suite kornia --aa 3
    python benchmarks/figures_time_cost.py --suite synthetic --benchmarks 100 --aa 1 --ab 1

``--tiny``: 2 synthetic benchmarks, one A/A comparison of one round at a 1000% limit: a check
that the script runs (its figures mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import figures_time_paired as paired  # noqa: E402  (the synthetic suite and its git helpers)

ROOT = Path(__file__).resolve().parents[1]

KORNIA_TESTS = '''"""24 of kornia's colour conversions x 4 image shapes, on its public API."""
import kornia.color as kc
import pytest
import torch

OPS = {
    "rgb_to_grayscale": kc.rgb_to_grayscale, "rgb_to_bgr": kc.rgb_to_bgr,
    "rgb_to_hls": kc.rgb_to_hls, "hls_to_rgb": kc.hls_to_rgb,
    "rgb_to_hsv": kc.rgb_to_hsv, "hsv_to_rgb": kc.hsv_to_rgb,
    "rgb_to_lab": kc.rgb_to_lab, "lab_to_rgb": kc.lab_to_rgb,
    "rgb_to_luv": kc.rgb_to_luv, "luv_to_rgb": kc.luv_to_rgb,
    "rgb_to_xyz": kc.rgb_to_xyz, "xyz_to_rgb": kc.xyz_to_rgb,
    "rgb_to_ycbcr": kc.rgb_to_ycbcr, "ycbcr_to_rgb": kc.ycbcr_to_rgb,
    "rgb_to_yuv": kc.rgb_to_yuv, "yuv_to_rgb": kc.yuv_to_rgb,
    "rgb_to_linear_rgb": kc.rgb_to_linear_rgb, "linear_rgb_to_rgb": kc.linear_rgb_to_rgb,
    "rgb_to_y": kc.rgb_to_y, "sepia": kc.sepia_from_rgb,
    "rgb_to_rgb255": kc.rgb_to_rgb255, "rgb255_to_rgb": kc.rgb255_to_rgb,
    "rgb_to_rgba": lambda image: kc.rgb_to_rgba(image, 1.0),
    "rgb_to_raw": lambda image: kc.rgb_to_raw(image, kc.CFA.BG),
}
SHAPES = {"1x3x32x32": (1, 3, 32, 32), "1x3x128x128": (1, 3, 128, 128),
          "4x3x128x128": (4, 3, 128, 128), "2x3x256x256": (2, 3, 256, 256)}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("op", list(OPS))
def test_colour(benchmark, op, shape):
    image = torch.rand(SHAPES[shape], generator=torch.Generator().manual_seed(0))
    benchmark(OPS[op], image)
'''


def _suite(repo: Path, name: str, count: int) -> bool:
    """Write the suite's three commits (tags base, aa, and ab where it has one); whether it has
    an A/B commit."""
    (repo / "suite").mkdir(parents=True)
    (repo / ".gitignore").write_text(".torchbench/\n__pycache__/\nout.json\n")
    if name == "kornia":
        (repo / "suite" / "test_colour.py").write_text(KORNIA_TESTS)
    else:
        (repo / "suite" / "__init__.py").write_text("")
        (repo / "suite" / "test_suite.py").write_text(paired.TESTS.format())
        paired._write(repo, 5, paired.cases(count))
    paired._git(repo, "init", "-q", "-b", "main")
    paired._git(repo, "add", "-A")
    paired._git(repo, "commit", "-q", "-m", "base")
    paired._git(repo, "tag", "base")
    changed = repo / "suite" / ("test_colour.py" if name == "kornia" else "lib.py")
    changed.write_text("# unchanged\n" + changed.read_text())
    paired._git(repo, "commit", "-q", "-am", "A/A: nothing the benchmarks run changes")
    paired._git(repo, "tag", "aa")
    if name == "kornia":
        return False
    paired._write(repo, 6, paired.cases(count))
    paired._git(repo, "commit", "-q", "-am", "A/B: every benchmark 20% slower")
    paired._git(repo, "tag", "ab")
    return True


def _pytest(repo: Path, args: list[str], ci: bool) -> tuple[int, float, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CI", None)
    if ci:
        env["CI"] = "true"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:benchmark", "-p", "no:cacheprovider",
         "suite", "--bench-mode=time", *args],
        cwd=repo, env=env, capture_output=True, text=True,
    )  # fmt: skip
    return done.returncode, time.monotonic() - started, done.stdout[-3000:] + done.stderr[-2000:]


def _compare(repo: Path, args: argparse.Namespace, label: str) -> dict[str, object]:
    """A plain run of the head, then the gate against the base measured in turns."""
    load_before = os.getloadavg()[0]
    code, plain, output = _pytest(repo, [], ci=False)
    if code != 0:
        sys.exit(f"the plain run exited {code}:\n{output}")
    out = repo / "out.json"
    out.unlink(missing_ok=True)
    gate_args = [
        "--bench-compare=base",
        "--bench-base=measure",
        f"--bench-rounds={args.rounds}",
        f"--bench-fail=time:{args.limit}",
        f"--bench-json={out}",
        *args.extra,
    ]
    code, seconds, output = _pytest(repo, gate_args, ci=True)
    if code not in (0, 1, 6) or not out.is_file():
        sys.exit(f"the gate exited {code}:\n{output}")
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        (args.keep / f"{label}.json").write_bytes(out.read_bytes())
    verdicts = [v for v in json.loads(out.read_text())["verdicts"] if v["metric"] == "time"]
    statuses: dict[str, list[str]] = {}
    for verdict in verdicts:
        statuses.setdefault(verdict["status"], []).append(verdict["key"])
        if verdict["status"] in ("regression", "too noisy") and label.startswith("aa"):
            print(f"    {verdict['status']}: {verdict['key']}: {verdict['summary'][:200]}")
    return {
        "exit": code,
        "statuses": statuses,
        "count": len(verdicts),
        "gate": seconds,
        "plain": plain,
        "load": (load_before + os.getloadavg()[0]) / 2,
    }


def _line(kind: str, number: int, run: dict[str, object]) -> str:
    statuses: dict[str, list[str]] = run["statuses"]  # type: ignore[assignment]
    gate, plain = float(run["gate"]), float(run["plain"])  # type: ignore[arg-type]
    return (
        f"{kind} run {number}: exit {run['exit']}, {run['count']} verdicts: "
        + ", ".join(f"{len(keys)} {status}" for status, keys in sorted(statuses.items()))
        + f"; gate {gate:.0f} s, plain run {plain:.0f} s: {gate / plain:.1f}x; "
        f"load {float(run['load']):.1f}"  # type: ignore[arg-type]
    )


def _totals(aa: list[dict[str, object]], ab: list[dict[str, object]]) -> None:
    count = paired.status_total
    ratios = sorted(float(r["gate"]) / float(r["plain"]) for r in aa + ab)  # type: ignore[arg-type]
    print(
        f"cost: the gate took {ratios[0]:.1f}x..{ratios[-1]:.1f}x a plain run of the same "
        "selection (target: at most 3x)"
    )
    if aa:
        judged = sum(int(r["count"]) for r in aa)  # type: ignore[call-overload]
        green = sum(1 for r in aa if r["exit"] == 0)
        print(
            f"A/A: exit 0 in {green}/{len(aa)} runs (target: at least 19 of 20); "
            f"{count(aa, 'regression')} false regression(s) in {judged} benchmark comparisons "
            f"(target 0); too noisy {count(aa, 'too noisy')}, improvements "
            f"{count(aa, 'improvement')}"
        )
    if ab:
        print(paired.ab_summary(ab))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", choices=("kornia", "synthetic"), default="kornia")
    parser.add_argument("--benchmarks", type=int, default=100, help="synthetic suite's size")
    parser.add_argument("--aa", type=int, default=2, help="A/A comparisons (target: 20)")
    parser.add_argument("--ab", type=int, default=0, help="A/B comparisons (synthetic only)")
    parser.add_argument("--rounds", type=int, default=4, help="--bench-rounds")
    parser.add_argument("--limit", default="10%", help="--bench-fail=time:LIMIT")
    parser.add_argument("--keep", type=Path, default=None, help="keep each --bench-json here")
    parser.add_argument("--tiny", action="store_true", help="a check that the script runs")
    args = parser.parse_args()
    args.extra = []
    if args.tiny:
        args.suite, args.benchmarks, args.aa, args.ab, args.rounds = "synthetic", 2, 1, 0, 1
        args.limit, args.extra = "1000%", ["--bench-min-run-time=0.02"]
    if args.suite == "kornia":
        try:
            import kornia  # noqa: F401
        except ImportError:
            sys.exit("figures_time_cost: --suite kornia needs kornia: pip install kornia")
    with tempfile.TemporaryDirectory(prefix="figures-time-cost-") as folder:
        repo = Path(folder) / "project"
        has_ab = _suite(repo, args.suite, args.benchmarks)
        print(
            f"suite: {args.suite}, --bench-rounds={args.rounds}, limit {args.limit}, "
            f"{os.cpu_count()} cores, {sys.executable}",
            flush=True,
        )
        aa, ab = [], []
        paired._git(repo, "checkout", "-q", "aa")
        for number in range(1, args.aa + 1):
            aa.append(_compare(repo, args, f"aa-{number}"))
            print(_line("A/A", number, aa[-1]), flush=True)
        if has_ab:
            paired._git(repo, "checkout", "-q", "ab")
            for number in range(1, args.ab + 1):
                ab.append(_compare(repo, args, f"ab-{number}"))
                print(_line("A/B", number, ab[-1]), flush=True)
    if aa or ab:
        _totals(aa, ab)


if __name__ == "__main__":
    main()
