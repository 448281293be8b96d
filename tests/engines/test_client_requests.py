"""engines/callgrind/client_requests: the request page is never writable and executable at once,
and natively every request is a no-op that answers "not on valgrind"."""

from __future__ import annotations

import ctypes
import platform
import sys

import pytest

from pytest_torchbench.engines.callgrind import client_requests

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.machine().lower() not in ("x86_64", "amd64"),
    reason="client requests need Linux on x86-64",
)


def _permissions(address: int) -> str:
    with open("/proc/self/maps", encoding="ascii") as maps:
        for line in maps:
            low, high = (int(part, 16) for part in line.split()[0].split("-"))
            if low <= address < high:
                return line.split()[1]
    raise AssertionError(f"{address:#x} is in no mapping")


def test_the_request_page_is_read_execute_only() -> None:
    address = ctypes.cast(client_requests._request_function(), ctypes.c_void_p).value
    assert address is not None
    assert _permissions(address) == "r-xp"  # W^X: written first, then made executable


def test_natively_requests_are_no_ops() -> None:
    assert client_requests.running_on_valgrind() is False
    toggle = client_requests.toggle_collect_fast()
    assert toggle() == 0
    client_requests.zero_stats()
    client_requests.dump_stats_at("native")
