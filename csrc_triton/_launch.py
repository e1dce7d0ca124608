"""Kernel declaration and the launch path shared by every spec_ops kernel.

Triton's ``kernel[grid](...)`` binds arguments, computes a specialization key and looks the
compiled kernel up on every call; for kernels this small that is most of the eager cost. Every
spec_ops kernel is declared with ``spec_kernel``, which turns off value and alignment
specialization for all runtime arguments, so a compiled kernel is determined by the device, the
dtypes of its tensor arguments, its constexpr values and num_warps. ``Launcher`` keys its cache
of compiled kernels by exactly those, read from the call's own arguments, and after the first
launch of a key calls the compiled kernel without Triton's per-call binding:

* ``direct``: the C launch function behind the compiled kernel, with device addresses for the
  tensors; taken only when the launcher object has the exact structure this code was written
  against (``_direct_launch``), anything else falls through to
* ``run``: the compiled kernel's ``run`` (Triton's own launcher object), tensors passed as
  tensors; taken when its call signature is the one this code was written against, else
* ``triton``: ``kernel[grid](...)`` on every call, always correct.

``SPEC_OPS_LAUNCH=run`` or ``=triton`` (read at import) caps the path, so the generic paths are
testable on a GPU whose Triton supports the direct one.

On NVIDIA devices that support it (sm_90+, Triton with grid dependency control), kernels are
launched with programmatic dependent launch (PDL): each one starts with ``pdl_prologue(PDL)``,
which lets the next kernel in the stream start launching and then waits until the previous
kernel's writes are visible. Launch latency overlaps the previous kernel; ordering is unchanged
whatever the neighbouring kernels are. Every kernel's last parameter is the constexpr ``PDL``,
which the launcher appends per device. ``SPEC_OPS_PDL=0`` (read at import) launches every kernel
without it, as on GPUs before sm_90, so that path is testable on a GPU that supports PDL.
"""

import functools
import inspect
import operator
import os
import threading
import types
from typing import NamedTuple, Optional

import torch
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
LAUNCH_PATHS = ("direct", "run", "triton")
LAUNCH_PATH_LIMIT = os.environ.get("SPEC_OPS_LAUNCH", "direct")
if LAUNCH_PATH_LIMIT not in LAUNCH_PATHS:
    raise ValueError(f"SPEC_OPS_LAUNCH must be one of {LAUNCH_PATHS}, got {LAUNCH_PATH_LIMIT!r}")
