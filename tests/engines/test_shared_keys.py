"""Classes' shared attribute keys at a state that no longer follows history (CPython 3.10-3.13)."""

from __future__ import annotations

import ctypes
import importlib
import sys
import sysconfig
import weakref

import pytest

from pytest_torchbench.engines.callgrind import shared_keys

SUPPORTED_HERE = (
    sys.implementation.name == "cpython"
    and (3, 10) <= sys.version_info[:2] <= (3, 13)
    and not sysconfig.get_config_var("Py_GIL_DISABLED")
)
pytestmark = pytest.mark.skipif(not SUPPORTED_HERE, reason="the pin is on for CPython 3.10-3.13")
#: 3.10 shares keys by another rule (a class stops sharing for good); the count of free slots the
#: other tests read is 3.11-3.13's.
COUNTED_SLOTS = pytest.mark.skipif(
    sys.version_info[:2] == (3, 10), reason="3.10 has no count of free slots"
)
ONLY_310 = pytest.mark.skipif(
    sys.version_info[:2] != (3, 10), reason="3.10's rule: a class stops sharing keys"
)


def _keys_of(cls: type) -> int | None:
    """The address of the class's shared key table (None: it shares none)."""
    offset = shared_keys._keys_offset()
    assert offset is not None
    return ctypes.c_void_p.from_address(id(cls) + offset).value


def _record_class() -> type:
    class Record:
        def __init__(self, value: int) -> None:
            self.value = value

    return Record


def _table(cls: type) -> tuple[int, int]:
    """(free slots, names) of the class's shared key table."""
    keys = _keys_of(cls)
    assert keys
    return (
        ctypes.c_ssize_t.from_address(keys + 16).value,
        ctypes.c_ssize_t.from_address(keys + 24).value,
    )


def _history_then_lazy_names(instances_before: int, listed: bool) -> tuple[type, object]:
    """A fresh class, ``instances_before`` instances made by "earlier tests", then one instance
    that sets two names its ``__init__`` does not."""
    cls = _record_class()
    earlier = [cls(i) for i in range(instances_before)]
    if listed:
        assert shared_keys.track([cls]) == 1
    record = cls(7)
    record.doubled = 14  # type: ignore[attr-defined]
    record.squared = 49  # type: ignore[attr-defined]
    del earlier
    return cls, record


def test_this_interpreter_is_supported() -> None:
    """3.10-3.13 with the GIL: the probe's offsets and counts check out (were they to stop, on a
    new patch release, every other test here would fail to find a table)."""
    assert shared_keys.supported()


def _shares_keys(instance: object) -> bool:
    """Whether a 3.10 instance's dictionary is a split one (``ma_values`` set)."""
    return ctypes.c_void_p.from_address(id(vars(instance)) + 40).value is not None


#: Six names a record's ``__init__`` does not set: one more than 3.10's first shared table holds.
LAZY_NAMES = ("a", "b", "c", "d", "e", "f")


def _records_after(alive_before: int, listed: bool) -> tuple[type, object]:
    """3.10: a fresh class, ``alive_before`` instances kept alive by "earlier tests", one of which
    set six names its ``__init__`` does not (outgrowing the shared table of five), then one new
    record that sets the same names."""
    cls = _record_class()
    earlier = [cls(i) for i in range(alive_before)]
    if earlier:
        for name in LAZY_NAMES:
            setattr(earlier[0], name, 1)
    if listed:
        assert shared_keys.track([cls]) == 1
    record = cls(7)
    for number, name in enumerate(LAZY_NAMES):
        setattr(record, name, number)
    del earlier
    return cls, record


@ONLY_310
def test_on_310_earlier_live_instances_decide_whether_a_class_shares_keys_unless_listed() -> None:
    # Unlisted: with no earlier instance the new record's names grow the shared table and the
    # class goes on sharing; with four alive when one outgrew it, the class shares nothing.
    alone, _ = _records_after(0, listed=False)
    after, _ = _records_after(4, listed=False)
    assert _keys_of(alone) is not None and _shares_keys(alone(1))
    assert _keys_of(after) is None and not _shares_keys(after(1))
    # Listed: no class shares, whatever ran before, and the attributes read back as set.
    for alive_before in (0, 4):
        cls, record = _records_after(alive_before, listed=True)
        assert _keys_of(cls) is None and not _shares_keys(record) and not _shares_keys(cls(2))
        assert vars(record) == {"value": 7, "a": 0, "b": 1, "c": 2, "d": 3, "e": 4, "f": 5}


