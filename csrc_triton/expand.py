"""First draft pass over expanded requests: 1.3 (token layout) and 1.7 (slot mapping).

The grid is (requests, chunks): program (r, c) handles chunks c, c + C, c + 2C, ... of request
r's outputs. C comes from shapes (about the mean request length over BLOCK), so a batch of
1024 decodes runs 1024 one-chunk programs and 8 long prefills are split into many. Each loop
is bounded by the out buffer's shape-derived size as well, so a garbage query_start_loc can
neither write out of bounds nor loop for long.

On decode-sized requests (at most 8 or 16 outputs or entries on average, from shapes) both take
the row layout instead: ROW_GROUP requests per program as one tile, so 1024 decodes run 128
(1.7: 129) programs; then the items past the tile, of a group's one longer request in a loop of
its own, of several laid end to end in one loop.
"""

import triton
import triton.language as tl

from ._indexing import (
    flat_remainders,
    flat_rows,
    lone_remainder,
    pick,
    request_chunks,
    row_group,
    row_value,
    slot_lookup,
    wide_chunks,
)
from ._launch import (
    LONE_TAIL,
    PER_REQUEST_BLOCK,
    PER_REQUEST_WARPS,
    ROW_GROUP,
    ROW_TAIL,
    ROW_WARPS,
    WIDE_CHUNK,
    Launcher,
    cdiv,
    num_chunks,
    pdl_prologue,
    row_cols,
    spec_kernel,
)


# 1.3's row layout takes its remainders 128 lanes at a time, not ROW_TAIL: its body holds more
# values per lane than 1.4's and 1.7's. At 1024 requests (scripts/mixed_batch.py, the flat loop
# then serving every group), 128 lanes took 2.31-2.53 us with 1-16 adjacent 256-token
# requests against 2.48-2.72 with 256, and 8.6-8.8 against 9.2-9.4 with 2048-token ones.
EXPAND_ROW_TAIL = tl.constexpr(128)
# 1.7's row layout runs a lone long request 256 lanes at a time, not LONE_TAIL's 512. With 4
# warps a 512-lane chunk holds 4 items per thread, and ptxas issues a thread's position loads
# two at a time, each pair after the previous pair's block-table address (sm_90 SASS): about
# four dependent round trips per chunk. At 256 lanes a chunk is one pair, two round trips. At
# 1024 requests (scripts/mixed_batch.py --lone 128 / 256 / 512) with 1-16 adjacent 256-token
# requests 1.70-1.94 us against 1.85-2.09 with 512, with one or four 2048-token ones 4.51-4.63
# against 5.09-5.27 (128 lanes: 2.04-2.27, 7.12-7.25). 1.3 and 1.4 keep 512: at 256 their
# 2048-token cases took 5.05-5.25 / 4.82-5.08 us against 3.77-3.92 / 3.54-3.81.
SLOT_LONE_TAIL = tl.constexpr(256)


@triton.jit
def expanded_tokens(target_token_ids_ptr, j, mask, query_start, num_valid, num_padding_slots,
                    num_input_tokens, next_token, first_position, parallel_drafting_token_id,
                    padding_token_id, SHIFT: tl.constexpr):
    """1.3's table for entries j of one request: (input id, position, masked, rejected).
    (expanded_input_ids and expanded_entries are the same in two steps, for a kernel that
    issues the load earlier; written out here, 1.3's kernels keep the schedule they were
    measured with.)"""
    is_input = j < num_valid
    is_bonus = j == num_valid
    is_masked = (j > num_valid) & (j < num_valid + num_padding_slots)
    is_rejected = j >= num_valid + num_padding_slots
    source = tl.minimum(query_start + (1 if SHIFT else 0) + j, num_input_tokens - 1)
    input_id = tl.load(target_token_ids_ptr + source, mask=mask & is_input & (source >= 0),
                       other=0).to(tl.int64)
    token = tl.where(is_input, input_id,
                     tl.where(is_bonus, next_token,
                              tl.where(is_masked, parallel_drafting_token_id, padding_token_id)))
    return token, tl.where(is_rejected, 0, first_position + j), is_masked, is_rejected


