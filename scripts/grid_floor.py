"""What a grid of one-warp programs costs by itself on the GPU: the floor under the round ops'
lanes layout, which runs one warp per program (benchmarks/results/round_lanes.txt, section 10).

    python scripts/grid_floor.py [--warps]

For G programs of one warp, launched with PDL as the ops are: an empty kernel, and kernels
whose 32 lanes per program make 1, 2 or 3 dependent reads (a -> b -> c) and one store. GPU µs
per call in a CUDA graph (bench_ops.graph_us). --warps: the same warps in all, as programs of
1, 2, 4, 8 or 16 warps each (fewer programs; round_lanes.txt, section 26).
"""

import argparse
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_ops  # noqa: E402
from step_floor import _empty_pdl  # noqa: E402

from spec_ops._triton._launch import pdl_prologue  # noqa: E402

PROGRAMS = (1, 64, 128, 192, 320, 576, 1024)
WARPS_TOTALS = (1, 64, 256, 576, 1088, 2048)
WARPS_PER_PROGRAM = (1, 2, 4, 8, 16)


@triton.jit
def _trips(a_ptr, b_ptr, c_ptr, out_ptr, TRIPS: tl.constexpr, PDL: tl.constexpr,
           BLOCK: tl.constexpr = 32):
    pdl_prologue(PDL)
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    value = tl.load(a_ptr + i)
    if TRIPS >= 2:
        value = tl.load(b_ptr + value)
    if TRIPS >= 3:
        value = tl.load(c_ptr + value)
    tl.store(out_ptr + i, value + 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warps", action="store_true",
                        help="programs of several warps, the same warps in all")
    warps = parser.parse_args().warps
    floor = bench_ops.empty_kernel_floor()["graph_us"]
    print(f"GPU µs per call (CUDA graph of {bench_ops.GRAPH_CALLS} calls); the empty-kernel "
          f"node bench_ops compares with: {floor:.3f}")
    x = torch.zeros(1, device="cuda")
    n = max(max(PROGRAMS), max(WARPS_TOTALS)) * 32
    a = torch.arange(n, device="cuda").flip(0).contiguous()
    b, c = torch.randperm(n, device="cuda"), torch.randperm(n, device="cuda")
    out = torch.empty(n, dtype=torch.int64, device="cuda")
    if warps:
        print(f"{'warps':>6} {'each':>6} {'G':>6} {'empty':>8} {'1 trip':>8} {'3 trips':>8}")
        # (warps in all, warps a program, programs); below `each` warps in all, one program.
        rows = [(programs * each, each, programs) for total in WARPS_TOTALS
                for each in WARPS_PER_PROGRAM if total % each == 0 or total < each
                for programs in (max(1, total // each),)]
    else:
        print(f"{'G':>6} {'empty':>8} {'1 trip':>8} {'2 trips':>8} {'3 trips':>8}")
        rows = [(programs, 1, programs) for programs in PROGRAMS]
    for total, each, programs in rows:
        row = [bench_ops.graph_us(lambda: _empty_pdl[(programs,)](
            x, True, num_warps=each, launch_pdl=True))]
        for trips in ((1, 3) if warps else (1, 2, 3)):
            row.append(bench_ops.graph_us(lambda: _trips[(programs,)](
                a, b, c, out, trips, True, 32 * each, num_warps=each, launch_pdl=True)))
        lead = f"{total:>6} {each:>6} {programs:>6} " if warps else f"{programs:>6} "
        print(lead + " ".join(f"{us:8.3f}" for us in row), flush=True)


if __name__ == "__main__":
    main()
