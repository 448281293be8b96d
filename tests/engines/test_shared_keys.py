"""Classes' shared attribute keys at a state that no longer follows history (CPython 3.11)."""
from __future__ import annotations

import ctypes
import importlib
import sys
import sysconfig
import weakref

import pytest

from pytest_torchbench.engines.callgrind import shared_keys

SUPPORTED_HERE = (sys.implementation.name == "cpython" and (3, 11) <= sys.version_info[:2] <= (3, 13)
                  and not sysconfig.get_config_var("Py_GIL_DISABLED"))
pytestmark = pytest.mark.skipif(not SUPPORTED_HERE, reason="the pin is on for CPython 3.11-3.13")


def _record_class() -> type:
    class Record:
        def __init__(self, value: int) -> None:
            self.value = value
    return Record


def _table(cls: type) -> tuple[int, int]:
    """(free slots, names) of the class's shared key table."""
    offset = shared_keys._keys_offset()
    assert offset is not None
    keys = ctypes.c_void_p.from_address(id(cls) + offset).value
    assert keys
    return (ctypes.c_ssize_t.from_address(keys + 16).value, ctypes.c_ssize_t.from_address(keys + 24).value)


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
    """3.11-3.13 with the GIL: the probe's offsets and counts check out (were they to stop, on a
    new patch release, every other test here would fail to find a table)."""
    assert shared_keys.supported()


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


def test_a_fresh_class_listed_shares_the_first_name_its_instances_set() -> None:
    cls = _record_class()
    shared_keys.track([cls])
    assert _table(cls) == (1, 0)
    first, second = cls(1), cls(2)
    second.extra = 3  # type: ignore[attr-defined]
    assert _table(cls) == (0, 1)
    assert (first.value, second.value, second.extra) == (1, 2, 3)  # type: ignore[attr-defined]


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
        "class Late:\n    def __init__(self):\n        self.value = 1\n\nmade = [Late() for _ in range(3)]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    # What this process imported so far counts as seen, so only the new module is listed (and
    # the session's own classes are left alone).
    seen = shared_keys.ModulesSince()
    seen.all_seen()
    monkeypatch.setattr(shared_keys, "_modules", seen)
    module = importlib.import_module(name)
    try:
        assert _table(module.Late)[0] > 1
        assert shared_keys.track_new_modules() == 1
        assert _table(module.Late)[0] == 1
        assert shared_keys.track_new_modules() == 0  # nothing new since
    finally:
        sys.modules.pop(name, None)
