"""On random valid inputs: the Triton kernel == the CPU kernel == the loop reference of
SPEC, bit for bit, over whole out buffers (so untouched regions must stay poisoned)."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from backends import TRITON, run
from reference import REFERENCES
from samples import OPS, clone_args, sample


def assert_same(actual, expected, what):
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        if isinstance(e, torch.Tensor):
            assert a.dtype == e.dtype, f"{what} output {i}: dtype {a.dtype} != {e.dtype}"
            e = e.tolist()
        assert a.tolist() == e, f"{what} output {i}:\n{a.tolist()}\n!=\n{e}"


@pytest.mark.parametrize("op", OPS)
@given(seed=st.integers(0, 2**32 - 1), num_reqs=st.integers(0, 24))
def test_triton_equals_cpu_equals_reference(op, seed, num_reqs):
    args = sample(op, seed, num_reqs, uniform_dtype=TRITON == "cuda")
    before = clone_args(args)
    cpu = run(op, args, "cpu")
    assert_same(cpu, REFERENCES[op](*args), "cpu vs reference")
    assert_same(run(op, args, TRITON), cpu, f"{TRITON} vs cpu")
    for original, arg in zip(before, args):   # run() worked on copies; the sample is intact
        if isinstance(arg, torch.Tensor):
            assert torch.equal(original, arg)
