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


def annotated(x: int, y: "Thing") -> list[int]:
    return [x]


def test_the_copy_keeps_the_type_hints() -> None:
    copy = fresh_callable(annotated)
    assert copy is not annotated
    assert copy.__annotations__ == annotated.__annotations__ and copy.__annotations__ is not annotated.__annotations__
