"""engines.callgrind.quickening: functions marked are quickened (and specialised) by their next
call, as CPython 3.11 itself would after 8 calls (3.10: get their inline cache, as after 1024
calls); nothing else about them changes."""

from __future__ import annotations

import ctypes
import dis
import gc
import sys
import types
import warnings

import pytest

from pytest_torchbench.engines.callgrind import quickening

pytestmark = pytest.mark.skipif(
    sys.implementation.name != "cpython" or sys.version_info[:2] not in ((3, 10), (3, 11)),
    reason="CPython 3.11's warm-up counter and 3.10's call count (3.12 quickens at creation)",
)
#: The calls that quicken an unmarked function.
CALLS_TO_QUICKEN = quickening._QUICKENED - quickening._INITIAL_WARMUP


def _fresh(source: str, name: str) -> types.FunctionType:
    namespace: dict[str, object] = {"LIMIT": 3}
    exec(source, namespace)  # a new code object no one has called
    function = namespace[name]
    assert isinstance(function, types.FunctionType)
    return function


SOURCE = """
def outer(x):
    def inner(y):
        return y + LIMIT
    return inner(x) + LIMIT
"""


CLASS_SOURCE = """

class Box:
    def get(self):
        return LIMIT
"""


def _quickened(code: types.CodeType) -> bool:
    if sys.version_info[:2] == (
        3,
        10,
    ):  # the inline cache made (``co_opcache``, before the counter)
        return (
            ctypes.c_void_p.from_address(id(code) + quickening._WARMUP_OFFSET - 8).value is not None
        )
    return any(
        instruction.opname == "RESUME_QUICK"
        for instruction in dis.get_instructions(code, adaptive=True)
    )  # type: ignore[call-arg]


def _inner_code(function: types.FunctionType) -> types.CodeType:
    return next(c for c in function.__code__.co_consts if isinstance(c, types.CodeType))


def test_this_interpreter_is_supported() -> None:
    assert quickening.supported()


@pytest.mark.skipif(
    sys.gettrace() is not None,
    reason="under a tracer (coverage, a debugger) 3.11 does not specialise",
)
def test_a_marked_function_and_its_nested_code_are_quickened_by_their_next_call() -> None:
    outer = _fresh(SOURCE, "outer")
    outer(1)
    assert not _quickened(outer.__code__)  # one call: CPython 3.11 still runs plain bytecode
    assert quickening.quicken_at_next_call([outer]) == 2  # outer and the nested inner
    assert outer(1) == 7  # the same behaviour...
    assert _quickened(outer.__code__) and _quickened(_inner_code(outer))  # ...quickened
    if sys.version_info[:2] == (3, 11):
        names = {i.opname for i in dis.get_instructions(outer.__code__, adaptive=True)}  # type: ignore[call-arg]
        assert "LOAD_GLOBAL_MODULE" in names  # and specialised in that same call


def test_an_unmarked_function_needs_its_eight_calls() -> None:
    """(1024 on 3.10.)"""
    outer = _fresh(SOURCE, "outer")
    for _ in range(CALLS_TO_QUICKEN - 1):
        outer(1)
    assert not _quickened(outer.__code__)
    outer(1)
    assert _quickened(outer.__code__)


def test_quickened_code_is_left_alone_and_marking_twice_counts_once() -> None:
    done = _fresh(SOURCE, "outer")
    for _ in range(CALLS_TO_QUICKEN + 1):
        done(1)
    fresh = _fresh(SOURCE, "outer")
    assert (
        quickening.quicken_at_next_call([done, fresh, fresh, "not a function", len]) == 2
    )  # fresh's two
    assert quickening.quicken_at_next_call([fresh]) == 0  # already marked


def test_by_default_every_function_the_collector_lists_is_marked() -> None:
    outer = _fresh(SOURCE, "outer")
    assert quickening.quicken_at_next_call() >= 2
    outer(1)
    assert _quickened(outer.__code__)


