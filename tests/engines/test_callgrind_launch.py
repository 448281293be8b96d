"""Launch pieces of the Callgrind engine that need no valgrind run: environment, argv,
client requests outside valgrind, and the preloaded allocator (natively)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_torchbench.engines import callgrind as cg
from pytest_torchbench.engines.callgrind import client_requests
from pytest_torchbench.engines.callgrind.launch import ENV_PAD_VARIABLE


def env_size(env: dict[str, str]) -> int:
    return sum(len(os.fsencode(k)) + len(os.fsencode(v)) + 2 for k, v in env.items())


def test_environment_passes_the_users_variables_and_pins_what_counting_needs(
    tmp_path: Path,
) -> None:
    source = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "LC_ALL": "C",
        "MY_DATASET": "/data/ünï",
        "TORCH_LOGS": "+dynamo",
        "CI": "true",
        "PYTEST_ADDOPTS": "-x",
        "PYTHONHASHSEED": "random",
        "LD_PRELOAD": "/evil.so",
        "PYTHONMALLOC": "pymalloc_debug",
        "PYTHONTRACEMALLOC": "5",
        "PYTHONDEVMODE": "1",
        "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2",
        "MALLOC_ARENA_MAX": "2",
        "VALGRIND_OPTS": "--leak-check=full",
        "OMP_NUM_THREADS": "8",
        "PYTEST_CURRENT_TEST": "t",
        ENV_PAD_VARIABLE: "user's",
    }
    allocator = tmp_path / "liballoc.so"
    env = cg.counted_environment(source, allocator)
    for name in ("PATH", "HOME", "LC_ALL", "MY_DATASET", "TORCH_LOGS", "CI", "PYTEST_ADDOPTS"):
        assert env[name] == source[name], name
    for name in (
        "PYTHONTRACEMALLOC",
        "PYTHONDEVMODE",
        "GLIBC_TUNABLES",
        "MALLOC_ARENA_MAX",
        "VALGRIND_OPTS",
        "PYTEST_CURRENT_TEST",
    ):
        assert name not in env, name
    assert env["PYTHONHASHSEED"] == "0"
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "1"
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["PYTHONMALLOC"] == "malloc" and env["LD_PRELOAD"] == str(allocator)
    assert set(env[ENV_PAD_VARIABLE]) == {"x"}
    without = cg.counted_environment(source, None)
    assert "LD_PRELOAD" not in without and "PYTHONMALLOC" not in without


def test_environment_block_has_a_fixed_size() -> None:
    short = cg.counted_environment({"PATH": "/bin"}, None)
    long = cg.counted_environment(
        {
            "PATH": "/bin:" + "x" * 1000,
            "UNRELATED": "y" * 1000,
            "CI": "true",
            "GITHUB_SHA": "0123456789abcdef0123456789abcdef01234567",
        },
        None,
        extra={"TORCHBENCH_A": "b"},
    )
    assert env_size(short) == env_size(long) == 32768
    huge = cg.counted_environment({"PATH": "x" * 40000}, None)
    assert env_size(huge) == 65536 and ENV_PAD_VARIABLE in huge
    odd = cg.counted_environment({"A=B": "1", "Z": "with\0nul", "B": "ok"}, None)
    assert "A=B" not in odd and "Z" not in odd and odd["B"] == "ok"


def test_valgrind_argv(tmp_path: Path) -> None:
    pattern = cg.out_file_pattern(tmp_path)
    assert pattern.endswith("callgrind.out.%p")
    argv = cg.valgrind_argv(sys.executable, pattern, no_aslr=False)
    assert argv[1] == "--tool=callgrind"
    if shutil.which("setarch"):
        assert cg.valgrind_argv(sys.executable, pattern)[:3] == [
            shutil.which("setarch"),
            "x86_64",
            "-R",
        ]
    for flag in ("--instr-atstart=no", "--collect-atstart=no", "--dump-instr=no", "-q"):
        assert flag in argv
    assert f"--callgrind-out-file={pattern}" in argv
    with pytest.raises(FileNotFoundError):
        cg.valgrind_argv(str(tmp_path / "no-python"), pattern)


def test_check_valgrind_reports_version_or_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("valgrind"):
        assert cg.check_valgrind().startswith("valgrind-")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(cg.ValgrindUnavailable, match="apt-get install valgrind"):
        cg.check_valgrind()


def test_client_requests_are_harmless_outside_valgrind() -> None:
    assert cg.running_on_valgrind() is False
    client_requests.toggle_collect()
    client_requests.zero_stats()
    client_requests.dump_stats_at("outside")


def test_unsupported_platform_is_clear(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_requests, "_function", None)
    monkeypatch.setattr(client_requests.platform, "machine", lambda: "aarch64")
    with pytest.raises(cg.UnsupportedPlatform, match="x86-64"):
        client_requests.running_on_valgrind()


def test_measure_outside_valgrind_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(cg.NotUnderValgrind, match="valgrind"):
        cg.measure(lambda: None, out_dir=tmp_path)


@pytest.fixture(scope="module")
def allocator(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = cg.build_allocator(tmp_path_factory.mktemp("alloc-cache"))
    if path is None:
        pytest.skip("no C compiler")
    return path


def test_allocator_build_is_cached_and_named_by_hash(allocator: Path) -> None:
    assert allocator.is_file() and cg.allocator_hash() in allocator.name
    mtime = allocator.stat().st_mtime_ns
    assert cg.build_allocator(allocator.parent) == allocator
    assert allocator.stat().st_mtime_ns == mtime


def test_allocator_without_compiler_returns_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CC", raising=False)
    assert cg.build_allocator(tmp_path) is None


TORCH_UNDER_ALLOCATOR = r"""
import ctypes, os, threading
import torch
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.memalign.restype = ctypes.c_void_p
libc.realloc.restype = ctypes.c_void_p
libc.realloc.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
libc.malloc_usable_size.argtypes = [ctypes.c_void_p]
libc.free.argtypes = [ctypes.c_void_p]
p = libc.memalign(4096, 100)
assert p % 4096 == 0 and libc.malloc_usable_size(p) >= 100
libc.free(p)
q = libc.malloc(10)
q = libc.realloc(q, 5000)
assert libc.malloc_usable_size(q) >= 5000
libc.free(q)
big = torch.randn(1000, 1000)
assert torch.allclose(big @ torch.eye(1000), big)
def work():
    for _ in range(50):
        torch.randn(64, 64).mm(torch.randn(64, 64)).sum()
