"""GPU µs of 1.7's two layouts on bench_ops' inputs, for choosing the row layout's tile.

    python scripts/sweep_row_layout.py

The per-request x chunk layout (one program per request) against the row layout (ROWS whole
requests per program as a [ROWS, COLS] tile) for several tiles and warps, at R = 1, 64 and
1024 decode requests (K + 1 tokens each) and the 8 x 2048 prefill, in a CUDA graph (bench_ops'
graph_us). Every variant's output is checked against the op's. Prints one table.
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_ops  # noqa: E402
from spec_ops._triton import expand  # noqa: E402
from spec_ops._triton._launch import PER_REQUEST_BLOCK, cdiv, num_chunks  # noqa: E402

TILES = ((4, 16), (8, 16), (16, 16), (8, 8), (16, 8), (32, 8), (32, 4))
WARPS = (1, 2, 4)
SIZES = ((1, bench_ops.K + 1), (64, bench_ops.K + 1), (1024, bench_ops.K + 1), (8, 2048))


def variants(state):
    num_reqs = state["query_start_loc"].shape[0] - 1
    num_entries = state["new_positions"].shape[0]
    out = torch.empty(num_entries, dtype=torch.int64, device="cuda")
    args = (state["block_table"], state["query_start_loc"], state["new_positions"],
            state["is_rejected_token_mask"], out, num_reqs, num_entries,
            state["block_table"].stride(0), state["block_table"].shape[1],
            state["num_new_tokens"], state["max_model_len"], state["block_size"])
    yield "chunks", out, lambda: expand._compute_new_slot_mapping(
        num_reqs + 1, (*args, PER_REQUEST_BLOCK), grid_y=num_chunks(num_entries, num_reqs))
    for rows, cols in TILES:
        for warps in WARPS:
            yield (f"rows {rows}x{cols}/{warps}", out,
                   lambda rows=rows, cols=cols, warps=warps: expand._compute_new_slot_mapping_rows(
                       cdiv(num_reqs + 1, rows), (*args, rows, cols),
                       num_warps=warps))


def main():
    op = next(op for op in bench_ops.OPS if op.label == "1.7")
    print("1.7 compute_new_slot_mapping: GPU µs per call (CUDA graph of "
          f"{bench_ops.GRAPH_CALLS} calls); empty kernel {bench_ops.empty_kernel_floor()['graph_us']:.3f}")
    for num_reqs, tokens in SIZES:
        state = bench_ops._fresh(op.inputs(num_reqs, tokens, torch.Generator().manual_seed(1)),
                                 "cuda")
        expected = torch.ops.spec_ops.compute_new_slot_mapping(*bench_ops._op_args(op.name,
                                                                                  state))
        results = []
        for name, out, launch in variants(state):
            out.fill_(-7)
            launch()
            torch.cuda.synchronize()
            same = torch.equal(out, expected)
            results.append((bench_ops.graph_us(launch), name, same))
        results.sort()
        print(f"R={num_reqs} x {tokens} tokens ({state['new_positions'].shape[0]} entries): "
              + ", ".join(f"{us:.3f}@{name}{'' if same else ' MISMATCH'}"
                          for us, name, same in results[:8])
              + f" | chunks {next(us for us, name, _ in results if name == 'chunks'):.3f}")


if __name__ == "__main__":
    main()