@ONLY_310
def test_on_310_instances_made_before_the_listing_keep_their_attributes() -> None:
    cls = _record_class()
    earlier = [cls(i) for i in range(3)]
    assert _shares_keys(earlier[0])
    keys = _keys_of(cls)
    assert keys is not None
    references = ctypes.c_ssize_t.from_address(keys)  # the class's and the three dictionaries'
    assert references.value == 4
    assert shared_keys.track([cls]) == 1
    assert _keys_of(cls) is None and references.value == 3  # the class's reference dropped
    assert shared_keys.track([cls]) == 1  # again: nothing more to do, nothing breaks
    assert references.value == 3
    for number, name in enumerate(("a", "b", "c", "d", "e", "f", "g")):
        setattr(earlier[0], name, number)  # outgrows the table it still shares
    del earlier[1].value
    assert vars(earlier[0]) == {"value": 0, "a": 0, "b": 1, "c": 2, "d": 3, "e": 4, "f": 5, "g": 6}
    assert vars(earlier[1]) == {} and vars(earlier[2]) == {"value": 2}


@COUNTED_SLOTS
def test_how_many_instances_ran_before_decides_which_names_are_shared_unless_listed() -> None:
    # Unlisted: one earlier instance leaves room for both lazy names, forty leave room for one.
    few, _ = _history_then_lazy_names(1, listed=False)
    many, _ = _history_then_lazy_names(40, listed=False)
    assert _table(few)[1] == 3 and _table(many)[1] == 2, (_table(few), _table(many))
    # Listed: the same table whatever ran before, and the attributes read back as set.
    few, record_after_few = _history_then_lazy_names(1, listed=True)
    many, record_after_many = _history_then_lazy_names(40, listed=True)
    assert _table(few) == _table(many) == (0, 2)
    for record in (record_after_few, record_after_many):
        assert vars(record) == {"value": 7, "doubled": 14, "squared": 49}


@COUNTED_SLOTS
def test_a_fresh_class_listed_shares_the_first_name_its_instances_set() -> None:
    cls = _record_class()
    shared_keys.track([cls])
    assert _table(cls) == (1, 0)
    first, second = cls(1), cls(2)
    second.extra = 3  # type: ignore[attr-defined]
    assert _table(cls) == (0, 1)
    assert (first.value, second.value, second.extra) == (1, 2, 3)  # type: ignore[attr-defined]


@COUNTED_SLOTS
def test_the_count_is_only_ever_lowered() -> None:
    cls = _record_class()
    kept = [cls(i) for i in range(40)]
    kept[0].extra = 1  # type: ignore[attr-defined]  # the last free slot
    assert _table(cls) == (0, 2)
    shared_keys.track([cls])
    assert _table(cls) == (0, 2)


def test_only_real_classes_are_listed() -> None:
    """A weak proxy to a class says it is a class (``isinstance``), but its address holds no key
    table: reading one there crashed the counted worker (tensordict's run, through
    ``ctypes.wintypes``' proxies)."""
    cls = _record_class()
    proxy = weakref.proxy(cls)
    assert isinstance(proxy, type)
    assert shared_keys.track([proxy, 3, "text", int]) == 0  # int: not a heap type
    assert shared_keys.track([cls]) == 1


def test_classes_of_modules_imported_later_are_listed(tmp_path, monkeypatch) -> None:
    name = f"late_classes_{tmp_path.name}"  # a name of this run only: never imported before
    (tmp_path / f"{name}.py").write_text(
        "class Late:\n    def __init__(self):\n        self.value = 1\n\n"
        "made = [Late() for _ in range(3)]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    # What this process imported so far counts as seen, so only the new module is listed (and
    # the session's own classes are left alone).
    seen = shared_keys.ModulesSince()
    seen.all_seen()
    monkeypatch.setattr(shared_keys, "_modules", seen)
    module = importlib.import_module(name)
    try:
        assert _keys_of(module.Late) is not None
        if sys.version_info[:2] != (3, 10):
            assert _table(module.Late)[0] > 1
        assert shared_keys.track_new_modules() == 1
        if sys.version_info[:2] == (3, 10):
            assert _keys_of(module.Late) is None
        else:
            assert _table(module.Late)[0] == 1
        assert shared_keys.track_new_modules() == 0  # nothing new since
    finally:
        sys.modules.pop(name, None)
