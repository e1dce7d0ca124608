"""torch.compile(fullgraph=True, dynamic=True) of a function calling each op equals eager,
across three batch sizes, with one compilation."""

import pytest
import torch
import torch._dynamo.testing
import torch.fx.experimental._config

from backends import HAS_CUDA
from samples import OPS, clone_args, op_overload, sample, written_arg_indices

DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])
BATCH_SIZES = (3, 9, 20)


def op_and_outputs(op):
    """A function that calls the op and returns what it wrote (and its result)."""
    overload, written = op_overload(op), written_arg_indices(op)

    def fn(*args):
        result = overload(*args)
        outputs = tuple(args[i].clone() for i in written)
        return outputs if result is None else outputs + (result,)
    return fn


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", OPS)
# Random lengths sometimes coincide at one batch size; duck sizing would turn that into a guard.
@torch.fx.experimental._config.patch(use_duck_shape=False)
def test_compiled_equals_eager_without_recompiling(op, device):
    torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounterWithBackend("inductor")
    fn = op_and_outputs(op)
    compiled = torch.compile(fn, backend=counter, fullgraph=True, dynamic=True)
    for num_reqs in BATCH_SIZES:
        args = sample(op, seed=7, num_reqs=num_reqs, fixed_dtype=torch.int32)
        expected = fn(*clone_args(args, device))
        actual = compiled(*clone_args(args, device))
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert a.dtype == e.dtype and torch.equal(a, e)
    assert counter.frame_count == 1, f"{op} compiled {counter.frame_count} times"
