"""A GPU suite for benchmarks/gpu_check.sh: one benchmark per kind of CUDA work the modes must
handle (a large matmul, a launch-bound add, an allocation, an MLP training step, a conv with cuDNN's
benchmark mode off and on, a host-to-device copy, a CUDA graph's replay, a torch.compile'd
function).

``TORCHBENCH_GPU_INJECT=1`` injects one regression per metric: the matmul runs twice (time,
gpu_time, kernels, ops), the add gets an extra ``* 1`` (ops: aten::mul, kernels: one more launch),
the allocation doubles (memory), the compiled function gets a graph break (compile).
"""

from __future__ import annotations

import os

import pytest
import torch

INJECT = os.environ.get("TORCHBENCH_GPU_INJECT") == "1"
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture
def generator() -> torch.Generator:
    return torch.Generator(device="cuda").manual_seed(0)


def test_matmul_bf16(benchmark, generator):
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=generator)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16, generator=generator)
    benchmark((lambda: (a @ b, a @ b)) if INJECT else (lambda: a @ b))


def test_add_small(benchmark):
    x = torch.ones(1024, device="cuda")
    benchmark((lambda: (x + 1) * 1) if INJECT else (lambda: x + 1))


def test_alloc_64mib(benchmark):
    numel = (2 if INJECT else 1) * 16 * 1024 * 1024  # float32: 64 MiB
    benchmark(lambda: torch.empty(numel, device="cuda"))


def test_mlp_step(benchmark, generator):
    model = torch.nn.Sequential(
        torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)
    ).cuda()
    x = torch.randn(256, 1024, device="cuda", generator=generator)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        model(x).sum().backward()

    benchmark(step)


@pytest.mark.parametrize("cudnn_benchmark", [False, True], ids=["cudnn_fixed", "cudnn_benchmark"])
def test_conv(benchmark, generator, cudnn_benchmark):
    conv = torch.nn.Conv2d(64, 64, 3, padding=1).cuda()
    x = torch.randn(16, 64, 56, 56, device="cuda", generator=generator)
    previous = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = cudnn_benchmark
    try:
        with torch.no_grad():
            benchmark(lambda: conv(x))
    finally:
        torch.backends.cudnn.benchmark = previous


def test_host_to_device(benchmark):
    host = torch.ones(4 * 1024 * 1024).pin_memory()
    benchmark(lambda: host.to("cuda", non_blocking=False))


def test_graph_replay(benchmark, generator):
    """A CUDA graph's replay launches its kernels outside any op: tied to the call by the runtime
    call's correlation id (cudaGraphLaunch), not by an op."""
    x = torch.randn(1024, 1024, device="cuda", generator=generator)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            x * 2 + 1
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        (x * 2 + 1).relu_()
    benchmark(graph.replay)


def test_compiled(benchmark, generator):
    x = torch.randn(1024, 1024, device="cuda", generator=generator)

    def f(t: torch.Tensor) -> torch.Tensor:
        t = torch.sin(t) * 2
        if INJECT:
            print("", end="")  # a graph break
        return torch.cos(t) + 1

    compiled = torch.compile(f)
    benchmark(compiled, x)
