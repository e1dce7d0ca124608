"""One launch per draft round (docs/round_ops.md): 6.1 chain EAGLE / MTP, 6.2 parallel
drafting, PARD and draft models, 6.3 DFlash.

No output needs a value another request produced, so each round is one grid with no barrier.
Every program that needs a request's 1.1 and 1.2 state recomputes it in registers (one pass
over the request's W sampled columns), then issues every load its first chunk of tokens needs
before its first store, so its chain of dependent global reads is three round trips: the
inputs, the positions its slots start from, the block table (all draft steps' rows at once, as
lanes of one vector). Further chunks of a long request load after that.

Program (r, c) of a request's C programs writes chunk c of its first-pass tokens, BLOCK
of them, and past the first C * BLOCK its chunks c, c + C, ... of WIDE_CHUNK (a long request
in a decode-sized batch); program (r, 0) alone writes the per-request outputs and the
request's draft steps.

The grid has at least one program, so an empty batch still writes its padding entries: those
are constants, dealt out chunk by chunk over all programs, each entry stored by exactly one.
"""

import triton
import triton.language as tl

from ._indexing import request_chunks, slot_lookup, wide_chunks
from ._launch import (
    PER_REQUEST_BLOCK,
    PER_REQUEST_WARPS,
    WIDE_CHUNK,
    Launcher,
    next_power_of_2,
    num_chunks,
    pdl_prologue,
    spec_kernel,
)
from .dflash import context_slots, context_tokens, query_slots, store_queries
from .draft_step import _advance
from .expand import expanded_tokens, store_expanded_indices
from .padded_batch import _next_token_and_count, _sample_index_and_rejected

# 6.2's kernel runs with 2 warps per program, 6.1's and 6.3's with PER_REQUEST_WARPS (1). At
# 1024 requests, K = 3 (scripts/mixed_batch.py --round-warps 1 / 2 / 4), 6.2 took 2.47 us
# on pure decodes against 2.69 with 1 warp, 2.65-3.05 against 3.55-3.63 with 256-token
# chunked prefills among them and 7.9-8.2 against 15.0-15.3 with 2048-token ones (the draft
# model's use of it: 2.69 / 2.96-3.18 / 9.0-9.3 against 2.73 / 3.36-3.53 / 15.1-15.3). A
# wide chunk (WIDE_CHUNK lanes) then holds 4 items per thread, not 8: see
# expand.SLOT_LONE_TAIL. 6.1 and 6.3 were slower on pure decodes with 2 warps (3.25 against
# 2.53, 2.34 against 1.89 us), 4 warps slower on pure decodes for all three.
PARALLEL_ROUND_WARPS = 2

# Draft steps computed side by side, as lanes of one vector (a round with more steps takes them
# this many at a time).
STEP_LANES = tl.constexpr(16)
# The round ops have no row layout. Measured in a CUDA graph on the H200 at K = 1, 3, 7
# (scripts/sweep_row_layout.py, benchmarks/results/row_layout_rounds.txt): 6.1 in rows lost at
# nearly every size; 6.2 and 6.3 in rows of 8 consecutive requests won at 1024 requests
# (2.58-3.87 us against 2.99-4.45, 1.74-2.43 against 2.18-2.62) but not at 512 or fewer, and in
# rows of strided requests (which keep adjacent long requests apart, as 1.3, 1.4 and 1.7 do)
# won or lost by up to 14% at 1024 requests, case by case.


@triton.jit
def _request_state(sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr, cu_num_draft_ptr,
                   query_start_loc_ptr, req, is_request, vocab_size, NUM_COLS: tl.constexpr):
    """6.0's state of request req, int64 scalars: (next, valid, last, rejected), where last is
    1.2's index to sample (1.2 reading 1.1's count in registers)."""
    next_token, count = _next_token_and_count(sampled_ptr, sampled_row_stride, discard_ptr,
                                              backup_ptr, req, is_request, vocab_size, NUM_COLS)
    last, rejected = _sample_index_and_rejected(cu_num_draft_ptr, query_start_loc_ptr, req,
                                                is_request, count)
    return next_token, count, last, rejected


