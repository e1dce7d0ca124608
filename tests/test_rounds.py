"""docs/round_ops.md: each round op equals the engine's sequence it replaces
(tests/round_sequences.py: the helper ops of docs/ops.md with the engine's torch glue) over
whole poisoned out buffers, on random batches, on the CPU kernels and the Triton kernels; it
leaves its inputs alone; on CUDA it is one launch. On the CPU the round ops' kernels are built
from the single ops' CPU kernels the sequences call, so there these tests check the round's
own glue; test_properties.py compares both backends with tests/reference.py."""

import types

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from backends import BACKENDS, TRITON, call, place, run
from round_sequences import SEQUENCES, cuda_launches_per_call, engine_batch
from samples import (
    clone_args,
    op_overload,
    parallel_round_past_int32,
    sample,
    written_arg_indices,
)

ROUND_OPS = sorted(SEQUENCES)
SEEDS, SIZES = st.integers(0, 2**32 - 1), st.integers(0, 24)


class BackendOps:
    """The helper ops on one backend, as the sequences call them: ops.<name>.default(*args)."""

    def __init__(self, backend):
        self.backend = backend

    def __getattr__(self, name):
        return types.SimpleNamespace(default=lambda *args: call(name, args, self.backend))


def whole(tensor):
    """The tensor's whole base: a row-strided view's gaps included."""
    return tensor if tensor._base is None else tensor._base


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ROUND_OPS)
@settings(max_examples=30)
@given(seed=SEEDS, num_reqs=SIZES)
def test_round_op_equals_the_sequence_it_replaces(op, backend, seed, num_reqs):
    assert_equals_the_sequence(op, backend, seed, num_reqs)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ROUND_OPS)
@pytest.mark.parametrize("seed, num_reqs", [(1, 40), (7, 6), (23, 8)])
def test_round_op_with_chunked_prefills_among_decodes(op, backend, seed, num_reqs):
    """300-900-token requests among short ones, each op in the layout it chooses for them. 6.2
    takes its per-request layout: past a program's first chunk, wider chunks; at R = 40 one
    program per request, with several wide chunks each; at R = 6 three programs per request,
    their wide chunks interleaved; at R = 8 two, the first taking two wide chunks. 6.1 and 6.3
    take their lanes layout, the long requests' items past their lanes in remainder programs.
    (test_row_layout.py forces each layout on such batches.)"""
    assert_equals_the_sequence(op, backend, seed, num_reqs, long_requests="prefill")


def assert_equals_the_sequence(op, backend, seed, num_reqs, long_requests=False):
    # Only batches the engine schedules: for a discarded request that had drafts, the
    # engine's scatter and gather at its last index are undefined (round_ops.md's deviations;
    # test_properties.py checks the round ops there against the reference).
    args = engine_batch(sample(op, seed, num_reqs, uniform_dtype=TRITON == "cuda",
                               long_requests=long_requests))
    assert_args_equal_the_sequence(op, args, backend)


def assert_args_equal_the_sequence(op, args, backend):
    """The op on ``args`` writes what its sequence writes; returns the sequence's outputs."""
    sequence_args = place(args, backend)
    SEQUENCES[op](*sequence_args, ops=BackendOps(backend))
    expected = [sequence_args[i] for i in written_arg_indices(op)]
    for i, (actual, want) in enumerate(zip(run(op, args, backend), expected, strict=True)):
        assert actual.dtype == want.dtype, f"output {i}"
        assert actual.tolist() == want.tolist(), f"output {i}"
    return expected


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", [2, 4, 6])
def test_parallel_round_past_int32(backend, seed):
    """int32 buffers, positions past 2^31 - 1 (docs/round_ops.md, 6.0 and 6.2): the first pass
    is what the sequence writes, 1.7's slots looked up at the positions as out_positions holds
    them (wrapped); the draft steps are 5.2 from the int64 start p0[r] = target_positions[qsl[r]]
    + nv[r], where the sequence reads the wrapped bonus position back. test_row_layout.py runs
    the lanes layout on these batches."""
    op = "prepare_parallel_round"
    args = parallel_round_past_int32(seed)
    sequence_args = place(args, backend)
    SEQUENCES[op](*sequence_args, ops=BackendOps(backend))
    expected = [sequence_args[i].cpu() for i in written_arg_indices(op)]
    actual = [t.cpu() for t in run(op, args, backend)]
    assert bool((expected[3] < 0).any()), "no stored position wrapped"
    for i, (got, want) in enumerate(zip(actual[:-3], expected[:-3], strict=True)):
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), f"output {i}"
    # The draft model's start state (S = 1, no shift): request r's bonus token sits nv[r]
    # entries into its extended query, after which nothing of it was rejected.
    query_start_loc, target_positions = args[4].long(), args[6].long()
    block_table, seq_lens, num_steps = args[7], args[8], args[29]
    num_reqs = args[0].shape[0]
    num_valid = expected[5][:num_reqs].long() - expected[8][:num_reqs].long()
    starts = query_start_loc[:num_reqs]
    first_positions = torch.where(starts < target_positions.shape[0], target_positions[
        starts.clamp(max=max(target_positions.shape[0] - 1, 0))], 0)
    rejected = query_start_loc[1:num_reqs + 1] - starts - num_valid
    step_outs = [t.clone() for t in expected[-3:]]
    if num_steps:
        torch.ops.spec_ops.eagle_multi_step_slot_mapping(
            first_positions + num_valid, block_table, seq_lens[:num_reqs].long() + 1 - rejected,
            args[27], args[28], num_steps, *step_outs, args[31])
        assert step_outs[0].tolist() != expected[-3].tolist(), "no step started past int32"
    for i, (got, want) in enumerate(zip(actual[-3:], step_outs), start=len(actual) - 3):
        assert got.dtype == want.dtype and got.tolist() == want.tolist(), f"output {i}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_round_steps_go_on_in_int64_past_int32(backend):
    """docs/round_ops.md's deviation: with max_model_len past 2^31 and int32 step outs, each
    step stores its value wrapped but the next step goes on from the int64 one (5.2's rows
    from (p0, L0)), where the engine's sequence reads the wrapped value back."""
    i32, i64 = torch.int32, torch.int64
    p0, seq_len, max_model_len = 2**31 - 2, 2**31 - 1, 2**31 + 1
    args = (torch.tensor([[5]], dtype=i32), torch.tensor([False]), torch.tensor([1], dtype=i32),
            torch.tensor([0], dtype=i32), torch.tensor([0, 1], dtype=i32),
            torch.tensor([7], dtype=i32), torch.tensor([p0], dtype=i64),
            torch.tensor([3], dtype=i64), torch.tensor([[10, 11]], dtype=i32),
            torch.tensor([seq_len], dtype=i32), *(torch.zeros(1, dtype=i32) for _ in range(4)),
            torch.zeros(1, dtype=i64), torch.zeros(1, dtype=i64), torch.zeros(4, 1, dtype=i32),
            torch.zeros(4, 1, dtype=i64), torch.zeros(4, 1, dtype=i32),
            100, 16, max_model_len, 4)
    # int64: positions 2^31 - 1, 2^31, then max_model_len (0, slot -1, seq_len 1), then 1.
    positions, slots, seq_lens = run("prepare_eagle_round", args, backend)[-3:]
    assert positions.flatten().tolist() == [2**31 - 1, -2**31, 0, 1]
    assert slots.flatten().tolist() == [11 * 16 + 15, 11 * 16, -1, 10 * 16 + 1]
    assert seq_lens.flatten().tolist() == [-2**31, -2**31 + 1, 1, 2]
    sequence_args = clone_args(args)
    SEQUENCES["prepare_eagle_round"](*sequence_args, ops=BackendOps(backend))
    assert sequence_args[16].flatten().tolist()[2:] == [-2**31 + 1, -2**31 + 2]   # positions


