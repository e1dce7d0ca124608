"""GPU µs of 1.3's, 1.4's and 1.7's two layouts on bench_ops' inputs: where the row layout pays.

    python scripts/sweep_row_layout.py [SIZES [WARPS]]    e.g. 1,64,1024 2,4

Each op through its launch function as shipped, once with the row layout (ROW_GROUP whole
requests per program as one tile, csrc_triton/_launch.py) at 1, 2 and 4 warps, once with it
turned off (one program per request), at R = 1 ... 1024 decode requests of K + 1 tokens, in a
CUDA graph (bench_ops' graph_us). Every variant's outputs are checked against the op's.
"""

import os

# The layout is forced per measurement: no launch plan may replay an earlier one's.
os.environ["SPEC_OPS_LAUNCH_PLANS"] = "0"      # before spec_ops is imported

import sys
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_ops  # noqa: E402
from spec_ops._triton import dflash, expand  # noqa: E402

SIZES = tuple(int(n) for n in sys.argv[1].split(",")) if len(sys.argv) > 1 else (
    1, 64, 128, 256, 512, 1024)
WARPS = tuple(int(n) for n in sys.argv[2].split(",")) if len(sys.argv) > 2 else (1, 2, 4)
OPS = {"1.3": (expand, "launch_copy_and_expand_eagle_inputs",
               expand._copy_and_expand_eagle_inputs_rows),
       "1.4": (dflash, "launch_copy_and_expand_dflash_inputs",
               dflash._copy_and_expand_dflash_inputs_rows),
       "1.7": (expand, "launch_compute_new_slot_mapping", expand._compute_new_slot_mapping_rows)}


def outputs(name, state):
    schema = getattr(torch.ops.spec_ops, name).default._schema
    return [state[a.name].clone() for a in schema.arguments
            if a.alias_info is not None and a.alias_info.is_write]


def main():
    floor = bench_ops.empty_kernel_floor()["graph_us"]
    print(f"GPU µs per call (CUDA graph of {bench_ops.GRAPH_CALLS} calls); empty kernel "
          f"{floor:.3f}; K = {bench_ops.K}")
    for label, (module, launch_name, rows_launcher) in OPS.items():
        op = next(op for op in bench_ops.OPS if op.label == label)
        for num_reqs in SIZES:
            state = bench_ops._fresh(
                op.inputs(num_reqs, bench_ops.K + 1, torch.Generator().manual_seed(1)), "cuda")
            args = bench_ops._op_args(op.name, state)
            fn = getattr(torch.ops.spec_ops, op.name).default
            expected = fn(*args)
            expected = outputs(op.name, state) if expected is None else [expected]
            cells = []
            variants = [("per request", 0)] + [(f"rows/{w}", w) for w in WARPS]
            for name, warps in variants:
                patches = ([mock.patch.object(module, "row_cols", lambda *a: None)] if not warps
                           else [mock.patch.object(rows_launcher, "num_warps", warps)])
                for patch in patches:
                    patch.start()
                try:
                    def call():
                        return fn(*args)
                    got = call()
                    got = outputs(op.name, state) if got is None else [got]
                    same = all(torch.equal(g, e) for g, e in zip(got, expected))
                    cells.append(f"{name} {bench_ops.graph_us(call):.3f}"
                                 + ("" if same else " MISMATCH"))
                finally:
                    for patch in patches:
                        patch.stop()
            print(f"{label} R={num_reqs:<5}" + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()
