"""Run the kernels whose graph-time targets are missed, a few times each, for Nsight Compute.

    ncu --clock-control none -k regex:kernel --launch-skip 2 --launch-count 1 \\
        --section SpeedOfLight --section LaunchStats --section WarpStateStats \\
        python scripts/profile_kernels.py

Each op runs at the benchmark's inputs (benchmarks/bench_ops.py): 1.2 at R=1 as the one
round-trip baseline, then 1.5 at R=1 and 1024, 1.6 at R=1024, 5.2 at R=1024. The NVTX-free
order is fixed, so the k-th profiled kernel is the k-th entry of CASES.
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_ops  # noqa: E402

CASES = (("1.2", 1), ("1.5", 1), ("1.5", 1024), ("1.6", 1024), ("5.2", 1024))
CALLS = 3


def main():
    ops = {op.label: op for op in bench_ops.OPS}
    for label, num_reqs in CASES:
        op = ops[label]
        gen = torch.Generator().manual_seed(num_reqs)
        state = bench_ops._fresh(op.inputs(num_reqs, bench_ops.K + 1, gen), "cuda")
        fn = getattr(torch.ops.spec_ops, op.name).default
        for _ in range(CALLS):
            bench_ops._call(op.name, fn, state)
        torch.cuda.synchronize()
        print(f"ran {label} R={num_reqs} x{CALLS}", flush=True)


if __name__ == "__main__":
    main()
