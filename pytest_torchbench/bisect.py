"""``torchbench bisect GOOD BAD --bench-mode=MODES -- PYTEST-ARGS``: the first commit whose value
moved beyond the limit, measured in worktrees.

How: GOOD and BAD are measured with the user's selection (the measured-base machinery of
``--bench-compare=REV``: a worktree per revision, the project imported from it, the cache under
``.torchbench/bases``, ``--bench-base-prepare``); each (benchmark, metric) that regressed from GOOD
to BAD is then searched for on the first-parent line between them, a commit counting as "after"
when its value against GOOD's is a regression. Measurements are shared between the searches and
kept in the cache, so a second bisect over the same range measures nothing again. The commit found
is explained by judging it against its parent, which the search has measured too, by the metric's
own details (functions for instructions, ops for ops, calls for calls). Cost for one regression:
GOOD, BAD and at most ceil(log2(n)) commits between them for n commits.

Why counts bisect well here: instruction, op and call counts repeat across processes (within
hundredths of a percent for instructions), so one measurement per commit decides. Wall time does
not; a time bisect measures each commit once too and says so: a step much larger than the noise
(a 2x slowdown) is found, a few percent is not a question one measurement per commit can answer.
"""

from __future__ import annotations

import dataclasses
import math
import platform
import subprocess
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

from .common.text import safe_text
from .common.vocabulary import NOT_COMPARABLE, REGRESSION, TOO_NOISY, Policy, Verdict
from .judging.gate import judge
from .pytest.base import BaseError, BaseRequest, measure
from .pytest.children import Invocation
from .pytest.progress import ProgressLines
from .store.refs import Revision, git_toplevel, revision_label
from .store.storage import BaselineSet

__all__ = ["BisectError", "Bisection", "bisect", "first_parent_line"]


class BisectError(BaseError):
    """Bisect cannot start or go on: one line, exit 4."""


@dataclasses.dataclass(frozen=True)
class Found:
    """The first commit of ``key``'s ``metric`` beyond the limit, and its verdict against its
    parent."""

    key: str
    metric: str
    commit: str
    subject: str
    parent_verdict: Verdict
    overall: Verdict  # BAD against GOOD
    #: BAD against the commit found, when it is a regression too: more came after it.
    later: Verdict | None = None


@dataclasses.dataclass
class Bisection:
    """What a bisect found, and what it cost."""

    commits: int
    measured: list[str]
    found: list[Found]
    unchanged: bool  # nothing regressed from GOOD to BAD
    from_cache: int = 0  # of ``measured``, those the cache served
    #: GOOD to BAD verdicts that could not say whether anything regressed (not comparable, too
    #: noisy): "nothing regressed" would be a silent pass.
    unjudged: list[Verdict] = dataclasses.field(default_factory=list)


