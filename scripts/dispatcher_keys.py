"""What the dispatcher costs a round op called through torch.ops, and whether skipping its
autograd keys changes that.

    python scripts/dispatcher_keys.py [--calls N] [--repeats N]

Each round op's schema behind a kernel that does nothing (bench_registration's shadow_ops and
no_op, as its "dispatcher" column measures the single ops), three ways: alone (as spec_ops
registers its kernels), with torch.library.fallthrough_kernel for Autograd, and with it for
Autograd and ADInplaceOrView. Each op called through torch.ops with bench_rounds.py's
arguments (R = 64, K = 3; parallel drafting as P-EAGLE); host µs per call, the variants taking
turns (bench_ops.host_us). On CUDA the kernels are registered for the CUDA key; without it
(bench_ops' smoke mode) for the CPU key, on CPU tensors. Without autograd kernels the
dispatcher runs its autograd fallback on the way to the kernel; a fallthrough skips that key.
What stays is the conversion of the arguments to C++ values and back, which every
Python-registered op pays.
"""

import argparse
import functools
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_ops  # noqa: E402  (first: it sets TRITON_INTERPRET in smoke mode)
import bench_registration  # noqa: E402
import bench_rounds  # noqa: E402

VARIANTS = {"alone": (), "fallthrough Autograd": ("Autograd",),
            "fallthrough Autograd, ADInplaceOrView": ("Autograd", "ADInplaceOrView")}
NUM_REQS, NUM_DRAFTS = 64, 3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    methods = {op: inputs for label, op, inputs in bench_rounds.METHODS
               if label != "draft model"}           # prepare_parallel_round as P-EAGLE
    shadows = {variant: bench_registration.shadow_ops(f"spec_ops_dispatch_{index}",
                                                      bench_registration.no_op, methods,
                                                      fallthroughs=keys)
               for index, (variant, keys) in enumerate(VARIANTS.items())}
    print(f"host µs per torch.ops call of a no-op kernel ({bench_registration.DEVICE}, torch "
          f"{torch.__version__}), median of {args.repeats} x {args.calls} calls")
    print(f"{'op':<24}" + "".join(f"{variant:>40}" for variant in VARIANTS))
    for op, inputs in methods.items():
        made = inputs(NUM_REQS, NUM_DRAFTS, torch.Generator().manual_seed(NUM_REQS))
        values = bench_ops._op_args(op, bench_ops._fresh(made, bench_registration.DEVICE))
        times = bench_ops.host_us(
            {variant: functools.partial(getattr(namespace, op).default, *values)
             for variant, (namespace, _library) in shadows.items()},
            calls=args.calls, repeats=args.repeats)
        print(f"{op:<24}" + "".join(f"{times[variant]:>40.2f}" for variant in VARIANTS))


if __name__ == "__main__":
    main()
