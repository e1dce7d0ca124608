"""Which registration route costs least per eager call? (issue #2: the op boundary)

The same SPEC 1.5 step kernel, same validation, behind four boundaries, timed as host µs per
eager call on CUDA (back-to-back calls, synchronized around each batch, the routes taking
turns within each repeat, median of repeats):

  library      torch.library.Library define/impl, called as torch.ops.spec_ops.<op>.default
               (what spec_ops ships); also through the spec_ops.<op> Python function
  custom_op    torch.library.custom_op wrapping the same validate + launch
  triton_op    torch.library.triton_op + wrap_triton (Inductor can see the kernel)
  raw triton   kernel[(grid,)](*args): the Triton launch alone, no validation, no op
  cached       the launcher's cached launch of the compiled kernel: the launch path the library
               route takes after validating

Then, for every op at R = 64 (bench_ops' inputs), where an eager call's host time goes, the
parts timed in turn within each repeat: the whole op; the dispatcher alone (a no-op Python
kernel behind the same schema); the metadata match (VerifiedMetadata); the op's check on
verified metadata and in full; all the validation a call repeating earlier metadata exactly
gets (VerifiedMetadata.checked); the cached launch; and the raw Triton launch for scale.

Then every op called with the same arguments each time against its batch size changing on
every call: the exact-metadata fast path against the size check it saves (and what noting
the sizes costs when they never repeat).

Last, each fused op (SPEC 5) against the SPEC 1 calls it replaces, at R = 64, through three
boundaries: spec_ops as shipped; the same schemas behind no-op kernels (the dispatcher
alone); and behind kernels that only replay the cached launch (dispatcher + launch, the least
any Python-registered op can cost: the floor of the eager fused-vs-unfused ratios).

Prints the three tables and writes benchmarks/results/bench_registration.json (and to $OUT when
set).
"""

import functools
import itertools
import json
import os
import sys
from pathlib import Path

import torch
import triton

import bench_ops  # benchmarks/, the script's own folder
import spec_ops
from spec_ops import validation
from spec_ops._library import KERNELS, VERIFIED
from spec_ops._triton import draft_step
from spec_ops._triton._launch import supports_pdl

def step_inputs(num_reqs):
    positions = torch.randint(0, 4000, (num_reqs,), dtype=torch.int64, device="cuda")
    block_table = torch.randint(0, 1 << 16, (num_reqs, 256), dtype=torch.int32, device="cuda")
    seq_lens = torch.randint(1, 4000, (num_reqs,), dtype=torch.int32, device="cuda")
    clamped = torch.empty(num_reqs, dtype=torch.int64, device="cuda")
    slots = torch.empty(num_reqs, dtype=torch.int64, device="cuda")
    return positions, block_table, seq_lens, 16, 4096, clamped, slots, None


def validate_and_launch(*args):
    """What the library route's CUDA kernel runs: the check (metadata verified in one call
    after the first) and the cached launch."""
    KERNELS["eagle_step_update_slot_mapping_and_metadata"].triton(*args)


@torch.library.custom_op("spec_ops_bench::step_custom_op",
                         mutates_args=("seq_lens", "out_clamped_positions", "out_slot_mapping"))
def step_custom_op(positions: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor,
                   block_size: int, max_model_len: int, out_clamped_positions: torch.Tensor,
                   out_slot_mapping: torch.Tensor) -> None:
    validate_and_launch(positions, block_table, seq_lens, block_size, max_model_len,
                        out_clamped_positions, out_slot_mapping)


@torch.library.triton_op("spec_ops_bench::step_triton_op",
                         mutates_args=("seq_lens", "out_clamped_positions", "out_slot_mapping"))
