"""On random valid inputs: the Triton kernel == the CPU kernel == the loop reference of
the contract, bit for bit, over whole out buffers (so untouched regions must stay poisoned)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from backends import BACKENDS, TRITON, run
from reference import REFERENCES
from samples import EMPTY_REQUEST_OPS, OPS, ROUND_OPS, clone_args, sample


def assert_same(actual, expected, what):
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected)):
        if isinstance(e, torch.Tensor):
            assert a.dtype == e.dtype, f"{what} output {i}: dtype {a.dtype} != {e.dtype}"
            e = e.tolist()
        assert a.tolist() == e, f"{what} output {i}:\n{a.tolist()}\n!=\n{e}"


def check_all_ways(op, args):
    before = clone_args(args)
    cpu = run(op, args, "cpu")
    assert_same(cpu, REFERENCES[op](*args), "cpu vs reference")
    assert_same(run(op, args, TRITON), cpu, f"{TRITON} vs cpu")
    for original, arg in zip(before, args):   # run() worked on copies; the sample is intact
        if isinstance(arg, torch.Tensor):
            assert torch.equal(original, arg)


@pytest.mark.parametrize("op", OPS)
@given(seed=st.integers(0, 2**32 - 1), num_reqs=st.integers(0, 24))
def test_triton_equals_cpu_equals_reference(op, seed, num_reqs):
    check_all_ways(op, sample(op, seed, num_reqs, uniform_dtype=TRITON == "cuda"))


@pytest.mark.parametrize("op", ROUND_OPS)
@given(seed=st.integers(0, 2**32 - 1), num_reqs=st.integers(0, 24))
def test_round_op_cpu_equals_reference(op, seed, num_reqs):
    """The CPU kernel on samples whose index tensors mix int32 and int64, which on CUDA the
    Triton comparison above leaves out (one dtype per launch there)."""
    args = sample(op, seed, num_reqs)
    assert_same(run(op, args, "cpu"), REFERENCES[op](*args), "cpu vs reference")


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("op", OPS)
def test_more_rows_than_one_program_and_long_requests(op, seed):
    """R = 150 spans two row blocks (128 rows each); 100-300 tokens per request take several
    chunks and several loop iterations per program."""
    check_all_ways(op, sample(op, seed, 150, uniform_dtype=TRITON == "cuda", long_requests=True))


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("op", OPS)
def test_a_few_long_requests_among_short_ones(op, seed):
    """A decode-sized batch (R = 100, short requests on average) with a few 100-300-token
    requests: layouts chosen for short requests still cover the long ones."""
    check_all_ways(op, sample(op, seed, 100, uniform_dtype=TRITON == "cuda",
                              long_requests="some"))


# The ops whose kernels size a tile or an unrolled loop by K: 1.4's queries, the sampled
# columns of 1.1, 5.1 and the round ops.
MANY_DRAFTS_OPS = ("eagle_prepare_next_token_padded", "prepare_padded_draft_inputs",
                   "copy_and_expand_dflash_inputs", *ROUND_OPS)


@pytest.mark.parametrize("num_reqs", [3, 40])
@pytest.mark.parametrize("op", MANY_DRAFTS_OPS)
def test_more_drafts_than_one_tile(op, num_reqs):
    """K (1.4: Q) of 65-150: queries past one tile of them, sampled columns read in a loop
    rather than unrolled, draft steps past one vector of step lanes; R = 40 a decode-sized
    batch, whose row and lanes layouts such a K leaves."""
    check_all_ways(op, sample(op, num_reqs, num_reqs, uniform_dtype=TRITON == "cuda",
                              many_drafts=True))


@pytest.mark.parametrize("op", EMPTY_REQUEST_OPS)
@settings(max_examples=min(settings().max_examples, 50))
@given(seed=st.integers(0, 2**32 - 1), num_reqs=st.integers(1, 12))
def test_requests_without_tokens(op, seed, num_reqs):
    """Requests with no tokens among the others and at the end of the batch: a first position
    read past the batch is 0 (docs/ops.md 1.3, docs/round_ops.md 6.0), in every kernel."""
    check_all_ways(op, sample(op, seed, num_reqs, uniform_dtype=TRITON == "cuda",
                              empty_requests=True))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", OPS)
def test_calls_taking_turns_each_get_their_own_results(op, backend):
    """Three argument sets (other sizes, scalars and dtypes), each called again and again in
    turn, as a loop whose batch size goes back and forth: each gets its own results."""
    turns = [sample(op, seed, num_reqs) for seed, num_reqs in ((1, 3), (2, 5), (3, 5))]
    for _ in range(3):
        for args in turns:
            assert_same(run(op, args, backend), REFERENCES[op](*args), f"{backend} in turn")