def test_new_modules_trigger_another_marking_and_nothing_else_does(tmp_path, monkeypatch) -> None:
    quickening.quicken_at_next_call()
    assert quickening.quicken_new_modules() == 0  # nothing imported since
    (tmp_path / "freshly_imported_mod.py").write_text("LIMIT = 3\n" + SOURCE + CLASS_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import freshly_imported_mod  # noqa: F401 - imported for its functions

    try:
        # A region freezes the collector before counting: a module imported in a first call is
        # frozen by the time the next test asks, and still found (through sys.modules).
        gc.collect()
        gc.freeze()
        assert quickening.quicken_new_modules() == 3  # outer, its inner, and the method
        assert quickening.quicken_new_modules() == 0  # once
        freshly_imported_mod.outer(1)
        freshly_imported_mod.Box().get()
        assert _quickened(freshly_imported_mod.outer.__code__)
        assert _quickened(freshly_imported_mod.Box.get.__code__)
    finally:
        gc.unfreeze()
        sys.modules.pop("freshly_imported_mod", None)


HOSTILE_MODULE = """
import sys, warnings

LIMIT = 3


def kept(x):
    return x + LIMIT


class DeprecatedAlias:
    # what torch.distributed.reduce_op is: asking isinstance() of it warns
    @property
    def __class__(self):
        warnings.warn("deprecated alias", FutureWarning)
        return int


alias = DeprecatedAlias()


class Strict(type):
    def __getattribute__(cls, name):
        raise AssertionError(f"the class was asked for {name}")


class Guarded(metaclass=Strict):
    def method(self):
        return LIMIT


class LazyModule:
    # not a module at all, and every attribute asked of it fails
    def __getattr__(self, name):
        raise AssertionError(f"the lazy module was asked for {name}")


sys.modules["hostile_lazy_entry"] = LazyModule()
"""


def test_new_modules_are_read_without_running_their_code(tmp_path, monkeypatch) -> None:
    """Marking runs inside the user's test: reading a module's namespace must not call a lazy
    module's ``__getattr__``, a metaclass's ``__getattribute__`` or a deprecated alias's
    ``__class__`` (a warning there fails a ``-W error`` suite)."""
    quickening.quicken_at_next_call()
    (tmp_path / "hostile_mod.py").write_text(HOSTILE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import hostile_mod  # noqa: F401 - imported for its functions

        with warnings.catch_warnings():
            warnings.simplefilter("error")
            # kept, DeprecatedAlias's __class__ getter, Strict.__getattribute__, Guarded.method,
            # LazyModule.__getattr__
            assert quickening.quicken_new_modules() == 5
        hostile_mod.kept(1)
        assert _quickened(hostile_mod.kept.__code__)
    finally:
        sys.modules.pop("hostile_mod", None)
        sys.modules.pop("hostile_lazy_entry", None)


WRAPPED_MODULE = """
LIMIT = 3


class Tools:
    @staticmethod
    def static(x):
        return x + LIMIT

    @classmethod
    def made(cls, x):
        return x + LIMIT

    @property
    def value(self):
        return LIMIT

    @value.setter
    def value(self, new):
        pass


class Odd:
    # a key of sys.modules that is not a string, whose hash is the user's code
    armed = False

    def __hash__(self):
        if Odd.armed:
            raise AssertionError("the key's __hash__ ran")
        return 1


import sys
sys.modules[Odd()] = sys.modules[__name__]
Odd.armed = True
"""


def test_functions_behind_static_and_class_methods_and_properties_are_marked_too(
    tmp_path, monkeypatch
) -> None:
    """Much of a library's code sits behind ``@staticmethod``, ``@classmethod`` and
    ``@property``; a ``sys.modules`` key that is not a string is skipped without hashing it."""
    quickening.quicken_at_next_call()
    (tmp_path / "wrapped_mod.py").write_text(WRAPPED_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import wrapped_mod

        # static, made, the getter and the setter (Odd.__hash__ too: it is a function)
        assert quickening.quicken_new_modules() == 5
        wrapped_mod.Tools.static(1)
        wrapped_mod.Tools.made(1)
        assert wrapped_mod.Tools().value == 3
        for code in (
            vars(wrapped_mod.Tools)["static"].__func__.__code__,
            vars(wrapped_mod.Tools)["made"].__func__.__code__,
            wrapped_mod.Tools.value.fget.__code__,
        ):
            assert _quickened(code)
    finally:
        sys.modules["wrapped_mod"].Odd.armed = False
        for key in [k for k in sys.modules if type(k) is not str]:
            del sys.modules[key]
        sys.modules.pop("wrapped_mod", None)


def test_nothing_is_marked_under_a_trace_function() -> None:
    """A trace function (coverage, a debugger) runs between any two lines: marking would no
    longer read and write a counter in one step, so it stands aside."""
    outer = _fresh(SOURCE, "outer")
    before = sys.gettrace()
    sys.settrace(lambda frame, event, arg: None)
    try:
        assert quickening.quicken_at_next_call([outer]) == 0
    finally:
        sys.settrace(before)
    assert quickening.quicken_at_next_call([outer]) == (0 if before is not None else 2)


def test_a_wrong_layout_fails_the_check(monkeypatch) -> None:
    """The only guard against writing elsewhere in a code object: a wrong offset must fail it."""
    flags_at, warmup_at = quickening._FLAGS_OFFSET, quickening._WARMUP_OFFSET
    for flags, warmup in (
        (flags_at - 4, warmup_at),
        (flags_at, warmup_at - 2),
        (flags_at, warmup_at + 4),
        (flags_at - 8, warmup_at),
    ):
        monkeypatch.setattr(quickening, "_FLAGS_OFFSET", flags)
        monkeypatch.setattr(quickening, "_WARMUP_OFFSET", warmup)
        assert not quickening.supported.__wrapped__(), (flags, warmup)
    monkeypatch.undo()
    assert quickening.supported.__wrapped__()


def test_where_the_layout_is_not_the_expected_one_nothing_is_written(monkeypatch) -> None:
    monkeypatch.setattr(quickening, "supported", lambda: False)
    outer = _fresh(SOURCE, "outer")
    assert quickening.quicken_at_next_call([outer]) == 0
    assert quickening.quicken_new_modules() == 0
    outer(1)
    assert not _quickened(outer.__code__)
