"""What an eager spec_ops call costs on the host, against the raw Triton launch of its kernel.

Every op of torch.ops.spec_ops, on bench_ops' inputs (OPS) at R = 64 requests, K = 3 drafts;
host µs per eager call (back-to-back calls, synchronized around each batch of calls, the
variants of one op taking turns within each repeat, median of repeats: bench_ops.host_us):

  op              torch.ops.spec_ops.<op>.default with the same arguments on every call
  op, changing    the batch size changing on every call: argument sets of R = 55..63 in turn,
                  more than an op remembers launches of (KnownCalls), so no launch plan forms
  fn, fn changing spec_ops.<op>, the public function (its eager entry skips the dispatcher once
                  a call's layout is known), the same argument sets
  raw             kernel[grid](*args) of the op's kernel on the op's launch arguments, the
  raw, changing   same ones or changing alike: Triton's own launch, no check, no op
  dispatcher      the op's schema in a scratch namespace behind a kernel that does nothing
  check           validation.check_<op>, the op's full metadata check
  layouts match   where the check has a size-only mode (verified=True): the match of the
  check, verified layouts remembered from earlier valid calls, and that size-only check, which
                  a matching call runs in place of the full one (validation.KnownLayouts)
  overlap         the OverlapCheck of its written tensors against every other argument
  cached launch   the launcher's cached launch alone, as the op makes it after its check
  rest            op, changing - the parts such a call runs (it replays no plan): the glue
                  around them

Target: every op's eager call, spec_ops.<op> (what users and the example call), at most 1.0x
its raw Triton launch, with the same arguments and with the batch size changing (PASS/FAIL in
the summary, printed last). The same ratios through torch.ops are printed beside them for
information: there the dispatcher converts the arguments to C++ values and back before the
Python kernel runs (the dispatcher column), which every Python-registered op pays and the raw
launch does not.

Two tables for information, printed first:
* registration routes: 1.5 at R = 64 behind torch.library.Library define/impl (what spec_ops
  ships; through the op and through the spec_ops function), custom_op and triton_op (each
  running the same check and launch), against the raw launch;
* each fused op against the unfused calls it replaces (bench_ops' unfused), through spec_ops,
  through the same schemas behind no-op kernels (the dispatcher alone), and behind kernels that
  only replay the cached launch (the least a Python-registered op can cost).

Writes benchmarks/results/bench_registration.json (and to $OUT when set). Without CUDA, or
with --smoke, it runs the same code paths on small CPU inputs: the ops' CPU kernels, the Triton
kernels interpreted (the launcher's whole call stands in for its cached launch, which the
interpreter does not have), a few calls each; its times mean nothing and no target is judged.
--quick prints the per-op table and the summary only.
"""

import argparse
import functools
import inspect
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

import bench_ops  # benchmarks/, the script's own folder; sets TRITON_INTERPRET in smoke mode
import spec_ops
from spec_ops import validation
from spec_ops._library import KERNELS, KnownCalls
from spec_ops._triton import draft_step
from spec_ops._triton._launch import INTERPRET, supports_pdl

SMOKE = bench_ops.SMOKE
DEVICE = "cpu" if SMOKE else "cuda"
NUM_REQS = 4 if SMOKE else 64
# More sizes than an op remembers launches of, none of them NUM_REQS (whose plan the variants
# with the same arguments make).
CHANGING_SIZES = (3, 5) if SMOKE else tuple(range(NUM_REQS - KnownCalls.MAX_REMEMBERED - 1,
                                                  NUM_REQS))
LIMIT = 1.0             # target: op <= LIMIT x raw Triton launch


def _op_args(op, num_reqs=NUM_REQS):
    inputs = op.inputs(num_reqs, bench_ops.K + 1, torch.Generator().manual_seed(num_reqs))
    return bench_ops._op_args(op.name, bench_ops._fresh(inputs, DEVICE))


def _overload(name, namespace=torch.ops.spec_ops):
    return getattr(namespace, name).default


