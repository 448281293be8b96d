"""The shared attribute keys of each class (CPython 3.10-3.13), brought once per counted worker
to a state that no longer follows what ran before.

Why: CPython 3.11 (and 3.12, 3.13) keeps the attribute names of a class's instances in one key
table per class (``ht_cached_keys``), with a count of free slots (``dk_usable``, 30 for a new
class). Every new instance lowers that count by one until it reaches 1; an instance that sets an
attribute not yet in the table once no slot is free gets its own dictionary, and every later
attribute read and write on it takes another path. So how a benchmark's objects store their
attributes, and the instructions it counts, depended on how many instances of each class earlier
tests in the worker had created: tensordict's own benchmarks counted several percent fewer when one
of their files ran alone than after the other file's tests, and under ``-n 2`` than serially, with
the same Python calls (docs/design/measurements.md, "tensordict's own benchmarks: one file
and ``-n 2``").

How: when the worker settles after collection, every class it can list (the collector's, then
each newly imported module's) gets its count of free slots lowered to 1, the state 29 instances
would have left. From then on a class's table gains at most one more name, the first that any
instance sets (the first attribute its ``__init__`` sets: the same in every run), and instances
keep the other names in their own dictionaries, in every run alike, whatever ran before and
however many instances it made. Lowering the count is the only write, and it is what CPython
itself does at each instance creation: no slot an existing instance's values array lacks is ever
handed out (each array has room for its class's names and free slots when it was made, never
fewer than now). The offset of ``ht_cached_keys`` is found on a probe class (the field after
``ht_qualname``, found by its value) and checked, with the count's offset in the key table,
against what creating instances does to them; anywhere that check fails (a free-threaded build;
another layout) this does nothing.

CPython 3.10 has no such count but the same history, by another rule: a class stops sharing keys
for good (``ht_cached_keys`` set to NULL) when an instance's new name outgrows the shared table (5
names, then 10, ...) or comes in another order while any other dictionary shares it, and at any
``del`` of an instance attribute. Alone, a benchmark's first record grows the table and keeps
sharing; after an earlier test that kept instances alive, the class shares nothing and every
record gets a dictionary of its own. So on 3.10 every class is put in the state CPython never
leaves, sharing nothing: the pointer set to NULL, as CPython does, and the class's reference to
the table dropped by lowering its count when other dictionaries still hold it. The last reference
is kept (the table not freed): the function that frees it is not exported. A class whose instances
all set the same names in ``__init__`` would share for good in a plain 3.10 process; listed, its
instances keep their attributes in dictionaries of their own, in every run alike.

What it costs: the instances of those classes keep most attributes in a dictionary, as the
instances of a class whose table filled up do in any long-running process; counts of
attribute-heavy code read somewhat higher than in a fresh process, the same in every run. Why not
lower only the tables that already hold names: which names a table then gains still followed
history (tensordict's counts moved as before). What it does not do: the names a table
already holds when the worker settles follow what collection made (a module-level instance in
another test file sets them); the one name a table may still gain is the first any instance sets
afterwards, the same in every run only when every test sets its attributes in the same order (an
``__init__`` does); a module imported later is listed before the next region, after the test and
its first call ran; a class made outside a module's namespace after collection (inside a test, by
a factory, a nested class) starts fresh and keeps its history.
"""

from __future__ import annotations

import ctypes
import functools
import gc
import sys
import sysconfig
from collections.abc import Iterable

from .quickening import ModulesSince, module_classes

__all__ = ["supported", "track", "track_new_modules"]

#: ``Py_TPFLAGS_MANAGED_DICT`` (3.11-3.13): instances keep their attributes in values the class's
#: shared keys index; ``Py_TPFLAGS_HEAPTYPE``: a ``PyHeapTypeObject`` (a class statement's type).
_MANAGED_DICT = 1 << 4
_HEAPTYPE = 1 << 9
#: ``PyDictKeysObject`` (3.11-3.13, 64-bit): ``dk_refcnt`` (8), three ``uint8_t`` and padding,
#: ``uint32_t dk_version``, then ``Py_ssize_t dk_usable`` and ``dk_nentries``. On 3.10:
#: ``dk_refcnt``, ``dk_size``, ``dk_lookup``, then ``dk_usable`` and ``dk_nentries``.
_USABLE_OFFSET = 16
_NENTRIES_OFFSET = 24
_USABLE_OFFSET_310 = 24
_NENTRIES_OFFSET_310 = 32
#: ``SHARED_KEYS_MAX_SIZE``: a new class's free slots. On 3.10 the free entries of a new class's
#: table of 8 (``USABLE_FRACTION(PyDict_MINSIZE)``).
_FRESH_USABLE = 30
_FRESH_USABLE_310 = 5
#: Whether this is 3.10's rule (stop sharing for good) rather than 3.11-3.13's (a count of free
#: slots).
_SHARING_STOPS = sys.version_info[:2] == (3, 10)
#: The steady state: what CPython's instance creation lowers the count to, and no further.
_STEADY_USABLE = 1

#: The modules whose classes were listed.
_modules = ModulesSince()


