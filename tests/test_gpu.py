"""GPU-only properties (H200): CUDA-graph capture and replay of every op, the engine-step
chain compiled with CUDA graphs (mode="reduce-overhead") and with default Inductor on CUDA,
the launcher (every launch path, a kernel per dtype of every tensor, the current stream, a
device other than the current one). The rest of the suite also runs on CUDA tensors when a
GPU is present."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
import torch._dynamo.utils
import torch._inductor.cudagraph_trees
import torch.fx.experimental._config
import triton

import spec_ops
from backends import run
from chain import engine_step, engine_step_inputs
from samples import (OPS, clone_args, dflash_with_rejected, op_overload, sample,
                     written_arg_indices)
from spec_ops._library import KERNELS, Plan
from spec_ops._triton._launch import LAUNCHERS

pytestmark = pytest.mark.gpu


def assert_equal_lists(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and torch.equal(a.cpu(), e.cpu())


@pytest.mark.parametrize("num_reqs", [1, 37])
@pytest.mark.parametrize("op", OPS)
def test_cuda_graph_replays_with_new_inputs_equal_eager(op, num_reqs):
    static = clone_args(sample(op, 0, num_reqs, fixed_dtype=torch.int32), "cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):               # warm up: compile the kernel outside capture
        op_overload(op)(*static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        result = op_overload(op)(*static)
    for seed in (1, 2, 3):
        fresh = sample(op, seed, num_reqs, fixed_dtype=torch.int32)
        for dst, src in zip(static, fresh):
            if isinstance(dst, torch.Tensor):
                assert dst.shape == src.shape
                dst.copy_(src)
        graph.replay()
        torch.cuda.synchronize()
        replayed = [static[i] for i in written_arg_indices(op)]
        if result is not None:
            replayed.append(result)
        assert_equal_lists(replayed, run(op, fresh, "cuda"))
        assert_equal_lists(replayed, run(op, fresh, "cpu"))


def graphs_recorded():
    manager = torch._inductor.cudagraph_trees.get_container(
        torch.cuda.current_device()).tree_manager
    return 0 if manager is None else sum(len(nodes) for nodes in manager.roots.values())


@pytest.mark.parametrize("mode", ["reduce-overhead", "default"])
@torch.fx.experimental._config.patch(use_duck_shape=False)
def test_engine_step_compiled_on_cuda_equals_eager(mode, launch_plans):
    """A compiled engine step (with and without CUDA graphs), launch plans on as in a serving
    loop: the compiled code's op calls replay them once a size repeats."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    # A backend object ignores `mode`, so CUDA graphs need the plain "inductor" backend; the
    # compilations are then counted through dynamo's counters.
    compiled = torch.compile(engine_step, fullgraph=True, dynamic=True,
                             mode=None if mode == "default" else mode)
    for num_reqs in (6, 11, 29):
        for seed in range(3):       # cudagraph trees record on the second call per shape
            inputs = engine_step_inputs(num_reqs, seed=100 * num_reqs + seed, device="cuda")
            expected = engine_step(*[x.clone() for x in inputs])
            actual = [t.clone() for t in compiled(*[x.clone() for x in inputs])]
            assert_equal_lists(actual, expected)
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
    if mode == "reduce-overhead":
        assert torch._dynamo.utils.counters["inductor"]["cudagraph_skips"] == 0
        assert graphs_recorded() >= 3


def launch_paths():
    """The launch path of every cached launch in this process."""
    return {launch.path for launcher in LAUNCHERS for launch in launcher.launches.values()}


def expected_launch_path():
    """The path SPEC_OPS_LAUNCH caps launches to; unset, the direct C launch on the Triton whose
    launcher it was written against (3.6, the H200's). None: no expectation."""
    if "SPEC_OPS_LAUNCH" in os.environ:
        return os.environ["SPEC_OPS_LAUNCH"]
    return "direct" if triton.__version__.startswith("3.6.") else None


def other_dtype(t):
    """``t`` as the other index dtype (int32 <-> int64), same shape, strides and values."""
    dtype = torch.int64 if t.dtype == torch.int32 else torch.int32
    base = t if t._base is None else t._base
    return base.to(dtype).as_strided(t.shape, t.stride(),
                                     t.storage_offset() - base.storage_offset())


