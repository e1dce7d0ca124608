"""Kernel declaration and the cached launch path shared by every spec_ops kernel.

Triton's ``kernel[grid](...)`` binds arguments, computes a specialization key and looks the
compiled kernel up on every call; for kernels this small that is most of the eager cost. Every
spec_ops kernel is declared with ``spec_kernel``, which turns off value and alignment
specialization for all runtime arguments, so the compiled kernel depends only on the argument
dtypes and the constexprs. The launcher's own key carries exactly those, which makes it safe to
call the compiled kernel directly on every call after the first: on Triton 3.6 its C launch
function itself, with device addresses for the tensors (see ``cached_launch``).

On devices that support it (Hopper or newer, Triton with grid dependency control), kernels
are launched with programmatic dependent launch (PDL): each one starts with
``pdl_prologue(PDL)``, which lets the next kernel in the stream start launching and then waits
until the previous kernel's writes are visible. Launch latency overlaps the previous kernel;
ordering is unchanged whatever the neighbouring kernels are. Every kernel's last parameter is
the constexpr ``PDL``, which the launcher appends per device.
"""

import functools
import inspect
import os

import torch
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
PER_REQUEST_BLOCK = 128     # lanes per program of the per-request x chunk grids (1.3, 1.4, 1.7)
PER_REQUEST_WARPS = 1
MAX_CHUNKS = 1024


@functools.cache
def supports_pdl(device_index):
    """Hopper (sm_90) or newer, and a Triton with grid dependency control (3.4+); False for
    a CPU tensor's device index (-1), as under TRITON_INTERPRET."""
    return (device_index >= 0 and hasattr(tl.extra.cuda, "gdc_wait")
            and torch.cuda.get_device_capability(device_index)[0] >= 9)


def cdiv(numerator, denominator):
    """Ceiling division of ints (triton.cdiv is a constexpr function: microseconds per call)."""
    return -(-numerator // denominator)


def next_power_of_2(n):
    """1 for n <= 0, else the smallest power of two >= n (exact for any int)."""
    return 1 << (n - 1).bit_length() if n > 1 else 1


def num_chunks(num_items, num_reqs):
    """Programs per request in a per-request x chunk grid: the mean items per request over
    PER_REQUEST_BLOCK, at least 1 (from shapes only)."""
    return min(max(cdiv(num_items, max(num_reqs, 1) * PER_REQUEST_BLOCK), 1), MAX_CHUNKS)


@triton.jit
def pdl_prologue(PDL: tl.constexpr):
    if PDL:
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

    ``key`` must determine the compiled kernel: the dtypes of the pointer arguments (through
    the op's variant, see ``spec_ops.validation.VerifiedMetadata``) and every constexpr value
    (runtime ints are annotated ``tl.int64`` in the kernels, so their values do not matter).
    ``args`` lists every kernel parameter in order, constexprs included, except the trailing
    ``PDL``, which the launcher adds for the device. Tensor arguments come first.
    """

    def __init__(self, kernel, num_warps=4):
        self.kernel = kernel
        self.num_warps = num_warps
        self.launches = {}      # (device index, num_warps, key) -> launch(grid, grid_y, args)

    def __call__(self, device_index, grid, key, args, num_warps=None, grid_y=1):
        if grid == 0 or grid_y == 0:
            return
        num_warps = num_warps or self.num_warps
        if INTERPRET:
            self.kernel[(grid, grid_y)](*args, False, num_warps=num_warps)
            return
        cache_key = (device_index, num_warps, key)
        launch = self.launches.get(cache_key)
        if launch is not None and device_index == torch._C._cuda_getDevice():
            launch(grid, grid_y, args)
            return
        with torch.cuda.device(device_index):
            if launch is None:
                self._first_launch(cache_key, grid, grid_y, args)
            else:
                launch(grid, grid_y, args)

    def _first_launch(self, cache_key, grid, grid_y, args):
        """The first launch of a variant goes through Triton, which compiles (or loads from its
        disk cache) and hands back the compiled kernel; later launches call it directly."""
        device_index, num_warps, _ = cache_key
        pdl = supports_pdl(device_index)
        options = {"launch_pdl": True} if pdl else {}
        compiled = self.kernel[(grid, grid_y)](*args, pdl, num_warps=num_warps, **options)
        self.launches[cache_key] = cached_launch(compiled, device_index, args, pdl)


def leading_tensors(args):
    """How many of ``args`` are tensors before the first non-tensor."""
    count = 0
    for arg in args:
        if not isinstance(arg, torch.Tensor):
            break
        count += 1
    return count


def bare_launcher(run):
    """The C launch function behind a compiled kernel's ``run``, when this Triton is one whose
    argument order we know (3.6: grid, stream, function, cooperative, PDL, two scratch
    buffers, metadata, hooks, kernel arguments) and the kernel needs no scratch memory; else
    None. Calling it directly skips a Python frame that allocates scratch per launch."""
    if not triton.__version__.startswith("3.6."):
        return None
    try:
        parameters = list(inspect.signature(type(run).__call__).parameters)
    except (TypeError, ValueError):
        return None
    if parameters != ["self", "gridX", "gridY", "gridZ", "stream", "function", "args"]:
        return None
    if getattr(run, "global_scratch_size", 1) or getattr(run, "profile_scratch_size", 1):
        return None
    return getattr(run, "launch", None)


_data_ptr = torch.Tensor.data_ptr


def cached_launch(compiled, device_index, args, pdl):
    """``launch(grid, grid_y, args)`` for a compiled kernel: tensors go to Triton as device
    addresses (the op validated their device), on the device's current stream."""
    num_tensors = leading_tensors(args)
    run = compiled.run
    function, metadata = compiled.function, compiled.packed_metadata
    current_stream = torch._C._cuda_getCurrentRawStream
    c_launch = bare_launcher(run)
    if c_launch is not None:
        cooperative, launch_pdl = run.launch_cooperative_grid, run.launch_pdl

        def launch(grid, grid_y, args):
            c_launch(grid, grid_y, 1, current_stream(device_index), function, cooperative,
                     launch_pdl, None, None, metadata, None, None, None,
                     *map(_data_ptr, args[:num_tensors]), *args[num_tensors:], pdl)
    else:
        def launch(grid, grid_y, args):
            run(grid, grid_y, 1, current_stream(device_index), function, metadata, None, None,
                None, *map(_data_ptr, args[:num_tensors]), *args[num_tensors:], pdl)
    launch.direct = c_launch is not None
    return launch
