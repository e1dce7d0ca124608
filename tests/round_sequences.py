"""What each round op of docs/round_ops.md replaces: the engine's own sequence for one draft
round, written with the helper ops of docs/ops.md and the torch glue an engine puts between
them (the table "What one launch replaces").

Each function takes exactly its round op's arguments, in the same order, and writes the same
out buffers, so ``sequence(*args)`` and ``op(*args)`` on copies of one sample must agree on
every out buffer. ``ops`` is the namespace the helper ops come from; tests pass one that runs
the Triton kernels interpreted.

The sequences run exactly what the engine runs, so they share its undefined results: a
request whose last accepted index lies outside its own span (a discarded request that had
drafts, which the engine never schedules) scatters its next token into another request and
gathers a stale position (round_ops.md's deviations). Callers comparing them with a round op
keep such requests out of their batches (``engine_batch``).

``cuda_launches_per_call`` counts what a call launches on CUDA (tests and the benchmark
compare a round op's one launch with its sequence's count).
"""

import torch

from spec_ops import PADDING_SLOT_ID


def _next_token_and_sample_index(sampled_token_ids, discard_request_mask,
                                 backup_next_token_ids, cu_num_draft_tokens, query_start_loc,
                                 next_token_ids, valid_sampled_tokens_count,
                                 token_indices_to_sample, vocab_size, ops):
    """1.1, then 1.2 with 1.1's counts; returns 1.2's rejected counts, [R]."""
    num_reqs = sampled_token_ids.shape[0]
    num_rejected_tokens = torch.empty(num_reqs, dtype=cu_num_draft_tokens.dtype,
                                      device=cu_num_draft_tokens.device)
    ops.eagle_prepare_next_token_padded.default(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, next_token_ids,
        valid_sampled_tokens_count, vocab_size)
    ops.eagle_prepare_inputs_padded.default(
        cu_num_draft_tokens, valid_sampled_tokens_count, query_start_loc,
        token_indices_to_sample, num_rejected_tokens)
    return num_rejected_tokens


def _pad(slot_mapping, num_tokens, num_input_tokens):
    """The CUDA-graph padding of a first pass of num_tokens tokens run as num_input_tokens."""
    if num_input_tokens is not None:
        slot_mapping[num_tokens:num_input_tokens] = PADDING_SLOT_ID


def _draft_steps(positions, block_table, seq_lens, block_size, max_model_len, num_steps,
                 out_step_positions, out_step_slot_mapping, out_step_seq_lens,
                 input_batch_size, ops):
    """The draft loop's metadata: num_steps calls of 1.5 from (positions, seq_lens), seq_lens
    advanced in place as the engine does. Row s of the step outs is what step s's forward
    reads: 1.5 writes the positions and slots there directly, the seq_lens are copied."""
    num_reqs = positions.shape[0]
    for step in range(num_steps):
        ops.eagle_step_update_slot_mapping_and_metadata.default(
            positions, block_table, seq_lens, block_size, max_model_len,
            out_step_positions[step, :num_reqs], out_step_slot_mapping[step], input_batch_size)
        positions = out_step_positions[step, :num_reqs]
        out_step_seq_lens[step, :num_reqs] = seq_lens


def prepare_eagle_round(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                        cu_num_draft_tokens, query_start_loc, target_token_ids,
                        target_positions, target_slot_mapping, block_table, seq_lens,
                        next_token_ids, valid_sampled_tokens_count, token_indices_to_sample,
                        out_input_ids, out_positions, out_slot_mapping, out_step_positions,
                        out_step_slot_mapping, out_step_seq_lens, vocab_size, block_size,
                        max_model_len, num_steps, num_input_tokens=None,
                        input_batch_size=None, *, ops=torch.ops.spec_ops):
    """Chain EAGLE / MTP (6.1): 1.1, 1.2, the first pass's inputs as the verify batch shifted
    by one token, then num_steps draft steps from each request's last accepted token."""
    num_reqs, num_tokens = sampled_token_ids.shape[0], target_token_ids.shape[0]
    num_rejected_tokens = _next_token_and_sample_index(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, next_token_ids, valid_sampled_tokens_count, token_indices_to_sample,
        vocab_size, ops)
    last = token_indices_to_sample[:num_reqs]

    shifted = target_token_ids[1:]
    out_input_ids[: shifted.shape[0]] = shifted
    out_input_ids[last.long()] = next_token_ids[:num_reqs].to(out_input_ids.dtype)
    out_positions[:num_tokens] = target_positions
    out_slot_mapping[:num_tokens] = target_slot_mapping
    _pad(out_slot_mapping, num_tokens, num_input_tokens)

    if num_steps > 0:
        positions = target_positions[last.long()]
        step_seq_lens = seq_lens[:num_reqs] - num_rejected_tokens
        _draft_steps(positions, block_table, step_seq_lens, block_size, max_model_len,
                     num_steps, out_step_positions, out_step_slot_mapping, out_step_seq_lens,
                     input_batch_size, ops)