@pytest.mark.parametrize("op", OPS)
def test_launch_key_has_every_tensor_dtype(op):
    """From all int32, each integer tensor switched to the other dtype in turn, one more per
    call: consecutive calls differ in one tensor's dtype only, so a launch key missing that
    tensor's dtype would rerun the previous call's kernel and differ from the CPU kernel.
    Every cached launch so far took the expected path (the direct C launch on the H200)."""
    args = list(sample(op, 5, 9, fixed_dtype=torch.int32))
    assert_equal_lists(run(op, args, "cuda"), run(op, args, "cpu"))
    for i, arg in enumerate(args):
        if not isinstance(arg, torch.Tensor) or arg.dtype not in (torch.int32, torch.int64):
            continue
        switched = [*args[:i], other_dtype(arg), *args[i + 1:]]
        try:
            KERNELS[op].check(*switched)
        except TypeError:
            continue            # the op takes this tensor in one dtype only
        args = switched
        assert_equal_lists(run(op, args, "cuda"), run(op, args, "cpu"))
    expected = expected_launch_path()
    if expected is not None:
        assert launch_paths() == {expected}


# Runs every op on CUDA in a process whose SPEC_OPS_LAUNCH or SPEC_OPS_PDL is set, printing
# the paths taken and whether kernels are launched with PDL.
PATHS_TAKEN = """
import torch
from backends import run
from samples import OPS, sample
from spec_ops._triton._launch import supports_pdl
from test_gpu import launch_paths
for op in OPS:
    run(op, sample(op, 0, 9, fixed_dtype=torch.int32), "cuda")
print(*sorted(launch_paths()), supports_pdl(torch.cuda.current_device()))
"""


def properties_in_a_process(env):
    """The Triton == CPU == reference properties in a process with ``env`` added, then the
    launch paths that process's launches took and whether they used PDL (PATHS_TAKEN's
    output, split)."""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, **env, "SPEC_OPS_EXAMPLES": "10"}
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-m", "not gpu", "tests/test_properties.py",
         "-k", "triton_equals_cpu or more_rows", "-p", "no:cacheprovider"],
        cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:]
    taken = subprocess.run([sys.executable, "-c", PATHS_TAKEN], cwd=root / "tests", env=env,
                           capture_output=True, text=True, timeout=300)
    assert taken.returncode == 0, taken.stderr[-3000:]
    return taken.stdout.split()


@pytest.mark.parametrize("path", ["run", "triton"])
def test_generic_launch_paths_equal_cpu(path):
    """SPEC_OPS_LAUNCH (read at import) caps the launch path, so each generic path gets a
    process of its own: the Triton == CPU == reference properties through it, and every
    cached launch there taking it."""
    assert properties_in_a_process({"SPEC_OPS_LAUNCH": path})[:-1] == [path]


def test_kernels_without_pdl_equal_cpu():
    """SPEC_OPS_PDL=0 (read at import) launches every kernel as on a GPU before sm_90: compiled
    with the constexpr PDL off, no grid-dependency control, launched without the attribute.
    The Triton == CPU == reference properties in a process of its own, through the launch path
    this Triton takes."""
    taken = properties_in_a_process({"SPEC_OPS_PDL": "0"})
    expected = expected_launch_path()
    assert taken[-1] == "False" and (expected is None or taken[:-1] == [expected]), taken


SPIN_CYCLES = 100_000_000     # ~50 ms of GPU clock


def call_after_landing(function, static, landing):
    """On a side stream that first spins for a long time: copy ``landing``'s tensors into
    ``static``'s, then ``function(*static)``; its result, once the side stream is done."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(SPIN_CYCLES)
        for dst, src in zip(static, landing):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
        result = function(*static)
    side.synchronize()
    return result


def test_multi_step_past_the_second_grid_axis_limit():
    """5.2 with more steps than a grid's second axis takes (65535): the steps run along the
    first, so the call equals the CPU kernel's instead of failing to launch."""
    op, num_steps = "eagle_multi_step_slot_mapping", 2**16 + 3
    args = sample(op, 0, 3, fixed_dtype=torch.int32)
    outs = tuple(torch.zeros(num_steps, out.shape[1], dtype=out.dtype) for out in args[6:9])
    args = args[:5] + (num_steps,) + outs + args[9:]
    assert_equal_lists(run(op, args, "cuda"), run(op, args, "cpu"))


