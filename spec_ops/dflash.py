"""1.4 (docs/ops.md): DFlash first pass: context K/V slots and Q query tokens per request.

The op's schema, CUDA kernel (a Triton launch), CPU kernel (vectorized torch) and public
function. The fake is in meta.py.
"""

import torch

from . import validation
from ._library import define
from ._torch_indexing import find_request, slot_lookup, take, write
from ._triton import launch_copy_and_expand_dflash_inputs


def _copy_and_expand_dflash_cpu(next_token_ids, target_positions, out_input_ids,
                                out_context_positions, out_query_positions,
                                out_context_slot_mapping, out_query_slot_mapping,
                                out_token_indices, block_table, query_start_loc,
                                num_rejected_tokens, parallel_drafting_token_id, block_size,
                                num_query_per_req, num_speculative_tokens):
    num_reqs = query_start_loc.shape[0] - 1
    if num_reqs == 0:
        return
    query_start_loc = query_start_loc.long()
    positions = target_positions.long()

    context = torch.arange(positions.shape[0])                              # [C]
    req = find_request(query_start_loc[:-1], context)
    owned = (context >= query_start_loc[req]) & (context < query_start_loc[req + 1])
    write(out_context_positions, positions, owned)
    write(out_context_slot_mapping, slot_lookup(block_table, req, positions, block_size), owned)

    query = torch.arange(num_reqs * num_query_per_req)                     # [R * Q]
    req = query // num_query_per_req
    q = query % num_query_per_req
    valid_end = query_start_loc[1:]
    if num_rejected_tokens is not None:
        valid_end = valid_end - num_rejected_tokens[:num_reqs].long()
    last = torch.where((valid_end >= 1) & (valid_end <= positions.shape[0]),
                       take(positions, valid_end - 1), 0)
    query_position = last[req] + 1 + q
    write(out_query_positions, query_position)
    write(out_query_slot_mapping, slot_lookup(block_table, req, query_position, block_size))
    write(out_input_ids, torch.where(q == 0, next_token_ids.long()[req],
                                     parallel_drafting_token_id))
    mask_query = q >= 1
    out_token_indices[(req * num_speculative_tokens + q - 1)[mask_query]] = (
        query[mask_query].to(out_token_indices.dtype))


_copy_and_expand_dflash_op = define(
    "copy_and_expand_dflash_inputs(Tensor next_token_ids, Tensor target_positions, "
    "Tensor(a!) out_input_ids, Tensor(b!) out_context_positions, "
    "Tensor(c!) out_query_positions, Tensor(d!) out_context_slot_mapping, "
    "Tensor(e!) out_query_slot_mapping, Tensor(f!) out_token_indices, Tensor block_table, "
    "Tensor query_start_loc, Tensor? num_rejected_tokens, int parallel_drafting_token_id, "
    "int block_size, int num_query_per_req, int num_speculative_tokens) -> ()",
    validation.check_copy_and_expand_dflash_inputs, launch_copy_and_expand_dflash_inputs,
    _copy_and_expand_dflash_cpu)


def copy_and_expand_dflash_inputs(next_token_ids, target_positions, out_input_ids,
                                  out_context_positions, out_query_positions,
                                  out_context_slot_mapping, out_query_slot_mapping,
                                  out_token_indices, block_table, query_start_loc,
                                  num_rejected_tokens, parallel_drafting_token_id, block_size,
                                  num_query_per_req, num_speculative_tokens):
    """DFlash first pass (docs/ops.md, 1.4): context tokens become K/V, Q queries per request.

    Context i of request r: its position and slot(r, position). Query q of request r at
    o = r * Q + q: position last + 1 + q where last = target_positions[qsl[r + 1] - rejected[r]
    - 1], slot(r, that position), id next_token_ids[r] for q = 0 else the parallel-drafting
    id; out_token_indices[r * K + q - 1] = o for q >= 1.
    """
    _copy_and_expand_dflash_op(next_token_ids, target_positions, out_input_ids,
                               out_context_positions, out_query_positions,
                               out_context_slot_mapping, out_query_slot_mapping,
                               out_token_indices, block_table, query_start_loc,
                               num_rejected_tokens, parallel_drafting_token_id, block_size,
                               num_query_per_req, num_speculative_tokens)
