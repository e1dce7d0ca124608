"""Run kernels at the benchmarks' inputs, a few times each, for Nsight Compute.

    ncu --clock-control none -k regex:kernel --launch-skip 2 --launch-count 1 \\
        --section SpeedOfLight --section LaunchStats --section WarpStateStats \\
        python scripts/profile_kernels.py [--rounds]

Without --rounds, the single ops whose graph-time targets are missed (benchmarks/bench_ops.py's
inputs): 1.2 at R=1 as the one round-trip baseline, then 1.5 at R=1 and 1024, 1.6 at R=1024,
5.2 at R=1024. With --rounds, the round ops at benchmarks/bench_rounds.py's inputs (ROUND_CASES),
after 1.2 at R=1. The order is fixed, so the k-th profiled kernel is the k-th case.
"""

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_ops  # noqa: E402

CASES = (("1.2", 1), ("1.5", 1), ("1.5", 1024), ("1.6", 1024), ("5.2", 1024))
ROUND_CASES = (("eagle", 1, 1), ("eagle", 1, 7), ("eagle", 1024, 1), ("eagle", 1024, 7),
               ("draft model", 1024, 7), ("dflash", 1024, 7))
CALLS = 3


def _run(name, state, label):
    fn = getattr(torch.ops.spec_ops, name).default
    for _ in range(CALLS):
        bench_ops._call(name, fn, state)
    torch.cuda.synchronize()
    print(f"ran {label} x{CALLS}", flush=True)


def main():
    ops = {op.label: op for op in bench_ops.OPS}
    rounds = "--rounds" in sys.argv[1:]
    for label, num_reqs in CASES[:1] if rounds else CASES:
        op = ops[label]
        gen = torch.Generator().manual_seed(num_reqs)
        _run(op.name, bench_ops._fresh(op.inputs(num_reqs, bench_ops.K + 1, gen), "cuda"),
             f"{label} R={num_reqs}")
    if rounds:
        import bench_rounds
        methods = {method: (op, inputs) for method, op, inputs in bench_rounds.METHODS}
        for method, num_reqs, k in ROUND_CASES:
            op, inputs = methods[method]
            gen = torch.Generator().manual_seed(1000 * num_reqs + k)
            _run(op, bench_ops._fresh(inputs(num_reqs, k, gen), "cuda"),
                 f"{method} R={num_reqs} K={k}")


if __name__ == "__main__":
    main()