@pytest.mark.parametrize("with_rejected", [False, True])
def test_dflash_queries_past_the_largest_tile(with_rejected):
    """1.4 with Q = 2^20 + 3 queries per request, more than a Triton tensor holds: its
    queries go in a loop of tiles, and the call equals the CPU kernel's."""
    num_reqs, num_query = 2, 2**20 + 3
    args = list(sample(_DFLASH, 3, num_reqs, fixed_dtype=torch.int64))
    for i, size in ((2, num_reqs * num_query), (4, num_reqs * num_query),
                    (6, num_reqs * num_query), (7, num_reqs * (num_query - 1))):
        args[i] = torch.full((size,), -7, dtype=args[i].dtype)
    block_size = args[12]
    args[8] = torch.arange(num_reqs * (num_query // block_size + 200),
                           dtype=args[8].dtype).reshape(num_reqs, -1)
    if with_rejected:
        args[10] = torch.zeros(num_reqs, dtype=torch.int64)
    args[13], args[14] = num_query, num_query - 1
    assert_equal_lists(run(_DFLASH, args, "cuda"), run(_DFLASH, args, "cpu"))


@pytest.mark.parametrize("op", OPS)
def test_call_on_a_side_stream_runs_on_it(op):
    """On a side stream whose inputs land only after a long spin, the op (its kernel already
    compiled) reads them after they land: it launched on the current stream, the side one. A
    launch on the default stream would have read the stale inputs."""
    fresh = sample(op, 1, 9, fixed_dtype=torch.int32)
    expected = run(op, fresh, "cpu")
    landing = clone_args(fresh, "cuda")
    static = clone_args(sample(op, 2, 9, fixed_dtype=torch.int32), "cuda")
    op_overload(op)(*clone_args(static, "cuda"))
    torch.cuda.synchronize()
    result = call_after_landing(op_overload(op), static, landing)
    outputs = [static[i] for i in written_arg_indices(op)]
    if result is not None:
        outputs.append(result)
    assert_equal_lists(outputs, expected)


_VOID_OPS = [op for op in OPS if not op_overload(op)._schema.returns]
_DFLASH = "copy_and_expand_dflash_inputs"


def _replay_sample(op, seed, given):
    """``op``'s arguments (fixed layout, 9 requests) with its optional tensors None or, for
    1.4 with ``given``, its num_rejected_tokens given."""
    if given:
        return dflash_with_rejected(seed, 9)
    args = list(sample(op, seed, 9, fixed_dtype=torch.int32))
    for i in KERNELS[op].entry.optional:
        args[i] = None
    return args


@pytest.mark.parametrize("op, given", [(op, False) for op in _VOID_OPS] + [(_DFLASH, True)])
def test_a_replayed_launch_runs_on_the_current_stream_and_in_a_graph(op, given, launch_plans):
    """The public function's replay of a remembered launch (the third call of one size), with
    the op's optional tensors None and, for 1.4, given: on a side stream whose inputs land
    after a long spin it reads them after they land, and a CUDA graph captured around it
    replays with new inputs equal to the CPU kernel."""
    function, entry = getattr(spec_ops, op), KERNELS[op].entry
    static = clone_args(_replay_sample(op, 2, given), "cuda")
    landing = _replay_sample(op, 1, given)
    expected = run(op, landing, "cpu")
    landing = clone_args(landing, "cuda")
    for _ in range(3):
        function(*clone_args(static, "cuda"))
    torch.cuda.synchronize()
    key = entry.calls.key(static, entry.scalars(static))
    plan = None if key is None else entry.calls.match(static, key, entry.known.tensors(static))
    assert plan is not None, "no plan"
    call_after_landing(function, static, landing)
    assert_equal_lists([static[i] for i in written_arg_indices(op)], expected)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        function(*static)
    for i in written_arg_indices(op):
        static[i].copy_(landing[i])     # the outs as they were before any call wrote them
    graph.replay()
    torch.cuda.synchronize()
    assert_equal_lists([static[i] for i in written_arg_indices(op)], expected)


def count_replays(monkeypatch):
    """A list that gets an entry per replayed launch plan from now on."""
    replays, replay = [], Plan.replay
    monkeypatch.setattr(Plan, "replay", lambda plan, args: (replays.append(1),
                                                            replay(plan, args))[1])
    return replays


@pytest.mark.parametrize("op", ["prepare_eagle_round", "prepare_parallel_round",
                                "prepare_dflash_round",
                                "eagle_step_update_slot_mapping_and_metadata"])
@torch.fx.experimental._config.patch(use_duck_shape=False)
def test_compiled_calls_replay_launch_plans(op, launch_plans, monkeypatch):
    """A function compiled by Inductor calls the op through torch.ops, whose CUDA kernel
    replays launch plans: two batch sizes in turn, three turns, every call equal to the CPU
    kernel, and plans replayed."""
    torch._dynamo.reset()
    written = written_arg_indices(op)
    overload = op_overload(op)

    def fn(*args):
        overload(*args)
        return tuple(args[i].clone() for i in written)
    compiled = torch.compile(fn, fullgraph=True, dynamic=True)
    replays = count_replays(monkeypatch)
    batches = [sample(op, 11 + n, n, fixed_dtype=torch.int32) for n in (5, 9)]
    for _ in range(3):
        for args in batches:
            assert_equal_lists(list(compiled(*clone_args(args, "cuda"))), run(op, args, "cpu"))
    assert replays, "no compiled call replayed a plan"


_TWO_GPUS = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")


def written_and_result(op, args, result):
    """The call's written tensors, then its result if it returns one."""
    return [args[i] for i in written_arg_indices(op)] + ([] if result is None else [result])


@_TWO_GPUS
@pytest.mark.parametrize("entry", ["torch.ops", "function"])
@pytest.mark.parametrize("op", OPS)
def test_tensors_on_a_device_other_than_the_current_one(op, entry, launch_plans, monkeypatch):
    """Tensors on cuda:1 while cuda:0 is current, through torch.ops and through the public
    function (its eager shortcut): the kernel compiles for and launches on the tensors' device
    on the first call, on the next two (the cached launch; for an op that returns nothing, the
    third makes a launch plan) and on the fourth (that plan replayed), and the current device
    stays cuda:0."""
    function = op_overload(op) if entry == "torch.ops" else getattr(spec_ops, op)
    args = sample(op, 3, 9, fixed_dtype=torch.int32)
    expected = run(op, args, "cpu")
    replays = count_replays(monkeypatch)
    with torch.cuda.device(0):
        for _ in range(4):
            placed = clone_args(args, "cuda:1")
            result = function(*placed)
            torch.cuda.synchronize(1)
            assert_equal_lists(written_and_result(op, placed, result), expected)
            assert torch.cuda.current_device() == 0
    assert bool(replays) == (op in _VOID_OPS), "a plan replayed, or none did"


@_TWO_GPUS
@pytest.mark.parametrize("op", OPS)
def test_one_layout_on_two_devices_in_turn(op, launch_plans):
    """The same call on cuda:0 and on cuda:1 in turn, three turns, cuda:0 current, each call's
    inputs landing on its device's current stream after a long spin: every call equals the CPU
    kernel, so it ran on that stream after they landed (a launch on the other device would
    fault or read the stale inputs). Each device has its own cached launch and plan."""
    fresh = sample(op, 1, 9, fixed_dtype=torch.int32)
    expected = run(op, fresh, "cpu")
    function = getattr(spec_ops, op)
    for _ in range(3):
        for index in (0, 1):
            static = clone_args(sample(op, 2, 9, fixed_dtype=torch.int32), f"cuda:{index}")
            landing = clone_args(fresh, f"cuda:{index}")
            with torch.cuda.device(index):
                torch.cuda._sleep(SPIN_CYCLES)
                for dst, src in zip(static, landing):
                    if isinstance(dst, torch.Tensor):
                        dst.copy_(src)
            result = function(*static)
            torch.cuda.synchronize(index)
            assert_equal_lists(written_and_result(op, static, result), expected)


@_TWO_GPUS
@pytest.mark.parametrize("op", OPS)
def test_a_thread_per_gpu(op, launch_plans):
    """Two threads, each with its own GPU current (a serving process per rank does this with a
    thread per device), call the op at once with their own batch sizes, two in turn, through
    the public function: every call equals the CPU kernel. The layouts, launches and plans
    they share are kept per device."""
    sizes = {0: (3, 9), 1: (9, 5)}
    batches = {(device, n): sample(op, 30 + n, n, fixed_dtype=torch.int32)
               for device, ns in sizes.items() for n in ns}
    expected = {key: run(op, args, "cpu") for key, args in batches.items()}
    function, wrong = getattr(spec_ops, op), []

    def loop(device):
        torch.cuda.set_device(device)
        for _ in range(8):
            for n in sizes[device]:
                placed = clone_args(batches[device, n], f"cuda:{device}")
                try:
                    result = function(*placed)
                    torch.cuda.current_stream().synchronize()
                    assert_equal_lists(written_and_result(op, placed, result),
                                       expected[device, n])
                except Exception as error:      # noqa: BLE001 - any exception is a failure
                    wrong.append(f"cuda:{device}, {n} requests: {type(error).__name__} {error}")

    threads = [threading.Thread(target=loop, args=(device,)) for device in sizes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong, wrong[:3]


@_TWO_GPUS
@pytest.mark.parametrize("op", OPS)
def test_cuda_graph_on_the_second_gpu(op):
    """With cuda:1 current, a CUDA graph captured around the op on cuda:1 tensors replays with
    new inputs equal to the CPU kernel."""
    with torch.cuda.device(1):
        static = clone_args(sample(op, 0, 9, fixed_dtype=torch.int32), "cuda:1")
        op_overload(op)(*clone_args(static, "cuda:1"))      # compiles outside the capture
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            result = op_overload(op)(*static)
        fresh = sample(op, 1, 9, fixed_dtype=torch.int32)
        for dst, src in zip(static, fresh):
            if isinstance(dst, torch.Tensor):
                assert dst.shape == src.shape
                dst.copy_(src)
        graph.replay()
        torch.cuda.synchronize()
        assert_equal_lists(written_and_result(op, static, result), run(op, fresh, "cpu"))


@_TWO_GPUS
@pytest.mark.parametrize("entry", ["torch.ops", "function"])
@pytest.mark.parametrize("op", OPS)
def test_a_tensor_on_the_other_gpu_is_refused(op, entry, launch_plans):
    """After three valid calls on cuda:0 (the layout known, the launch cached, a plan made for
    an op that returns nothing), each tensor argument but the first moved to cuda:1 in turn:
    a ValueError naming it, and nothing written on either device."""
    function = op_overload(op) if entry == "torch.ops" else getattr(spec_ops, op)
    args = sample(op, 11, 9, fixed_dtype=torch.int32)
    for _ in range(3):
        function(*clone_args(args, "cuda:0"))
    schema = op_overload(op)._schema.arguments
    tensors = [i for i, arg in enumerate(args) if isinstance(arg, torch.Tensor)]
    for index in tensors[1:]:
        placed = list(clone_args(args, "cuda:0"))
        placed[index] = placed[index].to("cuda:1")
        written = [i for i in written_arg_indices(op) if placed[i] is not None]
        before = [placed[i].clone() for i in written]
        name = schema[index].name
        with pytest.raises(ValueError, match=rf"spec_ops\.{op}: all tensors must be on one "
                                             rf"device; expected {name} on cuda:0"):
            function(*placed)
        torch.cuda.synchronize(0)
        torch.cuda.synchronize(1)
        for i, original in zip(written, before):
            assert torch.equal(placed[i], original), f"{schema[i].name} written"
