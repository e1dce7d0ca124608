"""1.4 (docs/ops.md): DFlash first pass. Context tokens only become K/V; each request gets Q
queries.

The grid is (requests, chunks). Requests with many context tokens (C > 1 context programs
each) give the queries a program of their own, (r, C), so their chain of dependent loads
(query_start_loc, the last valid position, the block table) runs beside the context's: 1.18
against 1.68 us per call in a CUDA graph at 8 x 2048 tokens on the H200. Decode batches (one
context program per request) keep both in program (r, 0), context first: 1.87 us at 1024
decodes against 2.86 with a query program per request (the extra 1024 programs cost more than
the overlap wins). Program (r, c) writes context chunks c, c + C, ... of request r.

Batches of decode-sized requests (at most 8 or 16 context tokens on average, from shapes) take
the row layout instead (csrc_triton/_launch.py): ROW_GROUP requests per program, their context
and their queries as two tiles, then the context past the tile, of a group's one longer request
in a loop of its own, of several laid end to end in one loop.
"""

import triton
import triton.language as tl

from ._indexing import (
    flat_remainders,
    flat_rows,
    lone_remainder,
    pick,
    row_group,
    row_value,
    slot_lookup,
)
from ._launch import (
    LONE_TAIL,
    PER_REQUEST_BLOCK,
    PER_REQUEST_WARPS,
    ROW_GROUP,
    ROW_TAIL,
    ROW_WARPS,
    Launcher,
    cdiv,
    next_power_of_2,
    num_chunks,
    pdl_prologue,
    row_cols,
    spec_kernel,
)

DECODE_BLOCK = 128     # lanes per program without a query program (the layout measured above)
# Queries per tile at most. A request's Q queries are one tile of next_power_of_2(Q) lanes up to
# this; a larger Q takes tiles of this many in a loop (the per-request layout only), since a
# tile of Q lanes compiles slowly past a few thousand (51 s for Q = 8192 in the row layout's
# [8, Q] tile) and not at all past Triton's 2**20 elements.
MAX_BLOCK_Q = 64


def query_block(num_query):
    """(BLOCK_Q, MORE_QUERIES): the query tile's lanes, and whether a loop of further tiles
    follows it."""
    block = next_power_of_2(num_query)
    return min(block, MAX_BLOCK_Q), block > MAX_BLOCK_Q


@triton.jit
def context_slots(target_positions_ptr, block_table_ptr, block_table_row_stride, num_block_cols,
                  req, i, owned, BLOCK_SIZE: tl.constexpr):
    """Context tokens ``i`` (where ``owned``) of request ``req``: (position, slot), loads only."""
    position = tl.load(target_positions_ptr + i, mask=owned, other=0).to(tl.int64)
    slot = slot_lookup(block_table_ptr, block_table_row_stride, num_block_cols, req,
                       position, owned, BLOCK_SIZE)
    return position, slot


@triton.jit
def context_tokens(target_positions_ptr, out_context_positions_ptr, out_context_slot_ptr,
                   block_table_ptr, block_table_row_stride, num_block_cols, req, i, owned,
                   BLOCK_SIZE: tl.constexpr):
    """Context tokens ``i`` (where ``owned``) of request ``req``: their own positions, and
    slots in the request's blocks."""
    position, slot = context_slots(target_positions_ptr, block_table_ptr, block_table_row_stride,
                                   num_block_cols, req, i, owned, BLOCK_SIZE)
    tl.store(out_context_positions_ptr + i, position, mask=owned)
    tl.store(out_context_slot_ptr + i, slot, mask=owned)


@triton.jit
def query_slots(block_table_ptr, block_table_row_stride, num_block_cols, req, last_position,
                num_query_per_req, BLOCK_SIZE: tl.constexpr, BLOCK_Q: tl.constexpr, first=0):
    """Request req's query tokens, loads only: (q, is_query, out index, position, slot) for
    queries q in [first, first + BLOCK_Q) at the positions after last_position (none when
    num_query_per_req is 0). Per-request values may be [ROWS, 1] columns (the row layout):
    every query of every row at once."""
    q = first + tl.arange(0, BLOCK_Q)
    is_query = q < num_query_per_req
    out = req * num_query_per_req + q
    position = last_position + 1 + q
    slot = slot_lookup(block_table_ptr, block_table_row_stride, num_block_cols, req,
                       position, is_query, BLOCK_SIZE)
    return q, is_query, out, position, slot