PDL_ALLOWED = os.environ.get("SPEC_OPS_PDL", "1") != "0"
# Lanes and warps per program of the per-request x chunk grids (1.3, 1.4, 1.7). Measured in a
# CUDA graph on the H200 against 128 lanes: 1.3 at 1024 decodes 2.30 -> 1.69 us and at 8 x 2048
# tokens 1.72 -> 1.22 us, 1.7 at 8 x 2048 1.79 -> 1.21 us (benchmarks/results/block_sizes.txt).
PER_REQUEST_BLOCK = 64
PER_REQUEST_WARPS = 1
MAX_CHUNKS = 1024
# The row layout of 1.3, 1.4 and 1.7 for decode-sized requests: ROW_GROUP whole requests per
# program as one [ROW_GROUP, cols] tile, ROW_WARPS warps. At 1024 decodes on the H200, 1.7
# took 1.07 us per call in a CUDA graph against 1.64 with one program per request (tiles and
# warps swept by scripts/sweep_row_layout.py; benchmarks/results/row_layout.txt: 4 warps are
# the fastest setting everywhere but 1.3 at R = 1024, where 2 warps took 1.06 against 1.12).
ROW_GROUP = 8
ROW_WARPS = 4
ROW_COLS = (8, 16)
# Lanes per iteration of the row layout's flat loop over its requests' remaining items (after
# the tile, every request's laid end to end; groups with one such request take LONE_TAIL's
# loop instead): a decode-sized batch can hold chunked prefills. Measured with the flat loop
# serving every group, at 1024 requests with 1-16 adjacent 256-token requests, 1.4 and 1.7
# took 2.0-2.4 us per call with 256 lanes against 2.3-3.3 with 128 or 512, and with one or four
# 2048-token requests 5.8-6.8 against 5.1-10.2 (512 lanes: 5.1-5.3 for 1.4, 9.7-10.2 for 1.7;
# scripts/mixed_batch.py, benchmarks/results/mixed_batch.txt). Groups that still take it hold
# several long requests (160 requests of 32 tokens among 864 decodes: 2.8 / 3.0 / 3.1 us for
# 1.3 / 1.4 / 1.7, other widths not compared). 1.3 takes half (expand.EXPAND_ROW_TAIL).
ROW_TAIL = tl.constexpr(256)
# A row group in which only one request has items past the tile (strided groups make that the
# usual case) runs them LONE_TAIL at a time with the request's values as scalars, without the
# flat loop's per-lane picks (_indexing.lone_remainder). At 1024 requests with 1-16 adjacent
# 256-token requests among decodes, 1.3 / 1.4 / 1.7 took 1.96-2.21 / 1.95-2.12 / 1.86-2.08 us
# against 2.31-2.54 / 2.14-2.44 / 2.02-2.46 in the flat loop; with one or four 2048-token
# requests 3.8-3.9 / 3.5-3.8 / 5.1-5.3 against 8.6-8.8 / 5.8-6.1 / 6.6-6.8. 1.3 and 1.4 take
# 512 lanes (with 2048-token requests 256 lanes took 4.8-5.3 against 3.5-3.9,
# scripts/mixed_batch.py --lone), 1.7 half (expand.SLOT_LONE_TAIL).
LONE_TAIL = tl.constexpr(512)
# Lanes per iteration of a per-request grid's loop past each program's first chunk (the round
# ops and 1.3): a long request among short ones (a chunked prefill in a decode batch) gets
# few programs, whose chunks would otherwise be PER_REQUEST_BLOCK lanes each. At 1024
# requests (K = 3, scripts/mixed_batch.py --wide) 256 lanes against 64: 6.1 with four
# 2048-token requests 6.7 against 9.1 us, 1.3 8.4 against 14.6; 6.2 and 6.3 on pure decodes
# 2.7 against 3.4 and 1.9 against 2.2 (the code around the first chunk compiles differently).
# 1.4 and 1.7 were slower with them and keep BLOCK-lane chunks. 512 lanes: 255 registers and
# spills in 6.2's kernel on sm_90.
WIDE_CHUNK = tl.constexpr(256)
LAUNCHERS = []      # every Launcher, in creation order: what compiled_variants() reads


def pdl_for_capability(major):
    """Whether kernels for an NVIDIA GPU of compute capability ``major``.x take programmatic
    dependent launch: 9.0 or newer, a Triton with grid dependency control (3.4+), and not turned
    off by SPEC_OPS_PDL=0. The one rule the launcher and scripts/compile_kernels.py both use."""
    return (PDL_ALLOWED and major >= 9
            and hasattr(tl.extra, "cuda") and hasattr(tl.extra.cuda, "gdc_wait"))


@functools.cache
def supports_pdl(device_index):
    """``pdl_for_capability`` of a CUDA device's major. False for a CPU tensor's device index
    (-1) and on ROCm, whose capability numbers mean something else."""
    return (device_index >= 0 and torch.version.hip is None
            and pdl_for_capability(torch.cuda.get_device_capability(device_index)[0]))


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


def row_cols(num_items, num_reqs):
    """The row layout's tile width when requests average at most that many items (from
    shapes only), else None: the per-request x chunk grid."""
    for cols in ROW_COLS:
        if num_items <= num_reqs * cols:
            return cols
    return None


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


_dtype = operator.attrgetter("dtype")
_data_ptr = torch.Tensor.data_ptr
# torch's own C entry points for the current device and stream (what Triton itself calls);
# the public functions where a torch lacks them.
_current_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


def _current_stream(device_index):
    if _current_raw_stream is not None:
        return _current_raw_stream(device_index)
    return torch.cuda.current_stream(device_index).cuda_stream


