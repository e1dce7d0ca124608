"""Kernel declaration and the cached launch path shared by every spec_ops kernel.

Triton's ``kernel[grid](...)`` binds arguments, computes a specialization key and looks the
compiled kernel up on every call; for kernels this small that is most of the eager cost. Every
spec_ops kernel is declared with ``spec_kernel``, which turns off value and alignment
specialization for all runtime arguments, so the compiled kernel depends only on the argument
dtypes and the constexprs. The launcher's own key carries exactly those, which makes it safe to
call the cached compiled kernel's launcher directly on every call after the first.

Kernels are launched with programmatic dependent launch (PDL, Hopper and later): each one
starts with ``pdl_prologue()``, which lets the next kernel in the stream start launching and
then waits until the previous kernel's writes are visible. Launch latency overlaps the
previous kernel; ordering is unchanged whatever the neighbouring kernels are.
"""

import inspect
import os

import torch
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
# PDL needs Hopper (sm_90) or newer; the interpreter has no grid dependency control.
USE_PDL = tl.constexpr(not INTERPRET and torch.cuda.is_available()
                       and torch.cuda.get_device_capability()[0] >= 9)


def cdiv(numerator, denominator):
    """Ceiling division of ints (triton.cdiv is a constexpr function: microseconds per call)."""
    return -(-numerator // denominator)


def next_power_of_2(n):
    """1 for n <= 0, else the smallest power of two >= n (exact for any int)."""
    return 1 << (n - 1).bit_length() if n > 1 else 1


@triton.jit
def pdl_prologue():
    if USE_PDL:
        tl.extra.cuda.gdc_launch_dependents()
        tl.extra.cuda.gdc_wait()


def spec_kernel(fn):
    """``triton.jit`` with no specialization on values or alignment of runtime arguments."""
    runtime_args = [
        name
        for name, param in inspect.signature(fn).parameters.items()
        if "constexpr" not in str(param.annotation)
    ]
    return triton.jit(
        fn, do_not_specialize=runtime_args, do_not_specialize_on_alignment=runtime_args
    )


class Launcher:
    """Launches one kernel over a 1-D or 2-D grid.

    ``key`` must determine the compiled kernel: the dtypes of the pointer arguments and every
    constexpr value (runtime ints are annotated ``tl.int64`` in the kernels, so their values do
    not matter). ``args`` lists every kernel parameter in order, constexprs included.
    """

    def __init__(self, kernel, num_warps=4):
        self.kernel = kernel
        self.num_warps = num_warps
        self.compiled = {}

    def __call__(self, device_index, grid, key, args, num_warps=None, grid_y=1):
        if grid == 0 or grid_y == 0:
            return
        num_warps = num_warps or self.num_warps
        if INTERPRET:
            self.kernel[(grid, grid_y)](*args, num_warps=num_warps)
            return
        cache_key = (device_index, num_warps, key)
        compiled = self.compiled.get(cache_key)
        if device_index != torch._C._cuda_getDevice():
            with torch.cuda.device(device_index):
                self._launch(compiled, cache_key, grid, grid_y, args, num_warps)
        else:
            self._launch(compiled, cache_key, grid, grid_y, args, num_warps)

    def _launch(self, compiled, cache_key, grid, grid_y, args, num_warps):
        if compiled is None:
            # The first launch of a variant goes through Triton, which compiles (or loads from
            # its disk cache) and hands back the compiled kernel.
            self.compiled[cache_key] = self.kernel[(grid, grid_y)](
                *args, num_warps=num_warps, launch_pdl=bool(USE_PDL))
            return
        stream = torch._C._cuda_getCurrentRawStream(cache_key[0])
        compiled.run(grid, grid_y, 1, stream, compiled.function, compiled.packed_metadata,
                     None, None, None, *args)