@triton.jit
def store_queries(out_input_ids_ptr, out_query_positions_ptr, out_query_slot_ptr,
                  out_token_indices_ptr, req, next_token, parallel_drafting_token_id,
                  num_speculative_tokens, q, is_query, out, position, slot):
    """``query_slots``' queries written: [next token, mask, mask, ...], their positions and
    slots, and where the K drafted ones landed."""
    tl.store(out_input_ids_ptr + out, tl.where(q == 0, next_token, parallel_drafting_token_id),
             mask=is_query)
    tl.store(out_query_positions_ptr + out, position, mask=is_query)
    tl.store(out_query_slot_ptr + out, slot, mask=is_query)
    tl.store(out_token_indices_ptr + req * num_speculative_tokens + q - 1, out,
             mask=is_query & (q >= 1))


@triton.jit
def write_queries(out_input_ids_ptr, out_query_positions_ptr, out_query_slot_ptr,
                  out_token_indices_ptr, block_table_ptr, block_table_row_stride, num_block_cols,
                  req, next_token, last_position, parallel_drafting_token_id, num_query_per_req,
                  num_speculative_tokens, BLOCK_SIZE: tl.constexpr, BLOCK_Q: tl.constexpr,
                  MORE_QUERIES: tl.constexpr):
    """Request req's query tokens r * Q + q: [next token, mask, mask, ...] at the positions
    after last_position (none when num_query_per_req is 0)."""
    q, is_query, out, position, slot = query_slots(
        block_table_ptr, block_table_row_stride, num_block_cols, req, last_position,
        num_query_per_req, BLOCK_SIZE, BLOCK_Q)
    store_queries(out_input_ids_ptr, out_query_positions_ptr, out_query_slot_ptr,
                  out_token_indices_ptr, req, next_token, parallel_drafting_token_id,
                  num_speculative_tokens, q, is_query, out, position, slot)
    if MORE_QUERIES:
        more_queries(out_input_ids_ptr, out_query_positions_ptr, out_query_slot_ptr,
                     out_token_indices_ptr, block_table_ptr, block_table_row_stride,
                     num_block_cols, req, next_token, last_position, parallel_drafting_token_id,
                     num_query_per_req, num_speculative_tokens, BLOCK_SIZE, BLOCK_Q)


@triton.jit
def more_queries(out_input_ids_ptr, out_query_positions_ptr, out_query_slot_ptr,
                 out_token_indices_ptr, block_table_ptr, block_table_row_stride, num_block_cols,
                 req, next_token, last_position, parallel_drafting_token_id, num_query_per_req,
                 num_speculative_tokens, BLOCK_SIZE: tl.constexpr, BLOCK_Q: tl.constexpr):
    """Request req's queries past its first BLOCK_Q (query_block's MORE_QUERIES), a tile at a
    time."""
    for first in range(BLOCK_Q, num_query_per_req, BLOCK_Q):
        q, is_query, out, position, slot = query_slots(
            block_table_ptr, block_table_row_stride, num_block_cols, req, last_position,
            num_query_per_req, BLOCK_SIZE, BLOCK_Q, first)
        store_queries(out_input_ids_ptr, out_query_positions_ptr, out_query_slot_ptr,
                      out_token_indices_ptr, req, next_token, parallel_drafting_token_id,
                      num_speculative_tokens, q, is_query, out, position, slot)


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
    num_context: tl.int64, block_table_row_stride: tl.int64, num_block_cols: tl.int64,
    parallel_drafting_token_id: tl.int64, num_query_per_req: tl.int64,
    num_speculative_tokens: tl.int64,
    HAS_REJECTED: tl.constexpr, QUERY_PROGRAM: tl.constexpr, BLOCK_SIZE: tl.constexpr,
    BLOCK_Q: tl.constexpr, MORE_QUERIES: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr,
):
    pdl_prologue(PDL)
    req = tl.program_id(0).to(tl.int64)
    chunk = tl.program_id(1).to(tl.int64)
    context_start = tl.load(query_start_loc_ptr + req).to(tl.int64)
    context_end = tl.load(query_start_loc_ptr + req + 1).to(tl.int64)
    # QUERY_PROGRAM: the last program column writes the queries, the others the context.
    num_context_programs = tl.num_programs(1).to(tl.int64) - (1 if QUERY_PROGRAM else 0)
    if chunk < num_context_programs:
        # Context chunks chunk, chunk + C, ..., bounded by the buffer whatever query_start_loc
        # holds. (Wider chunks past the first C, as the round kernels', measured slower here:
        # 11.0 against 8.1 us at 1024 requests with four 2048-token ones,
        # scripts/mixed_batch.py.)
        first = tl.maximum(-context_start, 0)
        stop = tl.minimum(context_end - context_start, num_context - context_start)
        for chunk_start in range(first + chunk * BLOCK, stop, num_context_programs * BLOCK):
            j = chunk_start + tl.arange(0, BLOCK)
            context_tokens(target_positions_ptr, out_context_positions_ptr, out_context_slot_ptr,
                           block_table_ptr, block_table_row_stride, num_block_cols, req,
                           context_start + j, j < stop, BLOCK_SIZE)
    if chunk == (num_context_programs if QUERY_PROGRAM else 0):
        valid_end = context_end
        if HAS_REJECTED:
            valid_end -= tl.load(num_rejected_ptr + req).to(tl.int64)
        last_position = tl.load(target_positions_ptr + valid_end - 1,
                                mask=(valid_end >= 1) & (valid_end <= num_context),
                                other=0).to(tl.int64)
        next_token = tl.load(next_token_ids_ptr + req).to(tl.int64)
        write_queries(out_input_ids_ptr, out_query_positions_ptr, out_query_slot_ptr,
                      out_token_indices_ptr, block_table_ptr, block_table_row_stride,
                      num_block_cols, req, next_token, last_position,
                      parallel_drafting_token_id, num_query_per_req, num_speculative_tokens,
                      BLOCK_SIZE, BLOCK_Q, MORE_QUERIES)


