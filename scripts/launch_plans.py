"""Host µs of a round op's eager call with and without launch plans, on CPU tensors.

    python scripts/launch_plans.py [R]

The public function (spec_ops.<op>) takes its eager entry as on CUDA (interpreter tensors,
EagerEntry.cpu_tensors_run_triton) and everything up to Triton's C launch runs: the checks,
the layout choice, the launcher's key and cached-launch lookup, the tensors' addresses; the C
launch itself is left out (no GPU). Per op, K = 1, median of 9 repeats of 3000 calls:

  repeated      one batch called again and again: the launch plan replays
  no plans      the same calls with plans turned off: the checked path
  two in turn   batches of R + 9 and R + 10 requests in turn: each size's plan replays
  changing      batches of more sizes in turn than an op remembers launches of (R + 9 ...
                R + 17): no plan forms
  + 8 plans     the same with eight plans of other sizes remembered (as many as are kept):
                what a call whose size matches none of them pays for looking
"""

import itertools
import os
import sys
import time
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"
ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests")]

import torch  # noqa: E402

import bench_ops  # noqa: E402
import bench_rounds  # noqa: E402
import spec_ops  # noqa: E402
from spec_ops import _library  # noqa: E402
from spec_ops._triton import _launch  # noqa: E402

_data_ptr = torch.Tensor.data_ptr


def _launch_without_c_call(self, key, grid, grid_y, num_warps, args):
    self.launches.get(key)
    [*map(_data_ptr, args[:self.num_tensors]), *args[self.num_tensors:]]


def timed(fn, calls=3000, repeats=9):
    for _ in range(300):
        fn()
    runs = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        runs.append((time.perf_counter() - start) / calls * 1e6)
    return sorted(runs)[repeats // 2]


def main():
    num_reqs = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    _launch.INTERPRET = False           # the compiled-kernel path, up to the C launch
    _launch.Launcher._launch = _launch_without_c_call
    _library.EagerEntry.cpu_tensors_run_triton = True
    print(f"R = {num_reqs}, K = 1, host µs per call of spec_ops.<op> ({torch.__version__}, "
          f"{os.cpu_count()} CPUs)")
    print(f"{'method':<12}{'repeated':>10}{'no plans':>10}{'two in turn':>13}{'changing':>10}"
          f"{f'+ {_library.KnownCalls.MAX_REMEMBERED} plans':>11}")
    remembered = _library.KnownCalls.MAX_REMEMBERED
    for method, op, inputs in bench_rounds.METHODS:
        batches = [bench_ops._op_args(op, bench_ops._fresh(
            inputs(num_reqs + n, 1, torch.Generator().manual_seed(n)), "cpu"))
            for n in range(2 * remembered + 2)]
        function, calls = getattr(spec_ops, op), _library.KERNELS[op].entry.calls
        _library.KERNELS[op].triton(*batches[0])       # a valid CUDA-route call: the layout
        calls.plans, calls.recent = (), ()
        repeated = timed(lambda: function(*batches[0]))
        assert calls.plans, "no plan formed"
        calls.learn, calls.plans = (lambda *args: None), ()
        unplanned = timed(lambda: function(*batches[0]))
        del calls.learn
        calls.plans, calls.recent = (), ()
        turns = itertools.cycle(batches[remembered + 1:remembered + 3])
        two = timed(lambda: function(*next(turns)))
        assert len(calls.plans) == 2, "two sizes in turn formed no plans"
        calls.plans, calls.recent = (), ()
        turns = itertools.cycle(batches[remembered + 1:])
        changing = timed(lambda: function(*next(turns)))
        assert not calls.plans, "sizes changing every call formed a plan"
        for batch in batches[1:remembered + 1]:
            for _ in range(2):
                function(*batch)
        assert len(calls.plans) == remembered
        looking = timed(lambda: function(*next(turns)))
        print(f"{method:<12}{repeated:>10.2f}{unplanned:>10.2f}{two:>13.2f}{changing:>10.2f}"
              f"{looking:>11.2f}")

if __name__ == "__main__":
    main()