def _qualname_offset(probe: type) -> int | None:
    """Where ``ht_qualname`` is: the one pointer-sized field of the probe holding its qualified
    name (which is not its name, so ``ht_name`` does not match)."""
    width = ctypes.sizeof(ctypes.c_void_p)
    wanted = id(probe.__qualname__)
    size: int = getattr(type, "__basicsize__")  # sizeof(PyHeapTypeObject)
    found = [
        offset
        for offset in range(0, size - width + 1, width)
        if ctypes.c_void_p.from_address(id(probe) + offset).value == wanted
    ]
    return found[0] if len(found) == 1 else None


@functools.lru_cache(maxsize=1)
def _keys_offset() -> int | None:
    """The offset of ``ht_cached_keys`` in a class object, checked; None where not CPython
    3.10-3.13 (with the GIL) with the layout and behaviour assumed here. 3.12 and 3.13 keep the
    same count with the same rule as 3.11 (3.13 holds the values inside the instance, with room
    for as many as the count and the names allowed when it was made); 3.10's table is checked by
    its free entries and names, which two names take and a second instance leaves alone."""
    if sys.implementation.name != "cpython" or not (3, 10) <= sys.version_info[:2] <= (3, 13):
        return None
    if ctypes.sizeof(ctypes.c_void_p) != 8 or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None  # a free-threaded build changes the count under a lock this cannot take

    def make() -> type:
        class Probe:
            def __init__(self) -> None:
                self.first = 1
                self.second = 2

        return Probe

    probe = make()
    qualname = _qualname_offset(probe)
    if qualname is None or not _has_shared_keys(probe.__flags__):
        return None
    offset = qualname + ctypes.sizeof(ctypes.c_void_p)
    keys = ctypes.c_void_p.from_address(id(probe) + offset).value
    if not keys:
        return None
    if _SHARING_STOPS:
        usable = ctypes.c_ssize_t.from_address(keys + _USABLE_OFFSET_310)
        entries = ctypes.c_ssize_t.from_address(keys + _NENTRIES_OFFSET_310)
        # each name takes a free entry; instances take none
        expected = [(_FRESH_USABLE_310, 0), (_FRESH_USABLE_310 - 2, 2), (_FRESH_USABLE_310 - 2, 2)]
    else:
        usable = ctypes.c_ssize_t.from_address(keys + _USABLE_OFFSET)
        entries = ctypes.c_ssize_t.from_address(keys + _NENTRIES_OFFSET)
        # one slot for each instance, one for each name
        expected = [(_FRESH_USABLE, 0), (_FRESH_USABLE - 3, 2), (_FRESH_USABLE - 4, 2)]
    kept = []
    for made, wanted in enumerate(expected):
        if made:
            kept.append(probe())
        if (usable.value, entries.value) != wanted:
            return None
    if ctypes.c_void_p.from_address(id(probe) + offset).value != keys:
        return None  # the instances did not share that table
    return offset


def _has_shared_keys(flags: int) -> bool:
    """Whether a class with these ``__flags__`` may have a shared key table: a heap type (a
    ``class`` statement's), and on 3.11-3.13 one whose instances' values the table indexes."""
    return bool(flags & _HEAPTYPE) and (_SHARING_STOPS or bool(flags & _MANAGED_DICT))


def supported() -> bool:
    """Whether this interpreter is CPython 3.10-3.13 with the layout assumed here."""
    return _keys_offset() is not None


def track(objects: Iterable[object] | None = None) -> int:
    """Lower the free slots of every class among ``objects`` (default: all the collector tracks)
    to 1, or on 3.10 stop it sharing keys (see the module docstring); returns how many classes
    were looked at. Call it before ``gc.freeze()`` (frozen objects are not listed). Only real
    classes are asked: ``type(thing)``, never ``isinstance``, which a weak proxy to a class
    answers for the class (and the proxy's own address holds no key table). No class is kept:
    lowering twice is lowering once."""
    offset = _keys_offset()
    if offset is None:
        return 0
    if objects is None:
        _modules.all_seen()
        objects = gc.get_objects()
    flags_of = type.__dict__["__flags__"].__get__
    looked_at = 0
    for thing in objects:
        if not issubclass(type(thing), type):
            continue
        if not _has_shared_keys(flags_of(thing)):
            continue
        looked_at += 1
        field = ctypes.c_void_p.from_address(id(thing) + offset)
        keys = field.value
        if not keys:
            continue
        if _SHARING_STOPS:
            # One line, as below: the class's reference dropped where another holder keeps the
            # table alive (a count of 1 is the class's alone: that table stays, unreferenced).
            references = ctypes.c_ssize_t.from_address(keys)  # dk_refcnt
            field.value = None
            references.value -= references.value > 1  # noqa: E702
            continue
        usable = ctypes.c_ssize_t.from_address(keys + _USABLE_OFFSET)
        # The read and the write on one line, with no call and no backward jump between them: no
        # other thread can run in between, not even under a trace function (line events come at
        # a line's start). Another thread's instance or name could otherwise take the count from
        # 2 to 0 there, and writing 1 over that 0 would hand out a slot that arrays made
        # meanwhile lack; lowered, the count never does.
        if usable.value > _STEADY_USABLE:
            usable.value = _STEADY_USABLE  # noqa: E701
    return looked_at


def track_new_modules() -> int:
    """The same for the classes of the modules imported since the last listing (one level: what
    their ``class`` statements made); nothing when there are none."""
    if not supported():
        return 0
    return track([cls for module in _modules.new() for cls in module_classes(module)])