@triton.jit
def expanded_input_ids(target_token_ids_ptr, j, mask, query_start, num_input_tokens,
                       SHIFT: tl.constexpr):
    """expanded_tokens' load alone: the input token entry j would copy (0 where not ``mask``).
    Its index is clamped into the batch, so a caller may load every entry's before knowing
    which entries are inputs (expanded_entries keeps only those)."""
    source = tl.minimum(query_start + (1 if SHIFT else 0) + j, num_input_tokens - 1)
    return tl.load(target_token_ids_ptr + source, mask=mask & (source >= 0),
                   other=0).to(tl.int64)


@triton.jit
def expanded_entries(input_id, j, num_valid, num_padding_slots, next_token, first_position,
                     parallel_drafting_token_id, padding_token_id):
    """expanded_tokens from expanded_input_ids' loads."""
    is_input = j < num_valid
    is_bonus = j == num_valid
    is_masked = (j > num_valid) & (j < num_valid + num_padding_slots)
    is_rejected = j >= num_valid + num_padding_slots
    token = tl.where(is_input, input_id,
                     tl.where(is_bonus, next_token,
                              tl.where(is_masked, parallel_drafting_token_id, padding_token_id)))
    return token, tl.where(is_rejected, 0, first_position + j), is_masked, is_rejected


@triton.jit
def store_expanded_indices(out_new_token_indices_ptr, out_hidden_state_mapping_ptr, j, out,
                           mask, req, query_start, query_next, num_valid, num_padding_slots,
                           num_input_tokens, SHIFT: tl.constexpr):
    """1.3's new-token indices (bonus first, then masks) and, with shift, where each input
    token of the request landed."""
    tl.store(out_new_token_indices_ptr + req * num_padding_slots + j - num_valid, out,
             mask=mask & (j >= num_valid) & (j < num_valid + num_padding_slots))
    if SHIFT:
        hidden = query_start + j
        tl.store(out_hidden_state_mapping_ptr + hidden, out,
                 mask=mask & (j < query_next - query_start) & (hidden >= 0)
                 & (hidden < num_input_tokens))


@triton.jit
def _expanded_outputs(target_token_ids_ptr, out_input_ids_ptr, out_positions_ptr,
                      out_rejected_ptr, out_masked_ptr, out_new_token_indices_ptr,
                      out_hidden_state_mapping_ptr, j, owned, req, out_start, query_start,
                      query_next, num_valid, next_token, first_position, num_input_tokens,
                      padding_token_id, parallel_drafting_token_id, num_padding_slots,
                      SHIFT: tl.constexpr):
    """Outputs out_start + j of request req where ``owned`` (j in its [first, last)): the row
    layout's body (the per-request kernel writes the same out in its own form)."""
    out = out_start + j
    token, position, is_masked, is_rejected = expanded_tokens(
        target_token_ids_ptr, j, owned, query_start, num_valid, num_padding_slots,
        num_input_tokens, next_token, first_position, parallel_drafting_token_id,
        padding_token_id, SHIFT)
    tl.store(out_input_ids_ptr + out, token, mask=owned)
    tl.store(out_positions_ptr + out, position, mask=owned)
    tl.store(out_rejected_ptr + out, is_rejected, mask=owned)
    tl.store(out_masked_ptr + out, is_masked, mask=owned)
    store_expanded_indices(out_new_token_indices_ptr, out_hidden_state_mapping_ptr, j, out,
                           owned, req, query_start, query_next, num_valid, num_padding_slots,
                           num_input_tokens, SHIFT)