def prepare_parallel_round(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                           cu_num_draft_tokens, query_start_loc, target_token_ids,
                           target_positions, block_table, seq_lens, next_token_ids,
                           valid_sampled_tokens_count, out_input_ids, out_positions,
                           out_is_masked_token_mask, out_new_token_indices,
                           out_hidden_state_mapping, out_slot_mapping, out_query_start_loc,
                           out_seq_lens, out_step_positions, out_step_slot_mapping,
                           out_step_seq_lens, vocab_size, padding_token_id,
                           parallel_drafting_token_id, num_padding_slots_per_request,
                           shift_input_ids, block_size, max_model_len, num_steps,
                           num_input_tokens=None, input_batch_size=None, *,
                           ops=torch.ops.spec_ops):
    """Parallel drafting, PARD and the draft model (6.2): 1.1, 1.2, the expanded first pass
    (1.3 ending each query at its last accepted token, 1.7, extend_all_queries_by_N's device
    fields), then, for the draft model, num_steps draft steps from each bonus token."""
    num_reqs, device = sampled_token_ids.shape[0], sampled_token_ids.device
    num_new_tokens = num_padding_slots_per_request - (1 if shift_input_ids else 0)
    num_first_pass = target_token_ids.shape[0] + num_reqs * num_new_tokens
    token_indices_to_sample = torch.empty(num_reqs, dtype=cu_num_draft_tokens.dtype,
                                          device=device)
    num_rejected_tokens = _next_token_and_sample_index(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, next_token_ids, valid_sampled_tokens_count, token_indices_to_sample,
        vocab_size, ops)

    is_rejected_token_mask = torch.empty(num_first_pass, dtype=torch.bool, device=device)
    ops.copy_and_expand_eagle_inputs.default(
        target_token_ids, target_positions, next_token_ids[:num_reqs], out_input_ids,
        out_positions, is_rejected_token_mask, out_is_masked_token_mask, out_new_token_indices,
        out_hidden_state_mapping, query_start_loc, token_indices_to_sample, padding_token_id,
        parallel_drafting_token_id, num_padding_slots_per_request, shift_input_ids)
    out_slot_mapping[:num_first_pass] = ops.compute_new_slot_mapping.default(
        block_table, query_start_loc, out_positions[:num_first_pass], is_rejected_token_mask,
        block_size, num_new_tokens, max_model_len)
    arange = torch.arange(num_reqs + 1, device=device)
    out_query_start_loc[: num_reqs + 1] = query_start_loc + num_new_tokens * arange
    out_seq_lens[:num_reqs] = seq_lens[:num_reqs] + num_new_tokens
    _pad(out_slot_mapping, num_first_pass, num_input_tokens)

    if num_steps > 0:
        # The draft model (S = 1): the first pass samples at each request's bonus token.
        positions = out_positions[out_new_token_indices[:num_reqs].long()]
        step_seq_lens = out_seq_lens[:num_reqs] - num_rejected_tokens
        _draft_steps(positions, block_table, step_seq_lens, block_size, max_model_len,
                     num_steps, out_step_positions, out_step_slot_mapping, out_step_seq_lens,
                     input_batch_size, ops)


def prepare_dflash_round(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                         cu_num_draft_tokens, query_start_loc, target_positions, block_table,
                         seq_lens, next_token_ids, valid_sampled_tokens_count, out_input_ids,
                         out_context_positions, out_query_positions, out_context_slot_mapping,
                         out_query_slot_mapping, out_token_indices, out_query_start_loc,
                         out_seq_lens, vocab_size, parallel_drafting_token_id, block_size,
                         num_speculative_tokens, num_input_tokens=None, *,
                         ops=torch.ops.spec_ops):
    """DFlash (6.3): 1.1, 1.2, 1.4 with the rejected counts and Q = K + 1 queries per
    request, and the query pass's query_start_loc and seq_lens."""
    num_reqs, device = sampled_token_ids.shape[0], sampled_token_ids.device
    num_queries = num_speculative_tokens + 1
    token_indices_to_sample = torch.empty(num_reqs, dtype=cu_num_draft_tokens.dtype,
                                          device=device)
    num_rejected_tokens = _next_token_and_sample_index(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, next_token_ids, valid_sampled_tokens_count, token_indices_to_sample,
        vocab_size, ops)

    ops.copy_and_expand_dflash_inputs.default(
        next_token_ids[:num_reqs], target_positions, out_input_ids, out_context_positions,
        out_query_positions, out_context_slot_mapping, out_query_slot_mapping,
        out_token_indices, block_table, query_start_loc, num_rejected_tokens,
        parallel_drafting_token_id, block_size, num_queries, num_speculative_tokens)
    out_query_start_loc[: num_reqs + 1] = torch.arange(num_reqs + 1, device=device) * num_queries
    out_seq_lens[:num_reqs] = seq_lens[:num_reqs] - num_rejected_tokens + num_queries
    _pad(out_query_slot_mapping, num_reqs * num_queries, num_input_tokens)


def engine_batch(args):
    """Restrict a round op's arguments, in place, to what the engine schedules: only requests
    without drafts (partial prefills) are discarded. A kept request's sampled row starts with
    a valid token (the rejection sampler always writes one, and so do the samplers), so its
    last accepted index lies inside its span."""
    discard_request_mask, cu_num_draft_tokens = args[1], args[3].long()
    num_drafts = cu_num_draft_tokens - torch.cat([cu_num_draft_tokens.new_zeros(1),
                                                  cu_num_draft_tokens[:-1]])
    discard_request_mask[num_drafts > 0] = False
    return args


SEQUENCES = {
    "prepare_eagle_round": prepare_eagle_round,
    "prepare_parallel_round": prepare_parallel_round,
    "prepare_dflash_round": prepare_dflash_round,
}


def cuda_launches_per_call(fn, calls=3):
    """Device operations (kernels, memcpys, memsets) one call of ``fn`` issues on CUDA, counted
    with torch.profiler over a few calls after a warm-up call."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    device_events = [event for event in profiler.events()
                     if event.device_type == torch.autograd.DeviceType.CUDA]
    return len(device_events) / calls