threads = [threading.Thread(target=work) for _ in range(4)]
[t.start() for t in threads]
[t.join() for t in threads]
print("OK", os.environ["PYTHONMALLOC"])
"""


def test_torch_runs_with_the_allocator_preloaded(allocator: Path) -> None:
    env = cg.counted_environment(os.environ, allocator)
    repo = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = repo
    result = subprocess.run(
        [sys.executable, "-c", TORCH_UNDER_ALLOCATOR],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "OK malloc"


# What a thread's allocations get after start_heap_epoch: page offsets of fresh bytes objects and
# tensors (bytes and TensorImpls come from malloc, not from CPython's per-type free lists).
HEAP_EPOCH = r"""
import json, os, sys, threading, time
import torch
from pytest_torchbench.engines import callgrind as cg

garbage = int(sys.argv[1])
kept = [bytes(17 + i % 1500) for i in range(garbage)][::2]   # history: blocks kept and freed
stop = threading.Event()
shared = []
def busy():                                                  # another thread, timing-dependent
    while not stop.is_set():
        shared.append(bytes(100)); shared[-50:] = shared[-25:]
        time.sleep(0.0005)
if garbage:
    threading.Thread(target=busy, daemon=True).start()
    time.sleep(0.05)
assert cg.start_heap_epoch()
offsets = []
for size in (40, 200, 900, 5000, 40, 200):
    offsets.append(id(bytes(size)) % 4096)                    # freed at once: reused (LIFO)
