"""How the counted process is launched, so that every launch is identical by construction.

Why: with PYTHONHASHSEED fixed, instruction counts still move by tenths of a percent with the
heap and stack layout, which depend on the environment's size, the thread variables, the
allocator and PYTHONMALLOC. A serial run, a re-exec'd pytest and an xdist worker that all build
their command and environment here get the same counts by construction rather than by luck.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from .client_requests import UnsupportedPlatform

__all__ = [
    "ValgrindUnavailable",
    "check_valgrind",
    "valgrind_argv",
    "out_file_pattern",
    "counted_environment",
    "counting_fingerprint",
    "ENV_PAD_VARIABLE",
]

#: Removed from the user's environment: each changes how every allocation or call is executed
#: (so it moves counts) or how valgrind counts. Everything else is passed through unchanged.
#: - LD_PRELOAD, PYTHONMALLOC: replaced by the counting allocator (or removed without one);
#: - PYTHONMALLOCSTATS, PYTHONTRACEMALLOC, PYTHONDEVMODE: allocator hooks and debug allocators;
#: - PYTHONPERFSUPPORT: perf trampolines around every Python call (3.12+);
#: - GLIBC_TUNABLES, MALLOC_*: glibc's allocator and the CPU features its string functions use;
#: - VALGRIND_OPTS: valgrind's options are the launch's (a memcheck option would also stop
#:   callgrind from starting);
#: - PYTEST_CURRENT_TEST: set by an outer pytest, different for every test that starts a run.
_DROPPED = frozenset(
    {
        "LD_PRELOAD",
        "PYTHONMALLOC",
        "PYTHONMALLOCSTATS",
        "PYTHONTRACEMALLOC",
        "PYTHONDEVMODE",
        "PYTHONPERFSUPPORT",
        "GLIBC_TUNABLES",
        "VALGRIND_OPTS",
        "PYTEST_CURRENT_TEST",
    }
)
_DROPPED_PREFIXES = ("MALLOC_",)

#: Fixed values: hash randomisation and thread pools are the biggest sources of count noise.
_FIXED = {
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "GOTO_NUM_THREADS": "1",
    "NUMEXPR_NUM_THREADS": "1",
    "VECLIB_MAXIMUM_THREADS": "1",
    "BLIS_NUM_THREADS": "1",
    "KMP_BLOCKTIME": "0",
    "OMP_WAIT_POLICY": "PASSIVE",
}

#: Pads the environment block to a fixed size: a longer PATH, an extra variable or a CI variable's
#: new value then does not move the process's stack (and so the counts); see
#: :func:`counted_environment`.
ENV_PAD_VARIABLE = "TORCHBENCH_ENV_PAD"
#: The block's size: larger than the CI environments seen (docs/design/measurements.md, "Counting
#: in the worker"); a larger one is rounded up to the next multiple (its counts can then move by a
#: few hundredths of a percent against a baseline recorded with a smaller block).
_ENV_BLOCK = 32768

#: Where the valgrind version is handed to the counted process for its fingerprint.
_VALGRIND_VERSION_VARIABLE = "TORCHBENCH_VALGRIND_VERSION"


class ValgrindUnavailable(RuntimeError):
    """valgrind (with Callgrind) is not installed or does not run here."""


def check_valgrind() -> str:
    """Return valgrind's version string (e.g. ``valgrind-3.19.0``) or raise a clear error."""
    machine = platform.machine().lower()
    if not sys.platform.startswith("linux") or machine not in ("x86_64", "amd64"):
        raise UnsupportedPlatform(
            "instruction counting runs Callgrind, which pytest-torchbench supports on Linux x86-64 "
            f"only (this is {sys.platform} on {platform.machine() or 'an unknown machine'})"
        )
    executable = shutil.which("valgrind")
    if executable is None:
        raise ValgrindUnavailable(
            "instruction counting needs valgrind, which is not on PATH; install it "
            "(Debian/Ubuntu: `apt-get install valgrind`, Fedora: `dnf install valgrind`)"
        )
    try:
        result = subprocess.run(
            [executable, "--version"], capture_output=True, text=True, timeout=60, check=True
        )
    except (OSError, subprocess.SubprocessError) as error:
        raise ValgrindUnavailable(f"`valgrind --version` failed: {error}") from error
    return result.stdout.strip()


def out_file_pattern(out_dir: str | os.PathLike[str]) -> str:
    """The ``--callgrind-out-file`` pattern: one file per pid (valgrind expands ``%p``).

    Each CALLGRIND_DUMP_STATS_AT then writes ``callgrind.out.<pid>.<n>``; helpers forked by the
    counted process write their own pid's files, which :func:`collect.measure` never reads.
    """
    return str(Path(out_dir).resolve() / "callgrind.out.%p")


