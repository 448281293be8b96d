"""``torchbench comment SUMMARY.md``: the Markdown summary as one pull-request comment (GitHub) or
merge-request note (GitLab), edited in place on every push instead of added again.

How: through the CI system's own command line, which the runner has and which holds the token
(``gh api`` with ``GH_TOKEN`` on GitHub Actions, ``glab api`` with ``GITLAB_TOKEN`` on GitLab CI):
list the comments, find ours by a marker on its first line, then update it or create it. The
summary already leads with the changes and stays under GitHub's 65,536 characters
(``reports/markdown.py``); a longer file is cut, and says so. Where the pull request comes from:
``--pr``, else the CI system's variables (``GITHUB_REF`` ``refs/pull/N/merge`` and
``GITHUB_REPOSITORY``; ``CI_PROJECT_ID`` and ``CI_MERGE_REQUEST_IID``).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .common.text import safe_text

__all__ = ["MARKER", "CommentError", "Target", "target_from", "post"]

#: The first line of our comment: how the next push finds it among the others.
MARKER = "<!-- torchbench summary: edited in place on every push -->"
#: GitHub refuses a comment over 65,536 characters; GitLab notes allow more, the same cut serves
#: both.
MOST = 65_000

Run = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


class CommentError(Exception):
    """The comment could not be posted: one line saying why and what to do."""


@dataclasses.dataclass(frozen=True)
class Target:
    """Where the comment goes, through which command line."""

    tool: str  # "gh" or "glab"
    comments: str  # the API path listing the comments (and creating one)
    one: str  # the API path of one comment, with {id}
    update: str  # the HTTP method that edits one


def target_from(env: Mapping[str, str], pr: str | None = None) -> Target:
    """The pull or merge request of this CI job (``pr`` overrides the number)."""
    if env.get("GITHUB_ACTIONS") or env.get("GITHUB_REPOSITORY"):
        repo = env.get("GITHUB_REPOSITORY", "")
        found = re.fullmatch(r"refs/pull/(\d+)/(merge|head)", env.get("GITHUB_REF", ""))
        number = pr or (found.group(1) if found else "")
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", repo) or not number.isdigit():
            raise CommentError(
                "comment: no pull request here (GITHUB_REF is not refs/pull/N/merge): run it on "
                "pull_request events, or name one with --pr N"
            )
        return Target(
            "gh",
            f"repos/{repo}/issues/{number}/comments",
            f"repos/{repo}/issues/comments/{{id}}",
            "PATCH",
        )
    if env.get("GITLAB_CI"):
        project, number = env.get("CI_PROJECT_ID", ""), pr or env.get("CI_MERGE_REQUEST_IID", "")
        if not project.isdigit() or not number.isdigit():
            raise CommentError(
                "comment: no merge request here (CI_MERGE_REQUEST_IID is not set): run it in a "
                "merge request pipeline, or name one with --pr N"
            )
        base = f"projects/{project}/merge_requests/{number}/notes"
        return Target("glab", base, base + "/{id}", "PUT")
    raise CommentError(
        "comment: not in GitHub Actions or GitLab CI: nothing tells which pull request to comment "
        "on"
    )


def _documents(text: str) -> list[Any]:
    """Every JSON value in ``text`` (a paginated listing prints one array per page)."""
    decoder, found, pos = json.JSONDecoder(), [], 0
    while pos < len(text):
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        value, pos = decoder.raw_decode(text, pos)
        found.append(value)
    return found


def _call(run: Run, target: Target, args: Sequence[str]) -> str:
    done = run([target.tool, "api", *args])
    if done.returncode != 0:
        why = (done.stderr or done.stdout or "").strip().splitlines()
        raise CommentError(
            f"comment: `{target.tool} api {args[-1] if args else ''}` failed "
            f"(exit {done.returncode}): {safe_text(why[-1] if why else 'no output')}"
        )
    return done.stdout


def _run(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )


def post(summary: str, target: Target, run: Run | None = None) -> str:
    """Create or update our comment with ``summary``; what was done, in a few words."""
    if run is None:
        if shutil.which(target.tool) is None:
            raise CommentError(
                f"comment: `{target.tool}` is not on PATH: it is on GitHub's and GitLab's hosted "
                "runners; install it elsewhere"
            )
        run = _run
    if len(summary) > MOST:
        summary = (
            summary[:MOST]
            + "\n\n*Cut to fit a comment: the job's reports hold the whole summary.*\n"
        )
    body = f"{MARKER}\n{summary}"
    try:
        listed = _documents(_call(run, target, ["--paginate", target.comments]))
    except ValueError as exc:
        raise CommentError(
            f"comment: `{target.tool} api {target.comments}` did not answer JSON ({exc})"
        ) from None
    ours = [
        c
        for page in listed
        for c in (page if isinstance(page, list) else [page])
        if isinstance(c, dict) and str(c.get("body", "")).startswith(MARKER)
    ]
    if ours:
        number = ours[0].get("id")
        _call(
            run,
            target,
            [
                "--method",
                target.update,
                "--raw-field",
                f"body={body}",
                target.one.format(id=number),
            ],
        )
        return f"updated comment {number}"
    _call(run, target, ["--method", "POST", "--raw-field", f"body={body}", target.comments])
    return "created the comment"