objects = [bytes(size) for size in (48, 300, 1200)] + [torch.ones(4, 4), torch.ones(8)]
offsets += [id(o) % 4096 for o in objects[:3]] + [t._cdata % 4096 for t in objects[3:]]
del kept, shared[:]                                           # earlier epoch's blocks: not reused
offsets.append(id(bytes(300)) % 4096)
stop.set()
print(json.dumps({"offsets": offsets, "dropped": cg.dropped_bytes()}))
"""


def _heap_epoch_run(allocator: Path, garbage: int) -> dict[str, object]:
    env = cg.counted_environment(os.environ, allocator)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    done = subprocess.run(
        [sys.executable, "-c", HEAP_EPOCH, str(garbage)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_heap_epoch_gives_the_same_addresses_whatever_ran_before(allocator: Path) -> None:
    """After start_heap_epoch, a thread's blocks do not depend on its earlier allocations nor on
    another thread allocating at moments timing decides (an xdist worker's execnet thread): the
    page offsets that address-dependent paths (memcmp) see are the same."""
    quiet = _heap_epoch_run(allocator, 0)
    busy = _heap_epoch_run(allocator, 20_001)
    assert quiet["offsets"] == busy["offsets"]
    assert len(set(quiet["offsets"])) > 3  # not trivially equal
    # the earlier epoch's blocks freed after it started (~7 MB kept) are counted, not reused
    assert int(busy["dropped"]) > 1_000_000 > int(quiet["dropped"])


def test_start_heap_epoch_without_the_allocator_is_a_no_op() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pytest_torchbench.engines import callgrind as cg; "
            "print(cg.start_heap_epoch(), cg.dropped_bytes())",
        ],
        env={
            **os.environ,
            "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
            "LD_PRELOAD": "",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "0"]


def test_every_counted_worker_is_launched_from_the_one_spec(tmp_path: Path) -> None:
    """The instructions metric's launch is the spec's: same argv, same environment."""
    from pytest_torchbench.engines.callgrind.spec import CountedProcessSpec
    from pytest_torchbench.engines.callgrind.worker import DUMP_DIR_VARIABLE, CallgrindLaunch

    launch = CallgrindLaunch()
    launch.allocator, launch.valgrind_version = tmp_path / "liballoc.so", "valgrind-3.19.0"
    source = {"PATH": "/usr/bin", "PYTHONHASHSEED": "random"}
    argv, env = launch.command(sys.executable, tmp_path, source)
    spec = CountedProcessSpec.build(
        sys.executable,
        tmp_path,
        allocator=tmp_path / "liballoc.so",
        valgrind_version="valgrind-3.19.0",
        extra_environment={DUMP_DIR_VARIABLE: str(tmp_path)},
    )
    assert (argv, env) == spec.command(source)
    assert argv[-1] == sys.executable and "--tool=callgrind" in argv
    assert env["PYTHONHASHSEED"] == "0" and env[DUMP_DIR_VARIABLE] == str(tmp_path)


def test_a_settled_worker_has_imported_the_modules_that_change_the_interpreter() -> None:
    """filelock (imported by torch's first compile) installs an audit hook on Python 3.12+ that
    every later ``exec`` runs: a settled worker has it before its first test there (and does not
    import it where it installs nothing: 3.10, 3.11)."""
    pytest.importorskip("filelock", reason="filelock is a dependency of torch; not installed here")
    script = (
        "import sys\nfrom pytest_torchbench.engines.callgrind import spec\n"
        "assert 'filelock' not in sys.modules\nspec.settle_worker()\n"
        "print('filelock' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == str(sys.version_info >= (3, 12))
