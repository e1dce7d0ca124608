"""What a replayed eager call of spec_ops.<op> costs the host besides its launch, no GPU needed.

    python scripts/entry_cost.py [--calls N] [--repeats N] [op ...]

The Python around the launch (the shortcut's probes, the scalars' types, the launch plan's
guard or the layout match and size-only check, the overlap check, the kernel's arguments) is
the same on CPU and CUDA tensors, and it is what a change to the eager entry moves. Runs under
TRITON_INTERPRET=1 with the public functions' shortcut on CPU tensors (the tests' hook,
``EagerEntry.cpu_tensors_run_triton``) and no launch made (``Launcher.__call__`` computes the
kernel's key and returns, ``again`` returns), so what is timed is all but the C launch itself.
Each op on tests/samples.py's arguments, host µs per call, median of repeats:

  same      8 requests on every call, its layout and plan learned from three calls first
  changing  9 argument sets (4-12 requests) in turn, more than an op remembers launches of
            (KnownCalls), so each call matches its layout and runs the size-only check

Default ops: one per size of argument list (1.1 and 1.5 with 5 tensors, the round ops with
18-22).
"""

import argparse
import itertools
import os
import statistics
import sys
import time
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import torch  # noqa: E402

import spec_ops  # noqa: E402
from samples import sample  # noqa: E402
from spec_ops._library import KERNELS, EagerEntry  # noqa: E402
from spec_ops._triton._launch import Launcher  # noqa: E402

OPS = ("eagle_prepare_next_token_padded", "eagle_step_update_slot_mapping_and_metadata",
       "prepare_eagle_round", "prepare_parallel_round", "prepare_dflash_round")


def per_call_us(fn, calls, repeats):
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - start) * 1e6 / calls)
    return statistics.median(samples)


def _no_launch(launcher, grid, args, num_warps=None, grid_y=1):
    """Launcher.__call__ without the launch: the launch it would have made."""
    num_warps = num_warps or launcher.num_warps
    return launcher, launcher.key(args, num_warps), grid, grid_y, num_warps, args


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ops", nargs="*", default=OPS)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    EagerEntry.cpu_tensors_run_triton = True
    print(f"host µs per call of spec_ops.<op>, launch excluded (torch {torch.__version__}), "
          f"median of {args.repeats} x {args.calls} calls")
    print(f"{'op':<48}{'tensors':>8}{'same':>8}{'changing':>10}")
    for op in args.ops:
        same = sample(op, 3, 8, uniform_dtype=True)
        changing = [sample(op, 3, num_reqs, uniform_dtype=True) for num_reqs in range(4, 13)]
        for values in (same, same, same, *changing):     # layouts and the plan, interpreted
            KERNELS[op].triton(*values)
        function = getattr(spec_ops, op)
        turns = itertools.cycle(changing)
        launch = Launcher.__call__, Launcher.again
        Launcher.__call__, Launcher.again = _no_launch, lambda launcher, made, tensors: None
        try:
            same_us = per_call_us(lambda: function(*same), args.calls, args.repeats)
            changing_us = per_call_us(lambda: function(*next(turns)), args.calls, args.repeats)
        finally:
            Launcher.__call__, Launcher.again = launch
        tensors = len(KERNELS[op].entry.known.tensors(same))
        print(f"{op:<48}{tensors:>8}{same_us:>8.2f}{changing_us:>10.2f}")


if __name__ == "__main__":
    main()
