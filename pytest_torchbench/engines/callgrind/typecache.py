"""What a type-cache miss costs outside ``find_name_in_mro``, measured once per interpreter.

Why: a count leaves out the type-attribute cache's misses, whose number follows memory layout
(which (type, name) pairs share a slot), not the benchmark's code. It subtracts the inclusive
cost of ``find_name_in_mro`` (the walk along the MRO), but a miss also runs a path of its own in
the lookup function that called it (``_PyType_Lookup``, ``_PyType_LookupRef`` on 3.13): it checks
the name, makes sure the type has a version tag and writes the slot. Left in the count, that
path failed a small Python-heavy benchmark of a real library that was run with another selection
(docs/design/counting.md, "Type-cache misses are kept apart"). It cannot be told apart from a
hit in Callgrind's function-level costs, so it is measured here: the same loop of class attribute
lookups is counted once with two names that share a slot (each lookup misses) and once with two
that do not (each hits); what the lookup functions cost beside the walk grows by the same
amount per miss in every run of this interpreter. The counts then leave out ``misses x that
cost`` too. Only the calls of ``getattr`` are counted (``--toggle-collect``), and only the
loop's calls (a dump before and after it): the interpreter's start-up has misses of its own,
which follow its addresses, and would move the figure from run to run.

The figure is kept in the user's cache folder, keyed by the interpreter's path, size and
modification time and by valgrind's version: two short valgrind runs the first time only.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import tempfile
from pathlib import Path

from .parse import CallgrindPart, calls_into, inclusive_cost_of, parse_callgrind_file

#: The function a miss calls to walk the MRO (its inclusive cost is left out of counts).
MISS_FUNCTION = "find_name_in_mro"
#: The lookup functions that call it on a miss: ``_PyType_Lookup`` (3.10-3.12), ``_PyType_LookupRef``
#: (3.13). Other callers (``update_one_slot``, at class creation) are not misses of the cache.
LOOKUP_PREFIX = "_PyType_Lookup"

#: How the figure is measured; a kept figure measured otherwise is measured again.
_METHOD = "colliding-names-getattr-only/2"
#: A C function the loop calls once before and once after: a dump before each (``--dump-before``).
_MARK = "sys_getswitchinterval"
#: Lookups per run of the loop (each of two names on a class: the class's and its metatype's lookups).
_LOOKUPS = 2000
#: More than any lookup function's miss path (docs/design/counting.md): a kept figure above it
#: is not believed.
_MOST = 1000.0
#: Two names set on a class and read in turn. For "miss" the second name shares the first's slot
#: (a slot is ``(version tag ^ (address of the name >> 3)) & 4095``: for one class, two names whose
#: addresses agree there collide whatever the tag), so each read evicts the other and every
#: lookup misses; for "hit" it does not. Nothing else differs, and no version tag is given up
#: (``sys._clear_type_cache`` would also take every tag on 3.10 and 3.11, and count their
#: reassignment as the miss's).
_SCRIPT = """
import sys
class C:
    pass
names = [sys.intern(f"attr{i}") for i in range(20000)]
def slot(name):
    return (id(name) >> 3) & 4095
first = names[0]
twin = next(n for n in names[1:] if slot(n) == slot(first))
other = next(n for n in names[1:] if slot(n) not in (slot(first), (slot(first) + 1) % 4096))
second = twin if sys.argv[1] == "miss" else other
setattr(C, first, 1)
setattr(C, second, 2)
del names
lookup = getattr
mark = sys.getswitchinterval
mark()
for _ in range(int(sys.argv[2])):
    lookup(C, first)
    lookup(C, second)