def recorded_launches(name, args):
    """The Launcher calls one call of the op's CUDA kernel makes (compiling its kernels on the
    first; interpreted on CPU tensors in smoke mode)."""
    launches = []
    with bench_ops._recording_launches(launches):
        KERNELS[name].triton(*args)
    assert launches, f"{name} launched no kernel"
    return launches


def raw_launch(launches):
    """kernel[grid](*args) of every launch the op made, in order."""
    return _in_turn([launch.raw() for launch in launches])


def cached_launch(launches):
    """The launcher's cached launch of every launch the op made; interpreted, the launcher's
    whole call (nothing is compiled, so nothing is cached)."""
    if INTERPRET:
        return _in_turn([functools.partial(launch.launcher, launch.grid, launch.args,
                                           launch.num_warps, launch.grid_y)
                         for launch in launches])
    return _in_turn([launch.fast() for launch in launches])


def _in_turn(calls):
    """One function making each of ``calls`` once, in order."""
    if len(calls) == 1:
        return calls[0]

    def run():
        for call in calls:
            call()
    return run


def shadow_ops(namespace, kernel_of, names, fallthroughs=()):
    """(torch.ops.<namespace>, its Library): the spec_ops schemas of ``names`` behind the
    kernels ``kernel_of(name)`` for this run's device, in place of spec_ops' own, and
    torch.library.fallthrough_kernel for the dispatch keys ``fallthroughs``. Keep the
    Library: its registrations go with it."""
    library = torch.library.Library(namespace, "DEF")
    for name in names:
        library.define(str(_overload(name)._schema).split("::", 1)[1])
        library.impl(name, kernel_of(name), "CPU" if SMOKE else "CUDA")
        for key in fallthroughs:
            library.impl(name, torch.library.fallthrough_kernel, key)
    return getattr(torch.ops, namespace), library


def no_op(name):
    """A kernel that does nothing (returns a preallocated tensor where the schema returns one):
    what is left of a call is the dispatcher's own work."""
    if not _overload(name)._schema.returns:
        return lambda *args: None
    result = torch.empty(1, dtype=torch.int64, device=DEVICE)
    return lambda *args: result


def launch_only(name):
    """A kernel that runs spec_ops' own on its first call, recording its launches, and from
    then on only replays them: no check, no glue around the launch."""
    replay = []

    def kernel(*args):
        if not replay:
            launches = []
            with bench_ops._recording_launches(launches):
                KERNELS[name].triton(*args)
            replay.append(cached_launch(launches))
        replay[0]()
    return kernel


# --- every op: the targets and where the time goes ------------------------------------------

def validation_parts(name, args):
    """({part: fn}, [the parts a CUDA call of the op runs]): its validation built as
    _library.define builds it. The full check, the match of remembered layouts and the
    size-only check a matching call runs instead (these calls all match: their layout is
    remembered first), the overlap check."""
    schema = _overload(name)._schema
    check = getattr(validation, "check_" + name)
    known = validation.KnownLayouts.for_schema(schema)
    known.remember(args)
    matrices = known.match(known.tensors(args))
    parts = {"check": functools.partial(check, *args),
             "layouts match": lambda: known.match(known.tensors(args)),
             "check, verified": functools.partial(check, *args, verified=True),
             # As the op runs it: a layout match tells the overlap check what is 2-D.
             "overlap": functools.partial(validation.OverlapCheck(name, schema), args,
                                          matrices=matrices)}
    runs = ["layouts match", "check, verified" if matrices is not None else "check"]
    return parts, [*runs, "overlap"]