@spec_kernel
def _copy_and_expand_eagle_inputs_kernel(
    target_token_ids_ptr,        # [T_in]
    target_positions_ptr,        # [T_in]
    next_token_ids_ptr,          # [R]
    out_input_ids_ptr,           # [>= num_outputs] out
    out_positions_ptr,           # [>= num_outputs] out
    out_rejected_ptr,            # [>= num_outputs] bool out
    out_masked_ptr,              # [>= num_outputs] bool out
    out_new_token_indices_ptr,   # [>= R * S] out
    out_hidden_state_mapping_ptr,  # [>= T_in] out (shift only)
    query_start_loc_ptr,         # [R + 1]
    query_end_loc_ptr,           # [R]
    num_input_tokens: tl.int64, num_outputs: tl.int64, padding_token_id: tl.int64,
    parallel_drafting_token_id: tl.int64, num_padding_slots: tl.int64,
    SHIFT: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr,
):
    pdl_prologue(PDL)
    req = tl.program_id(0).to(tl.int64)
    query_start = tl.load(query_start_loc_ptr + req).to(tl.int64)
    query_next = tl.load(query_start_loc_ptr + req + 1).to(tl.int64)
    query_end = tl.load(query_end_loc_ptr + req).to(tl.int64)
    next_token = tl.load(next_token_ids_ptr + req).to(tl.int64)
    first_position = tl.load(target_positions_ptr + query_start,
                             mask=(query_start >= 0) & (query_start < num_input_tokens),
                             other=0).to(tl.int64)
    # Shift drops each request's first input token, so it adds S - 1 outputs, not S.
    out_start = query_start + req * (num_padding_slots - 1 if SHIFT else num_padding_slots)
    num_valid = query_end - query_start + (0 if SHIFT else 1)
    total = num_valid + num_padding_slots + (query_next - query_end - 1)
    # j ranges over [0, total) and its output o = out_start + j over [0, num_outputs). The
    # bounds are spelled out here rather than taken from request_chunks: this form measured
    # 2.29 against 2.74 us per call in a CUDA graph at R = 1024 decodes on the H200 (1.72
    # against 1.45 at 8 x 2048 tokens), and decode batches are this op's common case.
    first = tl.maximum(-out_start, 0)
    last = tl.minimum(total, num_outputs - out_start)
    # This program's chunk of the request's first C * BLOCK outputs (as a loop of at most one
    # iteration, the form measured below), then the rest WIDE_CHUNK at a time (through
    # _expanded_outputs: only requests longer than their programs' first chunks get there,
    # which 8 x 2048 and decode batches never do).
    first += tl.program_id(1).to(tl.int64) * BLOCK
    step = tl.num_programs(1).to(tl.int64) * BLOCK
    for chunk_start in range(first, tl.minimum(last, first + BLOCK), step):
        # Written out rather than through _expanded_outputs with the mask j < last (the same
        # outputs): that compiled to 1.45 us per call at 8 x 2048 tokens on the H200 against
        # 1.21 for this form.
        j = chunk_start + tl.arange(0, BLOCK)
        out = out_start + j
        written = (j < total) & (out >= 0) & (out < num_outputs)
        token, position, is_masked, is_rejected = expanded_tokens(
            target_token_ids_ptr, j, written, query_start, num_valid, num_padding_slots,
            num_input_tokens, next_token, first_position, parallel_drafting_token_id,
            padding_token_id, SHIFT)
        tl.store(out_input_ids_ptr + out, token, mask=written)
        tl.store(out_positions_ptr + out, position, mask=written)
        tl.store(out_rejected_ptr + out, is_rejected, mask=written)
        tl.store(out_masked_ptr + out, is_masked, mask=written)
        store_expanded_indices(out_new_token_indices_ptr, out_hidden_state_mapping_ptr, j, out,
                               written, req, query_start, query_next, num_valid,
                               num_padding_slots, num_input_tokens, SHIFT)
    first, step = wide_chunks(first, step, BLOCK, WIDE_CHUNK)
    for chunk_start in range(first, last, step):
        wide = chunk_start + tl.arange(0, WIDE_CHUNK)
        _expanded_outputs(target_token_ids_ptr, out_input_ids_ptr, out_positions_ptr,
                          out_rejected_ptr, out_masked_ptr, out_new_token_indices_ptr,
                          out_hidden_state_mapping_ptr, wide, wide < last, req, out_start,
                          query_start, query_next, num_valid, next_token, first_position,
                          num_input_tokens, padding_token_id, parallel_drafting_token_id,
                          num_padding_slots, SHIFT)