def valgrind_argv(python: str, out_file_pattern: str, *, no_aslr: bool = True) -> list[str]:
    """The valgrind command line to put in front of ``[python, ...]``.

    With ``no_aslr`` (and util-linux's ``setarch`` on PATH) it starts with
    ``setarch x86_64 -R``: address-space randomisation moved some region's count (a ``memcmp``
    whose path depends on where its data lies) by ~600 instructions in one run out of a few;
    with it off, reruns were bit-identical.

    Instrumentation and collection start off (imports are not counted and run ~3x faster),
    instruction-level data is not dumped (only per-function costs are used, and the
    files stay small), and the client's own output is not mixed with valgrind's (``-q``).
    ``python`` must be the real interpreter (``sys.executable``), not a shell shim, which
    valgrind would trace instead; it is checked to be an existing file.
    """
    if not os.path.isfile(python):
        raise FileNotFoundError(f"interpreter {python!r} does not exist")
    valgrind = shutil.which("valgrind") or "valgrind"
    setarch = shutil.which("setarch") if no_aslr else None
    prefix = [setarch, "x86_64", "-R"] if setarch else []
    return prefix + [
        valgrind,
        "--tool=callgrind",
        "--instr-atstart=no",
        "--collect-atstart=no",
        "--dump-instr=no",
        "--separate-threads=no",
        "--combine-dumps=no",
        "--compress-strings=yes",
        "--compress-pos=yes",
        f"--callgrind-out-file={out_file_pattern}",
        "-q",
    ]


def counted_environment(
    source_env: Mapping[str, str],
    allocator: Path | None,
    *,
    extra: Mapping[str, str] | None = None,
    valgrind_version: str | None = None,
) -> dict[str, str]:
    """The counted process's environment: the user's whole environment, with what counting needs
    pinned.

    Why not a whitelist: a test that reads a variable (a data path, a feature flag,
    ``TORCH_LOGS``) must behave in instructions mode as in every other mode. Only what changes
    how the code is executed or counted is overridden (:data:`_FIXED`, :data:`_DROPPED`, the
    allocator). Determinism comes from the block's size instead: it is padded with
    :data:`ENV_PAD_VARIABLE` to 32 KiB (or the next multiple of 32 KiB beyond), so environments of
    different lengths lay out the stack alike. ``extra`` adds variables the caller needs; they
    are set last.
    """
    env: dict[str, str] = {}
    for name, value in source_env.items():
        if name in _DROPPED or name.startswith(_DROPPED_PREFIXES) or name == ENV_PAD_VARIABLE:
            continue
        if "=" in name or not name or "\0" in name or "\0" in value:
            continue  # cannot be passed through execve (nor through `env NAME=VALUE`)
        env[name] = value
    env.update(_FIXED)
    if allocator is not None:
        env["PYTHONMALLOC"] = "malloc"
        env["LD_PRELOAD"] = str(allocator)
    if valgrind_version is not None:
        env[_VALGRIND_VERSION_VARIABLE] = valgrind_version
    if extra:
        env.update(extra)
    env.pop(ENV_PAD_VARIABLE, None)
    used = sum(len(os.fsencode(k)) + len(os.fsencode(v)) + 2 for k, v in env.items())
    overhead = len(ENV_PAD_VARIABLE) + 2
    target = _ENV_BLOCK
    while target < used + overhead:
        target += _ENV_BLOCK
    env[ENV_PAD_VARIABLE] = "x" * (target - used - overhead)
    return dict(sorted(env.items()))


_HASH_IN_NAME = re.compile(r"libtorchbench_alloc-([0-9a-f]+)\.so$")


def counting_fingerprint() -> dict[str, str]:
    """Facts that decide whether two instruction counts are comparable.

    Call it INSIDE the counted process (it imports torch to ask for the CPU capability, which
    under valgrind is what valgrind emulates, e.g. AVX2 where the host has AVX512).
    """
    import torch

    preload = os.environ.get("LD_PRELOAD", "")
    match = _HASH_IN_NAME.search(preload)
    if match:
        allocator = f"torchbench-sizeclass:{match.group(1)}"
    elif preload:
        allocator = f"preload:{os.path.basename(preload)}"
    else:
        allocator = "libc"
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or "unknown"
    except (ValueError, OSError):
        libc = " ".join(platform.libc_ver()) or "unknown"
    return {
        "valgrind": os.environ.get(_VALGRIND_VERSION_VARIABLE, "unknown"),
        "libc": libc,
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "torch": torch.__version__,
        "pythonmalloc": os.environ.get("PYTHONMALLOC", "pymalloc"),
        "pythonhashseed": os.environ.get("PYTHONHASHSEED", "random"),
        "allocator": allocator,
        "cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
        "machine": platform.machine(),
    }