@triton.jit
def _fill_padding(ptr, row_stride, num_rows, start, stop, BLOCK: tl.constexpr):
    """-1 at columns [start, stop) of rows [0, num_rows): CUDA-graph padding, in chunks dealt
    out over every program of the grid."""
    program = tl.program_id(0).to(tl.int64) * tl.num_programs(1) + tl.program_id(1)
    num_programs = tl.num_programs(0).to(tl.int64) * tl.num_programs(1)
    for chunk_start in range(start + program * BLOCK, stop, num_programs * BLOCK):
        column = chunk_start + tl.arange(0, BLOCK)
        for row in range(num_rows):
            tl.store(ptr + row * row_stride + column, tl.full((BLOCK,), -1, tl.int64),
                     mask=column < stop)


@triton.jit
def _step_values(block_table_ptr, block_table_row_stride, num_block_cols, req, position,
                 seq_len, max_model_len, first_step, num_steps, valid, BLOCK_SIZE: tl.constexpr,
                 STEPS: tl.constexpr):
    """5.2's steps first_step ... first_step + STEPS - 1 of row req, loads only: (step, live,
    position, seq_len, slot), live where step < num_steps and ``valid``. Step s is 1.5's step
    applied s + 1 times to (position, seq_len) in registers, so all the steps' block-table
    reads are one round trip."""
    step = first_step + tl.arange(0, STEPS).to(tl.int64)
    live = step < tl.where(valid, num_steps, 0)
    positions = tl.zeros((STEPS,), tl.int64) + position
    seq_lens = tl.zeros((STEPS,), tl.int64) + seq_len
    over = tl.zeros_like(positions) != 0
    for i in range(tl.minimum(num_steps, first_step + STEPS)):
        advanced, advanced_over, advanced_seq_len = _advance(positions, seq_lens, max_model_len)
        take = step >= i
        positions = tl.where(take, advanced, positions)
        over = tl.where(take, advanced_over, over)
        seq_lens = tl.where(take, advanced_seq_len, seq_lens)
    slot = slot_lookup(block_table_ptr, block_table_row_stride, num_block_cols, req, positions,
                       live & ~over, BLOCK_SIZE)
    return step, live, positions, seq_lens, tl.where(over, -1, slot)


@triton.jit
def _store_steps(out_positions_ptr, out_positions_row_stride, out_slot_mapping_ptr,
                 out_slot_mapping_row_stride, out_seq_lens_ptr, out_seq_lens_row_stride, req,
                 step, live, position, seq_len, slot):
    """Column req of 5.2's step outs at rows ``step`` (where ``live``)."""
    tl.store(out_positions_ptr + step * out_positions_row_stride + req, position, mask=live)
    tl.store(out_seq_lens_ptr + step * out_seq_lens_row_stride + req, seq_len, mask=live)
    tl.store(out_slot_mapping_ptr + step * out_slot_mapping_row_stride + req, slot, mask=live)


@triton.jit
def _draft_steps(block_table_ptr, block_table_row_stride, num_block_cols, out_positions_ptr,
                 out_positions_row_stride, out_slot_mapping_ptr, out_slot_mapping_row_stride,
                 out_seq_lens_ptr, out_seq_lens_row_stride, req, position, seq_len,
                 max_model_len, num_steps, valid, values, BLOCK_SIZE: tl.constexpr,
                 STEPS: tl.constexpr):
    """Column req of 5.2's step outs (where ``valid``): num_steps successive 1.5 steps from
    (position, seq_len). ``values`` are the first STEPS steps' (``_step_values``, read before
    the first pass's stores); later steps, if any, are computed here."""
    step, live, step_position, step_seq_len, slot = values
    _store_steps(out_positions_ptr, out_positions_row_stride, out_slot_mapping_ptr,
                 out_slot_mapping_row_stride, out_seq_lens_ptr, out_seq_lens_row_stride, req,
                 step, live, step_position, step_seq_len, slot)
    for first_step in range(STEPS, num_steps, STEPS):
        step, live, step_position, step_seq_len, slot = _step_values(
            block_table_ptr, block_table_row_stride, num_block_cols, req, position, seq_len,
            max_model_len, first_step, num_steps, valid, BLOCK_SIZE, STEPS)
        _store_steps(out_positions_ptr, out_positions_row_stride, out_slot_mapping_ptr,
                     out_slot_mapping_row_stride, out_seq_lens_ptr, out_seq_lens_row_stride,
                     req, step, live, step_position, step_seq_len, slot)


