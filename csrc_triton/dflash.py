"""SPEC 1.4: DFlash first pass. Context tokens only become K/V; each request gets Q queries.

Flat over max(C, R * Q) lanes: lane i handles context token i (owner found by binary search)
and query token i (owner i // Q), so prefill-sized contexts spread over many programs.
"""

import triton
import triton.language as tl

from ._indexing import find_request, slot_lookup
from ._launch import Launcher, spec_kernel

BLOCK = 256


@spec_kernel
def _copy_and_expand_dflash_inputs_kernel(
    next_token_ids_ptr,          # [R]
    target_positions_ptr,        # [C]
    out_input_ids_ptr,           # [>= R * Q] out
    out_context_positions_ptr,   # [>= C] out
    out_query_positions_ptr,     # [>= R * Q] out
    out_context_slot_ptr,        # [>= C] out
    out_query_slot_ptr,          # [>= R * Q] out
    out_token_indices_ptr,       # [>= R * K] out
    block_table_ptr,             # [>= R, n_cols], row stride block_table_row_stride
    query_start_loc_ptr,         # [R + 1]
    num_rejected_ptr,            # [>= R], read only when HAS_REJECTED
    num_reqs: tl.int64, num_context: tl.int64, block_table_row_stride: tl.int64,
    num_block_cols: tl.int64, parallel_drafting_token_id: tl.int64, block_size: tl.int64,
    num_query_per_req: tl.int64, num_speculative_tokens: tl.int64, search_steps: tl.int64,
    HAS_REJECTED: tl.constexpr, BLOCK: tl.constexpr,
):
    lane = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)

    # Context token `lane`: its own position, and its slot in its request's blocks.
    req = find_request(query_start_loc_ptr, lane, lane < num_context, num_reqs, 0, 0,
                       search_steps)
    is_context = (lane < num_context) & (req < num_reqs)
    context_start = tl.load(query_start_loc_ptr + req, mask=is_context, other=0)
    context_end = tl.load(query_start_loc_ptr + req + 1, mask=is_context, other=0)
    owned = is_context & (lane >= context_start) & (lane < context_end)
    position = tl.load(target_positions_ptr + lane, mask=owned, other=0).to(tl.int64)
    slot = slot_lookup(block_table_ptr, block_table_row_stride, num_block_cols, req, position,
                       block_size, owned)
    tl.store(out_context_positions_ptr + lane, position, mask=owned)
    tl.store(out_context_slot_ptr + lane, slot, mask=owned)

    # Query token `lane` = r * Q + q: [next token, mask, mask, ...] after the last valid one.
    is_query = lane < num_reqs * num_query_per_req
    req = lane // num_query_per_req
    q = lane % num_query_per_req
    valid_end = tl.load(query_start_loc_ptr + req + 1, mask=is_query, other=0).to(tl.int64)
    if HAS_REJECTED:
        valid_end -= tl.load(num_rejected_ptr + req, mask=is_query, other=0).to(tl.int64)
    last_position = tl.load(
        target_positions_ptr + valid_end - 1,
        mask=is_query & (valid_end >= 1) & (valid_end <= num_context), other=0,
    ).to(tl.int64)
    query_position = last_position + 1 + q
    query_slot = slot_lookup(block_table_ptr, block_table_row_stride, num_block_cols, req,
                             query_position, block_size, is_query)
    next_token = tl.load(next_token_ids_ptr + req, mask=is_query & (q == 0), other=0).to(tl.int64)
    tl.store(out_input_ids_ptr + lane, tl.where(q == 0, next_token, parallel_drafting_token_id),
             mask=is_query)
    tl.store(out_query_positions_ptr + lane, query_position, mask=is_query)
    tl.store(out_query_slot_ptr + lane, query_slot, mask=is_query)
    tl.store(out_token_indices_ptr + req * num_speculative_tokens + q - 1, lane,
             mask=is_query & (q >= 1))


_copy_and_expand_dflash_inputs = Launcher(_copy_and_expand_dflash_inputs_kernel)


def launch_copy_and_expand_dflash_inputs(
        next_token_ids, target_positions, out_input_ids, out_context_positions,
        out_query_positions, out_context_slot_mapping, out_query_slot_mapping,
        out_token_indices, block_table, query_start_loc, num_rejected_tokens,
        parallel_drafting_token_id, block_size, num_query_per_req, num_speculative_tokens):
    num_reqs = query_start_loc.shape[0] - 1
    num_context = target_positions.shape[0]
    has_rejected = num_rejected_tokens is not None
    rejected = num_rejected_tokens if has_rejected else query_start_loc
    _copy_and_expand_dflash_inputs(
        target_positions.get_device(),
        triton.cdiv(max(num_context, num_reqs * num_query_per_req), BLOCK),
        (next_token_ids.dtype, target_positions.dtype, out_input_ids.dtype,
         out_context_positions.dtype, out_query_positions.dtype, out_context_slot_mapping.dtype,
         out_query_slot_mapping.dtype, out_token_indices.dtype, block_table.dtype,
         query_start_loc.dtype, rejected.dtype, has_rejected),
        (next_token_ids, target_positions, out_input_ids, out_context_positions,
         out_query_positions, out_context_slot_mapping, out_query_slot_mapping,
         out_token_indices, block_table, query_start_loc, rejected, num_reqs, num_context,
         block_table.stride(0), block_table.shape[1], parallel_drafting_token_id, block_size,
         num_query_per_req, num_speculative_tokens, num_reqs.bit_length(), has_rejected, BLOCK))
