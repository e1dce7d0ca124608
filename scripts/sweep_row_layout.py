"""GPU µs of the two layouts of 1.3, 1.4, 1.7 (bench_ops' inputs) and of the round ops
(bench_rounds' inputs): where the row layout pays.

    python scripts/sweep_row_layout.py [SIZES [WARPS [K [WHICH]]]]
    e.g. 1,64,1024 2,4 1,3,7 rounds        (WHICH: all, ops or rounds; default all)

Each op through its launch function as shipped, once with the row layout (ROW_GROUP whole
requests per program as one tile, csrc_triton/_launch.py) at 1, 2 and 4 warps, once with it
turned off (one program per request), at R = 1 ... 1024 decode requests of K + 1 tokens (the
round ops at each K given, bench_rounds' K = 3 by default), in a CUDA graph (bench_ops'
graph_us). Every variant's outputs are checked against the op's.
"""

import sys
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_ops  # noqa: E402
import bench_rounds  # noqa: E402
from spec_ops._triton import dflash, expand, rounds  # noqa: E402

SIZES = tuple(int(n) for n in sys.argv[1].split(",")) if len(sys.argv) > 1 else (
    1, 64, 128, 256, 512, 1024)
WARPS = tuple(int(n) for n in sys.argv[2].split(",")) if len(sys.argv) > 2 else (1, 2, 4)
ROUND_K = tuple(int(n) for n in sys.argv[3].split(",")) if len(sys.argv) > 3 else (3,)
WHICH = sys.argv[4] if len(sys.argv) > 4 else "all"
OPS = {"1.3": (expand, expand._copy_and_expand_eagle_inputs_rows),
       "1.4": (dflash, dflash._copy_and_expand_dflash_inputs_rows),
       "1.7": (expand, expand._compute_new_slot_mapping_rows)}
ROUND_ROWS = {"prepare_parallel_round": rounds._prepare_parallel_round_rows,
              "prepare_dflash_round": rounds._prepare_dflash_round_rows}    # 6.1 has none


def outputs(name, state):
    schema = getattr(torch.ops.spec_ops, name).default._schema
    return [state[a.name].clone() for a in schema.arguments
            if a.alias_info is not None and a.alias_info.is_write]


def sweep(label, module, rows_launcher, name, state):
    """One row of the table: the op at one size, per request and as rows at each warp count."""
    args = bench_ops._op_args(name, state)
    fn = getattr(torch.ops.spec_ops, name).default
    expected = fn(*args)
    expected = outputs(name, state) if expected is None else [expected]
    cells = []
    for variant, warps in [("per request", 0)] + [(f"rows/{w}", w) for w in WARPS]:
        patch = (mock.patch.object(module, "row_cols", lambda *a: None) if not warps
                 else mock.patch.object(rows_launcher, "num_warps", warps))
        # The round ops' rows at any batch size (theirs from ROUND_ROWS_MIN_REQS).
        threshold = mock.patch.object(rounds, "ROUND_ROWS_MIN_REQS", 0)
        with patch, threshold:
            def call():
                return fn(*args)
            got = call()
            got = outputs(name, state) if got is None else [got]
            same = all(torch.equal(g, e) for g, e in zip(got, expected))
            cells.append(f"{variant} {bench_ops.graph_us(call):.3f}"
                         + ("" if same else " MISMATCH"))
    print(f"{label:<22}" + "  ".join(cells), flush=True)


def main():
    floor = bench_ops.empty_kernel_floor()["graph_us"]
    print(f"GPU µs per call (CUDA graph of {bench_ops.GRAPH_CALLS} calls); empty kernel "
          f"{floor:.3f}; K = {bench_ops.K} (round ops: K = {ROUND_K})")
    for label, (module, rows_launcher) in (OPS.items() if WHICH != "rounds" else ()):
        op = next(op for op in bench_ops.OPS if op.label == label)
        for num_reqs in SIZES:
            state = bench_ops._fresh(
                op.inputs(num_reqs, bench_ops.K + 1, torch.Generator().manual_seed(1)), "cuda")
            sweep(f"{label} R={num_reqs}", module, rows_launcher, op.name, state)
    for method, name, inputs in (bench_rounds.METHODS if WHICH != "ops" else ()):
        if name not in ROUND_ROWS:
            continue
        for k in ROUND_K:
            for num_reqs in SIZES:
                state = bench_ops._fresh(inputs(num_reqs, k, torch.Generator().manual_seed(1)),
                                         "cuda")
                sweep(f"{method} K={k} R={num_reqs}", rounds, ROUND_ROWS[name], name, state)


if __name__ == "__main__":
    main()
