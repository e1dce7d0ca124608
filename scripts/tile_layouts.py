"""What Triton makes of a lanes tile whose warps each hold their own requests, no GPU needed.

    python scripts/tile_layouts.py

The round ops' lanes tiles are programs of one warp: [REQS, LANES], 32 / LANES requests a
warp, a lane per sampled column or first-pass item (csrc_triton/rounds.py). A grid of fewer,
larger programs costs less for the same warps (scripts/grid_floor.py --warps), so a tile of
several warps, [WARPS, REQS, LANES] with each warp its own REQS requests, would be the way to
fewer programs if Triton kept every value of a request inside its warp. This script compiles
a kernel shaped like the tiles' first round trips (per-request loads along the lanes, the
sampled column per lane, reductions over a request's lanes, a gather at the request's first
position, a block-table read, stores) for sm_90 with the installed Triton, as one warp
[REQS, LANES] and as WARPS warps with the warps' axis first, [WARPS, REQS, LANES], or last,
[REQS, LANES, WARPS], and counts in the PTX the shared-memory accesses and barriers (values
moving between warps or between layouts through shared memory) and the shuffles (moving
within a warp).
"""

import re

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def _tile_kernel(sampled_ptr, query_start_loc_ptr, seq_lens_ptr, positions_ptr,
                 block_table_ptr, out_ptr, out_head_ptr, num_reqs, block_table_row_stride,
                 WARPS: tl.constexpr, REQS: tl.constexpr, LANES: tl.constexpr,
                 WARPS_LAST: tl.constexpr):
    if WARPS == 1:
        row = tl.arange(0, REQS)[:, None]
        lane = tl.arange(0, LANES)[None, :]
        req = tl.program_id(0).to(tl.int64) * REQS + row + tl.zeros_like(lane)
    elif WARPS_LAST:    # [REQS, LANES, WARPS]
        row = tl.arange(0, REQS)[:, None, None]
        lane = tl.arange(0, LANES)[None, :, None]
        warp = tl.arange(0, WARPS)[None, None, :]
        req = ((tl.program_id(0).to(tl.int64) * WARPS + warp) * REQS + row
               + tl.zeros_like(lane))
    else:               # [WARPS, REQS, LANES]
        warp = tl.arange(0, WARPS)[:, None, None]
        row = tl.arange(0, REQS)[None, :, None]
        lane = tl.arange(0, LANES)[None, None, :]
        req = ((tl.program_id(0).to(tl.int64) * WARPS + warp) * REQS + row
               + tl.zeros_like(lane))
    axis: tl.constexpr = 1 if WARPS_LAST else -1    # the lanes
    is_request = req < num_reqs
    query_start = tl.load(query_start_loc_ptr + req, mask=is_request, other=0).to(tl.int64)
    query_next = tl.load(query_start_loc_ptr + req + 1, mask=is_request, other=0).to(tl.int64)
    seq_len = tl.load(seq_lens_ptr + req, mask=is_request, other=0).to(tl.int64)
    token = tl.load(sampled_ptr + req * LANES + lane, mask=is_request, other=-1)
    tl.debug_barrier()
    valid = token >= 0
    count = tl.expand_dims(tl.sum(valid.to(tl.int32), axis=axis), axis).to(tl.int64)
    last = tl.expand_dims(tl.max(tl.where(valid, lane, -1), axis=axis), axis)
    first_position = tl.load(positions_ptr + query_start, mask=is_request, other=0)
    tl.debug_barrier()
    position = first_position + lane + count
    block = tl.load(block_table_ptr + req * block_table_row_stride + position // 16,
                    mask=is_request & (lane <= last + 1), other=0).to(tl.int64)
    tl.debug_barrier()
    tl.store(out_ptr + query_start + req + lane, block * 16 + position % 16,
             mask=is_request & (lane < query_next - query_start + 1))
    tl.store(out_head_ptr + req, seq_len + count, mask=is_request & (lane == 0))


SIGNATURE = {"sampled_ptr": "*i32", "query_start_loc_ptr": "*i32", "seq_lens_ptr": "*i32",
             "positions_ptr": "*i64", "block_table_ptr": "*i32", "out_ptr": "*i64",
             "out_head_ptr": "*i32", "num_reqs": "i64", "block_table_row_stride": "i64",
             "WARPS": "constexpr", "REQS": "constexpr", "LANES": "constexpr",
             "WARPS_LAST": "constexpr"}
COUNTED = (("shared st", r"st\.shared"), ("shared ld", r"ld\.shared"),
           ("barriers", r"\bbar\.sync|\bbarrier\.sync"), ("shuffles", r"shfl\.sync"))


def ptx_counts(warps, lanes, warps_last):
    constexprs = {"WARPS": warps, "REQS": 32 // lanes, "LANES": lanes, "WARPS_LAST": warps_last}
    compiled = triton.compile(ASTSource(_tile_kernel, SIGNATURE, constexprs),
                              target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    ptx = compiled.asm["ptx"]
    return [len(re.findall(pattern, ptx)) for _, pattern in COUNTED]


def main():
    print(f"triton {triton.__version__}, sm_90 PTX (the source has 3 barriers of its own, "
          f"tl.debug_barrier, holding the loads in their round trips)")
    print(f"{'LANES':>5} {'warps':>5} {'tile':<20}"
          + " ".join(f"{name:>9}" for name, _ in COUNTED))
    for lanes in (4, 8, 16):
        for warps, warps_last in ((1, False), (2, False), (4, False), (2, True), (4, True)):
            tile = ("[REQS, LANES]" if warps == 1 else
                    "[REQS, LANES, WARPS]" if warps_last else "[WARPS, REQS, LANES]")
            counts = ptx_counts(warps, lanes, warps_last)
            print(f"{lanes:>5} {warps:>5} {tile:<20}" + " ".join(f"{n:>9}" for n in counts))


if __name__ == "__main__":
    main()
