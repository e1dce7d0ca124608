"""First draft pass over expanded requests: 1.3 (token layout) and 1.7 (slot mapping).

Each op: its schema, the CUDA kernel (a Triton launch), the CPU kernel (vectorized torch) and
the public function. The fakes are in meta.py.
"""

import torch

from . import validation
from ._library import define
from ._torch_indexing import find_request, slot_lookup, take, take_or_zero, write
from ._triton import launch_compute_new_slot_mapping, launch_copy_and_expand_eagle_inputs

# --- 1.3 copy_and_expand_eagle_inputs ------------------------------------------------------


def _copy_and_expand_cpu(target_token_ids, target_positions, next_token_ids, out_input_ids,
                         out_positions, out_is_rejected_token_mask, out_is_masked_token_mask,
                         out_new_token_indices, out_hidden_state_mapping, query_start_loc,
                         query_end_loc, padding_token_id, parallel_drafting_token_id,
                         num_padding_slots_per_request, shift_input_ids, num_outputs):
    num_reqs = next_token_ids.shape[0]
    if num_reqs == 0:
        return
    num_input_tokens = target_token_ids.shape[0]
    slots = num_padding_slots_per_request
    extra = slots - 1 if shift_input_ids else slots
    query_start_loc = query_start_loc.long()
    out = torch.arange(num_outputs)                                       # [num_outputs]
    out_start = query_start_loc[:-1] + torch.arange(num_reqs) * extra     # [R]
    req = find_request(out_start, out)
    query_start = query_start_loc[req]
    query_next = query_start_loc[req + 1]
    query_end = query_end_loc.long()[req]
    num_valid = query_end - query_start + (0 if shift_input_ids else 1)
    j = out - out_start[req]
    written = (j >= 0) & (j < num_valid + slots + (query_next - query_end - 1))

    is_input = j < num_valid
    is_bonus = j == num_valid
    is_masked = (j > num_valid) & (j < num_valid + slots)
    is_rejected = j >= num_valid + slots
    source = (query_start + (1 if shift_input_ids else 0) + j).clamp(max=num_input_tokens - 1)
    token = torch.where(
        is_input, take(target_token_ids, source),
        torch.where(is_bonus, next_token_ids.long()[req],
                    torch.where(is_masked, parallel_drafting_token_id, padding_token_id)))
    first_position = take_or_zero(target_positions, query_start)
    write(out_input_ids, token, written)
    write(out_positions, torch.where(is_rejected, 0, first_position + j), written)
    write(out_is_rejected_token_mask, is_rejected, written)
    write(out_is_masked_token_mask, is_masked, written)
    new_token = written & (j >= num_valid) & (j < num_valid + slots)
    out_new_token_indices[(req * slots + j - num_valid)[new_token]] = (
        out[new_token].to(out_new_token_indices.dtype))
    if shift_input_ids:
        hidden = query_start + j
        mapped = written & (j < query_next - query_start) & (hidden >= 0) & (
            hidden < num_input_tokens)
        out_hidden_state_mapping[hidden[mapped]] = out[mapped].to(out_hidden_state_mapping.dtype)


_copy_and_expand_op = define(
    "copy_and_expand_eagle_inputs(Tensor target_token_ids, Tensor target_positions, "
    "Tensor next_token_ids, Tensor(a!) out_input_ids, Tensor(b!) out_positions, "
    "Tensor(c!) out_is_rejected_token_mask, Tensor(d!) out_is_masked_token_mask, "
    "Tensor(e!) out_new_token_indices, Tensor(f!) out_hidden_state_mapping, "
    "Tensor query_start_loc, Tensor query_end_loc, int padding_token_id, "
    "int parallel_drafting_token_id, int num_padding_slots_per_request, "
    "bool shift_input_ids) -> ()",
    validation.check_copy_and_expand_eagle_inputs, launch_copy_and_expand_eagle_inputs,
    _copy_and_expand_cpu)