def per_op(no_ops):
    """{op label: {"op": name, "host_us": {variant: µs per call}, "op runs": [parts]}} for every
    op of bench_ops.OPS; ``no_ops`` is the namespace of no-op kernels behind the same schemas."""
    results = {}
    for op in bench_ops.OPS:
        fn, function = _overload(op.name), getattr(spec_ops, op.name)
        same = _op_args(op)
        changing = [_op_args(op, num_reqs) for num_reqs in CHANGING_SIZES]
        same_launches = recorded_launches(op.name, same)
        changing_launches = [recorded_launches(op.name, args) for args in changing]
        turns = len(changing)
        checks, runs = validation_parts(op.name, same)
        # The op and the raw launch go through the same loop over 8 calls, so the target
        # ratios compare like with like; the parts are single calls.
        fns = {
            "op": _in_turn([functools.partial(fn, *same)] * turns),
            "op, changing": _in_turn([functools.partial(fn, *args) for args in changing]),
            "fn": _in_turn([functools.partial(function, *same)] * turns),
            "fn, changing": _in_turn([functools.partial(function, *args) for args in changing]),
            "raw": _in_turn([raw_launch(same_launches)] * turns),
            "raw, changing": _in_turn([raw_launch(launches) for launches in changing_launches]),
            "dispatcher": functools.partial(_overload(op.name, no_ops), *same),
            **checks,
            "cached launch": cached_launch(same_launches),
        }
        times = bench_ops.host_us(fns)
        for name in ("op", "op, changing", "fn", "fn, changing", "raw", "raw, changing"):
            times[name] /= turns
        runs = ["dispatcher", *runs, "cached launch"]
        times["rest"] = times["op, changing"] - sum(times[part] for part in runs)
        results[op.label] = {"op": op.name, "host_us": times, "op runs": runs}
        print(f"[{time.perf_counter() - STARTED:6.1f} s] {op.label}", file=sys.stderr,
              flush=True)
    return results


JUDGED = ("fn", "fn, changing")     # the eager call; the torch.ops route is information


def evaluate_targets(ops):
    """[{label, variant, ratio, limit, judged, passed}]: function and op against the raw
    launch, same and changing sizes; ``passed`` (<= LIMIT) for the function's two only."""
    targets = []
    for label, row in ops.items():
        times = row["host_us"]
        for variant, raw in (("fn", "raw"), ("fn, changing", "raw, changing"),
                             ("op", "raw"), ("op, changing", "raw, changing")):
            ratio = None if SMOKE else times[variant] / times[raw]
            judged = variant in JUDGED
            targets.append({"label": label, "variant": variant, "ratio": ratio, "limit": LIMIT,
                            "judged": judged,
                            "passed": None if ratio is None or not judged else ratio <= LIMIT})
    return targets


# --- registration routes (information) -----------------------------------------------------

STEP = "eagle_step_update_slot_mapping_and_metadata"
STEP_WRITES = ("seq_lens", "out_clamped_positions", "out_slot_mapping")


@torch.library.custom_op("spec_ops_bench::step_custom_op", mutates_args=STEP_WRITES)
def step_custom_op(positions: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor,
                   block_size: int, max_model_len: int, out_clamped_positions: torch.Tensor,
                   out_slot_mapping: torch.Tensor) -> None:
    KERNELS[STEP].triton(positions, block_table, seq_lens, block_size, max_model_len,
                         out_clamped_positions, out_slot_mapping)


