"""Whether a kernel's parameter block costs GPU time per CUDA-graph node: the round ops pass
40-41 parameters (22 tensors and 18-19 ints), the empty kernel the targets compare with one.

    python scripts/param_floor.py

For G = 1 and 128 programs of one warp, launched with PDL as the ops are: empty kernels with
1, 22 and 41 parameters, and a kernel whose lanes make 3 dependent reads and a store (as
scripts/grid_floor.py) with its 4 parameters and with 37 more it does not use. GPU µs per call
in a CUDA graph (bench_ops.graph_us), three timings each.
"""

import importlib
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_ops  # noqa: E402

POINTERS, INTS = 22, 18

# Triton compiles a kernel from its source file, so the kernels with many parameters are
# written out as one.
_SOURCE = '''
import triton
import triton.language as tl
from spec_ops._triton._launch import pdl_prologue


@triton.jit
def empty_1(x, PDL: tl.constexpr):
    pdl_prologue(PDL)


@triton.jit
def empty_22({pointers}, PDL: tl.constexpr):
    pdl_prologue(PDL)


@triton.jit
def empty_41({pointers}, {ints}, x, PDL: tl.constexpr):
    pdl_prologue(PDL)


@triton.jit
def trips_4(a_ptr, b_ptr, c_ptr, out_ptr, PDL: tl.constexpr):
    pdl_prologue(PDL)
    i = tl.program_id(0).to(tl.int64) * 32 + tl.arange(0, 32)
    value = tl.load(c_ptr + tl.load(b_ptr + tl.load(a_ptr + i)))
    tl.store(out_ptr + i, value + 1)


@triton.jit
def trips_41(a_ptr, b_ptr, c_ptr, out_ptr, {unused_pointers}, {ints}, PDL: tl.constexpr):
    pdl_prologue(PDL)
    i = tl.program_id(0).to(tl.int64) * 32 + tl.arange(0, 32)
    value = tl.load(c_ptr + tl.load(b_ptr + tl.load(a_ptr + i)))
    tl.store(out_ptr + i, value + 1)
'''


def kernels_from_source(source, module):
    """The module named ``module`` made of ``source`` (Triton reads a kernel's source from
    its file)."""
    directory = Path(tempfile.mkdtemp())
    (directory / f"{module}.py").write_text(source)
    sys.path.insert(0, str(directory))
    return importlib.import_module(module)


def _kernels():
    names = [f"p{i}" for i in range(POINTERS)]
    return kernels_from_source(
        _SOURCE.format(pointers=", ".join(names), ints=", ".join(f"i{i}" for i in range(INTS)),
                       unused_pointers=", ".join(names[:POINTERS - 5])), "param_kernels")


def main():
    kernels = _kernels()
    floor = bench_ops.empty_kernel_floor()["graph_us"]
    x = torch.zeros(1, device="cuda")
    pointers = [torch.zeros(8, dtype=torch.int64, device="cuda") for _ in range(POINTERS)]
    ints = [1000 + i for i in range(INTS)]
    n = 128 * 32
    a = torch.arange(n, device="cuda").flip(0).contiguous()
    b, c = torch.randperm(n, device="cuda"), torch.randperm(n, device="cuda")
    out = torch.empty(n, dtype=torch.int64, device="cuda")
    print(f"{torch.cuda.get_device_name()}: GPU µs per call (CUDA graph of "
          f"{bench_ops.GRAPH_CALLS} calls); the empty-kernel node bench_ops compares with: "
          f"{floor:.3f}")
    for programs in (1, 128):
        launch = {"launch_pdl": True, "num_warps": 1}
        rows = {
            "empty, 1 parameter": lambda: kernels.empty_1[(programs,)](x, True, **launch),
            "empty, 22 pointers": lambda: kernels.empty_22[(programs,)](*pointers, True,
                                                                        **launch),
            "empty, 41 parameters": lambda: kernels.empty_41[(programs,)](
                *pointers, *ints, x, True, **launch),
            "3 trips, 4 parameters": lambda: kernels.trips_4[(programs,)](a, b, c, out, True,
                                                                          **launch),
            "3 trips, 41 parameters": lambda: kernels.trips_41[(programs,)](
                a, b, c, out, *pointers[:POINTERS - 5], *ints, True, **launch),
        }
        for name, fn in rows.items():
            fn()
            torch.cuda.synchronize()
            times = " ".join(f"{bench_ops.graph_us(fn):.3f}" for _ in range(3))
            print(f"G = {programs:<4} {name:<24} {times}")


if __name__ == "__main__":
    main()