def copy_and_expand_eagle_inputs(target_token_ids, target_positions, next_token_ids,
                                 out_input_ids, out_positions, out_is_rejected_token_mask,
                                 out_is_masked_token_mask, out_new_token_indices,
                                 out_hidden_state_mapping, query_start_loc, query_end_loc,
                                 padding_token_id, parallel_drafting_token_id,
                                 num_padding_slots_per_request, shift_input_ids):
    """Lay out the drafter's first pass: inputs, bonus token, S - 1 masks, rejected padding.

    Request r writes nv + S + rej outputs from out_start = qsl[r] + r * (S - 1) (shift) or
    qsl[r] + r * S: nv accepted inputs (shifted by one with shift), next_token_ids[r], S - 1
    parallel_drafting_token_id slots (masked), then the rejected tokens as padding_token_id at
    position 0. Also records the S new-token indices per request and, with shift, where every
    input token landed. docs/ops.md, 1.3 has the table.
    """
    _copy_and_expand_op(target_token_ids, target_positions, next_token_ids, out_input_ids,
                        out_positions, out_is_rejected_token_mask, out_is_masked_token_mask,
                        out_new_token_indices, out_hidden_state_mapping, query_start_loc,
                        query_end_loc, padding_token_id, parallel_drafting_token_id,
                        num_padding_slots_per_request, shift_input_ids)


# --- 1.7 compute_new_slot_mapping ----------------------------------------------------------

def _new_slot_mapping_cuda(block_table, query_start_loc, new_positions, is_rejected_token_mask,
                           block_size, num_new_tokens, max_model_len):
    slot_mapping = validation.empty_slot_mapping(new_positions)
    launch_compute_new_slot_mapping(block_table, query_start_loc, new_positions,
                                    is_rejected_token_mask, slot_mapping, block_size,
                                    num_new_tokens, max_model_len)
    return slot_mapping


def _new_slot_mapping_cpu(block_table, query_start_loc, new_positions, is_rejected_token_mask,
                          block_size, num_new_tokens, max_model_len):
    slot_mapping = validation.empty_slot_mapping(new_positions).fill_(-1)
    num_reqs = query_start_loc.shape[0] - 1
    if num_reqs == 0:
        return slot_mapping
    query_start_loc = query_start_loc.long()
    entry = torch.arange(new_positions.shape[0])
    start = query_start_loc[:-1] - query_start_loc[0] + torch.arange(num_reqs) * num_new_tokens
    req = find_request(start, entry)
    j = entry - start[req]
    owned = (j >= 0) & (j < query_start_loc[req + 1] - query_start_loc[req] + num_new_tokens)
    position = new_positions.long()
    keep = owned & ~is_rejected_token_mask & (position < max_model_len)
    slot = slot_lookup(block_table, req, position.clamp(max=max_model_len - 1), block_size)
    return torch.where(keep, slot, slot_mapping)


_new_slot_mapping_op = define(
    "compute_new_slot_mapping(Tensor block_table, Tensor query_start_loc, "
    "Tensor new_positions, Tensor is_rejected_token_mask, int block_size, "
    "int num_new_tokens, int max_model_len) -> Tensor",
    validation.check_compute_new_slot_mapping, _new_slot_mapping_cuda, _new_slot_mapping_cpu)


def compute_new_slot_mapping(block_table, query_start_loc, new_positions,
                             is_rejected_token_mask, block_size, num_new_tokens, max_model_len):
    """Slot mapping for the expanded first pass of 1.3 (docs/ops.md, 1.7), a new int64 tensor.

    Request r owns qsl[r + 1] - qsl[r] + num_new_tokens consecutive entries of new_positions.
    Entry with position p: slot(r, min(p, max_model_len - 1)), or -1 where
    p >= max_model_len or the entry is rejected.
    """
    return _new_slot_mapping_op(block_table, query_start_loc, new_positions,
                                is_rejected_token_mask, block_size, num_new_tokens,
                                max_model_len)