mark()
"""


def _key(python: str, valgrind_version: str | None) -> str:
    real = os.path.realpath(python)
    info = os.stat(real)
    text = f"{_METHOD}\0{real}\0{info.st_size}\0{info.st_mtime_ns}\0{valgrind_version}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _count_loop(python: str, mode: str, folder: Path) -> list[CallgrindPart]:
    """The dump of one run of the loop, the loop alone."""
    out = folder / f"{mode}.out"
    done = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                           "--toggle-collect=builtin_getattr", f"--dump-before={_MARK}",
                           python, "-I", "-S", str(folder / "lookups.py"), mode, str(_LOOKUPS)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace", timeout=300)
    if done.returncode != 0:
        last = " / ".join(done.stderr.strip().splitlines()[-3:])
        raise subprocess.SubprocessError(f"valgrind exited {done.returncode}: {last}")
    # The dumps at the two marks: the first ends the start-up, the second holds the loop alone.
    # Its costs come from getattr's calls only (--toggle-collect), and so do its call counts:
    # those count every call, collected or not, since the last dump.
    return parse_callgrind_file(out.with_name(f"{out.name}.2"))


def _beside_the_walks(parts: list[CallgrindPart], lookups: set[str]) -> int:
    """What the lookup functions cost, inclusive, less the walks along the MRO. Inclusive: the
    miss path's own callees (``assign_version_tag``) are the miss's too."""
    return sum(inclusive_cost_of(parts, name) for name in lookups) - inclusive_cost_of(parts, MISS_FUNCTION)


def measure_miss_path(python: str) -> float:
    """Instructions a miss adds in the lookup function and what it calls, beyond a hit, the walk
    along the MRO left out (0.0 where the interpreter's build has no ``find_name_in_mro`` of its
    own: inlined, nothing to count)."""
    with tempfile.TemporaryDirectory(prefix="torchbench-typecache-") as name:
        folder = Path(name)
        (folder / "lookups.py").write_text(_SCRIPT)
        missing = _count_loop(python, "miss", folder)
        hitting = _count_loop(python, "hit", folder)
    # The functions that call the walk, seen where every lookup misses; only those: on 3.13
    # _PyType_Lookup calls _PyType_LookupRef, which calls the walk (counted once, not twice).
    lookups = {caller.rpartition(":")[2] for part in missing for caller, callee in part.call_counts
               if callee.endswith(":" + MISS_FUNCTION) and caller.rpartition(":")[2].startswith(LOOKUP_PREFIX)}
    extra_misses = (calls_into(missing, MISS_FUNCTION, LOOKUP_PREFIX)
                    - calls_into(hitting, MISS_FUNCTION, LOOKUP_PREFIX))
    if extra_misses < _LOOKUPS:  # no walk of its own to see (inlined): nothing is subtracted
        return 0.0
    extra_cost = _beside_the_walks(missing, lookups) - _beside_the_walks(hitting, lookups)
    return round(max(extra_cost, 0) / extra_misses, 1)


def _read_kept(path: Path) -> object:
    """The kept figure, or None: only a regular file of at most 4 KiB is read (a FIFO or a device
    put in its place neither blocks the run nor fills its memory; a link is not followed)."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            return None
        data = os.read(handle, 4097)
    except OSError:
        return None
    finally:
        os.close(handle)
    if len(data) > 4096:
        return None
    try:
        document = json.loads(data)
        return document["miss_path"] if type(document) is dict else None
    except (ValueError, KeyError):
        return None


def miss_path_cost(python: str, cache_dir: Path, valgrind_version: str | None) -> float:
    """:func:`measure_miss_path`, kept in ``cache_dir`` for this interpreter and valgrind."""
    path = cache_dir / f"typecache-miss-{_key(python, valgrind_version)}.json"
    kept = _read_kept(path)
    # Only a number a miss path can have (not a NaN, a string or a bool): else measured again.
    if isinstance(kept, (int, float)) and not isinstance(kept, bool) and 0.0 <= kept <= _MOST:
        return float(kept)
    cost = measure_miss_path(python)
    if not 0.0 <= cost <= _MOST:
        raise subprocess.SubprocessError(f"a type-cache miss measured {cost} instructions beside its walk, "
                                         f"more than any CPython's path (at most {_MOST:.0f})")
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=cache_dir, prefix=".typecache-", suffix=".tmp")
        try:
            with os.fdopen(handle, "w") as file:
                file.write(json.dumps({"miss_path": cost, "python": os.path.realpath(python)}))
            os.replace(temporary, path)
        except OSError:
            os.unlink(temporary)
            raise
    except OSError:
        pass  # an unwritable cache: measured again next time, the same figure
    return cost