class Launch(NamedTuple):
    """A launch as ``Launcher`` made it: its kernel's cache key (None for an empty grid,
    which launches nothing), grid, warps and arguments, tensors first.
    ``launcher.again(launch, args)`` makes it again with other arguments of the same kind."""

    launcher: "Launcher"
    key: Optional[tuple]
    grid: int
    grid_y: int
    num_warps: int
    args: tuple


class Launcher:
    """Launches one kernel over a 1-D or 2-D grid.

    ``args`` lists every kernel parameter in order, constexprs included, except the trailing
    ``PDL``, which the launcher adds for the device. The kernel's ``*_ptr`` parameters come
    first and get tensors, all on one CUDA device (or CPU tensors under TRITON_INTERPRET).
    """

    def __init__(self, kernel, num_warps=4):
        self.kernel = kernel
        self.num_warps = num_warps
        parameters = list(inspect.signature(kernel.fn).parameters.values())
        names = [param.name for param in parameters]
        self.num_tensors = sum(name.endswith("_ptr") for name in names)
        assert all(name.endswith("_ptr") for name in names[:self.num_tensors]), names
        constexprs = [i for i, param in enumerate(parameters[:-1])
                      if "constexpr" in str(param.annotation)]
        self.constexprs = (operator.itemgetter(*constexprs) if len(constexprs) > 1 else
                           (lambda args: (args[constexprs[0]],)) if constexprs else
                           (lambda args: ()))
        self.constexpr_names = tuple(names[i] for i in constexprs)     # self.constexprs' order
        self.launches = {}      # key (see __call__) -> launch(grid, grid_y, args)
        self.lock = threading.Lock()
        LAUNCHERS.append(self)

    def key(self, args, num_warps):
        """What determines the compiled kernel: (device index, num_warps, every tensor's
        dtype, the constexprs)."""
        tensors = args[:self.num_tensors]
        return (tensors[0].get_device(), num_warps, *map(_dtype, tensors),
                *self.constexprs(args))

    def __call__(self, grid, args, num_warps=None, grid_y=1):
        """Launch the kernel over ``grid`` x ``grid_y`` programs; returns the launch made as
        the plain tuple of ``Launch``'s fields (a tuple costs a fifth of a named one, and
        every call makes one)."""
        num_warps = num_warps or self.num_warps
        if grid == 0 or grid_y == 0:
            return self, None, grid, grid_y, num_warps, args
        if INTERPRET:   # the key a compiled launch would have, so launches differ alike
            self.kernel[(grid, grid_y)](*args, False, num_warps=num_warps)
            return self, self.key(args, num_warps), grid, grid_y, num_warps, args
        device_index = args[0].get_device()
        # self.key(args, num_warps), written out: this runs on every call
        key = (device_index, num_warps, *map(_dtype, args[:self.num_tensors]),
               *self.constexprs(args))
        self._launch(key, grid, grid_y, num_warps, args)
        return self, key, grid, grid_y, num_warps, args

    def again(self, launch, args):
        """``launch`` (one this launcher made) made again with ``args``: other tensors of the
        same dtypes on the same device in the tensors' places, the same ints after them. The
        key is not read from them again."""
        if launch.grid == 0 or launch.grid_y == 0:
            return
        if INTERPRET:
            self.kernel[(launch.grid, launch.grid_y)](*args, False, num_warps=launch.num_warps)
            return
        self._launch(launch.key, launch.grid, launch.grid_y, launch.num_warps, args)

    def _launch(self, key, grid, grid_y, num_warps, args):
        device_index = key[0]
        cached = self.launches.get(key)
        if cached is not None and device_index == _current_device():
            cached(grid, grid_y, args)
            return
        with torch.cuda.device(device_index):
            if cached is None:
                with self.lock:     # one compilation per key, whatever the threads
                    cached = self.launches.get(key)
                    if cached is None:
                        self.launches[key] = self._first_launch(device_index, num_warps, grid,
                                                                grid_y, args)
                        return
            cached(grid, grid_y, args)

    def _first_launch(self, device_index, num_warps, grid, grid_y, args):
        """Launch through Triton, which compiles (or loads from its disk cache); return the
        launch later calls of this key take."""
        pdl = supports_pdl(device_index)
        options = {"launch_pdl": True} if pdl else {}
        kernel = self.kernel
        compiled = kernel[(grid, grid_y)](*args, pdl, num_warps=num_warps, **options)
        path = launch_path(compiled)
        if path == "direct":
            launch = _direct_launch(compiled, device_index, self.num_tensors, pdl)
        elif path == "run":
            launch = _run_launch(compiled, device_index, pdl)
        else:
            def launch(grid, grid_y, args):
                kernel[(grid, grid_y)](*args, pdl, num_warps=num_warps, **options)
        launch.path = path
        return launch


