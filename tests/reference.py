"""The contract (docs/) as plain Python loops over lists: the slow, obviously-right reference.

``REFERENCES[op](*args)`` takes the op's arguments (CPU tensors), never modifies them, and
returns the expected final value of every tensor the op writes (as lists, whole buffers,
untouched elements included), then the result tensor's values for compute_new_slot_mapping.
"""


def values(t):
    return t.tolist() if hasattr(t, "tolist") else list(t)


def at(items, index):
    """items[index], or 0 outside the list (the contract's reads outside a tensor)."""
    return items[index] if 0 <= index < len(items) else 0


def slot(table, row, position, block_size):
    """slot(r, p) with the block index clamped into the table; positions here are >= 0."""
    block_index = min(position // block_size, len(table[row]) - 1)
    return table[row][block_index] * block_size + position % block_size


def next_token_padded(sampled, discard, backup, next_ids, counts, vocab_size):
    next_ids, counts = values(next_ids), values(counts)
    for r, row in enumerate(values(sampled)):
        valid_cols = [j for j, t in enumerate(row) if 0 <= t < vocab_size]
        if discard[r] or not valid_cols:
            next_ids[r], counts[r] = int(backup[r]), 0 if discard[r] else len(valid_cols)
        else:
            next_ids[r], counts[r] = row[valid_cols[-1]], len(valid_cols)
    return [next_ids, counts]


def prepare_inputs_padded(cu, valid, qsl, indices, rejected):
    cu, valid, qsl = values(cu), values(valid), values(qsl)
    indices, rejected = values(indices), values(rejected)
    for r in range(len(cu)):
        drafts = cu[r] - (cu[r - 1] if r > 0 else 0)
        rejected[r] = drafts + 1 - valid[r] if drafts > 0 else 0
        indices[r] = qsl[r + 1] - 1 - rejected[r]
    return [indices, rejected]


def copy_and_expand_eagle_inputs(ids, positions, next_ids, out_ids, out_positions,
                                 out_rejected, out_masked, out_new, out_hidden, qsl, query_end,
                                 padding_id, parallel_id, slots, shift):
    ids, positions, next_ids = values(ids), values(positions), values(next_ids)
    qsl, query_end = values(qsl), values(query_end)
    outs = [values(t) for t in (out_ids, out_positions, out_rejected, out_masked, out_new,
                                out_hidden)]
    out_ids, out_positions, out_rejected, out_masked, out_new, out_hidden = outs
    num_input = len(ids)
    for r in range(len(next_ids)):
        qs, qn, qe = qsl[r], qsl[r + 1], query_end[r]
        rejected = qn - qe - 1
        if shift:
            num_valid, offset, out_start = qe - qs, 1, qs + r * (slots - 1)
        else:
            num_valid, offset, out_start = qe - qs + 1, 0, qs + r * slots
        for j in range(num_valid + slots + rejected):
            o = out_start + j
            if j < num_valid:
                token, position = ids[min(qs + offset + j, num_input - 1)], at(positions, qs) + j
            elif j == num_valid:
                token, position = next_ids[r], at(positions, qs) + j
            elif j < num_valid + slots:
                token, position = parallel_id, at(positions, qs) + j
            else:
                token, position = padding_id, 0
            out_ids[o], out_positions[o] = token, position
            out_rejected[o] = j >= num_valid + slots
            out_masked[o] = num_valid < j < num_valid + slots
            if num_valid <= j < num_valid + slots:
                out_new[r * slots + j - num_valid] = o
        if shift:
            for j in range(qn - qs):
                out_hidden[qs + j] = out_start + j
    return outs


def copy_and_expand_dflash_inputs(next_ids, positions, out_ids, out_context_positions,
                                  out_query_positions, out_context_slots, out_query_slots,
                                  out_token_indices, table, qsl, num_rejected, parallel_id,
                                  block_size, num_query, num_spec):
    next_ids, positions, table, qsl = values(next_ids), values(positions), values(table), \
        values(qsl)
    outs = [values(t) for t in (out_ids, out_context_positions, out_query_positions,
                                out_context_slots, out_query_slots, out_token_indices)]
    out_ids, out_cpos, out_qpos, out_cslot, out_qslot, out_tidx = outs
    for r in range(len(qsl) - 1):
        cs, ce = qsl[r], qsl[r + 1]
        valid_end = ce - (int(num_rejected[r]) if num_rejected is not None else 0)
        last = at(positions, valid_end - 1)
        for i in range(cs, ce):
            out_cpos[i] = positions[i]
            out_cslot[i] = slot(table, r, positions[i], block_size)
        for q in range(num_query):
            o = r * num_query + q
            out_qpos[o] = last + 1 + q
            out_qslot[o] = slot(table, r, last + 1 + q, block_size)
            out_ids[o] = next_ids[r] if q == 0 else parallel_id
            if q >= 1:
                out_tidx[r * num_spec + q - 1] = o
    return outs


def _step(table, position, seq_len, row, block_size, max_model_len):
    """One application of 1.5 to one row: (clamped position, slot, seq_len)."""
    next_position = position + 1
    over = next_position >= max_model_len
    clamped = 0 if over else next_position
    slot_id = -1 if over else slot(table, row, clamped, block_size)
    return clamped, slot_id, min(1 if over else seq_len + 1, max_model_len)


def eagle_step(positions, table, seq_lens, block_size, max_model_len, out_clamped, out_slots,
               input_batch_size=None):
    positions, table = values(positions), values(table)
    seq_lens, out_clamped, out_slots = values(seq_lens), values(out_clamped), values(out_slots)
    num_reqs = len(positions)
    padded = num_reqs if input_batch_size is None else input_batch_size
    for r in range(num_reqs):
        out_clamped[r], out_slots[r], seq_lens[r] = _step(table, positions[r], seq_lens[r], r,
                                                          block_size, max_model_len)
    for r in range(num_reqs, padded):
        out_slots[r] = -1
    return [seq_lens, out_clamped, out_slots]


def multi_step(positions, table, seq_lens, block_size, max_model_len, num_steps, out_positions,
               out_slots, out_seq_lens, input_batch_size=None):
    positions, table, seq_lens = values(positions), values(table), values(seq_lens)
    out_positions, out_slots, out_seq_lens = values(out_positions), values(out_slots), \
        values(out_seq_lens)
    num_reqs = len(positions)
    padded = num_reqs if input_batch_size is None else input_batch_size
    for r in range(num_reqs):
        position, seq_len = positions[r], seq_lens[r]
        for s in range(num_steps):
            position, slot_id, seq_len = _step(table, position, seq_len, r, block_size,
                                               max_model_len)
            out_positions[s][r], out_slots[s][r], out_seq_lens[s][r] = position, slot_id, seq_len
    for s in range(num_steps):
        for r in range(num_reqs, padded):
            out_slots[s][r] = -1
    return [out_positions, out_slots, out_seq_lens]


def mrope_step(positions, table, seq_lens, block_size, max_model_len, out_positions, out_slots,
               input_batch_size=None):
    positions, table = values(positions), values(table)
    seq_lens, out_positions, out_slots = values(seq_lens), values(out_positions), \
        values(out_slots)
    num_reqs = len(positions[0])
    padded = num_reqs if input_batch_size is None else input_batch_size
    for r in range(num_reqs):
        t = seq_lens[r]
        over = t >= max_model_len
        for d in range(3):
            out_positions[d][r] = 0 if over else positions[d][r] + 1
        out_slots[r] = -1 if over else slot(table, r, t, block_size)
        seq_lens[r] = 1 if over else t + 1
    for r in range(num_reqs, padded):
        out_slots[r] = -1
    return [seq_lens, out_positions, out_slots]


def update_num_computed_tokens(num_computed, num_accepted, prev_positions, valid, prev_drafts,
                               cpu_num_computed):
    before = values(num_computed)
    num_computed, num_accepted = values(num_computed), values(num_accepted)
    valid, prev_drafts = values(valid), values(prev_drafts)
    in_range = min(len(valid), len(before), len(prev_drafts))
    for i, p in enumerate(values(prev_positions)):
        if 0 <= p < in_range and prev_drafts[p] > 0:
            num_computed[i] = before[p] + valid[p]
            num_accepted[i] = valid[p]
        else:
            num_computed[i] = int(cpu_num_computed[i])
    return [num_computed, num_accepted]


def new_slot_mapping(table, qsl, new_positions, rejected, block_size, num_new, max_model_len):
    table, qsl = values(table), values(qsl)
    new_positions, rejected = values(new_positions), values(rejected)
    result, entry = [], 0
    for r in range(len(qsl) - 1):
        for _ in range(qsl[r + 1] - qsl[r] + num_new):
            p = new_positions[entry]
            if p >= max_model_len or rejected[entry]:
                result.append(-1)
            else:
                result.append(slot(table, r, min(p, max_model_len - 1), block_size))
            entry += 1
    return [result]


def prepare_padded_draft_inputs(sampled, discard, backup, cu, qsl, next_ids, counts, indices,
                                rejected, vocab_size):
    next_ids, counts = next_token_padded(sampled, discard, backup, next_ids, counts, vocab_size)
    indices, rejected = prepare_inputs_padded(cu, counts, qsl, indices, rejected)
    return [next_ids, counts, indices, rejected]


def _head(out, head):
    """``out`` as a list with ``head`` written over its first entries."""
    out = values(out)
    out[:len(head)] = head
    return out


def _round_state(sampled, discard, backup, cu, qsl, vocab_size):
    """docs/round_ops.md 6.0: per request next and valid (1.1), then last and rejected (1.2
    reading 1.1's counts)."""
    num_reqs = len(qsl) - 1
    next_ids, counts = next_token_padded(sampled, discard, backup, [0] * num_reqs,
                                         [0] * num_reqs, vocab_size)
    last, rejected = prepare_inputs_padded(cu, counts, qsl, [0] * num_reqs, [0] * num_reqs)
    return next_ids, counts, last, rejected


def eagle_round(sampled, discard, backup, cu, qsl, ids, positions, slots, table, seq_lens,
                next_out, counts_out, indices_out, out_ids, out_positions, out_slots,
                out_step_positions, out_step_slots, out_step_seq_lens, vocab_size, block_size,
                max_model_len, num_steps, num_input_tokens=None, input_batch_size=None):
    qsl, ids, positions, slots = values(qsl), values(ids), values(positions), values(slots)
    seq_lens = values(seq_lens)
    out_ids, out_positions, out_slots = values(out_ids), values(out_positions), values(out_slots)
    next_ids, counts, last, rejected = _round_state(sampled, discard, backup, cu, qsl,
                                                    vocab_size)
    num_tokens = len(ids)
    for r in range(len(next_ids)):
        for i in range(qsl[r], qsl[r + 1]):
            if i == last[r]:
                out_ids[i] = next_ids[r]
            elif i + 1 < num_tokens:
                out_ids[i] = ids[i + 1]
            out_positions[i], out_slots[i] = positions[i], slots[i]
    for i in range(num_tokens, num_tokens if num_input_tokens is None else num_input_tokens):
        out_slots[i] = -1
    start = [positions[i] if 0 <= i < num_tokens else 0 for i in last]
    lengths = [seq_lens[r] - rejected[r] for r in range(len(next_ids))]
    return [_head(next_out, next_ids), _head(counts_out, counts), _head(indices_out, last),
            out_ids, out_positions, out_slots,
            *multi_step(start, table, lengths, block_size, max_model_len, num_steps,
                        out_step_positions, out_step_slots, out_step_seq_lens, input_batch_size)]


def parallel_round(sampled, discard, backup, cu, qsl, ids, positions, table, seq_lens, next_out,
                   counts_out, out_ids, out_positions, out_masked, out_new, out_hidden, out_slots,
                   out_qsl, out_seq_lens, out_step_positions, out_step_slots, out_step_seq_lens,
                   vocab_size, padding_id, parallel_id, num_slots, shift, block_size,
                   max_model_len, num_steps, num_input_tokens=None, input_batch_size=None):
    qsl, positions, seq_lens = values(qsl), values(positions), values(seq_lens)
    out_slots, out_qsl, out_seq_lens = values(out_slots), values(out_qsl), values(out_seq_lens)
    next_ids, counts, last, rejected = _round_state(sampled, discard, backup, cu, qsl,
                                                    vocab_size)
    num_reqs = len(next_ids)
    new = num_slots - 1 if shift else num_slots
    first_pass = len(ids) + num_reqs * new
    out_ids, out_positions, rejected_mask, out_masked, out_new, out_hidden = \
        copy_and_expand_eagle_inputs(ids, positions, next_ids, out_ids, out_positions,
                                     [False] * first_pass, out_masked, out_new, out_hidden, qsl,
                                     last, padding_id, parallel_id, num_slots, shift)
    out_slots[:first_pass] = new_slot_mapping(table, qsl, out_positions[:first_pass],
                                              rejected_mask, block_size, new, max_model_len)[0]
    for i in range(first_pass, first_pass if num_input_tokens is None else num_input_tokens):
        out_slots[i] = -1
    for r in range(num_reqs + 1):
        out_qsl[r] = qsl[r] + new * r
    for r in range(num_reqs):
        out_seq_lens[r] = seq_lens[r] + new
    start = [at(positions, qsl[r]) + last[r] - qsl[r] + 1 for r in range(num_reqs)]
    lengths = [seq_lens[r] + new - rejected[r] for r in range(num_reqs)]
    return [_head(next_out, next_ids), _head(counts_out, counts), out_ids, out_positions,
            out_masked, out_new, out_hidden, out_slots, out_qsl, out_seq_lens,
            *multi_step(start, table, lengths, block_size, max_model_len, num_steps,
                        out_step_positions, out_step_slots, out_step_seq_lens, input_batch_size)]


def dflash_round(sampled, discard, backup, cu, qsl, positions, table, seq_lens, next_out,
                 counts_out, out_ids, out_context_positions, out_query_positions,
                 out_context_slots, out_query_slots, out_token_indices, out_qsl, out_seq_lens,
                 vocab_size, parallel_id, block_size, num_spec, num_input_tokens=None):
    qsl, positions, table, seq_lens = values(qsl), values(positions), values(table), \
        values(seq_lens)
    outs = [values(t) for t in (out_ids, out_context_positions, out_query_positions,
                                out_context_slots, out_query_slots, out_token_indices, out_qsl,
                                out_seq_lens)]
    out_ids, out_cpos, out_qpos, out_cslot, out_qslot, out_tidx, out_qsl, out_seq_lens = outs
    next_ids, counts, _, rejected = _round_state(sampled, discard, backup, cu, qsl, vocab_size)
    num_reqs, num_query = len(next_ids), num_spec + 1
    for r in range(num_reqs):
        for i in range(qsl[r], qsl[r + 1]):
            out_cpos[i] = positions[i]
            out_cslot[i] = slot(table, r, positions[i], block_size)
        last_index = qsl[r + 1] - rejected[r] - 1
        last = positions[last_index] if 0 <= last_index < len(positions) else 0
        for q in range(num_query):
            o = r * num_query + q
            out_qpos[o] = last + 1 + q
            out_qslot[o] = slot(table, r, last + 1 + q, block_size)
            out_ids[o] = next_ids[r] if q == 0 else parallel_id
            if q >= 1:
                out_tidx[r * num_spec + q - 1] = o
        out_seq_lens[r] = seq_lens[r] - rejected[r] + num_query
    for r in range(num_reqs + 1):
        out_qsl[r] = r * num_query
    num_queries = num_reqs * num_query
    for i in range(num_queries, num_queries if num_input_tokens is None else num_input_tokens):
        out_qslot[i] = -1
    return [_head(next_out, next_ids), _head(counts_out, counts), *outs]


REFERENCES = {
    "eagle_prepare_next_token_padded": next_token_padded,
    "eagle_prepare_inputs_padded": prepare_inputs_padded,
    "copy_and_expand_eagle_inputs": copy_and_expand_eagle_inputs,
    "copy_and_expand_dflash_inputs": copy_and_expand_dflash_inputs,
    "eagle_step_update_slot_mapping_and_metadata": eagle_step,
    "update_num_computed_tokens_for_batch_change": update_num_computed_tokens,
    "compute_new_slot_mapping": new_slot_mapping,
    "prepare_padded_draft_inputs": prepare_padded_draft_inputs,
    "eagle_multi_step_slot_mapping": multi_step,
    "eagle_mrope_step_update_slot_mapping_and_metadata": mrope_step,
    "prepare_eagle_round": eagle_round,
    "prepare_parallel_round": parallel_round,
    "prepare_dflash_round": dflash_round,
}
