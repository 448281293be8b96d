"""Resolving ``--bench-compare=REF`` to a baseline set: a saved name, a git revision, or a path.

Precedence, first match wins (documented in the README): a set of that name in the baselines
folder; a git revision (``REV`` or ``REV:SET``) whose commit holds committed baselines; a path to
a set folder or a single baseline file. A REF that is none of them is an error that lists the sets
that do exist.

Why this order: the saved name is what ``--bench-save`` wrote and what a developer just typed, so
it must never be shadowed by a branch of the same name; a revision comes before a path because
``main`` or ``origin/main`` are far more often meant as git names than as folders in the current
directory. Reading a revision uses ``git ls-tree``/``git cat-file`` on the commit only: nothing is
checked out, the working tree is untouched, and a shallow clone works as long as it holds the
revision (when it does not, the error says so and how to fetch it).

User strings reach git only as revisions, after ``--end-of-options`` (git >= 2.24), and a
"revision" that starts with '-' is never passed at all (no ref name or object id can): a
``--bench-compare=--output=FILE`` must not become an option of git. git's output is read as bytes
and baseline files are decoded strictly, so a non-UTF-8 file is one error line, not a traceback.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import subprocess
from pathlib import Path
from typing import Any

from ..judging.results import BenchmarkResult
from .storage import (
    MAX_BASELINE_BYTES,
    SET_NAME_MAX,
    SET_NAME_PATTERN,
    BaselineError,
    BaselineSet,
    NotASetError,
    available_sets,
    load_baseline_file,
    load_set_from_folder,
    parse_baseline_document,
)

DEFAULT_SET = "main"


class NoCommittedBaselines(BaselineError):
    """A revision that exists and holds no baselines: an error when only committed baselines can
    be used (``--bench-base=stored``), the cue to measure the revision otherwise."""


@dataclasses.dataclass(frozen=True)
class Revision:
    """What ``--bench-compare=REF`` names when it is a git revision (``REV`` or ``REV:SET``)."""

    ref: str  # as the user typed it
    revision: str
    set_name: str | None
    commit: str
    toplevel: Path

    @property
    def label(self) -> str:
        """``HEAD~1 (3f2a9c1e0b7d)``, or the short commit alone when REV is the commit itself."""
        return revision_label(self.revision, self.commit)


def revision_label(revision: str, commit: str) -> str:
    """How messages name a revision: ``HEAD~1 (3f2a9c1e0b7d)``; a revision given as the commit's
    hash (CI passes 40 of them) as its first 12, once, not the whole hash and again in brackets."""
    if _is_hash_of(revision, commit):
        return commit[:12]
    return f"{revision} ({commit[:12]})"


def shown_ref(ref: str, commit: str) -> str:
    """A reference as reports name the baseline: as typed, a commit hash in it cut to 12."""
    revision, sep, set_name = ref.partition(":")
    return (commit[:12] if _is_hash_of(revision, commit) else revision) + sep + set_name


def _is_hash_of(revision: str, commit: str) -> bool:
    return (
        len(revision) >= 7
        and commit.startswith(revision.lower())
        and all(c in "0123456789abcdefABCDEF" for c in revision)
    )


def compare_revision(ref: str, baselines_dir: Path, cwd: Path) -> Revision | None:
    """The git revision REF names, by :func:`resolve_compare`'s precedence (a saved set of that
    name comes first), or None when REF is a saved name, not a revision, or outside git."""
    if not ref or ("/" not in ref and ":" not in ref and _is_dir(baselines_dir / ref)):
        return None
    toplevel = git_toplevel(baselines_dir if _is_dir(baselines_dir) else cwd) or git_toplevel(cwd)
    if toplevel is None:
        return None
    revision, _, set_name = ref.partition(":")
    commit = _git_commit(revision, toplevel) if revision else None
    if commit is None:
        return None
    return Revision(ref, revision, set_name or None, commit, toplevel)


def exists_at(commit: str, path: str, toplevel: Path) -> bool:
    """Whether ``path`` (relative to the repository's top) exists at ``commit``."""
    if path.startswith("-") or "\0" in path:
        return False
    return _git(["cat-file", "-e", f"{commit}:{path}"], toplevel).returncode == 0


def _git_bytes(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def _git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """git with text output; undecodable bytes (file names, messages) are replaced, not fatal."""
    done = _git_bytes(args, cwd)
    return subprocess.CompletedProcess(
        done.args,
        done.returncode,
        done.stdout.decode("utf-8", "replace"),
        done.stderr.decode("utf-8", "replace"),
    )


def _is_dir(path: Path) -> bool:
    """Path.is_dir, but a name the file system rejects (too long...) is simply not a folder."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _is_special(path: Path) -> bool:
    """Something is there, but neither a folder nor a regular file (or a link to nothing)."""
    try:
        return os.path.lexists(path) and not path.is_dir() and not path.is_file()
    except (OSError, ValueError):
        return False


def git_toplevel(path: Path) -> Path | None:
    try:
        done = _git(["rev-parse", "--show-toplevel"], path if path.is_dir() else path.parent)
    except (OSError, FileNotFoundError):
        return None
    return Path(done.stdout.strip()) if done.returncode == 0 else None


def _git_commit(revision: str, toplevel: Path) -> str | None:
    if revision.startswith("-") or "\0" in revision:
        return None  # not a ref name nor an object id: never hand it to git, where options go
    done = _git(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"], toplevel
    )
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


def save_stamp(folder: Path) -> dict[str, Any]:
    """What a save records per changed entry: the commit checked out (None outside git or before
    the first commit) and the time, UTC to the second. Not part of comparability."""
    commit = None
    probe = folder
    while not _is_dir(probe) and probe != probe.parent:
        probe = probe.parent
    try:
        done = _git(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], probe)
    except OSError:  # no git installed
        done = None
    if done is not None and done.returncode == 0 and done.stdout.strip():
        commit = done.stdout.strip()
    now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    return {"commit": commit, "time": now.isoformat().replace("+00:00", "Z")}


@dataclasses.dataclass(frozen=True)
class _AtRevision:
    """A revision baselines are read from: as typed, its commit, the repository, and the option
    that named it (error lines start with ``option=revision``)."""

    revision: str
    commit: str
    toplevel: Path
    option: str

    @property
    def named(self) -> str:
        return f"{self.option}={self.revision}"


def load_set_from_git(
    revision: str,
    set_name: str | None,
    baselines_dir: Path,
    toplevel: Path,
    option: str = "--bench-compare",
) -> BaselineSet | None:
    """The baselines committed at ``revision``; None when the revision does not exist.

    A revision that exists but holds no baselines, or a corrupt file in it, is a BaselineError:
    the user clearly meant that revision, so falling through to "maybe it is a path" would hide
    the real problem.
    """
    commit = _git_commit(revision, toplevel)
    if commit is None:
        return None
    at = _AtRevision(revision=revision, commit=commit, toplevel=toplevel, option=option)
    given = shown_ref(
        revision if set_name is None else f"{revision}:{set_name}", commit
    )  # as typed, for reports
    try:
        relative = baselines_dir.resolve().relative_to(toplevel.resolve()).as_posix()
    except ValueError:
        raise BaselineError(
            f"{option}={revision}: the baselines folder {baselines_dir} is outside the git "
            f"repository {toplevel}, so it cannot be read from a revision"
        ) from None
    sizes = _json_sizes(at, relative)
    set_name = _chosen_set(at, relative, list(sizes), set_name)
    prefix = f"{relative}/{set_name}/"
    result = BaselineSet(
        name=set_name, source=f"git {revision_label(revision, commit)}:{prefix}", label=given
    )
    for path in sizes:
        if path.startswith(prefix):
            result.entries.update(_read_file(at, path, sizes[path]))
    return result


def _json_sizes(at: _AtRevision, relative: str) -> dict[str, int]:
    """The size of each ``.json`` file under ``relative`` at the commit, in git's order."""
    listing = _git(["ls-tree", "-r", "-z", "--long", at.commit, "--", relative], at.toplevel)
    if listing.returncode != 0:
        raise BaselineError(
            f"{at.named}: cannot list {relative}/ at {at.commit[:12]}: "
            f"{_first_line(listing.stderr)}"
        )
    sizes: dict[str, int] = {}  # "<mode> <type> <object> <size>\t<path>", sizes padded with spaces
    for line in listing.stdout.split("\0"):
        fields, _, name = line.partition("\t")
        if name.endswith(".json"):
            size = fields.split()[-1] if fields.split() else "-"
            sizes[name] = int(size) if size.isdigit() else 0
    return sizes


def _chosen_set(at: _AtRevision, relative: str, files: list[str], set_name: str | None) -> str:
    """The set to read: the one named, else the only one, else the default; a BaselineError when
    there is none, or no single one to choose."""
    sets = sorted(
        {f[len(relative) + 1 :].split("/", 1)[0] for f in files if "/" in f[len(relative) + 1 :]}
    )
    commit = at.commit
    if not sets:
        raise NoCommittedBaselines(
            f"{at.named}: revision {commit[:12]} has no committed baselines under "
            f"{relative}/; save and commit some first (pytest --bench-save={DEFAULT_SET})"
        )
    if set_name is None:
        if len(sets) == 1:
            set_name = sets[0]
        elif DEFAULT_SET in sets:
            set_name = DEFAULT_SET
        else:
            raise BaselineError(
                f"{at.named}: revision {commit[:12]} holds several baseline sets "
                f"({', '.join(sets)}); name one as {at.revision}:SET"
            )
    if set_name not in sets:
        raise BaselineError(
            f"{at.named}:{set_name}: revision {commit[:12]} has no set "
            f"{set_name!r} (it has: {', '.join(sets)})"
        )
    return set_name


def _read_file(at: _AtRevision, path: str, size: int) -> dict[str, BenchmarkResult]:
    """One baseline file's entries at the commit; one too large to be a baseline is not read."""
    commit = at.commit
    if size > MAX_BASELINE_BYTES:
        raise BaselineError(
            f"{at.named}: {path} at {commit[:12]} is over "
            f"{MAX_BASELINE_BYTES // (1024 * 1024)} MiB, more than any baseline file holds; "
            "it was not read: remove it from the baselines in a new commit"
        )
    shown = _git_bytes(["cat-file", "blob", f"{commit}:{path}"], at.toplevel)
    if shown.returncode != 0:
        raise BaselineError(
            f"{at.named}: cannot read {path} at {commit[:12]}: "
            f"{_first_line(shown.stderr.decode('utf-8', 'replace'))}"
        )
    return parse_baseline_document(shown.stdout, f"{path} at {revision_label(at.revision, commit)}")


def _first_line(text: str) -> str:
    """git's stderr can run to several lines; our errors are one line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if lines else "unknown git error"


def is_shallow(toplevel: Path) -> bool:
    """A shallow clone lacks history: a missing revision there needs a fetch, not a typo fix."""
    done = _git(["rev-parse", "--is-shallow-repository"], toplevel)
    return done.returncode == 0 and done.stdout.strip() == "true"


def _looks_like_revision(ref: str) -> bool:
    """``HEAD~1``, ``main^``, ``v1.2:main``, a hex sha: the user meant git, not a file."""
    revision = ref.partition(":")[0]
    return (
        bool(revision)
        and not revision.startswith("-")
        and (
            any(c in revision for c in "~^@")
            or ":" in ref
            or revision == "HEAD"
            or (len(revision) >= 7 and all(c in "0123456789abcdef" for c in revision.lower()))
        )
    )


def resolve_compare(
    ref: str, baselines_dir: Path, cwd: Path, option: str = "--bench-compare"
) -> BaselineSet:
    """Load the baseline set that REF names; BaselineError with one clear line otherwise.

    ``option`` is how the reference was given (``--bench-compare`` or a ``torchbench`` argument),
    so that messages name what the user typed.
    """
    if not ref:
        raise BaselineError(f"{option} needs a baseline set name, a git revision or a path")
    saved = baselines_dir / ref
    if "/" not in ref and ":" not in ref and _is_dir(saved):
        return load_set_from_folder(saved, ref)
    toplevel = git_toplevel(baselines_dir if _is_dir(baselines_dir) else cwd)
    if toplevel is None:
        toplevel = git_toplevel(cwd)
    if toplevel is not None:
        revision, _, set_name = ref.partition(":")
        if revision:
            from_git = load_set_from_git(
                revision, set_name or None, baselines_dir, toplevel, option
            )
            if from_git is not None:
                return from_git
    path = Path(ref)
    if not path.is_absolute():
        path = cwd / path
    if _is_dir(path):
        try:
            return load_set_from_folder(path, path.name or str(path))
        except NotASetError as exc:
            raise NotASetError(f"{option}={ref}: {exc}") from None
    if _is_file(path) or _is_special(path):  # a FIFO, a device, a dangling link: its own error
        return BaselineSet(name=path.stem, source=str(path), entries=load_baseline_file(path))
    if toplevel is not None and _looks_like_revision(ref):
        revision = ref.partition(":")[0]
        if is_shallow(toplevel):
            raise BaselineError(
                f"{option}={ref}: revision {revision!r} is not in this shallow clone of "
                f"{toplevel}; fetch it first (git fetch --depth=1 origin {revision}, or "
                "actions/checkout with fetch-depth: 0)"
            )
        raise BaselineError(f"{option}={ref}: unknown git revision {revision!r} in {toplevel}")
    existing = available_sets(baselines_dir)
    where = f"in {baselines_dir}" if _is_dir(baselines_dir) else f"({baselines_dir} does not exist)"
    listing = f"existing sets: {', '.join(existing)}" if existing else "no sets are saved yet"
    git_part = "no git revision" if toplevel is not None else "not inside a git repository"
    shallow = ""
    if toplevel is not None and is_shallow(toplevel):
        shallow = (
            f" (this is a shallow clone: if {ref!r} is a branch, fetch it with git fetch "
            f"--depth=1 origin {ref})"
        )
    suggestion = ref if SET_NAME_PATTERN.match(ref) and len(ref) <= SET_NAME_MAX else DEFAULT_SET
    raise BaselineError(
        f"{option}={ref}: no baseline set {ref!r} {where}, {git_part}{shallow} and no path of "
        f"that name; {listing}; create one with pytest --bench-save={suggestion}"
    )