@triton.jit
def _expanded_rows(target_positions_ptr, next_token_ids_ptr, query_start_loc_ptr,
                   query_end_loc_ptr, req, num_reqs, num_input_tokens, num_outputs,
                   num_padding_slots, SHIFT: tl.constexpr):
    """The row layout's requests ``req`` ([ROWS]; those past num_reqs write nothing): their
    values for _expanded_outputs, (out_start, query_start, query_next, num_valid, next_token,
    first_position), and the j each owns, [first, last) (as in the per-request kernel)."""
    is_request = req < num_reqs
    query_start = tl.load(query_start_loc_ptr + req, mask=is_request, other=0).to(tl.int64)
    query_next = tl.load(query_start_loc_ptr + req + 1, mask=is_request, other=0).to(tl.int64)
    query_end = tl.load(query_end_loc_ptr + req, mask=is_request, other=0).to(tl.int64)
    next_token = tl.load(next_token_ids_ptr + req, mask=is_request, other=0).to(tl.int64)
    first_position = tl.load(
        target_positions_ptr + query_start,
        mask=is_request & (query_start >= 0) & (query_start < num_input_tokens),
        other=0).to(tl.int64)
    out_start = query_start + req * (num_padding_slots - 1 if SHIFT else num_padding_slots)
    num_valid = query_end - query_start + (0 if SHIFT else 1)
    total = tl.where(is_request, num_valid + num_padding_slots + (query_next - query_end - 1), 0)
    return (out_start, query_start, query_next, num_valid, next_token, first_position,
            tl.maximum(-out_start, 0), tl.minimum(total, num_outputs - out_start))


@spec_kernel
def _copy_and_expand_eagle_inputs_rows_kernel(
    target_token_ids_ptr,        # [T_in]
    target_positions_ptr,        # [T_in]
    next_token_ids_ptr,          # [R]
    out_input_ids_ptr,           # [>= num_outputs] out
    out_positions_ptr,           # [>= num_outputs] out
    out_rejected_ptr,            # [>= num_outputs] bool out
    out_masked_ptr,              # [>= num_outputs] bool out
    out_new_token_indices_ptr,   # [>= R * S] out
    out_hidden_state_mapping_ptr,  # [>= T_in] out (shift only)
    query_start_loc_ptr,         # [R + 1]
    query_end_loc_ptr,           # [R]
    num_reqs: tl.int64, num_input_tokens: tl.int64, num_outputs: tl.int64,
    padding_token_id: tl.int64, parallel_drafting_token_id: tl.int64,
    num_padding_slots: tl.int64,
    SHIFT: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr, PDL: tl.constexpr,
):
    # Program p: its ROWS requests (row_group) as one [ROWS, COLS] tile of their first COLS outputs;
    # then, only if some request has more, the rest of every request's outputs laid end to end,
    # EXPAND_ROW_TAIL at a time, each lane with its request's values (flat_remainders), or a
    # lone request's LONE_TAIL at a time.
    pdl_prologue(PDL)
    req = row_group(ROWS)
    (out_start, query_start, query_next, num_valid, next_token, first_position, first,
     last) = _expanded_rows(target_positions_ptr, next_token_ids_ptr, query_start_loc_ptr,
                            query_end_loc_ptr, req, num_reqs, num_input_tokens, num_outputs,
                            num_padding_slots, SHIFT)
    j = tl.arange(0, COLS)[None, :]
    _expanded_outputs(target_token_ids_ptr, out_input_ids_ptr, out_positions_ptr,
                      out_rejected_ptr, out_masked_ptr, out_new_token_indices_ptr,
                      out_hidden_state_mapping_ptr, j, (j >= first[:, None]) & (j < last[:, None]),
                      req[:, None], out_start[:, None], query_start[:, None],
                      query_next[:, None], num_valid[:, None], next_token[:, None],
                      first_position[:, None], num_input_tokens, padding_token_id,
                      parallel_drafting_token_id, num_padding_slots, SHIFT)
    if tl.max(last) > COLS:
        # Loaded again, not carried over from the tile: see pick.
        (out_start, query_start, query_next, num_valid, next_token, first_position, first,
         last) = _expanded_rows(target_positions_ptr, next_token_ids_ptr, query_start_loc_ptr,
                                query_end_loc_ptr, req, num_reqs, num_input_tokens, num_outputs,
                                num_padding_slots, SHIFT)
        rest = tl.maximum(first, COLS)
        lone, long_row = lone_remainder(last - rest)
        if lone:
            row_last = row_value(last, long_row)
            for chunk_start in range(row_value(rest, long_row), row_last, LONE_TAIL):
                jj = chunk_start + tl.arange(0, LONE_TAIL).to(tl.int64)
                _expanded_outputs(
                    target_token_ids_ptr, out_input_ids_ptr, out_positions_ptr,
                    out_rejected_ptr, out_masked_ptr, out_new_token_indices_ptr,
                    out_hidden_state_mapping_ptr, jj, jj < row_last, row_value(req, long_row),
                    row_value(out_start, long_row), row_value(query_start, long_row),
                    row_value(query_next, long_row), row_value(num_valid, long_row),
                    row_value(next_token, long_row), row_value(first_position, long_row),
                    num_input_tokens, padding_token_id, parallel_drafting_token_id,
                    num_padding_slots, SHIFT)
        else:
            flat_start, flat_end, flat_total = flat_remainders(rest, last)
            for flat_first in range(0, flat_total, EXPAND_ROW_TAIL):
                f = flat_first + tl.arange(0, EXPAND_ROW_TAIL).to(tl.int64)
                in_row = flat_rows(f, flat_start, flat_end)
                _expanded_outputs(
                    target_token_ids_ptr, out_input_ids_ptr, out_positions_ptr,
                    out_rejected_ptr, out_masked_ptr, out_new_token_indices_ptr,
                    out_hidden_state_mapping_ptr, f + pick(in_row, rest - flat_start),
                    f < flat_total, pick(in_row, req), pick(in_row, out_start),
                    pick(in_row, query_start), pick(in_row, query_next),
                    pick(in_row, num_valid), pick(in_row, next_token),
                    pick(in_row, first_position), num_input_tokens, padding_token_id,
                    parallel_drafting_token_id, num_padding_slots, SHIFT)


