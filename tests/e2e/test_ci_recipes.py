"""The CI recipes of docs/ci.md, run as written (issue 25, point 4).

Each recipe is read from the documentation (the fenced block after ``<!-- recipe: NAME -->``), so
the page and the test cannot drift apart. A small runner plays the CI system: it clones a real
"origin" repository into a fixed workspace (as a runner does), sets the variables the CI system
sets, evaluates the ``if:``/``rules:`` conditions, emulates the cache (restore and save of the
path the recipe names, under the key it computes, only when the CI system would save it) and the
artifact upload, and runs every shell command with bash exactly as the page has it. The only
commands it does not run are the installs (``pip install``, ``apt-get``): this interpreter has
the plugin and pytest already, and tests do not download. Anything the runner does not know (an
action, a condition, a ``${{ }}`` inside a shell command) fails the test, so the recipe cannot
grow a piece that nothing runs.

The origin repository: ``main`` with a small library and one benchmark (ops mode: exact, cheap),
a pull request that adds one aten op per call (a regression), one that changes nothing the
benchmark runs, and GitHub's merge refs for both.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CI_DOC = ROOT / "docs" / "ci.md"
README = ROOT / "README.md"
KEY = "test_work.py::test_work"

LIB_BEFORE = "import torch\n\n\ndef work():\n    return torch.ones(4) + 1\n"
LIB_AFTER = "import torch\n\n\ndef work():\n    return (torch.ones(4) + 1).clone()\n"
TEST = (
    "import pytest\nimport mylib\n\n\n@pytest.mark.benchmark\ndef test_work():\n    mylib.work()\n"
)
#: A command the runner leaves out: installing (the interpreter has everything; tests do not
#: download).
INSTALL = re.compile(r"^\s*(sudo\s+)?(apt-get|apt|pip|python -m pip)\b")


# -- reading the recipe from the page ------------------------------------------------------------


def recipe(page: Path, name: str) -> str:
    """The fenced YAML block that follows ``<!-- recipe: NAME -->`` on ``page`` (exactly one)."""
    found = re.findall(
        rf"<!-- recipe: {re.escape(name)} -->\n```yaml\n(.*?)```",
        page.read_text(encoding="utf-8"),
        flags=re.S,
    )
    assert len(found) == 1, (
        f"{page}: expected one block marked 'recipe: {name}', found {len(found)}"
    )
    return found[0]


def _uncomment(line: str) -> str:
    """``line`` without a YAML comment (``#`` at the start or after a blank, outside quotes)."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def _scalar(text: str) -> Any:
    text = text.strip()
    if text.startswith('"'):
        assert text.endswith('"'), text
        return json.loads(text)
    if text.startswith("'"):
        assert text.endswith("'"), text
        return text[1:-1].replace("''", "'")
    if text.startswith("[") and text.endswith("]"):
        return [_scalar(part) for part in text[1:-1].split(",") if part.strip()]
    if text.startswith("{") and text.endswith("}"):
        pairs = [part.partition(":") for part in text[1:-1].split(",") if part.strip()]
        return {key.strip(): _scalar(value) for key, _, value in pairs}
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return {"true": True, "false": False, "null": None, "~": None}.get(text, text)


class MiniYaml:
    """The YAML the recipes use: block mappings and sequences, ``|`` blocks, quoted and flow
    scalars, comments. Anything else is an error naming the line (not a silent misreading)."""

    KEY = re.compile(r"^[\w.-]+:(\s|$)")

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.i = 0

    @classmethod
    def parse(cls, text: str) -> Any:
        parser = cls(text)
        value = parser.block()
        assert parser.peek() is None, f"line {parser.i + 1}: not read: {parser.lines[parser.i]!r}"
        return value

    def peek(self) -> tuple[int, str] | None:
        while self.i < len(self.lines):
            body = _uncomment(self.lines[self.i]).rstrip()
            if body.strip():
                assert "\t" not in body[: len(body) - len(body.lstrip())], (
                    f"line {self.i + 1}: a tab"
                )
                return len(body) - len(body.lstrip(" ")), body.strip()
            self.i += 1
        return None

    def block(self) -> Any:
        head = self.peek()
        if head is None:
            return None
        return (
            self.sequence(head[0])
            if head[1] == "-" or head[1].startswith("- ")
            else self.mapping(head[0])
        )

    def sequence(self, indent: int) -> list[Any]:
        items: list[Any] = []
        while (
            (head := self.peek())
            and head[0] == indent
            and (head[1] == "-" or head[1].startswith("- "))
        ):
            rest = head[1][1:].strip()
            if not rest:
                self.i += 1
                items.append(self.block())
            elif self.KEY.match(rest):  # a mapping that starts on the dash's line
                self.lines[self.i] = " " * (indent + 2) + rest
                items.append(self.mapping(indent + 2))
            else:
                self.i += 1
                items.append(_scalar(rest))
        assert not head or head[0] < indent, f"line {self.i + 1}: unexpected indentation"
        return items

    def mapping(self, indent: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        while (head := self.peek()) and head[0] == indent:
            assert self.KEY.match(head[1]), (
                f"line {self.i + 1}: expected 'key: value', got {head[1]!r}"
            )
            key, _, rest = head[1].partition(":")
            rest = rest.strip()
            self.i += 1
            assert key not in result, f"line {self.i}: '{key}' twice"
            if rest in ("|", "|-"):
                result[key] = self.literal(indent, keep_newline=rest == "|")
            elif rest:
                assert not rest.startswith((">", "&", "*", "!")), (
                    f"line {self.i}: unsupported {rest!r}"
                )
                result[key] = _scalar(rest)
            else:
                nxt = self.peek()
                nested = nxt is not None and (
                    nxt[0] > indent or (nxt[0] == indent and nxt[1].startswith("- "))
                )
                result[key] = self.block() if nested else None
        assert not head or head[0] < indent, f"line {self.i + 1}: unexpected indentation"
        return result

    def literal(self, indent: int, keep_newline: bool) -> str:
        taken: list[str] = []
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if line.strip() and len(line) - len(line.lstrip(" ")) <= indent:
                break
            taken.append(line)
            self.i += 1
        while taken and not taken[-1].strip():
            taken.pop()
        margin = min(len(line) - len(line.lstrip(" ")) for line in taken if line.strip())
        return "\n".join(line[margin:] for line in taken) + ("\n" if keep_newline else "")


# -- conditions and the CI systems' emulation -----------------------------------------------------

_TOKEN = re.compile(
    r"\s+|'[^']*'|\"[^\"]*\"|&&|\|\||==|!=|!|\(|\)|\$\{?\w+\}?|[A-Za-z_][\w.\-]*(?:\(\))?"
)


def evaluate(expression: str, lookup: Callable[[str], Any]) -> Any:
    """A GitHub ``if:`` or a GitLab ``rules: if:``: string literals, ``==``, ``!=``, ``!``, ``&&``,
    ``||``, parentheses; every name (``github.event_name``, ``always()``, ``$CI_X``) through
    ``lookup``, which fails on names it does not know."""
    expression = expression.strip()
    if expression.startswith("${{") and expression.endswith("}}"):
        expression = expression[3:-2]
    python: list[str] = []
    pos = 0
    while pos < len(expression):
        match = _TOKEN.match(expression, pos)
        assert match, f"cannot read the condition {expression!r} at {expression[pos:]!r}"
        token = match.group(0)
        pos = match.end()
        if token.isspace():
            continue
        if token[0] in "'\"":
            python.append(repr(token[1:-1]))
        else:
            python.append(
                {
                    "&&": " and ",
                    "||": " or ",
                    "!": " not ",
                    "==": "==",
                    "!=": "!=",
                    "(": "(",
                    ")": ")",
                }.get(token)
                or repr(lookup(token))
            )
    return eval("".join(python), {"__builtins__": {}})  # noqa: S307 - built from repr()s and operators


def substitute(text: str, lookup: Callable[[str], Any]) -> str:
    """GitHub's ``${{ expression }}`` in a ``with:`` value."""
    return re.sub(r"\$\{\{(.*?)\}\}", lambda m: str(evaluate(m.group(1), lookup)), text)


@dataclasses.dataclass
class Job:
    """What one emulated CI job did: its exit status, log, the step that failed, and what it
    left."""

    status: int = 0
    log: str = ""
    failed_step: str | None = None
    ran: list[str] = dataclasses.field(default_factory=list)
    artifacts: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    cache_hit: bool | None = None
    summary: str = ""


def _fresh(workspace: Path) -> None:
    """An empty workspace at the same path every job, as a runner's."""
    shutil.rmtree(workspace.parent, ignore_errors=True)
    workspace.mkdir(parents=True)


def _clone(origin: Path, workspace: Path, ref: str, depth: int) -> None:
    """Clone into the (empty) workspace; ``depth`` 0 is the full history."""
    shallow = ["--depth", str(depth), "--branch", ref] if depth else []
    subprocess.run(["git", "clone", "-q", *shallow, f"file://{origin}", str(workspace)], check=True)
    if not depth:
        subprocess.run(
            ["git", "checkout", "-q", "--detach", f"origin/{ref}"], cwd=workspace, check=True
        )


def _shell(
    script: str, workspace: Path, env: dict[str, str], timeout: float = 400
) -> tuple[int, str]:
    path = workspace.parent / "step.sh"
    path.write_text(script, encoding="utf-8")
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(path)],
        cwd=workspace,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout


def _installs_only(command: str) -> bool:
    parts = [part for part in re.split(r"&&|\n", command) if part.strip()]
    return bool(parts) and all(INSTALL.match(part) for part in parts)


def _base_env(workspace: Path) -> dict[str, str]:
    """This process's environment (PYTHONPATH on this checkout, from ``bench_env``), with this
    interpreter's scripts first on PATH, as ``setup-python`` or an image's Python puts them."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["HOME"] = str(workspace.parent)
    for name in (
        "PYTEST_ADDOPTS",
        "GITHUB_ENV",
        "GITHUB_STEP_SUMMARY",
        "GITHUB_ACTIONS",
        "GITLAB_CI",
    ):
        env.pop(name, None)
    return env


def run_github(
    workflow: dict[str, Any],
    event: str,
    origin: Path,
    ref: str,
    workspace: Path,
    cache: dict[str, Path],
    variables: dict[str, str],
    name: str | None = None,
    matrix: dict[str, Any] | None = None,
    index: int = 0,
) -> Job:
    """Job ``name`` (the only one by default) of ``workflow`` on ``event``, checking out ``ref`` of
    ``origin`` as actions/checkout would; ``matrix``/``index``: one combination of its matrix.
    Artifacts go to (and come from) a folder beside the workspace, shared by the jobs of a run."""
    job = Job()
    triggers = workflow.get("on") or workflow.get(True)  # a YAML 1.1 reader would make 'on' True
    assert event in triggers, f"the workflow does not run on {event}"
    if name is None:
        ((name, spec),) = workflow["jobs"].items()
    else:
        spec = workflow["jobs"][name]
    store = (
        workspace.parent.parent / f"artifacts-{ref.replace('/', '-')}"
    )  # one workflow run per ref here
    summary = workspace.parent.parent / f"summary-{ref.replace('/', '-')}-{name}-{index}.md"
    summary.unlink(missing_ok=True)
    _fresh(workspace)
    env = {
        **_base_env(workspace),
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": event,
        "GITHUB_WORKSPACE": str(workspace),
        "RUNNER_OS": "Linux",
        "GITHUB_STEP_SUMMARY": str(summary),
        **variables,
    }
    contexts: dict[str, Any] = {
        "github.event_name": event,
        "runner.os": "Linux",
        "github.token": "job-token",
        "github.base_ref": variables.get("GITHUB_BASE_REF", ""),
        "strategy.job-index": index,
        **{f"matrix.{k}": v for k, v in (matrix or {}).items()},
    }
    outputs: dict[str, dict[str, str]] = {}
    post_saves: list[tuple[str, str]] = []

    def lookup(token: str) -> Any:
        if token == "always()":
            return True
        if token in ("success()", "failure()"):
            return (job.failed_step is None) == (token == "success()")
        if token.startswith("env."):
            return env.get(token[4:], "")
        if token.startswith("steps."):
            step_id, _, output = token[6:].partition(".outputs.")
            return outputs.get(step_id, {}).get(output, "")
        assert token in contexts, f"the runner does not know {token!r}"
        return contexts[token]

    for key, value in {**(workflow.get("env") or {}), **(spec.get("env") or {})}.items():
        env[key] = substitute(str(value), lookup)
    if "if" in spec:
        assert evaluate(str(spec["if"]), lookup), f"job {name} would not run"
    for step in spec["steps"]:
        title = step.get("name") or step.get("uses") or step["run"]
        condition = str(step.get("if", "success()"))
        if not re.search(r"\b(always|success|failure|cancelled)\(\)", condition):
            condition = f"success() && ({condition})"
        if not evaluate(condition, lookup):
            continue
        job.ran.append(title)
        given = {k: substitute(str(v), lookup) for k, v in (step.get("with") or {}).items()}
        uses = step.get("uses", "")
        if "run" in step:
            command = step["run"]
            assert "${{" not in command, f"{title}: an expression inside a shell command"
            if _installs_only(command):
                job.log += f"--- {title}: not run here (installs)\n"
                continue
            env_file = workspace.parent / "github_env"
            env_file.write_text("")
            step_env = {
                **env,
                "GITHUB_ENV": str(env_file),
                **{k: substitute(str(v), lookup) for k, v in (step.get("env") or {}).items()},
            }
            status, output = _shell(command, workspace, step_env)
            job.log += f"--- {title} (exit {status})\n{output}"
            for line in env_file.read_text().splitlines():
                key, sep, value = line.partition("=")
                assert sep and "<<" not in key, f"{title}: GITHUB_ENV line {line!r}"
                env[key] = value
            if status != 0:
                job.status, job.failed_step = status, title
        elif uses.startswith("actions/checkout@"):
            _clone(origin, workspace, ref, int(given.get("fetch-depth", 1)))
        elif uses.startswith("actions/setup-python@"):
            pass  # this interpreter plays the runner's Python
        elif uses.split("@")[0] in ("actions/cache", "actions/cache/restore"):
            hit = given["key"] in cache
            if hit:
                shutil.copytree(cache[given["key"]], workspace / given["path"], dirs_exist_ok=True)
            job.cache_hit = hit
            job.log += f"--- {title}: cache {'hit' if hit else 'miss'} for {given['key']}\n"
            outputs[step.get("id", "")] = {"cache-hit": "true" if hit else "false"}
            if uses.startswith("actions/cache@") and not hit:
                post_saves.append(
                    (given["key"], given["path"])
                )  # saved in the post step, on success only
        elif uses.startswith("actions/cache/save@"):
            _save_cache(cache, given["key"], workspace / given["path"], workspace.parent.parent)
        elif uses.startswith("actions/upload-artifact@"):
            found = sorted(p for p in workspace.glob(given["path"]) if p.exists())
            job.artifacts[given["name"]] = [p.relative_to(workspace).as_posix() for p in found]
            target = store / given["name"]
            assert not target.exists(), f"artifact {given['name']} uploaded twice in one run"
            target.mkdir(parents=True)
            for path in found:  # a folder's contents, or the files, at the artifact's top
                if path.is_dir():
                    shutil.copytree(path, target, dirs_exist_ok=True)
                else:
                    shutil.copy(path, target / path.name)
        elif uses.startswith("actions/download-artifact@"):
            assert "merge-multiple" not in given and "name" not in given, (
                "the runner emulates pattern + path"
            )
            for artifact in sorted(store.glob(given["pattern"])):  # each into path/<artifact name>/
                shutil.copytree(artifact, workspace / given["path"] / artifact.name)
        else:
            raise AssertionError(f"the runner does not know the action {uses!r}")
    if job.failed_step is None:
        for key, path in post_saves:
            _save_cache(cache, key, workspace / path, workspace.parent.parent)
    job.summary = summary.read_text(encoding="utf-8") if summary.exists() else ""
    return job


def _save_cache(cache: dict[str, Path], key: str, path: Path, store: Path) -> None:
    """As the CI systems do: an existing key is never overwritten, a missing path saves nothing."""
    if key in cache or not path.exists():
        return
    target = store / "cache" / re.sub(r"[^\w.-]", "_", key)
    shutil.copytree(path, target)
    cache[key] = target


def run_gitlab(
    config: dict[str, Any],
    name: str,
    origin: Path,
    ref: str,
    workspace: Path,
    cache: dict[str, Path],
    variables: dict[str, str],
) -> Job | None:
    """Job ``name`` of ``.gitlab-ci.yml`` in a pipeline with ``variables``; None when its rules
    leave it out of the pipeline."""
    spec = config[name]
    env = {
        **_base_env(workspace),
        "CI": "true",
        "GITLAB_CI": "true",
        "CI_PROJECT_DIR": str(workspace),
        **variables,
    }
    for key, value in {**(config.get("variables") or {}), **(spec.get("variables") or {})}.items():
        env[key] = str(value)

    def lookup(token: str) -> Any:
        assert token.startswith("$"), f"the runner does not know {token!r}"
        return env.get(token.strip("${}"))  # an undefined variable equals no string

    rules = spec.get("rules")
    if rules is not None and not any(evaluate(rule["if"], lookup) for rule in rules):
        return None
    job = Job()
    _fresh(workspace)
    _clone(origin, workspace, ref, int(env.get("GIT_DEPTH", 20)))
    expand = lambda text: re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), str(text))  # noqa: E731
    cached = spec.get("cache")
    if cached:
        key = expand(cached["key"])
        job.cache_hit = key in cache
        for path in cached["paths"]:
            if job.cache_hit:
                shutil.copytree(cache[key], workspace / path, dirs_exist_ok=True)
        job.log += f"--- cache {'hit' if job.cache_hit else 'miss'} for {key}\n"
    commands = [line for line in spec["script"] if not _installs_only(line)]
    assert len(commands) < len(spec["script"]), "the recipe installs the project and the plugin"
    status, output = _shell("\n".join(commands) + "\n", workspace, env)
    job.status, job.log = status, job.log + output
    job.failed_step = "script" if status else None
    if cached and (
        cached.get("when") == "always"
        or (status == 0 and cached.get("when", "on_success") == "on_success")
    ):
        for path in cached["paths"]:
            _save_cache(cache, expand(cached["key"]), workspace / path, workspace.parent.parent)
    artifacts = spec.get("artifacts")
    if artifacts and (artifacts.get("when") == "always" or status == 0):
        job.artifacts["artifacts"] = sorted(
            p for p in artifacts["paths"] if (workspace / p).exists()
        )
    return job


# -- the repository --------------------------------------------------------------------------------


@pytest.fixture
def origin(pytester: pytest.Pytester, git: Callable[..., str], bench_env: None) -> Path:
    """``main``: a library and one benchmark; ``slow``: one more aten op per call; ``notes``: a
    change the benchmark does not run; ``pull/N/merge``: GitHub's merge commits of both."""
    root = pytester.path / "origin"
    (root / "mylib").mkdir(parents=True)
    (root / "mylib/__init__.py").write_text(LIB_BEFORE)
    (root / "test_work.py").write_text(TEST)
    (root / ".gitignore").write_text(".torchbench/\n__pycache__/\n.pytest_cache/\nbench.*\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "mylib")
    git(root, "checkout", "-q", "-b", "slow")
    (root / "mylib/__init__.py").write_text(LIB_AFTER)
    git(root, "commit", "-q", "-am", "one more op per call")
    git(root, "checkout", "-q", "-b", "notes", "main")
    (root / "NOTES.md").write_text("notes\n")
    git(root, "add", "NOTES.md")
    git(root, "commit", "-q", "-m", "notes")
    for number, branch in ((1, "slow"), (2, "notes")):
        git(root, "checkout", "-q", "--detach", "main")
        git(root, "merge", "-q", "--no-ff", branch, "-m", f"Merge {branch} into main")
        git(root, "branch", f"pull/{number}/merge")
    git(root, "checkout", "-q", "main")
    git(
        root, "config", "receive.denyCurrentBranch", "updateInstead"
    )  # a server takes the record's push
    return root


GH_STUB = r'''#!PYTHON
"""`gh api` as the recipe calls it: comments per pull request in $STUB_STATE, with the token
seen."""
import json, os, re, sys
args = sys.argv[1:]
state = os.environ["STUB_STATE"]
comments = json.load(open(state)) if os.path.exists(state) else []
method = args[args.index("--method") + 1] if "--method" in args else "GET"
body = next((a.partition("=")[2] for a in args if a.startswith("body=")), None)
path = args[-1]
if method == "GET":
    issue = re.search(r"issues/(\d+)/comments$", path).group(1)
    print(json.dumps([{"id": c["id"], "body": c["body"]} for c in comments if c["issue"] == issue]))
elif method == "POST":
    issue = re.search(r"issues/(\d+)/comments$", path).group(1)
    comments.append(
        {"id": len(comments) + 1, "issue": issue, "body": body, "token": os.environ.get("GH_TOKEN")}
    )
else:
    number = int(path.rsplit("/", 1)[1])
    next(c for c in comments if c["id"] == number).update(
        body=body, token=os.environ.get("GH_TOKEN")
    )
json.dump(comments, open(state, "w"))
'''


def _gh_stub(folder: Path) -> dict[str, str]:
    """A `gh` on PATH for the recipe's comment step; the variables that point the runner at it."""
    folder.mkdir(parents=True)
    (folder / "gh").write_text(GH_STUB.replace("PYTHON", sys.executable))
    (folder / "gh").chmod(0o755)
    return {
        "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}",
        "STUB_STATE": str(folder / "comments.json"),
    }


def _git_log(origin: Path) -> str:
    return subprocess.run(
        ["git", "log", "--format=%s", "main"],
        cwd=origin,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _sha(origin: Path, ref: str) -> str:
    return subprocess.run(
        ["git", "rev-parse", ref], cwd=origin, capture_output=True, text=True, check=True
    ).stdout.strip()


# -- the recipes -----------------------------------------------------------------------------------


def test_the_readme_shows_an_excerpt_of_the_tested_github_recipe() -> None:
    """The README's CI section is the tested recipe, shortened: its lines are the recipe's lines,
    in order, with ``...`` where lines were left out."""
    found = re.findall(
        r"<!-- recipe excerpt: github-actions -->\n```yaml\n(.*?)```",
        README.read_text(encoding="utf-8"),
        flags=re.S,
    )
    assert len(found) == 1
    whole = recipe(CI_DOC, "github-actions").splitlines()
    position = 0
    for line in found[0].splitlines():
        if line.strip() == "...":
            continue
        assert line in whole[position:], (
            f"README line not in docs/ci.md's recipe (or out of order): {line!r}"
        )
        position = whole.index(line, position) + 1


def test_github_actions_recipe(origin: Path, pytester: pytest.Pytester) -> None:
    """A pull request with a regression fails the job naming the benchmark (log, job summary,
    reports uploaded) and caches its measured base although the job failed; an unchanged pull
    request on the same base passes from the cache; a push to main saves baselines/main."""
    workflow = MiniYaml.parse(recipe(CI_DOC, "github-actions"))
    workspace = pytester.path / "runner" / "repo"
    cache: dict[str, Path] = {}
    gh = _gh_stub(pytester.path / "stub")
    pull = {
        "GITHUB_BASE_REF": "main",
        "GITHUB_REF": "refs/pull/1/merge",
        "GITHUB_HEAD_REF": "slow",
        "GITHUB_REPOSITORY": "team/project",
        **gh,
    }
    main = _sha(origin, "main")

    slow = run_github(workflow, "pull_request", origin, "pull/1/merge", workspace, cache, pull)
    assert slow.status == 1 and slow.failed_step == "gate", slow.log
    assert f"FAILED {KEY}" in slow.log and "aten::clone 0 -> 1 per call" in slow.log, slow.log
    assert f"the base {main[:12]}: measured in this job" in slow.log, slow.log
    assert slow.cache_hit is False and list(cache) == [f"torchbench-base-Linux-{main}"], slow.log
    assert "test\\_work.py::test\\_work" in slow.summary and "aten::clone" in slow.summary, (
        slow.summary
    )
    assert slow.artifacts == {"benchmarks": ["bench.html", "bench.json", "bench.md"]}, slow.log
    assert "record" not in slow.ran

    notes = run_github(
        workflow,
        "pull_request",
        origin,
        "pull/2/merge",
        workspace,
        cache,
        {**pull, "GITHUB_REF": "refs/pull/2/merge", "GITHUB_HEAD_REF": "notes"},
    )
    assert notes.status == 0, notes.log
    assert notes.cache_hit is True and f"the base {main[:12]}: taken from the cache" in notes.log, (
        notes.log
    )
    assert "measured in this job" not in notes.log and "compared with nothing" not in notes.log
    assert "no changes beyond the limits" in notes.log, notes.log
    print(notes.log)  # the cache hit, as the job's log says it
    # one comment per pull request, edited in place when the pull request is pushed again
    shutil.rmtree(pytester.path / "artifacts-pull-1-merge")  # another workflow run of the same ref
    again = run_github(workflow, "pull_request", origin, "pull/1/merge", workspace, cache, pull)
    assert again.status == 1, again.log
    comments = json.loads(Path(gh["STUB_STATE"]).read_text())
    assert [c["issue"] for c in comments] == ["1", "2"], comments
    assert "aten::clone" in comments[0]["body"] and "no changes" not in comments[0]["body"]
    assert [c["token"] for c in comments] == ["job-token", "job-token"]

    push = run_github(
        workflow,
        "push",
        origin,
        "main",
        workspace,
        cache,
        {"GITHUB_REF": "refs/heads/main", "GITHUB_REF_NAME": "main", "GITHUB_SHA": main},
    )
    assert push.status == 0, push.log
    assert "gate" not in push.ran and "record" in push.ran, push.ran
    saved = json.loads((workspace / "baselines/main/test_work.json").read_text(encoding="utf-8"))
    assert KEY in json.dumps(saved), saved
    # the set is committed and pushed: origin keeps the history, and says it saved
    assert f"benchmark baselines of {main} [skip ci]" in _git_log(origin), push.log
    assert "saved as baseline set 'main'" in push.summary, push.summary
    again = run_github(
        workflow,
        "push",
        origin,
        "main",
        workspace,
        cache,
        {
            "GITHUB_REF": "refs/heads/main",
            "GITHUB_REF_NAME": "main",
            "GITHUB_SHA": _sha(origin, "main"),
        },
    )
    assert again.status == 0, again.log  # the same counts: nothing to commit, nothing pushed
    assert _git_log(origin).count("[skip ci]") == 1


@pytest.mark.slow
def test_gitlab_ci_recipe(origin: Path, pytester: pytest.Pytester) -> None:
    """A merge request with a regression fails the job naming the benchmark, keeps its reports
    and its measured base (cache ``when: always``); an unchanged one passes from the cache; a
    pipeline on the default branch saves baselines/main and runs no gate."""
    config = MiniYaml.parse(recipe(CI_DOC, "gitlab-ci"))
    workspace = pytester.path / "runner" / "repo"
    cache: dict[str, Path] = {}
    main = _sha(origin, "main")
    request = {
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_DEFAULT_BRANCH": "main",
        "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
        "CI_MERGE_REQUEST_DIFF_BASE_SHA": main,
    }

    assert (
        run_gitlab(config, "benchmarks-record", origin, "slow", workspace, cache, request) is None
    )
    slow = run_gitlab(
        config,
        "benchmarks",
        origin,
        "slow",
        workspace,
        cache,
        {**request, "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "slow"},
    )
    assert slow is not None and slow.status == 1, slow and slow.log
    assert f"FAILED {KEY}" in slow.log and "aten::clone 0 -> 1 per call" in slow.log, slow.log
    assert slow.cache_hit is False and list(cache) == [f"torchbench-base-{main}"], slow.log
    assert slow.artifacts == {"artifacts": ["bench.html", "bench.json", "bench.md"]}, slow.log
    assert "test\\_work.py::test\\_work" in (workspace / "bench.md").read_text(encoding="utf-8")

    notes = run_gitlab(
        config,
        "benchmarks",
        origin,
        "notes",
        workspace,
        cache,
        {**request, "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "notes"},
    )
    assert notes is not None and notes.status == 0, notes and notes.log
    assert notes.cache_hit is True and f"the base {main[:12]}: taken from the cache" in notes.log, (
        notes.log
    )
    print(notes.log)

    pipeline = {
        "CI_PIPELINE_SOURCE": "push",
        "CI_DEFAULT_BRANCH": "main",
        "CI_COMMIT_BRANCH": "main",
    }
    assert run_gitlab(config, "benchmarks", origin, "main", workspace, cache, pipeline) is None
    record = run_gitlab(config, "benchmarks-record", origin, "main", workspace, cache, pipeline)
    assert record is not None and record.status == 0, record and record.log
    assert record.artifacts == {"artifacts": ["baselines/main"]}
    assert KEY in (workspace / "baselines/main/test_work.json").read_text(encoding="utf-8")


def test_the_yaml_reader_reads_what_the_recipes_use_and_refuses_the_rest() -> None:
    """The reader is small; it must not misread silently."""
    text = (
        "a:\n  b: [x, 'y']   # c\n  s:\n    - k: 1\n      l: \"v # w\"\n    - plain\n  r: |\n"
        "    echo 1\n    # kept\n  o:\n"
    )
    assert MiniYaml.parse(text) == {
        "a": {
            "b": ["x", "y"],
            "s": [{"k": 1, "l": "v # w"}, "plain"],
            "r": "echo 1\n# kept\n",
            "o": None,
        }
    }
    for bad in ("a: 1\n   b: 2\n", "a: >\n  x\n", "a: 1\na: 2\n", "- x\n - y\n"):
        with pytest.raises(AssertionError):
            MiniYaml.parse(bad)
    assert evaluate("always() && x != 'y'", {"always()": True, "x": "z"}.__getitem__) is True
    assert (
        evaluate('$A == "b" && $C == $D', {"$A": "b", "$C": None, "$D": "d"}.__getitem__) is False
    )


SHARD_LEFT = (
    "import pytest, torch\n\n\n@pytest.mark.benchmark\ndef test_add():\n    torch.ones(4) + 1\n"
)
SHARD_RIGHT = (
    "import pytest, torch\n\n\n@pytest.mark.benchmark\ndef test_mul():\n    torch.ones(4) * 2\n"
)
SHARD_RIGHT_SLOW = (
    "import pytest, torch\n\n\n@pytest.mark.benchmark\ndef test_mul():\n"
    "    (torch.ones(4) * 2).clone()\n"
)


@pytest.mark.slow
def test_github_actions_shards_recipe(
    pytester: pytest.Pytester, git: Callable[..., str], bench_env: None
) -> None:
    """The matrix recipe: each shard gates its part against the measured merge base (the one with
    the regression fails, the other passes), each caches its own base, and the merge job fails
    with the benchmark named in its log and job summary, and uploads the merged reports."""
    root = pytester.path / "origin"
    for folder, text in (
        ("tests/bench_left/test_left.py", SHARD_LEFT),
        ("tests/bench_right/test_right.py", SHARD_RIGHT),
    ):
        (root / folder).parent.mkdir(parents=True, exist_ok=True)
        (root / folder).write_text(text)
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (root / ".gitignore").write_text(
        ".torchbench/\n__pycache__/\n.pytest_cache/\nbench.*\nshard.json\nshards/\n"
    )
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "suite")
    git(root, "checkout", "-q", "-b", "slow")
    (root / "tests/bench_right/test_right.py").write_text(SHARD_RIGHT_SLOW)
    git(root, "commit", "-q", "-am", "one more op per call")
    git(root, "checkout", "-q", "--detach", "main")
    git(root, "merge", "-q", "--no-ff", "slow", "-m", "Merge slow into main")
    git(root, "branch", "pull/1/merge")
    workflow = MiniYaml.parse(recipe(CI_DOC, "github-actions-shards"))
    workspace = pytester.path / "runner" / "repo"
    cache: dict[str, Path] = {}
    pull = {"GITHUB_BASE_REF": "main", "GITHUB_REF": "refs/pull/1/merge", "GITHUB_HEAD_REF": "slow"}
    main = _sha(root, "main")

    matrix = workflow["jobs"]["shard"]["strategy"]["matrix"]["shard"]
    shards = [
        run_github(
            workflow,
            "pull_request",
            root,
            "pull/1/merge",
            workspace,
            cache,
            pull,
            "shard",
            {"shard": value},
            index,
        )
        for index, value in enumerate(matrix)
    ]
    assert [job.status for job in shards] == [0, 1], "\n".join(job.log for job in shards)
    assert "FAILED tests/bench_right/test_right.py::test_mul" in shards[1].log, shards[1].log
    assert sorted(cache) == [f"torchbench-base-Linux-{i}-{main}" for i in (0, 1)], cache
    assert [job.artifacts for job in shards] == [
        {"shard-0": ["shard.json"]},
        {"shard-1": ["shard.json"]},
    ]

    merged = run_github(
        workflow, "pull_request", root, "pull/1/merge", workspace, cache, pull, "merge"
    )
    assert merged.status == 1 and merged.failed_step == "merge", merged.log
    assert "merged 2 shard(s): 2 benchmark result(s)" in merged.log, merged.log
    assert "tests/bench_right/test_right.py::test_mul: ops" in merged.log, merged.log
    assert (
        "test\\_right.py::test\\_mul" in merged.summary
        and "test\\_left.py::test\\_add" in merged.summary
    )
    assert merged.artifacts == {"benchmarks": ["bench.html", "bench.json", "bench.md"]}, merged.log
