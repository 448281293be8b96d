"""Time mode against a base measured alternately (issue 25, point 2), printed against its targets.

A temporary git repository holds a synthetic suite of ``--benchmarks`` time benchmarks whose calls
take from about 10 us to about 10 ms (spaced evenly on a log scale; Python loops, small and large
``torch.add`` and ``torch.mm``, each call ``REPS`` = 5 repetitions of its operation), in three
commits: the base, an unchanged head (a comment changes: A/A), and a head where every benchmark
does 6 repetitions instead of 5 (a 20% slowdown of every benchmark: A/B). Each comparison is one
whole pytest session::

    pytest --bench-mode=time --bench-compare=HEAD~1 --bench-base=measure --bench-rounds=R

so REV is measured alternately with the checkout, R rounds of fresh processes (each round's two
at once, in 10 ms turns on one CPU; ``TORCHBENCH_ROUNDS=sequential`` in the environment: one
after the other), and every benchmark is judged on its paired head/base ratios. Printed per run: its
verdicts (regressions = false failures in an A/A run, caught slowdowns in an A/B run; too noisy;
improvements), the session's wall time and the load average; then the totals against the targets
of issue 25, point 2, for a suite of about 300 benchmarks at this machine's normal load:

* an unchanged pull request is green in at least 19 of 20 runs: a per-benchmark false failure
  rate around 0.02% (printed: the observed rate, and what it makes of a 300-benchmark suite);
* a 20% slowdown is caught in at least 95% of benchmarks.

The full-size run (``--benchmarks 300 --aa 20 --ab 20``) takes hours on a 2-core machine; the
defaults are a scaled run. Run from the repository root, e.g.::

    python benchmarks/figures_time_paired.py --benchmarks 40 --aa 3 --ab 2 --rounds 4

``--tiny``: 2 benchmarks, one A/A comparison of one round at a 1000% limit (no benchmark measured
again), no A/B one: a check that the script runs (its figures mean nothing).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LIB = '''"""A synthetic suite: per case, REPS repetitions of one operation of a chosen size."""
import torch

REPS = {reps}
CASES = {cases!r}
_TENSORS = {{}}


def _tensors(kind, n):
    if (kind, n) not in _TENSORS:
        generator = torch.Generator().manual_seed(n)
        shape = (n, n) if kind == "mm" else (n,)
        _TENSORS[kind, n] = (
            torch.rand(shape, generator=generator),
            torch.rand(shape, generator=generator),
        )
    return _TENSORS[kind, n]


def run(kind, n):
    if kind == "py":
        for _ in range(REPS):
            sum(i * i for i in range(n))
        return None
    a, b = _tensors(kind, n)
    op = torch.mm if kind == "mm" else torch.add
    for _ in range(REPS):
        op(a, b)
    return None
'''

TESTS = """import pytest

from suite import lib


@pytest.mark.parametrize("kind,n", lib.CASES, ids=[f"{{k}}-{{n}}" for k, n in lib.CASES])
def test_case(benchmark, kind, n):
    benchmark(lib.run, kind, n)