@triton.jit
def _new_slots(block_table_ptr, new_positions_ptr, rejected_ptr, out_slot_mapping_ptr,
               block_table_row_stride, num_block_cols, max_model_len, req, entry, owned, kept,
               BLOCK_SIZE: tl.constexpr):
    """Slot mapping entries ``entry`` (where ``owned``) of request ``req``: the slot of the
    entry's position, or -1 where rejected, at or past max_model_len, or not ``kept``."""
    position = tl.load(new_positions_ptr + entry, mask=owned, other=0).to(tl.int64)
    rejected = tl.load(rejected_ptr + entry, mask=owned, other=1) != 0
    keep = owned & kept & ~rejected & (position < max_model_len)
    slot = slot_lookup(block_table_ptr, block_table_row_stride, num_block_cols, req,
                       tl.minimum(position, max_model_len - 1), keep, BLOCK_SIZE)
    tl.store(out_slot_mapping_ptr + entry, tl.where(keep, slot, -1), mask=owned)


@triton.jit
def _new_slot_rows(query_start_loc_ptr, req, num_reqs, num_entries, num_new_tokens):
    """Rows ``req`` (request r < R, or R: the entries past the last request, which get -1 so
    the result never holds uninitialized memory): (start, count, entries kept of count)."""
    is_request = req < num_reqs
    first_start = tl.load(query_start_loc_ptr).to(tl.int64)
    query_start = tl.load(query_start_loc_ptr + req, mask=req <= num_reqs, other=0).to(tl.int64)
    query_next = tl.load(query_start_loc_ptr + req + 1, mask=is_request, other=0).to(tl.int64)
    start = query_start - first_start + req * num_new_tokens
    count = tl.where(is_request, query_next - query_start + num_new_tokens, num_entries - start)
    return start, count, tl.where(is_request, count, 0)