def compiled_variants():
    """The kernel variants this process has compiled (or loaded from Triton's disk cache), as
    (kernel name, key) pairs; key as in ``Launcher.key``. Empty under TRITON_INTERPRET."""
    variants = set()
    for launcher in LAUNCHERS:
        with launcher.lock:
            keys = list(launcher.launches)
        variants.update((launcher.kernel.fn.__name__, key) for key in keys)
    return variants


# --- the launch paths ----------------------------------------------------------------------

_RUN_PARAMETERS = ["self", "gridX", "gridY", "gridZ", "stream", "function"]
# What Triton 3.6's CudaLauncher.__call__ does once scratch buffers are None (no scratch
# memory): the direct path makes exactly this call.
_DIRECT_CALL = ("self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid,"
                " self.launch_pdl, global_scratch, profile_scratch, *args)")


def _call_parameters(run):
    try:
        return list(inspect.signature(type(run).__call__).parameters)
    except (TypeError, ValueError):
        return None


def launch_path(compiled):
    """The fastest launch path this compiled kernel's launcher is known to support, capped by
    SPEC_OPS_LAUNCH."""
    limit = LAUNCH_PATHS.index(LAUNCH_PATH_LIMIT)
    run = getattr(compiled, "run", None)
    parameters = _call_parameters(run)
    known_run = (parameters is not None and parameters[:6] == _RUN_PARAMETERS
                 and hasattr(compiled, "function") and hasattr(compiled, "packed_metadata"))
    if limit <= 0 and known_run and _direct_structure(run, parameters):
        return "direct"
    if limit <= 1 and known_run:
        return "run"
    return "triton"


def _direct_structure(run, parameters):
    """True when ``run`` is a launcher whose __call__ only allocates scratch memory and then
    calls its C ``launch`` as _DIRECT_CALL, and this kernel needs no scratch memory."""
    if parameters != _RUN_PARAMETERS + ["args"]:
        return False
    try:
        source = " ".join(inspect.getsource(type(run).__call__).split())
    except (OSError, TypeError):
        return False
    return (source.count("self.launch(") == 1 and _DIRECT_CALL in source
            and getattr(run, "global_scratch_size", 1) == 0
            and getattr(run, "profile_scratch_size", 1) == 0
            and isinstance(getattr(run, "launch", None), types.BuiltinFunctionType)
            and isinstance(getattr(run, "launch_cooperative_grid", None), bool)
            and isinstance(getattr(run, "launch_pdl", None), bool))


def _direct_launch(compiled, device_index, num_tensors, pdl):
    """The C launch with the tensors as device addresses (the op checked their device)."""
    run = compiled.run
    c_launch, function, metadata = run.launch, compiled.function, compiled.packed_metadata
    cooperative, launch_pdl = run.launch_cooperative_grid, run.launch_pdl

    def launch(grid, grid_y, args):
        c_launch(grid, grid_y, 1, _current_stream(device_index), function, cooperative,
                 launch_pdl, None, None, metadata, None, None, None,
                 *map(_data_ptr, args[:num_tensors]), *args[num_tensors:], pdl)
    return launch


def _run_launch(compiled, device_index, pdl):
    """Triton's launcher object, called as Triton 3.6 through 3.9 call it (without hooks)."""
    run, function, metadata = compiled.run, compiled.function, compiled.packed_metadata

    def launch(grid, grid_y, args):
        run(grid, grid_y, 1, _current_stream(device_index), function, metadata, None, None,
            None, *args, pdl)
    return launch