def first_parent_line(good: str, bad: str, toplevel: Path) -> list[tuple[str, str]]:
    """(commit, subject) from GOOD (first) to BAD (last) along BAD's first parents."""
    done = subprocess.run(
        ["git", "log", "--first-parent", "--reverse", "-z", "--format=%H%x1f%s", f"{good}..{bad}"],
        cwd=toplevel,
        capture_output=True,
        text=True,
        errors="replace",
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode != 0:
        raise BisectError(
            f"bisect: git log {good}..{bad} failed: {safe_text(done.stderr.strip()[:200])}"
        )
    line = [tuple(r.strip("\n").split("\x1f", 1)) for r in done.stdout.split("\0") if r.strip("\n")]
    subject = subprocess.run(
        ["git", "log", "-1", "--format=%s", good],
        cwd=toplevel,
        capture_output=True,
        text=True,
        errors="replace",
        check=False,
    ).stdout.strip()
    return [(good, subject), *[(sha, text) for sha, text in line]]  # type: ignore[misc]


def _commit(ref: str, toplevel: Path) -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        cwd=toplevel,
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0 or ref.startswith("-"):
        raise BisectError(f"bisect: {safe_text(ref)!r} is not a commit of {toplevel}")
    return done.stdout.strip()


def _environment(modes: Sequence[str]) -> dict[str, str]:
    """What a measured commit's cache entry is keyed by beside the commit: the interpreter and
    the versions that move counts (the run's own fingerprint is not known outside pytest)."""
    found = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "modes": ",".join(modes),
    }
    for name in ("torch", "numpy", "pytest"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def bisect(
    good: str,
    bad: str,
    modes: Sequence[str],
    pytest_args: Sequence[str],
    policy: Policy,
    write: Callable[[str], None],
    prepare: str | None = None,
) -> Bisection:
    """Measure GOOD and BAD, then bisect each regression between them (see the module docstring)."""
    cwd = Path.cwd()
    toplevel = git_toplevel(cwd)
    if toplevel is None:
        raise BisectError(
            f"bisect: {cwd} is not in a git repository: run it from the project's checkout"
        )
    good_commit, bad_commit = _commit(good, toplevel), _commit(bad, toplevel)
    line = first_parent_line(good_commit, bad_commit, toplevel)
    if len(line) < 2:
        raise BisectError(
            f"bisect: {safe_text(bad)} is not after {safe_text(good)} on its first-parent line"
        )
    commits = _Commits(
        line=line,
        toplevel=toplevel,
        cwd=cwd,
        modes=tuple(modes),
        args=(f"--bench-mode={','.join(modes)}", *pytest_args),
        prepare=prepare,
        write=write,
    )
    first, last = commits.at(0), commits.at(len(line) - 1)
    overall = [
        v
        for key, result in sorted(last.entries.items())
        for v in judge(result, first.entries, policy)
    ]
    targets = [v for v in overall if v.status == REGRESSION]
    unjudged = [v for v in overall if v.status in (NOT_COMPARABLE, TOO_NOISY)]
    found = [_trace(target, commits, policy=policy) for target in targets]
    return Bisection(
        len(line) - 1, commits.order, found, not targets, len(commits.cached), unjudged
    )


@dataclasses.dataclass
class _Commits:
    """The first-parent line from GOOD to BAD, each commit measured when first asked for and
    once only: the searches for several regressions share the measurements."""

    line: list[tuple[str, str]]
    toplevel: Path
    cwd: Path
    modes: tuple[str, ...]
    args: tuple[str, ...]
    prepare: str | None
    write: Callable[[str], None]
    measured: dict[str, BaselineSet] = dataclasses.field(default_factory=dict)
    order: list[str] = dataclasses.field(default_factory=list)
    cached: list[str] = dataclasses.field(default_factory=list)
    progress: ProgressLines = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.progress = ProgressLines(self.write)

    def at(self, index: int) -> BaselineSet:
        sha, subject = self.line[index]
        if sha not in self.measured:
            revision = Revision(sha, sha, None, sha, self.toplevel)
            self.write(
                f"torchbench bisect: measuring {revision_label(sha, sha)} "
                f"({safe_text(subject[:60])}), {index} of {len(self.line) - 1} commits after GOOD"
            )
            base = measure(
                BaseRequest(
                    revision=revision,
                    modes=self.modes,
                    environment=_environment(self.modes),
                    cache_root=self.cwd / ".torchbench" / "bases",
                    prepare=self.prepare,
                    option="bisect",
                ),
                Invocation(args=self.args, rootdir=self.cwd, cwd=self.cwd),
                progress=self.progress,
            )
            self.measured[sha] = base.entries
            self.order.append(sha)
            self.cached.extend([sha] if base.cached else [])
        return self.measured[sha]


def _trace(target: Verdict, commits: _Commits, *, policy: Policy) -> Found:
    """Binary search for the first commit where ``target`` (BAD against GOOD) is a regression
    against GOOD, judged then against its parent and against BAD."""
    first, last = commits.at(0), commits.at(len(commits.line) - 1)
    low, high = 0, len(commits.line) - 1  # low: not beyond the limit against GOOD; high: beyond it
    while high - low > 1:
        middle = (low + high) // 2
        if _regressed(commits.at(middle), first, target, policy):
            high = middle
        else:
            low = middle
    parent = commits.at(low).entries.get(target.key)
    here = commits.at(high).entries[target.key]
    against_parent = next(
        (
            v
            for v in judge(here, {target.key: parent} if parent else {}, policy)
            if v.metric == target.metric
        ),
        target,
    )
    later = next(
        (
            v
            for v in judge(last.entries[target.key], {target.key: here}, policy)
            if v.metric == target.metric and v.status == REGRESSION
        ),
        None,
    )
    commit, subject = commits.line[high]
    return Found(target.key, target.metric, commit, subject, against_parent, target, later)


def _regressed(measured: BaselineSet, good: BaselineSet, target: Verdict, policy: Policy) -> bool:
    result = measured.entries.get(target.key)
    if result is None:  # the benchmark is not there yet: not after the change
        return False
    return any(
        v.metric == target.metric and v.status == REGRESSION
        for v in judge(result, good.entries, policy)
    )


def report(found: Bisection, write: Callable[[str], None]) -> None:
    """The answer: per regression, the first commit beyond the limit and why; then the cost."""
    for verdict in found.unjudged:
        write(
            f"torchbench bisect: could not judge {safe_text(verdict.key)} [{verdict.metric}] "
            f"from GOOD to BAD: {safe_text(verdict.summary)}"
        )
    if found.unchanged:
        write(
            "torchbench bisect: nothing regressed beyond its limit between GOOD and BAD: nothing "
            "to bisect" + (" among what could be judged" if found.unjudged else "")
        )
    for item in found.found:
        write(
            f"torchbench bisect: {safe_text(item.key)} [{item.metric}]: "
            f"{safe_text(item.overall.summary)} from GOOD to BAD; first beyond the limit: "
            f"{item.commit[:12]} ({safe_text(item.subject[:72])})"
        )
        write(f"    against its parent: {safe_text(item.parent_verdict.summary)}")
        for detail in item.parent_verdict.details[:12]:
            write(f"      {safe_text(detail)}")
        if item.later is not None:
            write(
                f"    and more after it: {safe_text(item.later.summary)} from {item.commit[:12]} "
                f"to BAD; bisect {item.commit[:12]} BAD for the next"
            )
    bound = math.ceil(math.log2(max(found.commits, 1))) + 2
    cache = f", {found.from_cache} of them from the cache" if found.from_cache else ""
    write(
        f"torchbench bisect: measured {len(found.measured)} revision(s) for {found.commits} "
        f"commit(s) (at most {bound} for one regression){cache}"
    )
