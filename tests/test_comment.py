"""``torchbench comment`` (issue 47, item 4): one pull-request comment (GitHub) or merge-request
note (GitLab), edited in place on every push. Tested with a stub of the command line it calls
(``gh`` / ``glab``: the same ``api`` arguments, comments kept in a JSON file, listings in pages),
run through the real ``torchbench`` entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_torchbench.comment import MARKER

ROOT = Path(__file__).resolve().parent.parent

STUB = r'''#!PYTHON
"""A stub of `gh api` / `glab api`: comments in $STUB_STATE, every call logged in $STUB_LOG."""
import json, os, re, sys

args = sys.argv[1:]
with open(os.environ["STUB_LOG"], "a") as log:
    log.write(json.dumps([os.path.basename(sys.argv[0]), *args]) + "\n")
assert args[0] == "api", args
state = os.environ["STUB_STATE"]
comments = json.load(open(state)) if os.path.exists(state) else []
path, method, body = args[-1], "GET", None
for i, arg in enumerate(args):
    if arg == "--method":
        method = args[i + 1]
    if arg == "--raw-field":
        body = args[i + 1].partition("=")[2]
if os.environ.get("STUB_FAIL"):
    sys.stderr.write("HTTP 403: Resource not accessible by integration\n")
    sys.exit(1)
if method == "GET":
    assert "--paginate" in args
    for start in range(0, max(len(comments), 1), 2):  # pages of two, as separate JSON arrays
        print(json.dumps(comments[start:start + 2]))
elif method == "POST":
    comments.append({"id": 100 + len(comments), "body": body})
else:
    number = int(re.search(r"/(\d+)$", path).group(1))
    next(c for c in comments if c["id"] == number)["body"] = body
json.dump(comments, open(state, "w"))
'''


@pytest.fixture
def stub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in ("gh", "glab"):
        (folder / tool).write_text(STUB.replace("PYTHON", sys.executable))
        (folder / tool).chmod(0o755)
    state = tmp_path / "comments.json"
    state.write_text(
        json.dumps(
            [
                {"id": 1, "body": "LGTM"},
                {"id": 2, "body": "a human's note"},
                {"id": 3, "body": "another"},
            ]
        )
    )
    monkeypatch.setenv("STUB_STATE", str(state))
    monkeypatch.setenv("STUB_LOG", str(tmp_path / "calls.log"))
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    for name in (
        "GITHUB_ACTIONS",
        "GITHUB_REPOSITORY",
        "GITHUB_REF",
        "GITLAB_CI",
        "CI_PROJECT_ID",
        "CI_MERGE_REQUEST_IID",
    ):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _comment(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest_torchbench", "comment", str(path), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _bodies(stub: Path) -> list[str]:
    return [c["body"] for c in json.loads((stub / "comments.json").read_text())]


def test_github_one_comment_edited_on_every_push(
    stub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_REPOSITORY", "team/project")
    monkeypatch.setenv("GITHUB_REF", "refs/pull/7/merge")
    summary = stub / "bench.md"
    summary.write_text("## torchbench\n\n:x: **failed**: 1 regressed\n")
    first = _comment(summary)
    assert first.returncode == 0 and "created the comment" in first.stdout, first.stderr
    summary.write_text("## torchbench\n\n:white_check_mark: passed\n")
    second = _comment(summary)
    assert second.returncode == 0 and "updated comment 103" in second.stdout, second.stderr
    bodies = _bodies(stub)
    assert len(bodies) == 4 and bodies[:3] == [
        "LGTM",
        "a human's note",
        "another",
    ]  # others untouched
    assert bodies[3] == f"{MARKER}\n## torchbench\n\n:white_check_mark: passed\n"
    calls = [json.loads(line) for line in (stub / "calls.log").read_text().splitlines()]
    assert (
        calls[-1][:4] == ["gh", "api", "--method", "PATCH"]
        and calls[-1][-1] == "repos/team/project/issues/comments/103"
    )
    assert calls[1][-1] == "repos/team/project/issues/7/comments"


def test_gitlab_note_and_a_long_summary_is_cut(stub: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITLAB_CI", "true")
    monkeypatch.setenv("CI_PROJECT_ID", "42")
    monkeypatch.setenv("CI_MERGE_REQUEST_IID", "9")
    summary = stub / "bench.md"
    summary.write_text("x" * 70_000)
    assert _comment(summary).returncode == 0
    assert _comment(summary).returncode == 0
    mine = [b for b in _bodies(stub) if b.startswith(MARKER)]
    assert (
        len(mine) == 1
        and len(mine[0]) < 65_536
        and mine[0].endswith("the job's reports hold the whole summary.*\n")
    )
    calls = [json.loads(line) for line in (stub / "calls.log").read_text().splitlines()]
    assert calls[-1][:4] == ["glab", "api", "--method", "PUT"]
    assert calls[-1][-1] == "projects/42/merge_requests/9/notes/103"


def test_no_pull_request_or_a_refused_call_is_one_line(
    stub: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = stub / "bench.md"
    summary.write_text("## torchbench\n")
    outside = _comment(summary)
    assert outside.returncode == 4 and "not in GitHub Actions or GitLab CI" in outside.stderr
    monkeypatch.setenv("GITHUB_REPOSITORY", "team/project")
    monkeypatch.setenv("GITHUB_REF", "refs/heads/main")
    push = _comment(summary)
    assert push.returncode == 4 and "no pull request here" in push.stderr
    monkeypatch.setenv("STUB_FAIL", "1")
    refused = _comment(summary, "--pr", "7")
    assert refused.returncode == 4, refused.stderr
    assert (
        refused.stderr.count("\n") == 1
        and "HTTP 403: Resource not accessible by integration" in refused.stderr
    )
