"""How a kernel's device time follows the GPU's SM clock: the figures behind gpu_time's clock rule.

On a machine with a CUDA device and NVML (``pynvml``, from the nvidia-ml-py package), from the
repository root::

    python benchmarks/gpu_clocks.py            # about a minute

Three workloads (a 4096^3 bf16 matmul: compute-bound; a 1 GiB device-to-device copy:
memory-bound; a 1024-element add: launch-bound) are timed call by call with CUDA events, each
call followed by a read of the SM clock, in three states of the GPU: after idling, after 5 s and
after 20 s of sustained 8192^3 matmuls. For each it prints the fastest call, the median call, the
median clock and the median of time x clock (cycles): the spread across states of each tells
whether device time or cycles is the stable quantity, and for which kind of work.

Exit status: 0 done, 2 no CUDA device or no pynvml (one line says which; nothing is run).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable

import torch

#: The exit status when there is no CUDA device or no NVML binding.
NOT_HERE = 2


def main() -> int:
    if not torch.cuda.is_available():
        print(f"gpu_clocks: no CUDA device (torch {torch.__version__}): needs a GPU, nothing timed")
        return NOT_HERE
    try:
        import pynvml
    except ImportError:
        print("gpu_clocks: needs pynvml (pip install nvidia-ml-py): nothing timed")
        return NOT_HERE
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    print(
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, "
        f"max SM clock {pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM)} MHz, "
        f"power limit {pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000:.0f} W",
        flush=True,
    )

    def sm_clock() -> int:
        return int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))

    def state() -> str:
        temp = pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)
        power = pynvml.nvmlDeviceGetPowerUsage(handle) / 1000
        reasons_of = (
            getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        return f"{temp} C, {power:.0f} W, SM {sm_clock()} MHz, reasons 0x{reasons_of(handle):x}"

    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=g)
    big = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16, generator=g)
    src = torch.empty(256 * 1024 * 1024, device="cuda")  # 1 GiB float32
    dst = torch.empty_like(src)
    small = torch.ones(1024, device="cuda")
    workloads: dict[str, Callable[[], object]] = {
        "matmul 4096^3 bf16": lambda: a @ b,
        "copy 1 GiB": lambda: dst.copy_(src),
        "add 1024": lambda: small + 1,
    }

    def heat(seconds: float) -> None:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            for _ in range(8):
                big @ big
            torch.cuda.synchronize()

    def timed(fn: Callable[[], object], calls: int = 100) -> tuple[list[float], list[int]]:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        times, clocks = [], []
        for _ in range(calls):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            clocks.append(sm_clock())
            times.append(start.elapsed_time(end) * 1e3)  # us
        return times, clocks

    rows: dict[str, list[tuple[float, float, float, float]]] = {name: [] for name in workloads}
    for label, idle, sustained in (
        ("after 3 s idle", 3.0, 0.0),
        ("after 5 s sustained", 0.0, 5.0),
        ("after 20 s sustained", 0.0, 20.0),
    ):
        time.sleep(idle)
        heat(sustained)
        print(f"\n{label}: {state()}", flush=True)
        for name, fn in workloads.items():
            times, clocks = timed(fn)
            cycles = [t * c for t, c in zip(times, clocks)]  # us x MHz = cycles
            row = (
                min(times),
                statistics.median(times),
                statistics.median(clocks),
                statistics.median(cycles),
            )
            rows[name].append(row)
            print(
                f"  {name}: fastest {row[0]:.2f} us, median {row[1]:.2f} us, "
                f"median clock {row[2]:.0f} MHz, "
                f"median cycles {row[3]:.0f} (clock range {min(clocks)}-{max(clocks)} MHz)",
                flush=True,
            )

    def spread(values: list[float]) -> float:
        return (max(values) / min(values) - 1) * 100

    print(
        "\n| workload | fastest: spread | median: spread | clock: spread "
        "| cycles (median): spread |"
    )
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, found in rows.items():
        print(
            f"| {name} | {spread([r[0] for r in found]):.2f}% | "
            f"{spread([r[1] for r in found]):.2f}% | "
            f"{spread([r[2] for r in found]):.2f}% | {spread([r[3] for r in found]):.2f}% |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
