"""Do the kernel parameters a kernel reads cost GPU time per call? One-warp programs making
three dependent reads and a store (as scripts/grid_floor.py's), then: 18 integer parameters
read after the loads (a chain of multiply-adds), the same 18 as constexprs, stores through 10
pointer parameters, and both. With constants the compiler folds that chain, so the "mixed"
rows feed the loaded value into every step (an xor, then the multiply), a chain constants do
not fold (sm_90 PTX: 17 and 14 multiplies, the rest shifts): those two rows differ in where
the 18 values come from. GPU µs per call in a CUDA graph (bench_ops.graph_us), three
timings each, at 1, 576 and 1088 programs (the round ops' grids at R = 1024 run 192-1088).

    python scripts/param_reads.py

A kernel reads its runtime parameters from the constant bank; an instruction that needs a part
of it not yet in the SM's constant cache waits for it. rounds.py ("Configuration constants")
and benchmarks/results/round_lanes.txt (section 24) have what this found.
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_ops  # noqa: E402
from param_floor import kernels_from_source  # noqa: E402

INTS = 18
OUTS = 10
PROGRAMS = (1, 576, 1088)

_INTS = ", ".join(f"i{k}" for k in range(INTS))
_CHAIN = "\n".join(f"    acc = acc * i{k} + i{(k + 1) % INTS}" for k in range(INTS))
_MIXED = "\n".join(f"    acc = (acc ^ value) * i{k}" for k in range(INTS))
_STORES = "\n".join(f"    tl.store(o{k} + i, value + {k})" for k in range(OUTS))
_PROLOGUE = """    pdl_prologue(PDL)
    i = tl.program_id(0).to(tl.int64) * 32 + tl.arange(0, 32)
    value = tl.load(c + tl.load(b + tl.load(a + i)))"""
_CONSTEXPRS = ", ".join(f"i{k}: tl.constexpr" for k in range(INTS))


def _chain_kernel(name, ints, chain):
    """A kernel of three dependent reads, then ``chain`` on the value read, then a store."""
    return f"""
@triton.jit
def {name}(a, b, c, out, {ints}, PDL: tl.constexpr):
{_PROLOGUE}
    acc = value
{chain}
    tl.store(out + i, acc)
"""


_CHAIN_KERNELS = "\n".join(_chain_kernel(name, ints, chain) for name, ints, chain in (
    ("used_ints", _INTS, _CHAIN), ("const_ints", _CONSTEXPRS, _CHAIN),
    ("mixed_ints", _INTS, _MIXED), ("mixed_constexprs", _CONSTEXPRS, _MIXED)))
_SOURCE = f'''
import triton
import triton.language as tl

from spec_ops._triton._launch import pdl_prologue


@triton.jit
def base(a, b, c, out, PDL: tl.constexpr):
{_PROLOGUE}
    tl.store(out + i, value + 1)


{_CHAIN_KERNELS}

@triton.jit
def ten_outs(a, b, c, {", ".join(f"o{k}" for k in range(OUTS))}, PDL: tl.constexpr):
{_PROLOGUE}
{_STORES}


@triton.jit
def ten_outs_used_ints(a, b, c, {", ".join(f"o{k}" for k in range(OUTS))}, {_INTS},
                       PDL: tl.constexpr):
{_PROLOGUE}
    acc = value
{_CHAIN}
    value = acc
{_STORES}
'''


def main():
    kernels = kernels_from_source(_SOURCE, "param_read_kernels")
    floor = bench_ops.empty_kernel_floor()["graph_us"]
    print(f"{torch.cuda.get_device_name()}: GPU µs per call; the empty-kernel node: {floor:.3f}")
    n = 1100 * 32
    a = torch.arange(n, device="cuda").flip(0).contiguous()
    b, c = torch.randperm(n, device="cuda"), torch.randperm(n, device="cuda")
    outs = [torch.empty(n, dtype=torch.int64, device="cuda") for _ in range(OUTS)]
    ints = [3 + k for k in range(INTS)]
    launch = {"launch_pdl": True, "num_warps": 1}
    for programs in PROGRAMS:
        grid = (programs,)
        rows = {
            "3 trips": lambda: kernels.base[grid](a, b, c, outs[0], True, **launch),
            "3 trips, 18 ints read": lambda: kernels.used_ints[grid](
                a, b, c, outs[0], *ints, True, **launch),
            "3 trips, 18 constexprs": lambda: kernels.const_ints[grid](
                a, b, c, outs[0], *ints, True, **launch),
            "3 trips, 18 ints read, mixed": lambda: kernels.mixed_ints[grid](
                a, b, c, outs[0], *ints, True, **launch),
            "3 trips, 18 constexprs, mixed": lambda: kernels.mixed_constexprs[grid](
                a, b, c, outs[0], *ints, True, **launch),
            "3 trips, 10 outs": lambda: kernels.ten_outs[grid](a, b, c, *outs, True, **launch),
            "3 trips, 10 outs, 18 ints": lambda: kernels.ten_outs_used_ints[grid](
                a, b, c, *outs, *ints, True, **launch),
        }
        for name, fn in rows.items():
            fn()
            torch.cuda.synchronize()
            times = " ".join(f"{bench_ops.graph_us(fn):.3f}" for _ in range(3))
            print(f"G = {programs:<5} {name:<28} {times}", flush=True)


if __name__ == "__main__":
    main()
