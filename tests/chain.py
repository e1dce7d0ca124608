"""One engine step chained through spec_ops, as a serving loop runs it (docs/metadata.md):
next token -> prepare inputs padded -> copy/expand (parallel drafting) -> new slot mapping ->
extend_all_queries_by_N, then the draft decode loop of K step ops."""

import random

import torch

import spec_ops
from samples import POISON, rejection_sampler_output

VOCAB, K, BLOCK_SIZE, MAX_MODEL_LEN, PARALLEL_ID = 1000, 3, 16, 512, 1001


def engine_step(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                cu_num_draft_tokens, query_start_loc, target_token_ids, target_positions,
                block_table, seq_lens, arange):
    """Returns every tensor the step produced, metadata fields included."""
    num_reqs, device = sampled_token_ids.shape[0], sampled_token_ids.device

    def poisoned(size, dtype=torch.int32):
        """Out buffers start poisoned: discarded rows leave some entries unwritten."""
        return torch.full((size,), POISON if dtype != torch.bool else True, dtype=dtype,
                          device=device)

    per_request = [poisoned(num_reqs) for _ in range(4)]
    next_token_ids, valid_count, token_indices, num_rejected = per_request
    spec_ops.eagle_prepare_next_token_padded(sampled_token_ids, discard_request_mask,
                                             backup_next_token_ids, next_token_ids, valid_count,
                                             VOCAB)
    spec_ops.eagle_prepare_inputs_padded(cu_num_draft_tokens, valid_count, query_start_loc,
                                         token_indices, num_rejected)

    # Parallel drafting: shift, S = K slots per request; the last accepted token ends the query.
    num_input = target_token_ids.shape[0]
    num_out = num_input + num_reqs * (K - 1)
    out_ids, out_positions = poisoned(num_out), poisoned(num_out, torch.int64)
    rejected_mask, masked_mask = poisoned(num_out, torch.bool), poisoned(num_out, torch.bool)
    new_token_indices, hidden_map = poisoned(num_reqs * K), poisoned(num_input)
    spec_ops.copy_and_expand_eagle_inputs(
        target_token_ids, target_positions, next_token_ids, out_ids, out_positions,
        rejected_mask, masked_mask, new_token_indices, hidden_map, query_start_loc,
        token_indices, 0, PARALLEL_ID, K, True)
    new_slots = spec_ops.compute_new_slot_mapping(block_table, query_start_loc, out_positions,
                                                  rejected_mask, BLOCK_SIZE, K - 1,
                                                  MAX_MODEL_LEN)
    cad = spec_ops.CommonAttentionMetadata(
        query_start_loc=query_start_loc, query_start_loc_cpu=None, seq_lens=seq_lens,
        num_reqs=num_reqs, num_actual_tokens=num_input, max_query_len=K + 1,
        max_seq_len=MAX_MODEL_LEN - 8, block_table_tensor=block_table,
        slot_mapping=torch.empty(0, dtype=torch.int64, device=device))
    extended = spec_ops.extend_all_queries_by_N(cad, K - 1, arange, new_slots)

    # Chain drafting: K - 1 autoregressive steps from each request's sampled token.
    decode = spec_ops.draft_decode_metadata(cad, arange, num_rejected)
    decode = decode.replace(seq_lens=decode.seq_lens.clone())
    positions = target_positions[token_indices.long()]
    slots = poisoned(num_reqs + 2, torch.int64)
    step_slots = []
    for _ in range(K - 1):
        spec_ops.eagle_step_update_slot_mapping_and_metadata(
            positions, block_table, decode.seq_lens, BLOCK_SIZE, MAX_MODEL_LEN, positions, slots,
            num_reqs + 2)
        decode = spec_ops.advance_draft_step_metadata(decode, slots, MAX_MODEL_LEN)
        step_slots.append(decode.slot_mapping.clone())
    return (next_token_ids, valid_count, token_indices, num_rejected, out_ids, out_positions,
            rejected_mask, masked_mask, new_token_indices, hidden_map, new_slots,
            extended.query_start_loc, extended.seq_lens, extended.slot_mapping, positions,
            decode.seq_lens, decode.query_start_loc, *step_slots)


def engine_step_inputs(num_reqs, seed, device):
    """Valid inputs of one step: K drafts per request (some requests none), tokens of the
    verify batch at consecutive positions."""
    rng = random.Random(seed)
    drafts = [rng.choice((0, K, K, K)) for _ in range(num_reqs)]
    sampled = rejection_sampler_output(rng, num_reqs, K + 1, VOCAB).to(torch.int32)
    cumulative, starts, positions = [], [0], []
    for d in drafts:
        cumulative.append((cumulative[-1] if cumulative else 0) + d)
        starts.append(starts[-1] + K + 1)
        first = rng.randint(0, MAX_MODEL_LEN - 2 * K - 2)
        positions += range(first, first + K + 1)
    num_tokens = starts[-1]

    def ints(values, dtype=torch.int32):
        return torch.tensor(values, dtype=dtype, device=device)

    return (sampled.contiguous().to(device),
            ints([rng.random() < 0.1 for _ in range(num_reqs)], torch.bool),
            ints([rng.randrange(VOCAB) for _ in range(num_reqs)]), ints(cumulative), ints(starts),
            ints([rng.randrange(VOCAB) for _ in range(num_tokens)]),
            ints(positions, torch.int64),
            ints([[rng.randrange(4096) for _ in range(MAX_MODEL_LEN // BLOCK_SIZE)]
                  for _ in range(num_reqs)]),
            ints([p + 1 for p in positions[K::K + 1]]),
            torch.arange(num_reqs + 1, dtype=torch.int32, device=device))
