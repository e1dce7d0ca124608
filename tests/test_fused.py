"""5.1 and 5.2: each fused op equals the ops it replaces, run in sequence through the real
ops, on random valid inputs, on the CPU kernels and the Triton kernels."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from backends import BACKENDS, call, place, run
from samples import sample

SEEDS, SIZES = st.integers(0, 2**32 - 1), st.integers(0, 24)


def assert_equal(actual, expected):
    for a, e in zip(actual, expected, strict=True):
        assert a.dtype == e.dtype and torch.equal(a.cpu(), e.cpu())


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=150)
@given(seed=SEEDS, num_reqs=SIZES)
def test_prepare_padded_draft_inputs_is_next_token_then_prepare_inputs(backend, seed, num_reqs):
    args = sample("prepare_padded_draft_inputs", seed, num_reqs)
    fused = run("prepare_padded_draft_inputs", args, backend)
    (sampled, discard, backup, cu_num_draft, query_start_loc, next_token_ids, valid_count,
     token_indices, num_rejected, vocab_size) = place(args, backend)
    call("eagle_prepare_next_token_padded",
         (sampled, discard, backup, next_token_ids, valid_count, vocab_size), backend)
    call("eagle_prepare_inputs_padded",
         (cu_num_draft, valid_count, query_start_loc, token_indices, num_rejected), backend)
    assert_equal(fused, [next_token_ids, valid_count, token_indices, num_rejected])


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=150)
@given(seed=SEEDS, num_reqs=SIZES)
def test_multi_step_is_repeated_step_and_leaves_its_inputs_alone(backend, seed, num_reqs):
    args = sample("eagle_multi_step_slot_mapping", seed, num_reqs)
    (positions, block_table, seq_lens, block_size, max_model_len, num_steps, out_positions,
     out_slot_mapping, out_seq_lens, input_batch_size) = placed = place(args, backend)
    before = [positions.clone(), seq_lens.clone()]
    call("eagle_multi_step_slot_mapping", placed, backend)
    assert_equal([positions, seq_lens], before)

    (positions, block_table, seq_lens, _, _, _, expected_positions, expected_slots,
     expected_seq_lens, _) = place(args, backend)
    for step in range(num_steps):
        call("eagle_step_update_slot_mapping_and_metadata",
             (positions, block_table, seq_lens, block_size, max_model_len, positions,
              expected_slots[step], input_batch_size), backend)
        expected_positions[step, :num_reqs] = positions
        expected_seq_lens[step, :num_reqs] = seq_lens[:num_reqs]
    assert_equal([out_positions, out_slot_mapping, out_seq_lens],
                 [expected_positions, expected_slots, expected_seq_lens])
