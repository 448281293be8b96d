"""engines.fresh_code: copies that behave as the original and whose code has never run."""

from __future__ import annotations

import functools
import types
from unittest import mock

import pytest
import torch

from pytest_torchbench.engines.fresh_code import fresh_callable

SCALE = 3


def scaled(x: int, *, by: int = 2) -> int:
    return x * by * SCALE


def with_nested(x: int) -> int:
    inner = lambda y: y + 1  # noqa: E731 - a nested code object
    return inner(x)


class Thing:
    def __init__(self) -> None:
        self.base = 10

    def add(self, x: int) -> int:
        return super().__getattribute__("base") + x


def _all_codes(code: types.CodeType) -> list[types.CodeType]:
    found = [code]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found += _all_codes(const)
    return found


def test_a_plain_function_is_copied_with_new_code_objects_and_the_same_behaviour() -> None:
    copy = fresh_callable(with_nested)
    assert copy is not with_nested and copy(4) == with_nested(4) == 5
    ours, theirs = _all_codes(copy.__code__), _all_codes(with_nested.__code__)
    assert len(ours) == len(theirs) == 2
    assert all(a is not b and a.co_code == b.co_code for a, b in zip(ours, theirs))
    assert copy.__name__ == "with_nested" and copy.__qualname__ == with_nested.__qualname__
    assert copy.__module__ == with_nested.__module__


def test_globals_defaults_and_keyword_defaults_are_the_originals() -> None:
    copy = fresh_callable(scaled)
    assert copy(1) == 6 and copy(1, by=5) == 15
    global SCALE
    SCALE = 4
    try:
        assert copy(1) == 8  # the same globals, not a snapshot
    finally:
        SCALE = 3
    copy.__kwdefaults__["by"] = 7
    assert scaled(1) == 6  # its keyword defaults are its own dict


def test_a_closure_sees_the_same_cells() -> None:
    box = [1]

    def read() -> int:
        return box[0]

    copy = fresh_callable(read)
    box[0] = 9
    assert copy() == 9


def test_bound_methods_and_partials_keep_their_binding() -> None:
    thing = Thing()
    method = fresh_callable(thing.add)
    assert isinstance(method, types.MethodType) and method.__self__ is thing and method(1) == 11
    assert method.__func__ is not Thing.add
    partial = fresh_callable(functools.partial(scaled, 2, by=1))
    assert isinstance(partial, functools.partial) and partial() == 6
    assert partial.func is not scaled


def test_what_is_not_plain_user_code_is_left_alone() -> None:
    module = torch.nn.Linear(2, 2)
    assert fresh_callable(module) is module
    assert fresh_callable(torch.add) is torch.add
    assert fresh_callable(torch.nn.functional.pad) is torch.nn.functional.pad  # torch's own code
    compiled = torch.compile(scaled, backend="eager")
    assert fresh_callable(compiled) is compiled  # its graphs belong to its code
    pad_partial = functools.partial(torch.nn.functional.pad, pad=(1, 1))
    assert fresh_callable(pad_partial) is pad_partial


@pytest.mark.parametrize("fn", [len, print, object()], ids=["builtin", "print", "not-callable"])
def test_other_objects_come_back_unchanged(fn: object) -> None:
    assert fresh_callable(fn) is fn  # type: ignore[arg-type]


class _Proxy:
    """What ``wrapt``'s decorators are: an object that says it is the function it wraps."""

    def __init__(self, wrapped: object) -> None:
        self._wrapped = wrapped
        self.calls = 0

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return types.FunctionType

    def __call__(self, *args: object) -> object:
        self.calls += 1
        return self._wrapped(*args)  # type: ignore[operator]


class _LoggedPartial(functools.partial):  # type: ignore[type-arg]
    def __call__(self, *args: object, **kwargs: object) -> object:
        return ("logged", super().__call__(*args, **kwargs))


def test_objects_that_only_claim_to_be_functions_are_left_alone() -> None:
    """A proxy's ``__class__``, a ``Mock(spec=f)`` and a ``partial`` subclass would lose what they
    add if copied as the function or partial they resemble."""
    proxy = _Proxy(scaled)
    assert isinstance(proxy, types.FunctionType)  # what isinstance() would have believed
    assert fresh_callable(proxy) is proxy  # type: ignore[arg-type]
    spec = mock.Mock(spec=scaled)
    assert fresh_callable(spec) is spec
    logged = _LoggedPartial(scaled, 1)
    assert fresh_callable(logged) is logged and logged() == ("logged", 6)


def annotated(x: int, y: Thing) -> list[int]:
    return [x]


def test_the_copy_keeps_the_type_hints() -> None:
    copy = fresh_callable(annotated)
    assert copy is not annotated
    assert (
        copy.__annotations__ == annotated.__annotations__
        and copy.__annotations__ is not annotated.__annotations__
    )


_KERNELS: dict[object, str] = {}