"""


def cases(count: int) -> list[tuple[str, int]]:
    """``count`` (kind, size) pairs whose calls (5 repetitions) take from about 10 us to about
    10 ms, evenly on a log scale; the kinds take turns. Sizes come from rough per-element costs
    on this machine type, not from a calibration (a calibration would differ between processes)."""
    found = []
    for index in range(count):
        target = 10e-6 * 1000 ** (index / max(count - 1, 1)) / 5  # seconds per repetition
        kind = ("py", "add", "mm")[index % 3]
        if kind == "py":
            n = max(int(target / 45e-9), 4)  # about 45 ns a loop step
        elif kind == "add":
            n = max(int((target - 2e-6) / 0.6e-9), 16)  # about 2 us a call, 0.6 ns an element
        else:
            n = max(
                int(round((max(target - 3e-6, 0.0) / 0.15e-9) ** (1 / 3))), 2
            )  # about 0.15 ns a multiply-add
        while (kind, n) in found:  # a large suite's shortest targets round to the same size
            n += 1
        found.append((kind, n))
    return found


def _git(cwd: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@e",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@e",
    }
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def _write(repo: Path, reps: int, all_cases: list[tuple[str, int]], comment: str = "") -> None:
    (repo / "suite" / "lib.py").write_text(comment + LIB.format(reps=reps, cases=all_cases))


def _compare(
    repo: Path, rounds: int, limit: str, extra: list[str], label: str, keep: Path | None = None
) -> dict[str, object]:
    """One pytest session comparing HEAD with HEAD~1 measured alternately: its verdicts and cost."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CI", None)
    out = repo / "out.json"
    out.unlink(missing_ok=True)
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:benchmark",
            "-p",
            "no:cacheprovider",
            "suite",
            "--bench-mode=time",
            "--bench-compare=HEAD~1",
            "--bench-base=measure",
            f"--bench-rounds={rounds}",
            f"--bench-fail=time:{limit}",
            f"--bench-json={out}",
            *extra,
        ],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - started
    if done.returncode not in (0, 1) or not out.is_file():
        sys.exit(f"pytest exited {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        (keep / f"{label}.json").write_bytes(out.read_bytes())
    document = json.loads(out.read_text())
    verdicts = [v for v in document["verdicts"] if v["metric"] == "time"]
    judged_on = [
        int(found.group(1))
        for v in verdicts
        if (found := re.search(r"over (\d+) alternated rounds", v.get("summary", "")))
    ]
    again = sum(1 for n in judged_on if n > rounds)  # sent to a pass of extra rounds
    twice = sum(1 for n in judged_on if n > 2 * rounds)  # and to the second pass
    for verdict in verdicts:  # the false failures and too noisy ones, with their rounds
        if verdict["status"] in ("regression", "too noisy") and label.startswith("aa"):
            print(f"    {verdict['status']}: {verdict['key']}: {verdict['summary'][:160]}")
            print("      " + "; ".join(verdict.get("details", [])[: 2 * rounds]))
    statuses: dict[str, list[str]] = {}
    for verdict in verdicts:
        statuses.setdefault(verdict["status"], []).append(verdict["key"])
    ratios = sorted(
        v["current"] / v["baseline"] for v in verdicts if v.get("current") and v.get("baseline")
    )
    return {
        "exit": done.returncode,
        "statuses": statuses,
        "count": len(verdicts),
        "seconds": seconds,
        "again": again,
        "twice": twice,
        "rounds_again": document.get("base_rounds_again") or 0,
        "load": (load_before + os.getloadavg()[0]) / 2,
        "ratios": ratios,
        "times": sorted(v["baseline"] for v in verdicts if v.get("baseline")),
    }


def _line(kind: str, number: int, run: dict[str, object]) -> str:
    statuses: dict[str, list[str]] = run["statuses"]  # type: ignore[assignment]
    ratios: list[float] = run["ratios"]  # type: ignore[assignment]
    median = ratios[len(ratios) // 2] if ratios else float("nan")
    return (
        f"{kind} run {number}: exit {run['exit']}, {run['count']} verdicts: "
        + ", ".join(f"{len(keys)} {status}" for status, keys in sorted(statuses.items()))
        + f"; paired change median {(median - 1) * 100:+.1f}%; {run['again']} measured again, "
        f"{run['twice']} of them twice ({run['rounds_again']} more rounds in all); "
        f"session {run['seconds']:.0f} s, "
        f"load {run['load']:.1f}"
    )


def status_total(runs: list[dict[str, object]], status: str) -> int:
    """How many verdicts of ``runs`` (each with its ``statuses``) have ``status``."""
    return sum(len(run["statuses"].get(status, [])) for run in runs)  # type: ignore[attr-defined]


def ab_summary(runs: list[dict[str, object]]) -> str:
    """The A/B line: how many +20% slowdowns ``runs`` caught, against the target, and the rest."""
    judged = sum(int(run["count"]) for run in runs)  # type: ignore[call-overload]
    caught = status_total(runs, "regression")
    return (
        f"A/B (+20% everywhere): caught {caught}/{judged} "
        f"({caught / max(judged, 1) * 100:.1f}%; target >= 95%); "
        f"too noisy {status_total(runs, 'too noisy')}, "
        f"unchanged {status_total(runs, 'unchanged')}, "
        f"improvements {status_total(runs, 'improvement')}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--benchmarks", type=int, default=40, help="benchmarks in the suite (target: about 300)"
    )
    parser.add_argument("--aa", type=int, default=3, help="A/A comparisons (target: 20)")
    parser.add_argument(
        "--ab", type=int, default=2, help="A/B comparisons, every benchmark 20%% slower"
    )
    parser.add_argument("--rounds", type=int, default=4, help="--bench-rounds")
    parser.add_argument("--limit", default="10%", help="the time limit (--bench-fail=time:LIMIT)")
    parser.add_argument("--min-run-time", default=None, help="--bench-min-run-time, if any")
    parser.add_argument(
        "--keep", type=Path, default=None, help="a folder to keep each run's --bench-json in"
    )
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="2 benchmarks, one A/A comparison of one round: a check that the script runs",
    )
    args = parser.parse_args()
    if args.tiny:
        args.benchmarks, args.aa, args.ab, args.rounds = 2, 1, 0, 1
        # a limit no noise reaches: every verdict decided in the one round, none measured again
        args.limit = "1000%"
        args.min_run_time = args.min_run_time or "0.02"
    extra = [f"--bench-min-run-time={args.min_run_time}"] if args.min_run_time else []
    all_cases = cases(args.benchmarks)
    with tempfile.TemporaryDirectory(prefix="figures-time-paired-") as folder:
        repo = Path(folder) / "project"
        (repo / "suite").mkdir(parents=True)
        (repo / "suite" / "__init__.py").write_text("")
        (repo / "suite" / "test_suite.py").write_text(TESTS.format())
        (repo / ".gitignore").write_text(".torchbench/\n__pycache__/\nout.json\n")
        _write(repo, 5, all_cases)
        _git(repo, "init", "-q", "-b", "main")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "base")
        _write(repo, 5, all_cases, comment="# unchanged\n")
        _git(repo, "commit", "-q", "-am", "A/A: nothing the benchmarks run changes")
        _git(repo, "tag", "aa")
        _write(repo, 6, all_cases)
        _git(repo, "commit", "-q", "-am", "A/B: every benchmark 20% slower")
        _git(repo, "tag", "ab")
        print(
            f"suite: {args.benchmarks} benchmarks, --bench-rounds={args.rounds}, "
            f"limit {args.limit}, "
            f"{os.cpu_count()} cores, {sys.executable}"
        )
        aa_runs, ab_runs = [], []
        _git(repo, "checkout", "-q", "aa")
        for number in range(1, args.aa + 1):
            aa_runs.append(
                _compare(repo, args.rounds, args.limit, extra, f"aa-{number}", args.keep)
            )
            print(_line("A/A", number, aa_runs[-1]), flush=True)
        _git(repo, "checkout", "-q", "ab")
        for number in range(1, args.ab + 1):
            ab_runs.append(
                _compare(repo, args.rounds, args.limit, extra, f"ab-{number}", args.keep)
            )
            print(_line("A/B", number, ab_runs[-1]), flush=True)
    times: list[float] = (aa_runs or ab_runs)[0]["times"] if (aa_runs or ab_runs) else []  # type: ignore[assignment]
    if times:
        print(
            "fastest call per benchmark (the base's median over rounds): "
            f"{times[0] * 1e6:.1f} us .. "
            f"{times[-1] * 1e3:.2f} ms"
        )

    total = status_total
    if aa_runs:
        judged = sum(int(run["count"]) for run in aa_runs)  # type: ignore[call-overload]
        false = total(aa_runs, "regression")
        green = sum(1 for run in aa_runs if not run["statuses"].get("regression"))  # type: ignore[attr-defined]
        rate = false / judged if judged else 0.0
        bound = (
            1 - 0.05 ** (1 / judged) if judged and not false else None
        )  # 95% upper bound with none seen
        print(
            f"A/A: {false} false failure(s) in {judged} benchmark comparisons "
            f"({rate * 100:.3f}% per benchmark"
            + (
                f"; none seen: below {bound * 100:.2f}% at 95% confidence"
                if bound is not None
                else ""
            )
            + f"); green runs {green}/{len(aa_runs)}; too noisy {total(aa_runs, 'too noisy')}, "
            f"improvements {total(aa_runs, 'improvement')}"
        )
        at_300 = (1 - rate) ** 300
        print(
            "     target: per-benchmark false rate <= 0.02% "
            "(a 300-benchmark suite green in >= 19/20 runs); "
            f"at the observed rate a 300-benchmark suite is green in {at_300 * 100:.0f}% of runs"
        )
    if ab_runs:
        print(ab_summary(ab_runs))
    seconds = [float(run["seconds"]) for run in aa_runs + ab_runs]  # type: ignore[arg-type]
    if seconds:
        print(
            f"session time: {min(seconds):.0f}-{max(seconds):.0f} s per comparison "
            f"({args.rounds} rounds = {2 * args.rounds} child sessions + the session itself)"
        )


if __name__ == "__main__":
    main()
