"""Build (once, cached) the deterministic allocator preloaded into the counted process.

Why a cache keyed by source and compiler: the shared object must be identical for every launch
that is compared (it is part of the counts' fingerprint), building it costs about 0.3 s, and
several processes (xdist workers) may ask at the same moment, so it is written under a temporary
name and renamed into place atomically.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

__all__ = ["ALLOCATOR_NAME", "allocator_source", "allocator_hash", "build_allocator"]

#: Recorded in fingerprints: which allocator the counts were made with.
ALLOCATOR_NAME = "torchbench-sizeclass"

_CFLAGS = ("-O2", "-fPIC", "-shared", "-fno-builtin", "-pthread")


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
    less stable across statement order and environment, by up to about 1%).
    Raises :class:`RuntimeError` with the compiler's message if compilation fails.
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
        result = subprocess.run(
            [compiler, *_CFLAGS, "-o", str(built), str(source)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"building the deterministic allocator with {compiler} failed:\n{result.stderr}"
            )
        os.replace(built, target)  # atomic: concurrent builders all end with a whole file
    return target