def _registered(fn):  # type: ignore[no-untyped-def]
    """A user's own decorator that keys a registry on the function it wraps (as JIT-ish
    libraries do): a copy that held another function in its closure would raise KeyError."""
    _KERNELS[fn] = fn.__name__

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        return (_KERNELS[fn], fn(*args, **kwargs))

    return wrapper


@torch.no_grad()
def doubled_without_grad(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@torch.enable_grad()
@torch.autocast("cpu")
@torch.inference_mode()
def stacked(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@_registered
def registered(x: int) -> int:
    return x + 1


def test_a_decorated_function_is_copied_inside_its_decorator() -> None:
    """``@torch.no_grad()``: torch's wrapper keeps its code (shared by every function it wraps);
    the user's function in its closure is a fresh copy; the decorator still does its work."""
    copy = fresh_callable(doubled_without_grad)
    assert copy is not doubled_without_grad and copy.__code__ is doubled_without_grad.__code__
    inner, original = copy.__wrapped__, doubled_without_grad.__wrapped__  # type: ignore[attr-defined]
    assert inner is not original and inner.__code__ is not original.__code__
    assert inner.__code__.co_code == original.__code__.co_code
    assert any(cell.cell_contents is inner for cell in copy.__closure__)  # what the wrapper calls
    assert any(
        cell.cell_contents is original for cell in doubled_without_grad.__closure__
    )  # untouched
    x = torch.ones(2, requires_grad=True)
    assert not copy(x).requires_grad and torch.equal(copy(x), doubled_without_grad(x))


def test_stacked_torch_decorators_are_copied_to_the_innermost_function() -> None:
    copy = fresh_callable(stacked)
    assert torch.equal(copy(torch.zeros(1)), torch.ones(1)) and copy(torch.zeros(1)).is_inference()
    ours, theirs = copy, stacked
    for _ in range(
        3
    ):  # enable_grad's, autocast's and inference_mode's wrappers (kept), the function
        assert ours is not theirs and ours.__code__.co_code == theirs.__code__.co_code
        ours, theirs = ours.__wrapped__, theirs.__wrapped__  # type: ignore[attr-defined]
    assert ours.__code__ is not theirs.__code__ and ours.__name__ == "stacked"


def test_a_users_own_decorator_is_copied_as_it_is() -> None:
    """Its closure may be keyed on (or rebind) the function it wraps: fresh code for the wrapper,
    the same closure, so the registry still finds the function (it raised KeyError when the copy
    held a copy of the function)."""
    copy = fresh_callable(registered)
    assert copy is not registered and copy.__code__ is not registered.__code__
    assert copy.__closure__ == registered.__closure__
    assert copy(1) == ("registered", 2)


def test_code_that_torch_compile_compiled_is_kept() -> None:
    """A test body compiling a lambda: dynamo's graphs are keyed on the lambda's code object, and
    a copy of it would compile again in the measured calls."""

    def body(x: torch.Tensor) -> torch.Tensor:
        return torch.compile(lambda y: y.sin() + 1, backend="eager")(x)

    def nested_codes(fn: types.FunctionType) -> list[types.CodeType]:
        return [c for c in fn.__code__.co_consts if isinstance(c, types.CodeType)]

    fresh_before = fresh_callable(body)  # not compiled yet: the lambda's code is copied
    assert nested_codes(fresh_before)[0] is not nested_codes(body)[0]
    body(torch.ones(2))
    copy = fresh_callable(body)
    assert copy.__code__ is not body.__code__ and nested_codes(copy)[0] is nested_codes(body)[0]
    assert torch.allclose(copy(torch.ones(2)), torch.ones(2).sin() + 1)


def test_wrappers_that_do_not_hold_what_they_name_are_copied_as_plain_functions() -> None:
    """``__wrapped__`` is only followed into a closure cell that holds it; a chain that loops
    back, an empty cell and a ``__wrapped__`` that is no function are no trouble."""

    def target() -> int:
        return 1

    def by_global() -> int:
        return scaled(1)

    by_global.__wrapped__ = scaled  # type: ignore[attr-defined]
    copy = fresh_callable(by_global)
    assert copy() == 6 and copy.__wrapped__ is scaled  # type: ignore[attr-defined]

    def looping() -> int:
        return looping.__name__ and target()  # type: ignore[return-value]

    looping.__wrapped__ = looping  # type: ignore[attr-defined]
    assert fresh_callable(looping)() == 1

    def later() -> int:
        return late()  # noqa: F821 - an empty cell until the assignment below

    later.__wrapped__ = target  # type: ignore[attr-defined]
    assert fresh_callable(later) is not later
    late = target  # noqa: F841

    def odd() -> int:
        return 2

    odd.__wrapped__ = functools.partial(scaled, 1)  # type: ignore[attr-defined]
    assert fresh_callable(odd)() == 2


def test_a_compiled_function_inside_a_decorator_is_left_alone() -> None:
    compiled = torch.compile(scaled, backend="eager")
    wrapped = torch.no_grad()(compiled)
    assert fresh_callable(wrapped) is wrapped  # torch's wrapper around a function with graphs