def step_triton_op(positions: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor,
                   block_size: int, max_model_len: int, out_clamped_positions: torch.Tensor,
                   out_slot_mapping: torch.Tensor) -> None:
    validation.check_eagle_step_update_slot_mapping_and_metadata(
        positions, block_table, seq_lens, block_size, max_model_len, out_clamped_positions,
        out_slot_mapping)
    num_reqs = positions.shape[0]
    grid = (-(-num_reqs // draft_step.BLOCK_R),)
    pdl = supports_pdl(positions.get_device())
    torch.library.wrap_triton(draft_step._step_kernel)[grid](
        positions, block_table, seq_lens, out_clamped_positions, out_slot_mapping, num_reqs,
        num_reqs, block_table.stride(0), block_table.shape[1], max_model_len, block_size,
        draft_step.BLOCK_R, pdl, **({"launch_pdl": True} if pdl else {}))


def shadow_ops(namespace, kernel_of, names):
    """(torch.ops.<namespace>, its Library): the spec_ops schemas of ``names`` behind the CUDA
    kernels ``kernel_of(name)`` in place of spec_ops' own. Keep the Library: its
    registrations go with it."""
    library = torch.library.Library(namespace, "DEF")
    for name in names:
        library.define(str(getattr(torch.ops.spec_ops, name).default._schema).split("::", 1)[1])
        library.impl(name, kernel_of(name), "CUDA")
    return getattr(torch.ops, namespace), library


def no_op(name):
    """A kernel that does nothing (returns a preallocated tensor where the schema returns one):
    what is left of a call is the dispatcher's own work."""
    if "-> Tensor" not in str(getattr(torch.ops.spec_ops, name).default._schema):
        return lambda *args: None
    result = torch.empty(1, dtype=torch.int64, device="cuda")
    return lambda *args: result


def launch_only(name):
    """A kernel that runs spec_ops' own on its first call, recording the launch, and from then
    on only replays that launch: no check, no metadata match, no glue around it."""
    replay = []

    def kernel(*args):
        if not replay:
            launches = []
            with bench_ops._recording_launches(launches):
                KERNELS[name].triton(*args)
            replay.append(launches[0].fast())
        replay[0]()
    return kernel


def _r64_args(op, num_reqs=64):
    state = bench_ops._fresh(
        op.inputs(num_reqs, bench_ops.K + 1, torch.Generator().manual_seed(5)), "cuda")
    return bench_ops._op_args(op.name, state)


CHANGING_SIZES = range(57, 65)     # more than VerifiedMetadata remembers exactly


def _call_next(fn, arg_sets):
    fn(*next(arg_sets))


def size_changes():
    """{op label: {route: host µs}}: each op called with the same arguments on every call
    (remembered exactly after its warm-up calls, so not checked), and with the batch size changing
    on every call, the 8 sizes of CHANGING_SIZES in turn (too many to be remembered exactly:
    each call is checked for sizes and noted as seen). Both cycle through 8 argument sets."""
    times = {}
    for op in bench_ops.OPS:
        fn = getattr(torch.ops.spec_ops, op.name).default
        same = [_r64_args(op)] * len(CHANGING_SIZES)
        changing = [_r64_args(op, num_reqs) for num_reqs in CHANGING_SIZES]
        calls = {route: functools.partial(_call_next, fn, itertools.cycle(arg_sets))
                 for route, arg_sets in (("same", same), ("changing", changing))}
        times[op.label] = bench_ops.host_us(calls)
    return times


def breakdown():
    """{op label: {part: host µs}} at R = 64, the parts interleaved within each repeat."""
    no_ops, _library = shadow_ops("spec_ops_breakdown", no_op,
                                  [op.name for op in bench_ops.OPS])
    parts = {}
    for op in bench_ops.OPS:
        args = _r64_args(op)
        launches = []
        with bench_ops._recording_launches(launches):
            getattr(torch.ops.spec_ops, op.name).default(*args)
        check, verified = getattr(validation, "check_" + op.name), VERIFIED[op.name]
        fns = {
            "op": functools.partial(getattr(torch.ops.spec_ops, op.name).default, *args),
            "dispatcher": functools.partial(getattr(no_ops, op.name).default, *args),
            "metadata match": functools.partial(verified, args),
            "check, verified": functools.partial(check, *args, verified=True),
            "check, full": functools.partial(check, *args),
            "checked, exact": functools.partial(verified.checked, args, check),
            "cached launch": launches[0].fast(),
            "raw triton": launches[0].raw(),
        }
        if op.unfused:
            fns["unfused"] = functools.partial(op.unfused, *args)
        parts[op.label] = bench_ops.host_us(fns)
    return parts


UNFUSED_OPS = {      # the SPEC 1 ops each fused op's unfused sequence calls (bench_ops.OPS)
    "5.1": ("eagle_prepare_next_token_padded", "eagle_prepare_inputs_padded"),
    "5.2": ("eagle_step_update_slot_mapping_and_metadata",),
}
FLOOR_ROUTES = {
    "spec_ops as shipped": None,
    "dispatcher only (no-op kernels)": no_op,
    "dispatcher + cached launch only": launch_only,
}


def fused_floors():
    """{fused op label: {route: {fused, unfused, ratio}}}: host µs per call at R = 64 of each
    SPEC 5 op and of the SPEC 1 calls it replaces, through the routes of FLOOR_ROUTES, all
    interleaved. The same schemas behind kernels that only replay the cached launch are the
    least any Python-registered kernel can cost, so their ratio is the floor of the eager
    fused-vs-unfused targets."""
    fused = [op for op in bench_ops.OPS if op.unfused]
    names = {name for op in fused for name in (op.name, *UNFUSED_OPS[op.label])}
    namespaces, libraries = {"spec_ops as shipped": torch.ops.spec_ops}, []
    for route, kernel_of in FLOOR_ROUTES.items():
        if kernel_of is not None:
            namespace = "spec_ops_floor_" + kernel_of.__name__
            namespaces[route], library = shadow_ops(namespace, kernel_of, sorted(names))
            libraries.append(library)
    floors = {}
    for op in fused:
        args = _r64_args(op)
        fns = {}
        for route, ops in namespaces.items():
            fns[route, "fused"] = functools.partial(getattr(ops, op.name).default, *args)
            fns[route, "unfused"] = functools.partial(op.unfused, *args, ops=ops)
        times = bench_ops.host_us(fns)
        floors[op.label] = {route: {"fused": times[route, "fused"],
                                    "unfused": times[route, "unfused"],
                                    "ratio": times[route, "fused"] / times[route, "unfused"]}
                            for route in namespaces}
    return floors


def main():
    rows = []
    for num_reqs in (1, 1024):
        args = step_inputs(num_reqs)
        launches = []
        with bench_ops._recording_launches(launches):
            spec_ops.eagle_step_update_slot_mapping_and_metadata(*args)
        op = torch.ops.spec_ops.eagle_step_update_slot_mapping_and_metadata
        routes = {
            "library (.default)": lambda: op.default(*args),
            "library (packet)": lambda: op(*args),
            "spec_ops function": lambda: spec_ops.eagle_step_update_slot_mapping_and_metadata(
                *args),
            "custom_op": lambda: step_custom_op(*args[:7]),
            "triton_op": lambda: step_triton_op(*args[:7]),
            "raw triton kernel[grid]": launches[0].raw(),
            "cached launch": launches[0].fast(),
        }
        times = bench_ops.host_us(routes)
        for name, us in times.items():
            rows.append({"num_reqs": num_reqs, "route": name, "host_us": us,
                         "vs_raw_triton": us / times["raw triton kernel[grid]"]})
    print(f"{'R':>5}  {'route':<26}{'host µs':>9}  {'× raw triton':>12}")
    for row in rows:
        print(f"{row['num_reqs']:>5}  {row['route']:<26}{row['host_us']:>9.2f}  "
              f"{row['vs_raw_triton']:>12.2f}")
    parts = breakdown()
    names = ["op", "dispatcher", "metadata match", "check, verified", "check, full",
             "checked, exact", "cached launch", "raw triton", "unfused"]
    print("\nwhere an eager call's host µs go (R = 64; the parts overlap: op = dispatcher + "
          "validation + launch + glue, where validation is 'checked, exact' for a call that "
          "repeats earlier metadata, as these do, and metadata match + check otherwise)")
    print(f"{'op':<5}" + "".join(f"{name:>16}" for name in names))
    for label, times in parts.items():
        print(f"{label:<5}" + "".join(f"{times.get(name, float('nan')):>16.2f}"
                                      for name in names))
    changes = size_changes()
    print("\nthe batch size changing on every call (8 sizes in turn) against the same arguments "
          "each call, host µs")
    print(f"{'op':<5}{'same':>9}{'changing':>10}{'difference':>12}")
    for label, row in changes.items():
        print(f"{label:<5}{row['same']:>9.2f}{row['changing']:>10.2f}"
              f"{row['changing'] - row['same']:>12.2f}")
    floors = fused_floors()
    print("\nfused ops against the SPEC 1 calls they replace (R = 64, host µs per call, "
          "interleaved)")
    print(f"{'op':<5}{'route':<34}{'fused':>9}{'unfused':>9}{'ratio':>8}")
    for label, routes in floors.items():
        for route, row in routes.items():
            print(f"{label:<5}{route:<34}{row['fused']:>9.2f}{row['unfused']:>9.2f}"
                  f"{row['ratio']:>8.3f}")
    result = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
              "triton": triton.__version__, "python": sys.version.split()[0], "rows": rows,
              "breakdown_r64": parts, "size_changes": changes, "fused_floors_r64": floors}
    for folder in filter(None, (Path(__file__).resolve().parent / "results",
                                os.environ.get("OUT"))):
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / "bench_registration.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
