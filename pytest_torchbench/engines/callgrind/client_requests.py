"""Valgrind client requests issued from Python, without a compiler.

Why: switching Callgrind's instrumentation on *after* ``import torch`` is what makes one
valgrind process per session affordable (importing torch under instrumentation would cost
several times more: docs/design/counting.md), and
torch only binds CALLGRIND_TOGGLE_COLLECT (``torch._C._valgrind_toggle``), not
CALLGRIND_START_INSTRUMENTATION. A client request is just a magic instruction sequence that is a
no-op on real hardware and that valgrind's JIT recognises, so we write those few bytes into an
anonymous mapping, make it read-only and executable (never writable and executable at once: W^X),
and call them through :mod:`ctypes`. Outside valgrind the sequence returns the default value,
which is how :func:`running_on_valgrind` works. Why not a function in a compiled helper (the
allocator's shared object is compiled at run time already): that object is optional (no C
compiler: counting goes on with glibc malloc), and client requests are not; the costs of each
are in docs/design/counting.md, "Switching instrumentation on and off".

The request codes come from ``valgrind.h``/``callgrind.h`` (shipped with torch in
``torch/utils/benchmark/utils/valgrind_wrapper/``):
``VG_USERREQ_TOOL_BASE('C','T') == 0x43540000`` and the Callgrind requests follow in order.
"""

from __future__ import annotations

import ctypes
import functools
import mmap
import os
import platform
import sys
import threading
from collections.abc import Callable

__all__ = [
    "UnsupportedPlatform",
    "running_on_valgrind",
    "start_instrumentation",
    "stop_instrumentation",
    "toggle_collect",
    "toggle_collect_fast",
    "zero_stats",
    "dump_stats",
    "dump_stats_at",
]


class UnsupportedPlatform(RuntimeError):
    """Raised where Callgrind counting cannot work (valgrind here needs Linux on x86-64)."""


# valgrind.h: VG_USERREQ__RUNNING_ON_VALGRIND
_RUNNING_ON_VALGRIND = 0x1001
# callgrind.h: VG_USERREQ_TOOL_BASE('C','T') and the enum that follows it.
_TOOL_BASE = (ord("C") & 0xFF) << 24 | (ord("T") & 0xFF) << 16
_DUMP_STATS = _TOOL_BASE + 0
_ZERO_STATS = _TOOL_BASE + 1
_TOGGLE_COLLECT = _TOOL_BASE + 2
_DUMP_STATS_AT = _TOOL_BASE + 3
_START_INSTRUMENTATION = _TOOL_BASE + 4
_STOP_INSTRUMENTATION = _TOOL_BASE + 5

# uint64_t request(uint64_t *args /* rdi */, uint64_t default_ /* rsi */):
# the body of VALGRIND_DO_CLIENT_REQUEST_EXPR for PLAT_amd64_linux as a System V function.
_CODE = bytes(
    [
        0x48,
        0x89,
        0xF8,  # mov rax, rdi      ; rax = &args[0]
        0x48,
        0x89,
        0xF2,  # mov rdx, rsi      ; rdx = default
        0x48,
        0xC1,
        0xC7,
        0x03,  # rol rdi, 3  ; the special-instruction preamble:
        0x48,
        0xC1,
        0xC7,
        0x0D,  # rol rdi, 13 ; four rotations summing to 128 bits,
        0x48,
        0xC1,
        0xC7,
        0x3D,  # rol rdi, 61 ; i.e. a no-op on real hardware
        0x48,
        0xC1,
        0xC7,
        0x33,  # rol rdi, 51
        0x48,
        0x87,
        0xDB,  # xchg rbx, rbx     ; rdx = client_request(rax)
        0x48,
        0x89,
        0xD0,  # mov rax, rdx      ; return rdx
        0xC3,  # ret
    ]
)

_lock = threading.Lock()
_function: ctypes._CFuncPtr | None = None  # type: ignore[name-defined]
_keepalive: list[object] = []


def _check_platform() -> None:
    machine = platform.machine().lower()
    if not sys.platform.startswith("linux") or machine not in ("x86_64", "amd64"):
        raise UnsupportedPlatform(
            "Callgrind instruction counting needs Linux on x86-64 "
            f"(this is {sys.platform} on {platform.machine() or 'an unknown machine'})"
        )


def _request_function() -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    """Map the request trampoline once; later calls reuse it (valgrind translates it once).

    The page is written while it is read-write and then switched to read-execute with
    ``mprotect``, so it is never writable and executable at once: kernels and policies that
    refuse such mappings (W^X) accept it."""
    global _function
    if _function is not None:
        return _function
    with _lock:
        if _function is None:
            _check_platform()
            page = mmap.mmap(
                -1,
                mmap.PAGESIZE,
                flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS,
                prot=mmap.PROT_READ | mmap.PROT_WRITE,
            )
            page.write(_CODE)
            address = ctypes.addressof(ctypes.c_char.from_buffer(page))
            libc = ctypes.CDLL(None, use_errno=True)
            libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
            if libc.mprotect(address, mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_EXEC) != 0:
                errno = ctypes.get_errno()
                raise UnsupportedPlatform(
                    f"cannot make the client-request page executable: {os.strerror(errno)}"
                )
            prototype = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64)
            _keepalive.append(page)  # the mapping must outlive the function pointer
            _function = prototype(address)
    return _function


def _request(code: int, arg1: int = 0, default: int = 0) -> int:
    args = (ctypes.c_uint64 * 6)(code, arg1, 0, 0, 0, 0)
    return int(_request_function()(ctypes.addressof(args), default))


def running_on_valgrind() -> bool:
    """True inside a valgrind process (any tool); False natively. Raises only on a wrong
    platform."""
    return _request(_RUNNING_ON_VALGRIND, default=0) != 0


def start_instrumentation() -> None:
    """CALLGRIND_START_INSTRUMENTATION: costly (valgrind flushes its translations); do it once."""
    _request(_START_INSTRUMENTATION)


def stop_instrumentation() -> None:
    """CALLGRIND_STOP_INSTRUMENTATION."""
    _request(_STOP_INSTRUMENTATION)


def toggle_collect() -> None:
    """CALLGRIND_TOGGLE_COLLECT: cheap switch of event collection (instrumentation must be on)."""
    _request(_TOGGLE_COLLECT)


def toggle_collect_fast() -> Callable[[], int]:
    """A CALLGRIND_TOGGLE_COLLECT callable with no Python bytecode in it.

    Why: the region between the two toggles is counted, so the toggle itself should cost the same
    every time. A Python wrapper's bytecode is specialised by CPython over its first calls, so
    the first benchmark of a process would pay a few thousand instructions more than the next.
    This is a ``functools.partial`` over the ctypes function and a prebuilt argument block: C all
    the way down.
    """
    args = (ctypes.c_uint64 * 6)(_TOGGLE_COLLECT, 0, 0, 0, 0, 0)
    _keepalive.append(args)
    return functools.partial(_request_function(), ctypes.addressof(args), 0)


def zero_stats() -> None:
    """CALLGRIND_ZERO_STATS: forget the costs collected so far."""
    _request(_ZERO_STATS)


def dump_stats() -> None:
    """CALLGRIND_DUMP_STATS: write the costs collected so far to a new part file and zero them."""
    _request(_DUMP_STATS)


def dump_stats_at(label: str) -> None:
    """CALLGRIND_DUMP_STATS_AT(label): as :func:`dump_stats`, naming the part
    (``desc: Trigger:``)."""
    buffer = ctypes.create_string_buffer(label.encode("utf-8", "replace"))
    _request(_DUMP_STATS_AT, ctypes.addressof(buffer))