@triton.jit
def _eagle_first_pass(target_token_ids_ptr, target_positions_ptr, target_slot_mapping_ptr,
                      out_input_ids_ptr, out_positions_ptr, out_slot_mapping_ptr, i, owned,
                      last, next_token, num_tokens):
    """6.1's first-pass tokens i (where ``owned``): the target batch one token to the left,
    the next token at the request's last accepted index."""
    has_successor = i + 1 < num_tokens
    successor = tl.load(target_token_ids_ptr + i + 1, mask=owned & has_successor, other=0)
    position = tl.load(target_positions_ptr + i, mask=owned)
    slot = tl.load(target_slot_mapping_ptr + i, mask=owned)
    is_last = i == last
    tl.store(out_input_ids_ptr + i, tl.where(is_last, next_token, successor.to(tl.int64)),
             mask=owned & (is_last | has_successor))
    tl.store(out_positions_ptr + i, position, mask=owned)
    tl.store(out_slot_mapping_ptr + i, slot, mask=owned)


@triton.jit
def _parallel_first_pass(target_token_ids_ptr, block_table_ptr, block_table_row_stride,
                         num_block_cols, out_input_ids_ptr, out_positions_ptr, out_masked_ptr,
                         out_slot_mapping_ptr, out_new_token_indices_ptr,
                         out_hidden_state_mapping_ptr, j, owned, req, out_start, query_start,
                         query_next, num_valid, next_token, first_position, num_tokens,
                         padding_token_id, parallel_drafting_token_id, num_padding_slots,
                         max_model_len, SHIFT: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """6.2's first-pass entries out_start + j of request req (where ``owned``): 1.3's layout
    with the last accepted index as the query end, and 1.7's slot of every entry."""
    out = out_start + j
    token, position, is_masked, is_rejected = expanded_tokens(
        target_token_ids_ptr, j, owned, query_start, num_valid, num_padding_slots, num_tokens,
        next_token, first_position, parallel_drafting_token_id, padding_token_id, SHIFT)
    keep = ~is_rejected & (position < max_model_len)
    slot = slot_lookup(block_table_ptr, block_table_row_stride, num_block_cols, req,
                       tl.minimum(position, max_model_len - 1), owned & keep, BLOCK_SIZE)
    tl.store(out_input_ids_ptr + out, token, mask=owned)
    tl.store(out_positions_ptr + out, position, mask=owned)
    tl.store(out_masked_ptr + out, is_masked, mask=owned)
    tl.store(out_slot_mapping_ptr + out, tl.where(keep, slot, -1), mask=owned)
    store_expanded_indices(out_new_token_indices_ptr, out_hidden_state_mapping_ptr, j, out,
                           owned, req, query_start, query_next, num_valid, num_padding_slots,
                           num_tokens, SHIFT)


@spec_kernel
def _prepare_eagle_round_kernel(
    sampled_ptr,                 # [R, W], row stride sampled_row_stride
    discard_ptr,                 # [R] bool
    backup_ptr,                  # [R]
    cu_num_draft_ptr,            # [R] inclusive cumsum
    query_start_loc_ptr,         # [R + 1]
    target_token_ids_ptr,        # [T]
    target_positions_ptr,        # [T]
    target_slot_mapping_ptr,     # [T]
    block_table_ptr,             # [>= R, n_cols], row stride block_table_row_stride
    seq_lens_ptr,                # [>= R]
    next_token_ptr,              # [>= R] out
    valid_count_ptr,             # [>= R] out
    token_indices_ptr,           # [>= R] out
    out_input_ids_ptr,           # [>= T] out
    out_positions_ptr,           # [>= T] out
    out_slot_mapping_ptr,        # [>= num_input_tokens] out
    out_step_positions_ptr,      # [>= num_steps, >= R] out, row stride step_positions_stride
    out_step_slot_mapping_ptr,   # [>= num_steps, >= input_batch_size] out
    out_step_seq_lens_ptr,       # [>= num_steps, >= R] out, row stride step_seq_lens_stride
    num_reqs: tl.int64, num_tokens: tl.int64, num_input_tokens: tl.int64,
    input_batch_size: tl.int64, sampled_row_stride: tl.int64,
    block_table_row_stride: tl.int64, num_block_cols: tl.int64, vocab_size: tl.int64,
    max_model_len: tl.int64, num_steps: tl.int64, step_positions_stride: tl.int64,
    step_slot_mapping_stride: tl.int64, step_seq_lens_stride: tl.int64,
    NUM_COLS: tl.constexpr, BLOCK_SIZE: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr,
):
    pdl_prologue(PDL)
    req = tl.program_id(0).to(tl.int64)
    is_request = req < num_reqs
    head = is_request & (tl.program_id(1).to(tl.int64) == 0)
    next_token, count, last, rejected = _request_state(
        sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr, cu_num_draft_ptr,
        query_start_loc_ptr, req, is_request, vocab_size, NUM_COLS)
    query_start = tl.load(query_start_loc_ptr + req).to(tl.int64)
    query_next = tl.load(query_start_loc_ptr + req + 1, mask=is_request, other=0).to(tl.int64)
    seq_len = tl.load(seq_lens_ptr + req, mask=head, other=0).to(tl.int64) - rejected
    # The draft steps start at the last accepted token. A discarded row with drafts may point
    # in front of the batch: read as position 0.
    position = tl.load(target_positions_ptr + last, mask=head & (last >= 0) & (last < num_tokens),
                       other=0).to(tl.int64)
    steps = _step_values(block_table_ptr, block_table_row_stride, num_block_cols, req, position,
                         seq_len, max_model_len, 0, num_steps, head, BLOCK_SIZE, STEP_LANES)

    first, stop, step = request_chunks(query_start,
                                       tl.where(is_request, query_next - query_start, 0),
                                       num_tokens, BLOCK)
    j = first + tl.arange(0, BLOCK)
    _eagle_first_pass(target_token_ids_ptr, target_positions_ptr, target_slot_mapping_ptr,
                      out_input_ids_ptr, out_positions_ptr, out_slot_mapping_ptr,
                      query_start + j, j < stop, last, next_token, num_tokens)
    first, step = wide_chunks(first, step, BLOCK, WIDE_CHUNK)
    for chunk_start in range(first, stop, step):
        wide = chunk_start + tl.arange(0, WIDE_CHUNK)
        _eagle_first_pass(target_token_ids_ptr, target_positions_ptr, target_slot_mapping_ptr,
                          out_input_ids_ptr, out_positions_ptr, out_slot_mapping_ptr,
                          query_start + wide, wide < stop, last, next_token, num_tokens)
    _fill_padding(out_slot_mapping_ptr, 0, 1, num_tokens, num_input_tokens, BLOCK)
    _fill_padding(out_step_slot_mapping_ptr, step_slot_mapping_stride, num_steps, num_reqs,
                  input_batch_size, BLOCK)

    tl.store(next_token_ptr + req, next_token, mask=head)
    tl.store(valid_count_ptr + req, count, mask=head)
    tl.store(token_indices_ptr + req, last, mask=head)
    _draft_steps(block_table_ptr, block_table_row_stride, num_block_cols,
                 out_step_positions_ptr, step_positions_stride, out_step_slot_mapping_ptr,
                 step_slot_mapping_stride, out_step_seq_lens_ptr, step_seq_lens_stride, req,
                 position, seq_len, max_model_len, num_steps, head, steps, BLOCK_SIZE,
                 STEP_LANES)


@spec_kernel
def _prepare_parallel_round_kernel(
    sampled_ptr,                 # [R, W], row stride sampled_row_stride
    discard_ptr,                 # [R] bool
    backup_ptr,                  # [R]
    cu_num_draft_ptr,            # [R] inclusive cumsum
    query_start_loc_ptr,         # [R + 1]
    target_token_ids_ptr,        # [T]
    target_positions_ptr,        # [T]
    block_table_ptr,             # [>= R, n_cols], row stride block_table_row_stride
    seq_lens_ptr,                # [>= R]
    next_token_ptr,              # [>= R] out
    valid_count_ptr,             # [>= R] out
    out_input_ids_ptr,           # [>= F] out
    out_positions_ptr,           # [>= F] out
    out_masked_ptr,              # [>= F] bool out
    out_new_token_indices_ptr,   # [>= R * S] out
    out_hidden_state_mapping_ptr,  # [>= T] out (shift only)
    out_slot_mapping_ptr,        # [>= num_input_tokens] out
    out_query_start_loc_ptr,     # [>= R + 1] out
    out_seq_lens_ptr,            # [>= R] out
    out_step_positions_ptr,      # [>= num_steps, >= R] out, row stride step_positions_stride
    out_step_slot_mapping_ptr,   # [>= num_steps, >= input_batch_size] out
    out_step_seq_lens_ptr,       # [>= num_steps, >= R] out, row stride step_seq_lens_stride
    num_reqs: tl.int64, num_tokens: tl.int64, num_first_pass: tl.int64,
    num_input_tokens: tl.int64, input_batch_size: tl.int64, sampled_row_stride: tl.int64,
    block_table_row_stride: tl.int64, num_block_cols: tl.int64, vocab_size: tl.int64,
    padding_token_id: tl.int64, parallel_drafting_token_id: tl.int64,
    num_padding_slots: tl.int64, max_model_len: tl.int64, num_steps: tl.int64,
    step_positions_stride: tl.int64, step_slot_mapping_stride: tl.int64,
    step_seq_lens_stride: tl.int64,
    NUM_COLS: tl.constexpr, SHIFT: tl.constexpr, BLOCK_SIZE: tl.constexpr,
    BLOCK: tl.constexpr, PDL: tl.constexpr,
):
    pdl_prologue(PDL)
    req = tl.program_id(0).to(tl.int64)
    is_request = req < num_reqs
    head = is_request & (tl.program_id(1).to(tl.int64) == 0)
    next_token, count, last, rejected = _request_state(
        sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr, cu_num_draft_ptr,
        query_start_loc_ptr, req, is_request, vocab_size, NUM_COLS)
    query_start = tl.load(query_start_loc_ptr + req).to(tl.int64)
    query_next = tl.load(query_start_loc_ptr + req + 1, mask=is_request, other=0).to(tl.int64)
    # N: shift drops each request's first input token, so it adds S - 1 tokens, not S.
    num_new = num_padding_slots - 1 if SHIFT else num_padding_slots
    seq_len = tl.load(seq_lens_ptr + req, mask=head, other=0).to(tl.int64) + num_new
    is_last_row = (req == tl.num_programs(0) - 1) & (tl.program_id(1) == 0)
    batch_end = tl.load(query_start_loc_ptr + num_reqs, mask=is_last_row, other=0).to(tl.int64)
    first_position = tl.load(target_positions_ptr + query_start,
                             mask=is_request & (query_start >= 0) & (query_start < num_tokens),
                             other=0).to(tl.int64)
    # Steps start at the bonus token, after the last - qsl[r] + 1 accepted inputs.
    step_position = first_position + last - query_start + 1
    steps = _step_values(block_table_ptr, block_table_row_stride, num_block_cols, req,
                         step_position, seq_len - rejected, max_model_len, 0, num_steps, head,
                         BLOCK_SIZE, STEP_LANES)

    out_start = query_start + req * num_new
    num_valid = last - query_start + (0 if SHIFT else 1)
    total = tl.where(is_request, query_next - query_start + num_new, 0)
    first, stop, step = request_chunks(out_start, total, num_first_pass, BLOCK)
    j = first + tl.arange(0, BLOCK)
    _parallel_first_pass(
        target_token_ids_ptr, block_table_ptr, block_table_row_stride, num_block_cols,
        out_input_ids_ptr, out_positions_ptr, out_masked_ptr, out_slot_mapping_ptr,
        out_new_token_indices_ptr, out_hidden_state_mapping_ptr, j, j < stop, req, out_start,
        query_start, query_next, num_valid, next_token, first_position, num_tokens,
        padding_token_id, parallel_drafting_token_id, num_padding_slots, max_model_len, SHIFT,
        BLOCK_SIZE)
    first, step = wide_chunks(first, step, BLOCK, WIDE_CHUNK)
    for chunk_start in range(first, stop, step):
        wide = chunk_start + tl.arange(0, WIDE_CHUNK)
        _parallel_first_pass(
            target_token_ids_ptr, block_table_ptr, block_table_row_stride, num_block_cols,
            out_input_ids_ptr, out_positions_ptr, out_masked_ptr, out_slot_mapping_ptr,
            out_new_token_indices_ptr, out_hidden_state_mapping_ptr, wide, wide < stop, req,
            out_start, query_start, query_next, num_valid, next_token, first_position,
            num_tokens, padding_token_id, parallel_drafting_token_id, num_padding_slots,
            max_model_len, SHIFT, BLOCK_SIZE)
    _fill_padding(out_slot_mapping_ptr, 0, 1, num_first_pass, num_input_tokens, BLOCK)
    _fill_padding(out_step_slot_mapping_ptr, step_slot_mapping_stride, num_steps, num_reqs,
                  input_batch_size, BLOCK)

    tl.store(next_token_ptr + req, next_token, mask=head)
    tl.store(valid_count_ptr + req, count, mask=head)
    tl.store(out_query_start_loc_ptr + req, out_start, mask=head)
    tl.store(out_seq_lens_ptr + req, seq_len, mask=head)
    tl.store(out_query_start_loc_ptr + num_reqs, batch_end + num_reqs * num_new,
             mask=is_last_row)
    _draft_steps(block_table_ptr, block_table_row_stride, num_block_cols,
                 out_step_positions_ptr, step_positions_stride, out_step_slot_mapping_ptr,
                 step_slot_mapping_stride, out_step_seq_lens_ptr, step_seq_lens_stride, req,
                 step_position, seq_len - rejected, max_model_len, num_steps, head, steps,
                 BLOCK_SIZE, STEP_LANES)


@spec_kernel
def _prepare_dflash_round_kernel(
    sampled_ptr,                 # [R, W], row stride sampled_row_stride
    discard_ptr,                 # [R] bool
    backup_ptr,                  # [R]
    cu_num_draft_ptr,            # [R] inclusive cumsum
    query_start_loc_ptr,         # [R + 1]
    target_positions_ptr,        # [C]
    block_table_ptr,             # [>= R, n_cols], row stride block_table_row_stride
    seq_lens_ptr,                # [>= R]
    next_token_ptr,              # [>= R] out
    valid_count_ptr,             # [>= R] out
    out_input_ids_ptr,           # [>= R * Q] out
    out_context_positions_ptr,   # [>= C] out
    out_query_positions_ptr,     # [>= R * Q] out
    out_context_slot_ptr,        # [>= C] out
    out_query_slot_ptr,          # [>= num_input_tokens] out
    out_token_indices_ptr,       # [>= R * K] out
    out_query_start_loc_ptr,     # [>= R + 1] out
    out_seq_lens_ptr,            # [>= R] out
    num_reqs: tl.int64, num_context: tl.int64, num_input_tokens: tl.int64,
    sampled_row_stride: tl.int64, block_table_row_stride: tl.int64, num_block_cols: tl.int64,
    vocab_size: tl.int64, parallel_drafting_token_id: tl.int64,
    num_speculative_tokens: tl.int64,
    NUM_COLS: tl.constexpr, BLOCK_SIZE: tl.constexpr, BLOCK_Q: tl.constexpr,
    BLOCK: tl.constexpr, PDL: tl.constexpr,
):
    pdl_prologue(PDL)
    req = tl.program_id(0).to(tl.int64)
    is_request = req < num_reqs
    chunk = tl.program_id(1).to(tl.int64)
    head = is_request & (chunk == 0)
    context_start = tl.load(query_start_loc_ptr + req).to(tl.int64)
    context_end = tl.load(query_start_loc_ptr + req + 1, mask=is_request, other=0).to(tl.int64)
    num_query = num_speculative_tokens + 1
    # Only the queries need the request's state (the context tokens are copied as they are).
    next_token, count, last, rejected = _request_state(
        sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr, cu_num_draft_ptr,
        query_start_loc_ptr, req, head, vocab_size, NUM_COLS)
    seq_len = tl.load(seq_lens_ptr + req, mask=head, other=0).to(tl.int64) - rejected + num_query

    # 1.4's context tokens (their own positions, and slots in the request's blocks): this
    # program's first chunk before any store, any further ones after.
    context_end = tl.where(is_request, context_end, context_start)     # no context outside
    first = tl.maximum(-context_start, 0)
    stop = tl.minimum(context_end - context_start, num_context - context_start)
    num_programs = tl.num_programs(1).to(tl.int64)
    j = first + chunk * BLOCK + tl.arange(0, BLOCK)
    owned = j < stop
    # 1.4's queries after the last valid position; outside the batch it reads as 0.
    last_position = tl.load(target_positions_ptr + last,
                            mask=head & (last >= 0) & (last < num_context), other=0).to(tl.int64)
    context_position, context_slot = context_slots(
        target_positions_ptr, block_table_ptr, block_table_row_stride, num_block_cols, req,
        context_start + j, owned, BLOCK_SIZE)
    q, is_query, out, query_position, query_slot = query_slots(
        block_table_ptr, block_table_row_stride, num_block_cols, req, last_position,
        tl.where(head, num_query, 0), BLOCK_SIZE, BLOCK_Q)

    tl.store(out_context_positions_ptr + context_start + j, context_position, mask=owned)
    tl.store(out_context_slot_ptr + context_start + j, context_slot, mask=owned)
    store_queries(out_input_ids_ptr, out_query_positions_ptr, out_query_slot_ptr,
                  out_token_indices_ptr, req, next_token, parallel_drafting_token_id,
                  num_speculative_tokens, q, is_query, out, query_position, query_slot)
    tl.store(next_token_ptr + req, next_token, mask=head)
    tl.store(valid_count_ptr + req, count, mask=head)
    tl.store(out_query_start_loc_ptr + req, req * num_query, mask=head)
    tl.store(out_seq_lens_ptr + req, seq_len, mask=head)
    tl.store(out_query_start_loc_ptr + num_reqs, num_reqs * num_query,
             mask=(req == tl.num_programs(0) - 1) & (chunk == 0))
    # The rest of a long request's context, WIDE_CHUNK at a time.
    first, step = wide_chunks(first + chunk * BLOCK, num_programs * BLOCK, BLOCK, WIDE_CHUNK)
    for chunk_start in range(first, stop, step):
        wide = chunk_start + tl.arange(0, WIDE_CHUNK)
        context_tokens(target_positions_ptr, out_context_positions_ptr, out_context_slot_ptr,
                       block_table_ptr, block_table_row_stride, num_block_cols, req,
                       context_start + wide, wide < stop, BLOCK_SIZE)
    _fill_padding(out_query_slot_ptr, 0, 1, num_reqs * num_query, num_input_tokens, BLOCK)


_prepare_eagle_round = Launcher(_prepare_eagle_round_kernel, PER_REQUEST_WARPS)
_prepare_parallel_round = Launcher(_prepare_parallel_round_kernel, PARALLEL_ROUND_WARPS)
_prepare_dflash_round = Launcher(_prepare_dflash_round_kernel, PER_REQUEST_WARPS)


def launch_prepare_eagle_round(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, target_token_ids, target_positions, target_slot_mapping, block_table,
        seq_lens, next_token_ids, valid_sampled_tokens_count, token_indices_to_sample,
        out_input_ids, out_positions, out_slot_mapping, out_step_positions,
        out_step_slot_mapping, out_step_seq_lens, vocab_size, block_size, max_model_len,
        num_steps, num_input_tokens, input_batch_size):
    num_reqs, num_cols = sampled_token_ids.shape
    num_tokens = target_token_ids.shape[0]
    _prepare_eagle_round(
        max(num_reqs, 1),
        (sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
         query_start_loc, target_token_ids, target_positions, target_slot_mapping, block_table,
         seq_lens, next_token_ids, valid_sampled_tokens_count, token_indices_to_sample,
         out_input_ids, out_positions, out_slot_mapping, out_step_positions,
         out_step_slot_mapping, out_step_seq_lens, num_reqs, num_tokens, num_input_tokens,
         input_batch_size, sampled_token_ids.stride()[0], block_table.stride()[0],
         block_table.shape[1], vocab_size, max_model_len, num_steps,
         out_step_positions.stride()[0], out_step_slot_mapping.stride()[0],
         out_step_seq_lens.stride()[0], num_cols, block_size, PER_REQUEST_BLOCK),
        grid_y=num_chunks(num_tokens, num_reqs))


def launch_prepare_parallel_round(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, target_token_ids, target_positions, block_table, seq_lens,
        next_token_ids, valid_sampled_tokens_count, out_input_ids, out_positions,
        out_is_masked_token_mask, out_new_token_indices, out_hidden_state_mapping,
        out_slot_mapping, out_query_start_loc, out_seq_lens, out_step_positions,
        out_step_slot_mapping, out_step_seq_lens, vocab_size, padding_token_id,
        parallel_drafting_token_id, num_padding_slots_per_request, shift_input_ids, block_size,
        max_model_len, num_steps, num_first_pass, num_input_tokens, input_batch_size):
    num_reqs, num_cols = sampled_token_ids.shape
    _prepare_parallel_round(
        max(num_reqs, 1),
        (sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
         query_start_loc, target_token_ids, target_positions, block_table, seq_lens,
         next_token_ids, valid_sampled_tokens_count, out_input_ids, out_positions,
         out_is_masked_token_mask, out_new_token_indices, out_hidden_state_mapping,
         out_slot_mapping, out_query_start_loc, out_seq_lens, out_step_positions,
         out_step_slot_mapping, out_step_seq_lens, num_reqs, target_token_ids.shape[0],
         num_first_pass, num_input_tokens, input_batch_size, sampled_token_ids.stride()[0],
         block_table.stride()[0], block_table.shape[1], vocab_size, padding_token_id,
         parallel_drafting_token_id, num_padding_slots_per_request, max_model_len, num_steps,
         out_step_positions.stride()[0], out_step_slot_mapping.stride()[0],
         out_step_seq_lens.stride()[0], num_cols, shift_input_ids, block_size,
         PER_REQUEST_BLOCK),
        grid_y=num_chunks(num_first_pass, num_reqs))


def launch_prepare_dflash_round(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, target_positions, block_table, seq_lens, next_token_ids,
        valid_sampled_tokens_count, out_input_ids, out_context_positions, out_query_positions,
        out_context_slot_mapping, out_query_slot_mapping, out_token_indices,
        out_query_start_loc, out_seq_lens, vocab_size, parallel_drafting_token_id, block_size,
        num_speculative_tokens, num_input_tokens):
    num_reqs, num_cols = sampled_token_ids.shape
    num_context = target_positions.shape[0]
    _prepare_dflash_round(
        max(num_reqs, 1),
        (sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
         query_start_loc, target_positions, block_table, seq_lens, next_token_ids,
         valid_sampled_tokens_count, out_input_ids, out_context_positions,
         out_query_positions, out_context_slot_mapping, out_query_slot_mapping,
         out_token_indices, out_query_start_loc, out_seq_lens, num_reqs, num_context,
         num_input_tokens, sampled_token_ids.stride()[0], block_table.stride()[0],
         block_table.shape[1], vocab_size, parallel_drafting_token_id, num_speculative_tokens,
         num_cols, block_size, next_power_of_2(num_speculative_tokens + 1), PER_REQUEST_BLOCK),
        grid_y=num_chunks(num_context, num_reqs))