@triton.jit
def _context_rows(query_start_loc_ptr, req, num_reqs, num_context):
    """The row layout's requests ``req`` ([ROWS]; those past num_reqs write nothing):
    (context_start, context_end, first, stop): request r writes context tokens
    context_start + j for j in [first, stop), in the buffer."""
    is_request = req < num_reqs
    context_start = tl.load(query_start_loc_ptr + req, mask=is_request, other=0).to(tl.int64)
    context_end = tl.load(query_start_loc_ptr + req + 1, mask=is_request, other=0).to(tl.int64)
    stop = tl.where(is_request,
                    tl.minimum(context_end - context_start, num_context - context_start), 0)
    return context_start, context_end, tl.maximum(-context_start, 0), stop


@spec_kernel
def _copy_and_expand_dflash_inputs_rows_kernel(
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
    num_block_cols: tl.int64, parallel_drafting_token_id: tl.int64,
    num_query_per_req: tl.int64, num_speculative_tokens: tl.int64,
    HAS_REJECTED: tl.constexpr, BLOCK_SIZE: tl.constexpr, BLOCK_Q: tl.constexpr,
    ROWS: tl.constexpr, COLS: tl.constexpr, PDL: tl.constexpr,
):
    # Program p: its ROWS requests (row_group) as one [ROWS, COLS] tile of their first COLS context
    # tokens and one [ROWS, BLOCK_Q] tile of their queries; then, only if some request has
    # more context, the rest of every request's laid end to end, ROW_TAIL at a time
    # (flat_remainders), or a lone request's LONE_TAIL at a time.
    pdl_prologue(PDL)
    req = row_group(ROWS)
    is_request = req < num_reqs
    context_start, context_end, first, stop = _context_rows(query_start_loc_ptr, req, num_reqs,
                                                            num_context)
    j = tl.arange(0, COLS)[None, :]
    i = context_start[:, None] + j
    owned = (j >= first[:, None]) & (j < stop[:, None])
    # Every load of the tiles before any store: query_start_loc (and the rejected counts and
    # next tokens), then the positions, then the block table, three round trips.
    valid_end = context_end
    if HAS_REJECTED:
        valid_end -= tl.load(num_rejected_ptr + req, mask=is_request, other=0).to(tl.int64)
    next_token = tl.load(next_token_ids_ptr + req, mask=is_request, other=0).to(tl.int64)
    last_position = tl.load(target_positions_ptr + valid_end - 1,
                            mask=is_request & (valid_end >= 1) & (valid_end <= num_context),
                            other=0).to(tl.int64)
    position, slot = context_slots(target_positions_ptr, block_table_ptr, block_table_row_stride,
                                   num_block_cols, req[:, None], i, owned, BLOCK_SIZE)
    q, is_query, out, query_position, query_slot = query_slots(
        block_table_ptr, block_table_row_stride, num_block_cols, req[:, None],
        last_position[:, None], tl.where(is_request, num_query_per_req, 0)[:, None],
        BLOCK_SIZE, BLOCK_Q)
    tl.store(out_context_positions_ptr + i, position, mask=owned)
    tl.store(out_context_slot_ptr + i, slot, mask=owned)
    store_queries(out_input_ids_ptr, out_query_positions_ptr, out_query_slot_ptr,
                  out_token_indices_ptr, req[:, None], next_token[:, None],
                  parallel_drafting_token_id, num_speculative_tokens, q, is_query, out,
                  query_position, query_slot)
    if tl.max(stop) > COLS:
        # Loaded again, not carried over from the tile: see pick.
        context_start, _, first, stop = _context_rows(query_start_loc_ptr, req, num_reqs,
                                                      num_context)
        rest = tl.maximum(first, COLS)
        lone, long_row = lone_remainder(stop - rest)
        if lone:
            row_stop = row_value(stop, long_row)
            row_start = row_value(context_start, long_row)
            for chunk_start in range(row_value(rest, long_row), row_stop, LONE_TAIL):
                jj = chunk_start + tl.arange(0, LONE_TAIL).to(tl.int64)
                context_tokens(target_positions_ptr, out_context_positions_ptr,
                               out_context_slot_ptr, block_table_ptr, block_table_row_stride,
                               num_block_cols, row_value(req, long_row), row_start + jj,
                               jj < row_stop, BLOCK_SIZE)
        else:
            flat_start, flat_end, flat_total = flat_remainders(rest, stop)
            for flat_first in range(0, flat_total, ROW_TAIL):
                f = flat_first + tl.arange(0, ROW_TAIL).to(tl.int64)
                in_row = flat_rows(f, flat_start, flat_end)
                context_tokens(target_positions_ptr, out_context_positions_ptr,
                               out_context_slot_ptr, block_table_ptr, block_table_row_stride,
                               num_block_cols, pick(in_row, req),
                               f + pick(in_row, context_start + rest - flat_start),
                               f < flat_total, BLOCK_SIZE)


