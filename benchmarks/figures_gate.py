"""The cost of a base measured in the same job (``--bench-compare=REV``, issue 25), printed.

A temporary git repository holds the project's example suite (``examples/``) in two commits (the
second changes nothing the benchmarks run). For each mode it times whole pytest sessions:

* ``head only``: ``pytest --bench-mode=MODE`` (what a run costs without any base);
* ``base measured (cold)``: ``--bench-compare=HEAD~1 --bench-base=measure`` with an empty cache;
* ``base cached``: the same command again (the cache under ``.torchbench/bases`` is warm);

and says the ratio of each to ``head only`` (targets: cold about 2x, cached about 1x). The second
commit changes nothing the benchmarks run, so the comparison is an A/A: its exit status and the
largest |delta| of any verdict say what measuring the base in a worktree (another path, the worktree
first on ``PYTHONPATH``) does to the numbers (ops: exact; instructions: within a few tenths of a
percent; time: the machine's noise). Wall time depends on the machine's load: the load average is
printed with every line.

Run from the repository root: ``python benchmarks/figures_gate.py [--modes ops,time,instructions]``
(instructions needs valgrind and takes a few minutes). ``--tiny``: ops mode on
``examples/test_ops.py`` only, no cached-base session: a check that the script runs (its figures
mean little).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _git(cwd: Path, *args: str) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "b",
        "GIT_AUTHOR_EMAIL": "b@e",
        "GIT_COMMITTER_NAME": "b",
        "GIT_COMMITTER_EMAIL": "b@e",
    }
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def _session(cwd: Path, *args: str) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("CI", None)
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
            *args,
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    seconds = time.monotonic() - started
    if done.returncode not in (0, 1):
        sys.exit(
            f"pytest {' '.join(args)} exited {done.returncode}:\n"
            f"{done.stdout[-3000:]}{done.stderr[-2000:]}"
        )
    return seconds, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default="ops,time")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="ops mode on examples/test_ops.py, no cached base: a check that the script runs",
    )
    args = parser.parse_args()
    modes = ["ops"] if args.tiny else args.modes.split(",")
    selection = "examples/test_ops.py" if args.tiny else "examples"
    with tempfile.TemporaryDirectory(prefix="figures-gate-") as folder:
        repo = Path(folder) / "project"
        shutil.copytree(
            ROOT / "examples", repo / "examples", ignore=shutil.ignore_patterns("__pycache__")
        )
        (repo / ".gitignore").write_text(".torchbench/\n__pycache__/\n")
        _git(repo, "init", "-q", "-b", "main")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "base")
        (repo / "examples" / "NOTES").write_text("a change no benchmark runs\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", "head")
        print(f"suite: {ROOT / selection} ({sys.executable}, {os.cpu_count()} cores)")
        for mode in modes:
            plain, _ = _session(repo, selection, f"--bench-mode={mode}")
            shutil.rmtree(repo / ".torchbench", ignore_errors=True)
            rows = [("head only", plain)]
            verdict = ""
            # --tiny: the cold base only (the cached one runs the same lines of this script)
            labels = (
                ("base measured (cold)",) if args.tiny else ("base measured (cold)", "base cached")
            )
            for label in labels:
                seconds, code = _session(
                    repo,
                    selection,
                    f"--bench-mode={mode}",
                    "--bench-compare=HEAD~1",
                    "--bench-base=measure",
                    f"--bench-json={repo / 'out.json'}",
                )
                rows.append((label, seconds))
                if not verdict:
                    verdicts = json.loads((repo / "out.json").read_text())["verdicts"]
                    deltas = [
                        abs(v["current"] / v["baseline"] - 1)
                        for v in verdicts
                        if v.get("current") is not None and v.get("baseline")
                    ]
                    verdict = (
                        f"A/A exit {code}, {len(verdicts)} verdicts, worst |delta| "
                        f"{max(deltas, default=0) * 100:.3f}%, statuses "
                        f"{sorted({v['status'] for v in verdicts})}"
                    )
            for label, seconds in rows:
                print(
                    f"{mode:>12}  {label:<22} {seconds:7.1f} s  {seconds / plain:4.2f}x  "
                    f"(load {os.getloadavg()[0]:.1f})"
                )
            print(f"{mode:>12}  {verdict}")


if __name__ == "__main__":
    main()
