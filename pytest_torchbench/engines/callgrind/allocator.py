"""Build (once, cached) the deterministic allocator preloaded into the counted process.

Why a cache keyed by source and compiler: the shared object must be identical for every launch
that is compared (it is part of the counts' fingerprint), building it runs a C compiler, and
several processes (xdist workers) may ask at the same moment, so it is written under a temporary
name and renamed into place atomically.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

from ...common.text import one_line, safe_text

__all__ = [
    "ALLOCATOR_NAME",
    "allocator_source",
    "allocator_hash",
    "build_allocator",
    "AllocatorBuildError",
    "start_heap_epoch",
    "dropped_bytes",
]

#: Recorded in fingerprints: which allocator the counts were made with.
ALLOCATOR_NAME = "torchbench-sizeclass"

_CFLAGS = ("-O2", "-fPIC", "-shared", "-fno-builtin", "-pthread")
#: How long one build may take before it is given up.
_BUILD_TIMEOUT = 300


class AllocatorBuildError(RuntimeError):
    """The C compiler could not build the allocator: the message says which command failed, its
    first error line and what to do."""


def allocator_source() -> bytes:
    """The C source shipped with the package (package data ``engines/callgrind/*.c``)."""
    return resources.files(__package__).joinpath("allocator.c").read_bytes()


def _compiler() -> str | None:
    for name in (os.environ.get("CC") or "", "gcc", "cc"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _compiler_version(compiler: str) -> str:
    try:
        result = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, check=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return result.stdout.strip().splitlines()[0] if result.stdout.strip() else "unknown"


def allocator_hash(compiler_version: str | None = None) -> str:
    """Short hash of the source, flags and compiler: names the build and goes into fingerprints."""
    if compiler_version is None:
        compiler = _compiler()
        compiler_version = _compiler_version(compiler) if compiler else "none"
    digest = hashlib.sha256()
    digest.update(allocator_source())
    digest.update(" ".join(_CFLAGS).encode())
    digest.update(compiler_version.encode())
    return digest.hexdigest()[:16]


def build_allocator(cache_dir: str | os.PathLike[str]) -> Path | None:
    """Compile the allocator into ``cache_dir`` unless already there; None when no C compiler.

    The caller decides what to do without it (warn and count with glibc malloc: counts are then
    less stable across statement order and environment: docs/design/counting.md, "What moves
    counts"). Raises :class:`AllocatorBuildError` when the compiler fails.
    """
    compiler = _compiler()
    if compiler is None:
        return None
    key = allocator_hash(_compiler_version(compiler))
    cache = Path(cache_dir)
    target = cache / f"libtorchbench_alloc-{key}.so"
    if target.is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".build-") as tmp:
        source = Path(tmp) / "allocator.c"
        source.write_bytes(allocator_source())
        built = Path(tmp) / target.name
        _compile(compiler, source, built)
        os.replace(built, target)  # atomic: concurrent builders all end with a whole file
    return target


def _compile(compiler: str, source: Path, built: Path) -> None:
    """Run the compiler; :class:`AllocatorBuildError` naming the command and its first error line
    when it fails, cannot start or hangs."""
    command = shlex.join([compiler, *_CFLAGS, "-o", built.name, source.name])
    try:
        result = subprocess.run(
            [compiler, *_CFLAGS, "-o", str(built), str(source)],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=_BUILD_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        why = f"did not finish in {_BUILD_TIMEOUT} s"
    except OSError as exc:
        why = f"could not start ({exc.strerror or exc})"
    else:
        if result.returncode == 0:
            return
        why = f"exited with status {result.returncode}: {_first_error(result)}"
    raise AllocatorBuildError(
        f"instruction counting could not build its deterministic allocator: `{safe_text(command)}` "
        f"{safe_text(why)}; fix that compiler, or set CC to a working one (unset: gcc, else cc)"
    )


def _first_error(result: subprocess.CompletedProcess[str]) -> str:
    """The compiler's first line that says ``error``, else its first line."""
    lines = (result.stderr + "\n" + result.stdout).splitlines()
    errors = [line for line in lines if "error" in line.lower()]
    return one_line("\n".join(errors or lines)) or "(it printed nothing)"


@functools.lru_cache(maxsize=1)
def _preloaded() -> ctypes.CDLL | None:
    """The preloaded allocator's functions, when this process runs with it (else None)."""
    process = ctypes.CDLL(None)
    return process if hasattr(process, "torchbench_alloc_new_epoch") else None


def start_heap_epoch() -> bool:
    """Start a new epoch of the calling thread's heap in the preloaded allocator (False without it).

    Why: which blocks (addresses) a thread's allocations get from the allocator depends on every
    malloc and free before them; some counted paths depend on addresses (glibc's ``memcmp`` takes
    a longer path when an operand lies near a page's end; CPython compares equal strings with it in
    dict lookups), and the start-up of an xdist worker interleaves its two threads as timing
    decides. So runs of the same tests gave the same test's tensors other addresses in some runs,
    and counts moved by 1-9 instructions per call. After this call the thread's blocks come from a
    fresh arena and only from blocks it gave out since (allocator.c), so a test that starts an epoch
    gets the same addresses on every run, whatever ran before it. Blocks of earlier epochs freed
    later are not reused (:func:`dropped_bytes`): tens of KB per test.
    """
    process = _preloaded()
    if process is None:
        return False
    return int(process.torchbench_alloc_new_epoch()) == 0


def dropped_bytes() -> int:
    """Bytes the calling thread freed but the allocator left unused (0 without the allocator)."""
    process = _preloaded()
    if process is None:
        return 0
    function = process.torchbench_alloc_dropped
    function.restype = ctypes.c_ulonglong
    return int(function())