_copy_and_expand_dflash_inputs = Launcher(_copy_and_expand_dflash_inputs_kernel,
                                          PER_REQUEST_WARPS)
_copy_and_expand_dflash_inputs_rows = Launcher(_copy_and_expand_dflash_inputs_rows_kernel,
                                               ROW_WARPS)


def launch_copy_and_expand_dflash_inputs(
        next_token_ids, target_positions, out_input_ids, out_context_positions,
        out_query_positions, out_context_slot_mapping, out_query_slot_mapping,
        out_token_indices, block_table, query_start_loc, num_rejected_tokens,
        parallel_drafting_token_id, block_size, num_query_per_req, num_speculative_tokens):
    num_reqs = query_start_loc.shape[0] - 1
    num_context = target_positions.shape[0]
    has_rejected = num_rejected_tokens is not None
    rejected = num_rejected_tokens if has_rejected else query_start_loc
    block_q, more = query_block(num_query_per_req)
    cols = None if more else row_cols(num_context, num_reqs)
    if cols is not None:
        return _copy_and_expand_dflash_inputs_rows(
            cdiv(num_reqs, ROW_GROUP),
            (next_token_ids, target_positions, out_input_ids, out_context_positions,
             out_query_positions, out_context_slot_mapping, out_query_slot_mapping,
             out_token_indices, block_table, query_start_loc, rejected, num_reqs, num_context,
             block_table.stride()[0], block_table.shape[1], parallel_drafting_token_id,
             num_query_per_req, num_speculative_tokens, has_rejected, block_size, block_q,
             ROW_GROUP, cols))
    context_programs = num_chunks(num_context, num_reqs)
    query_program = context_programs > 1
    return _copy_and_expand_dflash_inputs(
        num_reqs,
        (next_token_ids, target_positions, out_input_ids, out_context_positions,
         out_query_positions, out_context_slot_mapping, out_query_slot_mapping,
         out_token_indices, block_table, query_start_loc, rejected, num_context,
         block_table.stride()[0], block_table.shape[1], parallel_drafting_token_id,
         num_query_per_req, num_speculative_tokens, has_rejected, query_program, block_size,
         block_q, more, PER_REQUEST_BLOCK if query_program else DECODE_BLOCK),
        grid_y=context_programs + query_program)
