"""What a counted process is: every pin that makes its instruction counts repeat, in one place.

Why one spec: counts move with the process's environment, allocator, interpreter arguments,
working directory and with interpreter-wide state that earlier tests leave behind. A serial run
and each ``-n`` worker must be launched the same way, and every counted worker must start its
tests from the same interpreter state, so that they count alike by construction. The pins were
spread over the launch, the metric and the pytest glue; :class:`CountedProcessSpec` gathers those
of the launch (built once by :meth:`CountedProcessSpec.build`, in the controller) and
:func:`settle_worker` those applied inside the worker before its first test. The table below
names every pin and where it acts (the ones applied per test or per region stay next to the
code they pin, and are listed here so that a reader finds them all):

====================================  ============================  ================================
pin                                   why                           applied by
====================================  ============================  ================================
environment: ``PYTHONHASHSEED=0``,    hash randomisation; spinning  :meth:`environment`
thread variables ``=1``, dropped      thread pools                  (``launch.counted_environment``)
allocator hooks, padded block
``PYTHONMALLOC=malloc`` +             glibc malloc's cost follows   :meth:`environment`
``LD_PRELOAD`` the deterministic      heap history
allocator
valgrind options, ASLR off            instrumentation off during    :meth:`argv`
(``setarch -R``)                      imports; a ``memcmp`` path    (``launch.valgrind_argv``)
                                      follows addresses
``sys.executable`` as given           a virtualenv is found from    :meth:`argv`
                                      that path
modules preloaded                     interpreter-wide hooks they   :func:`settle_worker`
(:data:`PRELOADED`)                   install at import (audit
                                      hooks are permanent)
worker arguments without              argv length moves the heap    ``pytest/workers.py``
controller-only options; fixed
basetemp and run id
a heap epoch per test and per         a test's addresses            ``WorkerLaunch.isolate``
collector                             independent of history
functions marked to quicken           helpers specialised by the    ``quickening`` via
(3.10, 3.11)                          test itself                   :func:`settle_worker`
``gc.freeze()`` after collection, gc  collections inside regions    :func:`settle_worker`,
off in regions                                                      ``collect.count_region``
``torch.set_num_threads``             thread pools                  ``collect.count_region``
(default 1)
type attribute cache emptied per      stale entries of earlier      ``collect.count_region``
region (not on 3.10)                  tests
classes' attribute keys at their      which names a class's         ``shared_keys`` via
steady state (3.10-3.13)              instances share follows how   :func:`settle_worker`
                                      many earlier tests made
seeds (torch, numpy, ``random``)      random code draws alike       ``pytest/seeding.py``
fresh code of the benchmarked         its specialisation history    ``engines/fresh_code.py``
function
====================================  ============================  ================================

This module knows nothing of pytest.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from .launch import counted_environment, out_file_pattern, valgrind_argv

__all__ = ["CountedProcessSpec", "PRELOADED", "settle_worker"]

#: Modules a counted worker imports before its first test, because importing them changes the
#: interpreter for everything that runs after, and some test may import them first; each with the
#: first Python version where it does (elsewhere the import would only move the heap: not done).
#: - ``filelock`` (a dependency of torch, imported by ``torch.utils._filelock`` in the first
#:   ``torch.compile``): on Python 3.12+ it installs a Python audit hook (``sys.addaudithook``),
#:   which cannot be removed, and which then runs at every audited event (each ``exec`` of a
#:   ``bench_timer`` statement, ``compile``, ``open``, ``sys._getframe``...). Without the preload,
#:   every such benchmark after a compiled test counted more than when it ran alone or first
#:   (docs/design/measurements.md, "Python versions"). Preloaded, every test sees the hook.
PRELOADED: tuple[tuple[str, tuple[int, int]], ...] = (("filelock", (3, 12)),)


@dataclasses.dataclass(frozen=True)
class CountedProcessSpec:
    """How one run launches its counted workers (each one identically).

    ``python`` is the interpreter exactly as given (``sys.executable``: resolving a virtualenv's
    symlink would leave the virtualenv); ``folder`` the run's folder (dumps, workers' stderr; the
    same name on every run); ``allocator`` the deterministic allocator to preload (None when no C
    compiler built it); ``valgrind_version`` goes into the fingerprint; ``extra_environment``
    holds the variables the caller adds (set last)."""

    python: str
    folder: Path
    allocator: Path | None
    valgrind_version: str | None
    extra_environment: tuple[tuple[str, str], ...] = ()
    no_aslr: bool = True

    @classmethod
    def build(
        cls,
        python: str,
        folder: Path,
        *,
        allocator: Path | None,
        valgrind_version: str | None,
        extra_environment: Mapping[str, str] | None = None,
    ) -> CountedProcessSpec:
        """The one builder: every counted worker of a run gets the spec built here."""
        return cls(
            python=python,
            folder=Path(folder),
            allocator=allocator,
            valgrind_version=valgrind_version,
            extra_environment=tuple(sorted((extra_environment or {}).items())),
        )

    def argv(self) -> list[str]:
        """``[setarch -R] valgrind --tool=callgrind ... python``: the worker's own arguments
        follow."""
        return [
            *valgrind_argv(self.python, out_file_pattern(self.folder), no_aslr=self.no_aslr),
            self.python,
        ]

    def environment(self, source_env: Mapping[str, str]) -> dict[str, str]:
        """The user's environment with what counting needs pinned
        (``launch.counted_environment``)."""
        return counted_environment(
            source_env,
            self.allocator,
            extra=dict(self.extra_environment),
            valgrind_version=self.valgrind_version,
        )

    def command(
        self, source_env: Mapping[str, str] | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """``(argv, environment)``, the environment from ``source_env`` (default: this
        process's)."""
        return self.argv(), self.environment(os.environ if source_env is None else source_env)


def preload_modules(modules: tuple[tuple[str, tuple[int, int]], ...] = PRELOADED) -> list[str]:
    """Import the modules of :data:`PRELOADED` that this Python needs and that are installed;
    returns the names imported."""
    done = []
    for name, since in modules:
        if sys.version_info < since:
            continue
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        done.append(name)
    return done


def settle_worker() -> None:
    """Inside a counted worker, once, after collection and before its first test: the
    interpreter-wide state every test then starts from.

    Order matters: the preloaded modules' functions are marked for quickening too (3.11), and the
    marking and the listing of classes (``shared_keys``) happen before ``gc.freeze()`` (frozen
    objects are not listed)."""
    import gc

    from . import quickening, shared_keys

    preload_modules()
    quickening.quicken_at_next_call()
    shared_keys.track()
    gc.freeze()
