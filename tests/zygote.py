"""A fork server for the end-to-end tests: ``python -m pytest`` runs without paying for Python
and torch.

Every end-to-end test starts real pytest runs. Started as fresh processes, each one pays for
the interpreter and ``import torch`` (seconds each; most of a small run), hundreds of times
over the suite. This process imports torch, numpy and pytest once, then forks a child per run:
the child is a fresh copy of that state (nothing one run does reaches the next), chdirs,
takes the run's environment, sys.path and argv as ``python -m pytest`` would have them, points
its file descriptors 0-2 where the run's output goes, and runs pytest to the end: it exits
through the interpreter's normal shutdown, so atexit handlers and non-daemon threads behave
as in a fresh process. The plugin itself is not imported here: its modules are imported by
each child, with the child's environment and working directory, as in a real run.

What the interpreter reads once at start (``PYTHONHASHSEED``, ``PYTHONMALLOC``) and what torch
and its libraries read at import (``OMP_NUM_THREADS`` for the thread pools' defaults,
``TORCH_LOGS``) a child gets from its server: the test process keeps one server per combination
of those variables (``IMPORT_TIME_VARIABLES`` in ``tests/conftest.py``), started with them.
What no server gives (``-X`` options, an interpreter other than this one) needs a real process,
and the tests that need it start one. Counted workers, xdist workers and git-worktree base runs
are real processes in any case: the plugin starts them.

Protocol (one JSON object per line): the test process writes ``{"argv", "cwd", "env",
"stdout", "stderr"}``; this process answers ``{"pid": N}`` when the child runs and then
``{"returncode": N}`` (negative: killed by that signal). Single-threaded by design (OpenBLAS is
told to start no threads before numpy loads), so forking is safe.
"""

from __future__ import annotations

import json
import os
import runpy
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's BLAS would start a thread at import

import numpy  # noqa: E402,F401
import torch  # noqa: E402,F401
import torch.profiler  # noqa: E402,F401
import torch.utils.benchmark  # noqa: E402,F401

# sys.path as this interpreter built it, less what is specific to this process: the script's
# folder (python -m puts the working directory there instead) and PYTHONPATH's entries (each
# run has its own PYTHONPATH, put in front as the interpreter would).
_OWN_PYTHONPATH = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
_BASE_PATH = [p for p in sys.path[1:] if p not in _OWN_PYTHONPATH]


def _child(request: dict) -> None:
    """Become ``python -m pytest ARGS`` for ``request``; never returns (exits through
    SystemExit)."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    pythonpath = [
        os.path.abspath(p) for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p
    ]
    sys.path[:] = [os.getcwd(), *pythonpath, *_BASE_PATH]
    sys.path_importer_cache.clear()
    stdin = os.open(os.devnull, os.O_RDONLY)
    stdout = os.open(request["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    stderr = os.open(request["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    for source, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(source, target)
        os.close(source)
    # Fresh text streams over the new descriptors (the server's were pipes, with their buffers).
    sys.stdin = open(0, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False)  # noqa: SIM115
    # As `python -m pytest` runs it (runpy sets argv[0] and __main__); it ends in SystemExit.
    sys.argv = ["-m", *request["argv"]]
    runpy.run_module("pytest", run_name="__main__", alter_sys=True)
    raise SystemExit(0)


def serve() -> None:
    """Answer requests from stdin until it closes."""
    channel_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
    channel_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    # The server's own fds 0 and 1 are the channel's; children replace them, the server keeps
    # its duplicates. fd 2 stays the test process's stderr for the server's own errors.
    for line in channel_in:
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            channel_in.close()
            channel_out.close()
            _child(request)
        channel_out.write(json.dumps({"pid": pid}) + "\n")
        channel_out.flush()
        _, status = os.waitpid(pid, 0)
        channel_out.write(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}) + "\n")
        channel_out.flush()


if __name__ == "__main__":
    serve()
