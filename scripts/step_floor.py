"""Where a draft step's GPU time goes (1.5 at R = 1, 64, 1024; bench_ops' inputs), against
the floors a kernel launched with PDL cannot go under.

    python scripts/step_floor.py

GPU µs per call in a CUDA graph of 50 calls (bench_ops.graph_us), in one table:

  empty                 an empty Triton kernel (bench_ops' floor, empty_kernel_floor), and
                        with the PDL prologue every spec_ops kernel starts with (launched
                        with PDL)
  one trip              a kernel that loads two [R] vectors and stores three (int64, one of
                        them in place), as 1.5 does but with no load depending on another
  1.2                   eagle_prepare_inputs_padded: one round trip of loads, then stores
  1.5 op                the op as users call it
  1.5 raw               its kernel launched the plain Triton way, then variants of that launch:
    row stride 0        every row reads block-table row 0 (few distinct cache lines)
    no gather           max_model_len 1: every row is past it, so no block-table read
    no PDL              launched without PDL (and its prologue off)
    32 rows / 1 warp    programs of 32 rows and 1 warp instead of the op's
                        (draft_step.BLOCK_R rows, STEP_WARPS warps)

scripts/load_trips.py shows the trips: 1.5 loads positions (trip 1), then seq_lens and the
block-table entry (trip 2; ptxas issues the seq_lens load after the positions arrive, so
"no gather" still waits two trips). Needs CUDA.
"""

import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_ops  # noqa: E402
from bench_ops import graph_us  # noqa: E402

import spec_ops  # noqa: E402
from spec_ops._triton import draft_step  # noqa: E402
from spec_ops._triton._launch import pdl_prologue  # noqa: E402

SIZES = (1, 64, 1024)


@triton.jit
def _empty_pdl(x, PDL: tl.constexpr):
    pdl_prologue(PDL)


@triton.jit
def _one_trip(a_ptr, b_ptr, out_ptr, other_out_ptr, n, BLOCK: tl.constexpr, PDL: tl.constexpr):
    pdl_prologue(PDL)
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = rows < n
    a = tl.load(a_ptr + rows, mask=mask, other=0)
    b = tl.load(b_ptr + rows, mask=mask, other=0)
    tl.store(out_ptr + rows, a + 1, mask=mask)
    tl.store(b_ptr + rows, b + 1, mask=mask)            # in place, like seq_lens
    tl.store(other_out_ptr + rows, a + b, mask=mask)


def _cases(num_reqs):
    grid = (triton.cdiv(num_reqs, 128),)
    vectors = [torch.arange(num_reqs, device="cuda", dtype=torch.int64) for _ in range(4)]
    step_op = next(op for op in bench_ops.OPS if op.label == "1.2")
    padded = bench_ops._op_args(step_op.name, bench_ops._fresh(
        step_op.inputs(num_reqs, bench_ops.K + 1, torch.Generator().manual_seed(num_reqs)),
        "cuda"))
    state = bench_ops._fresh(bench_ops._draft_step_inputs(
        num_reqs, bench_ops.K + 1, torch.Generator().manual_seed(num_reqs)), "cuda")
    block_table = state["block_table"]

    def raw(row_stride=None, max_model_len=state["max_model_len"], pdl=True,
            warps=draft_step.STEP_WARPS, block=draft_step.BLOCK_R):
        args = (state["positions"], block_table, state["seq_lens"],
                state["out_clamped_positions"], state["out_slot_mapping"], num_reqs, num_reqs,
                block_table.stride(0) if row_stride is None else row_stride,
                block_table.shape[1], max_model_len, state["block_size"], block, pdl)
        options = {"launch_pdl": True} if pdl else {}
        return lambda: draft_step._step_kernel[(triton.cdiv(num_reqs, block),)](
            *args, num_warps=warps, **options)

    return {
        "one trip": lambda: _one_trip[grid](*vectors, num_reqs, 128, True, num_warps=4,
                                            launch_pdl=True),
        "1.2": lambda: spec_ops.eagle_prepare_inputs_padded(*padded),
        "1.5 op": lambda: spec_ops.eagle_step_update_slot_mapping_and_metadata(
            state["positions"], block_table, state["seq_lens"], state["block_size"],
            state["max_model_len"], state["out_clamped_positions"], state["out_slot_mapping"]),
        "1.5 raw": raw(),
        "  row stride 0": raw(row_stride=0),
        "  no gather": raw(max_model_len=1),
        "  no PDL": raw(pdl=False),
        "  32 rows / 1 warp": raw(warps=1, block=32),
    }


def main():
    x = torch.zeros(1, device="cuda")
    floor = bench_ops.empty_kernel_floor()
    empty = floor["graph_us"]
    empty_pdl = graph_us(lambda: _empty_pdl[(1,)](x, True, launch_pdl=True))
    rows = {}
    for num_reqs in SIZES:
        for name, fn in _cases(num_reqs).items():
            rows.setdefault(name, []).append(graph_us(fn))
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton "
          f"{triton.__version__}; GPU µs per call, CUDA graph of {bench_ops.GRAPH_CALLS} calls")
    print(f"empty kernel {empty:.3f} (the process's first timed graph: "
          f"{floor['graph_us_first']:.3f}), with the PDL prologue {empty_pdl:.3f}; "
          f"1.5 x empty = {1.5 * empty:.3f}")
    print(f"{'':22s}" + "".join(f"{'R = ' + str(n):>10s}" for n in SIZES))
    for name, values in rows.items():
        print(f"{name:22s}" + "".join(f"{v:10.3f}" for v in values))


if __name__ == "__main__":
    main()