@spec_kernel
def _compute_new_slot_mapping_kernel(
    block_table_ptr,             # [>= R, n_cols], row stride block_table_row_stride
    query_start_loc_ptr,         # [R + 1]
    new_positions_ptr,           # [T]
    rejected_ptr,                # [T] bool
    out_slot_mapping_ptr,        # [T] out
    num_reqs: tl.int64, num_entries: tl.int64, block_table_row_stride: tl.int64,
    num_block_cols: tl.int64, num_new_tokens: tl.int64, max_model_len: tl.int64,
    BLOCK_SIZE: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr,
):
    # Program (r, c), r <= R: chunks c, c + C, ... of row r. (Wider chunks past the first C,
    # as 1.3's, measured slower here: 20.2 against 11.7 us at 1024 requests with one
    # 2048-token request, scripts/mixed_batch.py.)
    pdl_prologue(PDL)
    req = tl.program_id(0).to(tl.int64)
    start, count, num_kept = _new_slot_rows(query_start_loc_ptr, req, num_reqs, num_entries,
                                            num_new_tokens)
    first, stop, step = request_chunks(start, count, num_entries, BLOCK)
    for chunk_start in range(first, stop, step):
        j = chunk_start + tl.arange(0, BLOCK)
        _new_slots(block_table_ptr, new_positions_ptr, rejected_ptr, out_slot_mapping_ptr,
                   block_table_row_stride, num_block_cols, max_model_len, req, start + j,
                   j < stop, j < num_kept, BLOCK_SIZE)


@triton.jit
def _new_slot_row_entries(query_start_loc_ptr, req, num_reqs, num_entries, num_new_tokens):
    """The row layout's rows ``req`` ([ROWS]; those past R write nothing): (start, first, stop,
    entries kept): row r writes entries start + j for j in [first, stop), in the buffer."""
    start, count, num_kept = _new_slot_rows(query_start_loc_ptr, req, num_reqs, num_entries,
                                            num_new_tokens)
    return (start, tl.maximum(-start, 0),
            tl.where(req <= num_reqs, tl.minimum(count, num_entries - start), 0), num_kept)


@spec_kernel
def _compute_new_slot_mapping_rows_kernel(
    block_table_ptr,             # [>= R, n_cols], row stride block_table_row_stride
    query_start_loc_ptr,         # [R + 1]
    new_positions_ptr,           # [T]
    rejected_ptr,                # [T] bool
    out_slot_mapping_ptr,        # [T] out
    num_reqs: tl.int64, num_entries: tl.int64, block_table_row_stride: tl.int64,
    num_block_cols: tl.int64, num_new_tokens: tl.int64, max_model_len: tl.int64,
    BLOCK_SIZE: tl.constexpr, ROWS: tl.constexpr, COLS: tl.constexpr, PDL: tl.constexpr,
):
    # Program p: its ROWS rows (row_group; r <= R, as above) as one [ROWS, COLS] tile of their first
    # COLS entries; then, only if some row is longer, the rest of every row's entries laid end to
    # end, ROW_TAIL at a time (flat_remainders), or a lone row's SLOT_LONE_TAIL at a time.
    pdl_prologue(PDL)
    req = row_group(ROWS)
    start, first, stop, num_kept = _new_slot_row_entries(query_start_loc_ptr, req, num_reqs,
                                                         num_entries, num_new_tokens)
    j = tl.arange(0, COLS)[None, :]
    _new_slots(block_table_ptr, new_positions_ptr, rejected_ptr, out_slot_mapping_ptr,
               block_table_row_stride, num_block_cols, max_model_len, req[:, None],
               start[:, None] + j, (j >= first[:, None]) & (j < stop[:, None]),
               j < num_kept[:, None], BLOCK_SIZE)
    if tl.max(stop) > COLS:
        # Loaded again, not carried over from the tile: see pick.
        start, first, stop, num_kept = _new_slot_row_entries(query_start_loc_ptr, req, num_reqs,
                                                             num_entries, num_new_tokens)
        rest = tl.maximum(first, COLS)
        lone, long_row = lone_remainder(stop - rest)
        if lone:
            row_stop = row_value(stop, long_row)
            row_start = row_value(start, long_row)
            row_kept = row_value(num_kept, long_row)
            for chunk_start in range(row_value(rest, long_row), row_stop, SLOT_LONE_TAIL):
                jj = chunk_start + tl.arange(0, SLOT_LONE_TAIL).to(tl.int64)
                _new_slots(block_table_ptr, new_positions_ptr, rejected_ptr,
                           out_slot_mapping_ptr, block_table_row_stride, num_block_cols,
                           max_model_len, row_value(req, long_row), row_start + jj,
                           jj < row_stop, jj < row_kept, BLOCK_SIZE)
        else:
            flat_start, flat_end, flat_total = flat_remainders(rest, stop)
            for flat_first in range(0, flat_total, ROW_TAIL):
                f = flat_first + tl.arange(0, ROW_TAIL).to(tl.int64)
                in_row = flat_rows(f, flat_start, flat_end)
                jj = f + pick(in_row, rest - flat_start)
                _new_slots(block_table_ptr, new_positions_ptr, rejected_ptr,
                           out_slot_mapping_ptr, block_table_row_stride, num_block_cols,
                           max_model_len, pick(in_row, req), pick(in_row, start) + jj,
                           f < flat_total, jj < pick(in_row, num_kept), BLOCK_SIZE)


