"""GPU-only properties (H200): CUDA-graph capture and replay of every op, and the engine-step
chain compiled with CUDA graphs (mode="reduce-overhead") and with default Inductor on CUDA.
The rest of the suite also runs on CUDA tensors when a GPU is present."""

import pytest
import torch
import torch._dynamo.utils
import torch._inductor.cudagraph_trees
import torch.fx.experimental._config

from backends import run
from chain import engine_step, engine_step_inputs
from samples import OPS, clone_args, op_overload, sample, written_arg_indices

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
def test_engine_step_compiled_on_cuda_equals_eager(mode):
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


@pytest.mark.parametrize("op", OPS)
def test_dtype_variants_launch_their_own_kernels_directly(op):
    """int32, int64 and int32 again through one process: each dtype mix is its own variant in
    the launch key, so each runs the kernel compiled for it (equal to the CPU kernel); on
    Triton 3.6 every cached launch is the direct C launch."""
    import types

    import triton

    import spec_ops._triton as kernels
    from spec_ops._triton._launch import Launcher
    for dtype in (torch.int32, torch.int64, torch.int32):
        args = sample(op, 5, 9, fixed_dtype=dtype)
        assert_equal_lists(run(op, args, "cuda"), run(op, args, "cpu"))
    modules = [m for m in vars(kernels).values() if isinstance(m, types.ModuleType)]
    launchers = [v for m in modules for v in vars(m).values() if isinstance(v, Launcher)]
    launches = [launch for launcher in launchers for launch in launcher.launches.values()]
    assert launches
    if triton.__version__.startswith("3.6."):
        assert all(launch.direct for launch in launches)