@pytest.mark.parametrize("backend", BACKENDS)
def test_draft_model_steps_start_from_the_int64_length(backend):
    """The same deviation in 6.2's draft steps: the bonus token's length L0 = seq_lens + 1 -
    rejected is int64 even where int32 out_seq_lens stores it wrapped; int64 step outs show
    it, where the engine's sequence reads the wrapped length back."""
    i32, i64 = torch.int32, torch.int64
    p0, seq_len, max_model_len = 2**31 - 2, 2**31 - 1, 2**31 + 1
    args = (torch.tensor([[5]], dtype=i32), torch.tensor([False]), torch.tensor([1], dtype=i32),
            torch.tensor([0], dtype=i32), torch.tensor([0, 1], dtype=i32),
            torch.tensor([7], dtype=i32), torch.tensor([p0], dtype=i64),
            torch.tensor([[10, 11]], dtype=i32), torch.tensor([seq_len], dtype=i32),
            torch.zeros(1, dtype=i32), torch.zeros(1, dtype=i32), torch.zeros(2, dtype=i32),
            torch.zeros(2, dtype=i64), torch.zeros(2, dtype=torch.bool),
            torch.zeros(1, dtype=i32), torch.zeros(0, dtype=i32), torch.zeros(2, dtype=i64),
            torch.zeros(2, dtype=i32), torch.zeros(1, dtype=i32),
            *(torch.zeros(4, 1, dtype=i64) for _ in range(3)),
            100, 0, 99, 1, False, 16, max_model_len, 4)
    outputs = run("prepare_parallel_round", args, backend)
    assert outputs[-4].tolist() == [-2**31]                      # out_seq_lens: 2^31 wrapped
    positions, slots, seq_lens = (t.flatten().tolist() for t in outputs[-3:])
    # Steps from the bonus token at 2^31 - 1: 2^31, then max_model_len (0, slot -1, length 1).
    assert positions == [2**31, 0, 1, 2]
    assert slots == [11 * 16, -1, 10 * 16 + 1, 10 * 16 + 2]
    assert seq_lens == [2**31 + 1, 1, 2, 3]
    sequence_args = clone_args(args)
    SEQUENCES["prepare_parallel_round"](*sequence_args, ops=BackendOps(backend))
    assert sequence_args[21].flatten().tolist()[0] == -2**31 + 1


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ROUND_OPS)
@settings(max_examples=10)
@given(seed=SEEDS, num_reqs=SIZES)
def test_round_op_leaves_its_inputs_alone(op, backend, seed, num_reqs):
    args = place(sample(op, seed, num_reqs, uniform_dtype=TRITON == "cuda"), backend)
    before = clone_args(args, "cpu")
    call(op, args, backend)
    written = written_arg_indices(op)
    for i, (arg, original) in enumerate(zip(args, before)):
        if isinstance(arg, torch.Tensor) and i not in written:
            assert torch.equal(whole(arg).cpu(), whole(original)), f"argument {i}"


@pytest.mark.gpu
@pytest.mark.parametrize("op", ROUND_OPS)
def test_one_launch_per_call_on_cuda(op):
    """The whole round in one kernel launch; the sequence it replaces takes many."""
    args = engine_batch(sample(op, 3, 37, fixed_dtype=torch.int32))
    round_args, sequence_args = clone_args(args, "cuda"), clone_args(args, "cuda")
    assert cuda_launches_per_call(lambda: op_overload(op)(*round_args)) == 1
    assert cuda_launches_per_call(lambda: SEQUENCES[op](*sequence_args)) > 5