@torch.library.triton_op("spec_ops_bench::step_triton_op", mutates_args=STEP_WRITES)
def step_triton_op(positions: torch.Tensor, block_table: torch.Tensor, seq_lens: torch.Tensor,
                   block_size: int, max_model_len: int, out_clamped_positions: torch.Tensor,
                   out_slot_mapping: torch.Tensor) -> None:
    KERNELS[STEP].check(positions, block_table, seq_lens, block_size, max_model_len,
                        out_clamped_positions, out_slot_mapping)
    num_reqs = positions.shape[0]
    pdl = supports_pdl(positions.get_device())
    torch.library.wrap_triton(draft_step._step_kernel)[(-(-num_reqs // draft_step.BLOCK_R),)](
        positions, block_table, seq_lens, out_clamped_positions, out_slot_mapping, num_reqs,
        num_reqs, block_table.stride(0), block_table.shape[1], max_model_len, block_size,
        draft_step.BLOCK_R, pdl, num_warps=draft_step.STEP_WARPS,
        **({"launch_pdl": True} if pdl else {}))


def routes():
    """{route: host µs per call} of 1.5 at R = NUM_REQS through each registration route."""
    (step,) = [op for op in bench_ops.OPS if op.name == STEP]
    args = _op_args(step)[:7]       # input_batch_size left at its default
    fns = {
        "Library define/impl (.default)": functools.partial(_overload(STEP), *args),
        "spec_ops function": functools.partial(getattr(spec_ops, STEP), *args),
        "custom_op": functools.partial(step_custom_op, *args),
        "triton_op + wrap_triton": functools.partial(step_triton_op, *args),
        "raw kernel[grid]": raw_launch(recorded_launches(STEP, args)),
    }
    try:
        torch.library.wrap_triton(draft_step._step_kernel)
    except RuntimeError:
        # torch 2.11's wrap_triton takes no kernel as the interpreter wraps it: in smoke mode
        # there the route is left out.
        if not INTERPRET:
            raise
        del fns["triton_op + wrap_triton"]
    return bench_ops.host_us(fns)


# --- fused ops against the calls they replace (information) ---------------------------------

def fused_floors(no_ops):
    """{fused op label: {route: {fused, unfused, ratio}}}: host µs per call of each fused op and
    of the unfused calls it replaces, through spec_ops, the no-op kernels and kernels that only
    replay the cached launch, all interleaved. The last is the least any Python-registered op
    can cost, so its ratio is the floor of the eager fused-vs-unfused targets."""
    fused = [op for op in bench_ops.OPS if op.unfused]
    replays, _library = shadow_ops("spec_ops_floor_launch_only", launch_only,
                                   [op.name for op in bench_ops.OPS])
    namespaces = {"spec_ops as shipped": torch.ops.spec_ops,
                  "dispatcher only (no-op kernels)": no_ops,
                  "dispatcher + cached launch only": replays}
    floors = {}
    for op in fused:
        args = _op_args(op)
        # An unfused sequence that takes no namespace of ops runs through spec_ops only.
        takes_ops = "ops" in inspect.signature(op.unfused).parameters
        by_route = namespaces if takes_ops else {"spec_ops as shipped": torch.ops.spec_ops}
        fns = {}
        for route, ops in by_route.items():
            fns[route, "fused"] = functools.partial(_overload(op.name, ops), *args)
            fns[route, "unfused"] = functools.partial(op.unfused, *args,
                                                      **({"ops": ops} if takes_ops else {}))
        times = bench_ops.host_us(fns)
        floors[op.label] = {route: {"fused": times[route, "fused"],
                                    "unfused": times[route, "unfused"],
                                    "ratio": times[route, "fused"] / times[route, "unfused"]}
                            for route in by_route}
    return floors


# --- tables and files -----------------------------------------------------------------------

def print_routes(times):
    print(f"\nregistration routes: {STEP} (1.5), R = {NUM_REQS}, host µs per eager call")
    print(f"{'route':<32}{'host µs':>9}{'x raw':>8}")
    for route, us in times.items():
        print(f"{route:<32}{us:>9.2f}{us / times['raw kernel[grid]']:>8.2f}")


def print_floors(floors):
    print(f"\nfused ops against the unfused calls they replace (R = {NUM_REQS}, host µs per "
          f"call, interleaved; information, no target)")
    print(f"{'op':<5}{'route':<34}{'fused':>9}{'unfused':>9}{'ratio':>8}")
    for label, by_route in floors.items():
        for route, row in by_route.items():
            print(f"{label:<5}{route:<34}{row['fused']:>9.2f}{row['unfused']:>9.2f}"
                  f"{row['ratio']:>8.3f}")


COLUMNS = {"fn": "fn", "fn, changing": "fn chg", "op": "op", "op, changing": "op chg",
           "raw": "raw", "raw, changing": "raw chg",
           "dispatcher": "dispatch", "check": "check", "layouts match": "match",
           "check, verified": "chk verif", "overlap": "overlap", "cached launch": "launch",
           "rest": "rest"}


def print_per_op(ops):
    print(f"\nhost µs per eager call, R = {NUM_REQS} (chg: R = {CHANGING_SIZES[0]}.."
          f"{CHANGING_SIZES[-1]} in turn); the parts: dispatch(er), the full check, the match "
          f"of remembered layouts, the size-only check (chk verif), overlap, the cached launch; "
          f"rest = op chg - the parts such a call runs (* below); fn skips the dispatcher")
    print(f"{'op':<5}" + "".join(f"{short:>10}" for short in COLUMNS.values()))
    for label, row in ops.items():
        cells = [("-" if name not in row["host_us"] else
                  f"{row['host_us'][name]:.2f}{'*' if name in row['op runs'] else ''}")
                 for name in COLUMNS]
        print(f"{label:<5}" + "".join(f"{cell:>10}" for cell in cells))


def _summary_cell(target):
    if target["ratio"] is None:
        return "n/a"
    if not target["judged"]:
        return f"info {target['ratio']:.2f}"
    return f"{'PASS' if target['passed'] else 'FAIL'} {target['ratio']:.2f}"


def print_summary(targets, unmeasured):
    print(f"\n== summary: eager call (spec_ops.<op>) <= {LIMIT:g}x raw Triton launch (host µs "
          f"ratio); torch.ops for information ==")
    print(f"{'':<5}{'spec_ops.<op>':^36}{'torch.ops.spec_ops.<op>':^36}")
    print(f"{'op':<5}{'same arguments':>18}{'changing R':>18}{'same arguments':>18}"
          f"{'changing R':>18}")
    for label in dict.fromkeys(target["label"] for target in targets):
        cells = [_summary_cell(t) for t in targets if t["label"] == label]
        print(f"{label:<5}" + "".join(f"{cell:>18}" for cell in cells))
    judged = [target for target in targets if target["judged"]]
    passed = sum(target["passed"] is True for target in judged)
    failed = sum(target["passed"] is False for target in judged)
    print(f"targets: {passed} PASS, {failed} FAIL, {len(judged) - passed - failed} n/a"
          + (" (smoke run: CPU, no timing judged)" if SMOKE else ""))
    if unmeasured:
        print(f"not measured (no inputs in bench_ops.OPS): {', '.join(unmeasured)}")


STARTED = time.perf_counter()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help="small CPU inputs, interpreted Triton, a few calls: the code paths "
                             "only (automatic without CUDA)")
    parser.add_argument("--quick", action="store_true",
                        help="the per-op table and the targets only")
    parser.add_argument("--results-dir", type=Path,
                        help=f"where the JSON goes (default {bench_ops.RESULTS_DIR}; a temporary "
                             f"directory in smoke mode); also copied to $OUT when set")
    args = parser.parse_args()

    measured = {op.name for op in bench_ops.OPS}
    unmeasured = sorted(name for name in KERNELS if name not in measured)
    no_ops, _library = shadow_ops("spec_ops_no_op", no_op, sorted(measured))
    route_times = floors = None
    if not args.quick:
        route_times = routes()
        print_routes(route_times)
        floors = fused_floors(no_ops)
        print_floors(floors)
    ops = per_op(no_ops)
    print_per_op(ops)
    targets = evaluate_targets(ops)

    report = {"machine": bench_ops.machine_info(),
              "config": {"num_reqs": NUM_REQS, "changing_sizes": list(CHANGING_SIZES),
                         "K": bench_ops.K, "host_calls": bench_ops.HOST_CALLS,
                         "host_repeats": bench_ops.HOST_REPEATS, "quick": args.quick,
                         "seconds": round(time.perf_counter() - STARTED, 1)},
              "ops": ops, "targets": targets, "not_measured": unmeasured,
              "routes": route_times, "fused_floors": floors}
    results_dir = args.results_dir or (Path(tempfile.mkdtemp()) if SMOKE
                                       else bench_ops.RESULTS_DIR)
    name = "bench_registration_smoke.json" if SMOKE else "bench_registration.json"
    for folder in filter(None, (results_dir, os.environ.get("OUT"))):
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / name).write_text(json.dumps(report, indent=1))
    print(f"\nwrote {results_dir / name} in {report['config']['seconds']} s")
    print_summary(targets, unmeasured)


if __name__ == "__main__":
    main()
