"""Resolving ``--bench-compare=REF`` to a baseline set: a saved name, a git revision, or a path.

Precedence, first match wins (documented in the README): a set of that name in the baselines
folder; a git revision (``REV`` or ``REV:SET``) whose commit holds committed baselines; a path to
a set folder or a single baseline file. A REF that is none of them is an error that lists the sets
that do exist.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

from .storage import BaselineError, BaselineSet, available_sets, load_set_from_folder, parse_baseline_document

DEFAULT_SET = "main"


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, check=False,
        stdin=subprocess.DEVNULL,
    )


def git_toplevel(path: Path) -> Path | None:
    try:
        done = _git(["rev-parse", "--show-toplevel"], path if path.is_dir() else path.parent)
    except (OSError, FileNotFoundError):
        return None
    return Path(done.stdout.strip()) if done.returncode == 0 else None


def _git_commit(revision: str, toplevel: Path) -> str | None:
    done = _git(["rev-parse", "--verify", "--quiet", f"{revision}^{{commit}}"], toplevel)
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def load_set_from_git(revision: str, set_name: str | None, baselines_dir: Path, toplevel: Path) -> BaselineSet | None:
    """The baselines committed at ``revision``; None when the revision does not exist."""
    commit = _git_commit(revision, toplevel)
    if commit is None:
        return None
    try:
        relative = baselines_dir.resolve().relative_to(toplevel.resolve()).as_posix()
    except ValueError:
        raise BaselineError(
            f"--bench-compare={revision}: the baselines folder {baselines_dir} is outside the git "
            f"repository {toplevel}, so it cannot be read from a revision"
        ) from None
    listing = _git(["ls-tree", "-r", "--name-only", commit, "--", relative], toplevel)
    files = [line for line in listing.stdout.splitlines() if line.endswith(".json")]
    sets = sorted({f[len(relative) + 1:].split("/", 1)[0] for f in files if "/" in f[len(relative) + 1:]})
    if not sets:
        raise BaselineError(
            f"--bench-compare={revision}: revision {commit[:12]} has no committed baselines under "
            f"{relative}/; save and commit some first (pytest --bench-save={DEFAULT_SET})"
        )
    if set_name is None:
        if len(sets) == 1:
            set_name = sets[0]
        elif DEFAULT_SET in sets:
            set_name = DEFAULT_SET
        else:
            raise BaselineError(
                f"--bench-compare={revision}: revision {commit[:12]} holds several baseline sets "
                f"({', '.join(sets)}); name one as {revision}:SET"
            )
    if set_name not in sets:
        raise BaselineError(
            f"--bench-compare={revision}:{set_name}: revision {commit[:12]} has no set "
            f"{set_name!r} (it has: {', '.join(sets)})"
        )
    prefix = f"{relative}/{set_name}/"
    result = BaselineSet(name=set_name, source=f"git {revision} ({commit[:12]}):{prefix}")
    for path in files:
        if not path.startswith(prefix):
            continue
        shown = _git(["show", f"{commit}:{path}"], toplevel)
        if shown.returncode != 0:
            raise BaselineError(f"--bench-compare={revision}: cannot read {path} at {commit[:12]}: {shown.stderr.strip()}")
        result.entries.update(parse_baseline_document(shown.stdout, f"{path} at {revision}"))
    return result


def resolve_compare(ref: str, baselines_dir: Path, cwd: Path) -> BaselineSet:
    """Load the baseline set that REF names; BaselineError with one clear line otherwise."""
    if not ref:
        raise BaselineError("--bench-compare needs a baseline set name, a git revision or a path")
    saved = baselines_dir / ref
    if "/" not in ref and saved.is_dir():
        return load_set_from_folder(saved, ref)
    toplevel = git_toplevel(baselines_dir if baselines_dir.exists() else cwd)
    if toplevel is not None:
        revision, _, set_name = ref.partition(":")
        if revision:
            from_git = load_set_from_git(revision, set_name or None, baselines_dir, toplevel)
            if from_git is not None:
                return from_git
    path = Path(ref)
    if not path.is_absolute():
        path = cwd / path
    if path.is_dir():
        return load_set_from_folder(path, path.name)
    if path.is_file():
        baseline_set = BaselineSet(name=path.stem, source=str(path))
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BaselineError(f"baseline file {path} cannot be read ({exc})") from None
        baseline_set.entries.update(parse_baseline_document(text, str(path)))
        return baseline_set
    existing = available_sets(baselines_dir)
    where = f"in {baselines_dir}" if baselines_dir.is_dir() else f"({baselines_dir} does not exist)"
    listing = f"existing sets: {', '.join(existing)}" if existing else "no sets are saved yet"
    raise BaselineError(
        f"--bench-compare={ref}: no baseline set {ref!r} {where}, no git revision and no path of "
        f"that name; {listing}; create one with pytest --bench-save={ref if '/' not in ref else DEFAULT_SET}"
    )
