"""Compile every kernel variant spec_ops.warmup reaches, for GPU architectures, on any
machine: Triton's front end, LLVM and its bundled ptxas (or, for AMD targets, its linker) run
on the CPU, no GPU needed.

    python scripts/compile_kernels.py [--arch 90[,80,gfx942,...]] [--jobs N]

The CPU test suite runs the Triton kernels in Triton's interpreter, which executes them as
NumPy code and does not check what the compiler checks (a loop-carried value must keep its
type, for one). This compiles, to a binary, each (kernel, tensor dtypes, constexprs, num_warps)
that warm-up launches for K = 3 and K = 100 configurations with the production dtypes and with
every integer tensor int64, exactly as the launcher would for a GPU of that architecture (no
value or alignment specialization; programmatic dependent launch from sm_90 on), and exits
non-zero naming every variant that fails.
tests/test_compile_kernels.py runs it in CI.
"""

import os

os.environ.pop("TRITON_INTERPRET", None)    # before triton is imported: compile, not interpret

import argparse  # noqa: E402
import inspect  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402

import torch  # noqa: E402
import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

import spec_ops  # noqa: E402
from spec_ops._library import KERNELS  # noqa: E402
from spec_ops._triton._launch import LAUNCHERS, Launcher, pdl_for_capability  # noqa: E402

CONFIG = dict(vocab_size=100, block_size=16, max_model_len=128, max_num_reqs=300)
# K = 3, and a K past the tiles and unrolled loops sized by it (1.4's queries, the sampled
# columns), whose kernels take loops instead.
NUM_SPECULATIVE_TOKENS = (3, 100)
DTYPE_SETS = ({}, dict.fromkeys(("token_ids", "positions", "block_table", "counts",
                                 "slot_mapping"), torch.int64))
POINTER_TYPES = {torch.int32: "*i32", torch.int64: "*i64", torch.bool: "*i1"}


def variants():
    """{(kernel name, num_warps, signature, constexprs)} of every launch warm-up makes, its
    Triton kernels called on CPU tensors with the launches recorded instead of run."""
    found = {}

    def record(self, grid, args, num_warps=None, grid_y=1):
        parameters = list(inspect.signature(self.kernel.fn).parameters.values())
        signature, constexprs = {}, {}
        # PDL recorded as on; compiled_variant sets it for the architecture
        for i, (parameter, value) in enumerate(zip(parameters, (*args, True))):
            if "constexpr" in str(parameter.annotation):
                signature[parameter.name] = "constexpr"
                constexprs[(i,)] = value
            elif parameter.name.endswith("_ptr"):
                signature[parameter.name] = POINTER_TYPES[value.dtype]
            else:
                assert "int64" in str(parameter.annotation), (self.kernel.fn.__name__,
                                                              parameter.name)
                signature[parameter.name] = "i64"
        key = (self.kernel.fn.__name__, num_warps or self.num_warps,
               tuple(signature.items()), tuple(sorted(constexprs.items())))
        found.setdefault(key, None)

    original = Launcher.__call__
    warmup_module = sys.modules["spec_ops.warmup"]
    original_call = warmup_module._call
    Launcher.__call__ = record
    warmup_module._call = lambda op, *args: KERNELS[op].triton(*args)
    try:
        for num_speculative_tokens in NUM_SPECULATIVE_TOKENS:
            for dtypes in DTYPE_SETS:
                spec_ops.warmup("cpu", **CONFIG, num_speculative_tokens=num_speculative_tokens,
                                dtypes=dtypes)
    finally:
        Launcher.__call__ = original
        warmup_module._call = original_call
    return list(found)


def compiled_variant(variant, arch, num_warps=None):
    """The variant compiled for ``arch`` as the launcher would compile it on such a GPU: an
    int is an NVIDIA compute capability (90: sm_90), with programmatic dependent launch where
    the launcher would take it (``pdl_for_capability``: sm_90 on, unless SPEC_OPS_PDL=0; the
    kernels' constexpr ``PDL``, recorded as on) and without it elsewhere; a string such as
    "gfx942" an AMD target (64-lane wavefronts, no PDL). num_warps its own unless given."""
    name, warps, signature, constexprs = variant
    kernel = next(launcher.kernel for launcher in LAUNCHERS if launcher.kernel.fn.__name__ == name)
    nvidia = isinstance(arch, int)
    pdl = nvidia and pdl_for_capability(arch // 10)
    constexprs = dict(constexprs)
    constexprs[(list(dict(signature)).index("PDL"),)] = pdl
    target = GPUTarget("cuda", arch, 32) if nvidia else GPUTarget("hip", arch, 64)
    return triton.compile(ASTSource(kernel, dict(signature), constexprs), target=target,
                          options={"num_warps": num_warps or warps,
                                   **({"launch_pdl": True} if pdl else {})})


def compile_variant(variant, arch):
    """None if the variant compiles to a binary (a cubin, or an AMD hsaco), else the error's
    first lines."""
    try:
        compiled = compiled_variant(variant, arch)
        assert compiled.asm.get("cubin" if isinstance(arch, int) else "hsaco"), "no binary"
    except Exception as error:      # noqa: BLE001 - reported per variant
        return f"{type(error).__name__}: {' '.join(str(error).split())[:600]}"
    return None


def target_name(arch):
    return f"sm_{arch}" if isinstance(arch, int) else arch


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="90",
                        help="targets, comma-separated: NVIDIA compute capabilities (80, 90, "
                             "100) or AMD architectures (gfx942)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    options = parser.parse_args()
    archs = [int(arch) if arch.isdigit() else arch for arch in options.arch.split(",")]
    start = time.perf_counter()
    found = variants()
    jobs = [(variant, arch) for arch in archs for variant in found]
    with ProcessPoolExecutor(options.jobs) as pool:
        errors = list(pool.map(compile_variant, *zip(*jobs)))
    for ((name, num_warps, _, constexprs), arch), error in zip(jobs, errors):
        if error:
            print(f"FAILED {target_name(arch)} {name} num_warps={num_warps} "
                  f"constexprs={[v for _, v in constexprs]}: {error}")
    for arch in archs:
        compiled = sum(not error for (_, a), error in zip(jobs, errors) if a == arch)
        print(f"triton {triton.__version__}, {target_name(arch)}: {compiled} of {len(found)} "
              f"kernel variants compiled ({len({v[0] for v in found})} kernels)")
    print(f"{time.perf_counter() - start:.1f} s")
    return 1 if any(errors) else 0


if __name__ == "__main__":
    sys.exit(main())