_copy_and_expand_eagle_inputs = Launcher(_copy_and_expand_eagle_inputs_kernel,
                                         PER_REQUEST_WARPS)
_copy_and_expand_eagle_inputs_rows = Launcher(_copy_and_expand_eagle_inputs_rows_kernel,
                                              ROW_WARPS)
_compute_new_slot_mapping = Launcher(_compute_new_slot_mapping_kernel, PER_REQUEST_WARPS)
_compute_new_slot_mapping_rows = Launcher(_compute_new_slot_mapping_rows_kernel, ROW_WARPS)


def launch_copy_and_expand_eagle_inputs(
        target_token_ids, target_positions, next_token_ids, out_input_ids, out_positions,
        out_is_rejected_token_mask, out_is_masked_token_mask, out_new_token_indices,
        out_hidden_state_mapping, query_start_loc, query_end_loc, padding_token_id,
        parallel_drafting_token_id, num_padding_slots_per_request, shift_input_ids,
        num_outputs):
    num_reqs = next_token_ids.shape[0]
    cols = row_cols(num_outputs, num_reqs)
    if cols is not None:
        return _copy_and_expand_eagle_inputs_rows(
            cdiv(num_reqs, ROW_GROUP),
            (target_token_ids, target_positions, next_token_ids, out_input_ids, out_positions,
             out_is_rejected_token_mask, out_is_masked_token_mask, out_new_token_indices,
             out_hidden_state_mapping, query_start_loc, query_end_loc, num_reqs,
             target_token_ids.shape[0], num_outputs, padding_token_id,
             parallel_drafting_token_id, num_padding_slots_per_request, shift_input_ids,
             ROW_GROUP, cols))
    return _copy_and_expand_eagle_inputs(
        num_reqs,
        (target_token_ids, target_positions, next_token_ids, out_input_ids, out_positions,
         out_is_rejected_token_mask, out_is_masked_token_mask, out_new_token_indices,
         out_hidden_state_mapping, query_start_loc, query_end_loc, target_token_ids.shape[0],
         num_outputs, padding_token_id, parallel_drafting_token_id,
         num_padding_slots_per_request, shift_input_ids, PER_REQUEST_BLOCK),
        grid_y=num_chunks(num_outputs, num_reqs))


def launch_compute_new_slot_mapping(block_table, query_start_loc, new_positions,
                                    is_rejected_token_mask, out_slot_mapping, block_size,
                                    num_new_tokens, max_model_len):
    num_reqs = query_start_loc.shape[0] - 1
    num_entries = new_positions.shape[0]
    args = (block_table, query_start_loc, new_positions, is_rejected_token_mask,
            out_slot_mapping, num_reqs, num_entries, block_table.stride()[0],
            block_table.shape[1], num_new_tokens, max_model_len, block_size)
    cols = row_cols(num_entries, num_reqs)
    if cols is not None:
        return _compute_new_slot_mapping_rows(cdiv(num_reqs + 1, ROW_GROUP),
                                              (*args, ROW_GROUP, cols))
    return _compute_new_slot_mapping(num_reqs + 1, (*args, PER_REQUEST_BLOCK),
                                     grid_y=num_chunks(num_entries, num_reqs))
