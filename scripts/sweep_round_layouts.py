"""GPU µs of the round ops' two layouts on bench_rounds' inputs: where the lanes layout pays.

    python scripts/sweep_round_layouts.py [SIZES [DRAFTS]]    e.g. 1,64,1024 1,3,7

Each method of bench_rounds (6.1 chain EAGLE, 6.2 P-EAGLE and draft model, 6.3 DFlash)
through its op, once with the lanes layout forced (csrc_triton/rounds.py: a warp holds
32 / LANES requests, a lane per sampled column, token and draft step), once with the
per-request layout forced (a program per request and chunk), at R decode requests of K + 1
tokens (1 in 10 without drafts), in a CUDA graph (bench_ops' graph_us). Both layouts' outputs
are checked against the sequence each op replaces.
"""

import os

# The layout is forced per measurement: no launch plan may replay an earlier one's.
os.environ["SPEC_OPS_LAUNCH_PLANS"] = "0"      # before spec_ops is imported

import functools
import sys
from pathlib import Path
from unittest import mock

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
import bench_ops  # noqa: E402
import bench_rounds  # noqa: E402
from round_sequences import SEQUENCES  # noqa: E402
from spec_ops._triton import rounds  # noqa: E402

SIZES = tuple(int(n) for n in sys.argv[1].split(",")) if len(sys.argv) > 1 else (
    1, 64, 128, 256, 512, 1024)
DRAFTS = tuple(int(n) for n in sys.argv[2].split(",")) if len(sys.argv) > 2 else (1, 3, 7)
LAYOUTS = {   # rounds.lanes_split, forced
    "per request": lambda num_items, num_reqs, lanes, *pays: None,
    "lanes": lambda num_items, num_reqs, lanes, *pays: (
        None if lanes is None else rounds.REMAINDER_SPLIT.value),
}


def main():
    floor = bench_ops.empty_kernel_floor()["graph_us"]
    print(f"GPU µs per call (CUDA graph of {bench_ops.GRAPH_CALLS} calls); empty kernel "
          f"{floor:.3f} (2x: {2 * floor:.3f})")
    print(f"{'method':<12} {'K':>2} {'R':>5} {'per request':>12} {'lanes':>8}")
    for method, op, inputs in bench_rounds.METHODS:
        fn = getattr(torch.ops.spec_ops, op).default
        for k in DRAFTS:
            for num_reqs in SIZES:
                gen = torch.Generator().manual_seed(1000 * num_reqs + k)
                initial = bench_ops._fresh(inputs(num_reqs, k, gen), "cuda")
                expected = bench_ops._outputs(op, SEQUENCES[op], initial)
                cells = []
                for choice in LAYOUTS.values():
                    with mock.patch.object(rounds, "lanes_split", choice):
                        mismatches = bench_ops._check(op, fn, initial, expected)
                        us = bench_ops.graph_us(functools.partial(
                            fn, *bench_ops._op_args(op, bench_ops._fresh(initial))))
                    cells.append(f"{us:.3f}" + ("!" if mismatches else ""))
                print(f"{method:<12} {k:>2} {num_reqs:>5} {cells[0]:>12} {cells[1]:>8}",
                      flush=True)
    print("(! marks outputs that differ from the sequence's)")


if __name__ == "__main__":
    main()
