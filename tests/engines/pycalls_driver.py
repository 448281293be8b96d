"""Workloads for the Python-calls engine tests, runnable by any Python 3.10+ without torch or
pytest.

``test_pycalls.py`` calls :func:`report` in its own interpreter (3.11 here: ``sys.setprofile``), and
runs this file as a script with the other interpreters it finds (3.12 and 3.13: ``sys.monitoring``;
3.10: ``sys.setprofile`` without qualified names), which print the same report as JSON. So both
hooks are checked against one expectation.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # this checkout, first

from pytest_torchbench.engines import pycalls  # noqa: E402
from pytest_torchbench.engines.sites import PLUGIN_DIR  # noqa: E402


class Box:
    def __init__(self, data: dict[int, int]) -> None:
        self.data = data

    def get(self, key: int) -> int:
        return self.data[key]


def helper(value: int) -> int:
    return value


def numbers(n: int) -> Any:
    for i in range(n):  # a generator: it starts once, and is resumed n + 1 times
        yield i


def work(box: Box) -> list[int]:
    total = 0
    for key in numbers(4):
        total += helper(box.get(key))  # 4 calls of Box.get and of helper
    return sorted([3, 1, 2], key=lambda v: -v)  # a C function calling a lambda 3 times


class Suspend:
    def __await__(self) -> Any:
        yield  # suspends the coroutine awaiting it once


async def coroutine() -> int:
    await Suspend()
    return 1


def resumables() -> list[int]:
    """A closure generator and a coroutine that suspends: each starts once, however often
    resumed."""
    k = 3

    def inner() -> Any:
        for i in range(k):
            yield i

    running = coroutine()
    running.send(None)  # runs until Suspend's yield
    try:
        running.send(None)  # resumes it to the end
    except StopIteration:
        pass
    return list(inner())


_filled: list[int] = []


def fill() -> None:
    _filled.append(1)


def cached() -> int:
    if not _filled:
        fill()  # the first call only: the warm-up's
    return helper(1)


def seeding() -> None:
    helper(0)


def spin() -> None:
    pass


def with_a_busy_thread(box: Box) -> Callable[[], Any]:
    """``work`` while another thread runs ``spin`` in a loop (it must not be counted)."""
    stop = threading.Event()
    started = threading.Event()

    def loop() -> None:
        started.set()
        while not stop.is_set():
            spin()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    started.wait()

    def run() -> list[int]:
        result: list[int] = []
        for _ in range(5):
            result = work(box)
            time.sleep(0.005)  # the other thread runs meanwhile
        return result

    run.stop = lambda: (stop.set(), thread.join())  # type: ignore[attr-defined]
    return run


def ours(fn: Callable[[], Any]) -> Callable[[], Any]:
    """A wrapper whose code lives in the plugin's folder, as the fixtures' wrappers do."""
    namespace: dict[str, Any] = {"fn": fn}
    exec(
        compile(
            "def wrapper():\n    return fn()\n",
            os.path.join(PLUGIN_DIR, "wrapper_for_tests.py"),
            "exec",
        ),
        namespace,
    )
    return namespace["wrapper"]  # type: ignore[no-any-return]


def generated() -> Callable[[], int]:
    """A function whose code was made at run time, as torch.fx makes ``<eval_with_key>.12``."""
    namespace: dict[str, Any] = {}
    exec(compile("def forward():\n    return 1\n", "<eval_with_key>.12", "exec"), namespace)
    return namespace["forward"]  # type: ignore[no-any-return]


def report() -> dict[str, Any]:
    box = Box({i: i for i in range(4)})
    out: dict[str, Any] = {"hook": pycalls.HOOK}
    out["work"] = pycalls.count_calls(functools.partial(work, box), root=HERE)
    out["again"] = pycalls.count_calls(functools.partial(work, box), root=HERE)
    out["resumables"] = pycalls.count_calls(resumables, root=HERE)
    out["cached"] = pycalls.count_calls(cached, root=HERE, before_region=seeding)
    out["ours"] = pycalls.count_calls(ours(functools.partial(work, box)), root=HERE)
    out["generated"] = pycalls.count_calls(generated(), root=HERE)
    busy = with_a_busy_thread(box)
    try:
        out["busy"] = pycalls.count_calls(busy, root=HERE, iterations=1, warmup=0)
    finally:
        busy.stop()  # type: ignore[attr-defined]
    sites = pycalls.call_sites(functools.partial(work, box), root=HERE)
    out["sites"], out["defined"] = sites.sites, sites.defined

    def previous(*args: Any) -> None:
        pass

    if sys.version_info < (3, 12):
        sys.setprofile(previous)
        pycalls.count_calls(functools.partial(work, box))
        out["left_behind"] = sys.getprofile() is previous
        sys.setprofile(None)
    else:
        pycalls.count_calls(functools.partial(work, box))
        out["left_behind"] = all(sys.monitoring.get_tool(tool) is None for tool in (2, 3, 4))
    out["all_taken"] = all_tool_ids_taken(box)
    return out


def all_tool_ids_taken(box: Box) -> str:
    """What counting says when another tool holds every sys.monitoring id it may use (3.12+)."""
    if sys.version_info < (3, 12):
        return "no tool ids before 3.12"
    for tool in (2, 3, 4):
        sys.monitoring.use_tool_id(tool, "someone else")
    try:
        pycalls.count_calls(functools.partial(work, box))
    except RuntimeError as exc:
        return str(exc)
    finally:
        for tool in (2, 3, 4):
            sys.monitoring.free_tool_id(tool)
    return "counted"


if __name__ == "__main__":
    print(json.dumps(report()))
