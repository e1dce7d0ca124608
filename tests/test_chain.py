"""The engine-step chain compiled whole (fullgraph, dynamic) equals eager, without
recompiling across batch sizes. The CUDA-graph variants are in test_gpu.py."""

import torch
import torch._dynamo.testing
import torch.fx.experimental._config

from chain import engine_step, engine_step_inputs


# Random lengths sometimes coincide at one batch size; duck sizing would turn that into a guard.
@torch.fx.experimental._config.patch(use_duck_shape=False)
def test_engine_step_compiled_equals_eager_cpu():
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")
    compiled = torch.compile(engine_step, backend=counter, fullgraph=True, dynamic=True)
    for num_reqs in (4, 11, 29):
        inputs = engine_step_inputs(num_reqs, seed=num_reqs, device="cpu")
        expected = engine_step(*[x.clone() for x in inputs])
        actual = compiled(*[x.clone() for x in inputs])
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert a.dtype == e.dtype and torch.equal(a, e)
    assert counter.frame_count == 1
