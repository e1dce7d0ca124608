"""Padded-drafter bookkeeping after verification: 1.1, 1.2 and their fusion 5.1
(docs/ops.md).

One program handles BLOCK_R requests; every request is independent, so these are one launch of
cdiv(R, BLOCK_R) programs.
"""

import triton
import triton.language as tl

from ._launch import Launcher, cdiv, pdl_prologue, spec_kernel

BLOCK_R = 128
# Sampled columns (K + 1) read in an unrolled pass at most; more are read in a loop. Unrolled,
# sm_90 compiles of 1.1's kernel took 0.5 s at 64 columns and 15.8 s at 256, and grow faster
# than the columns.
UNROLLED_COLS = tl.constexpr(64)


@triton.jit
def _next_token_and_count(sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr,
                          rows, row_mask, vocab_size, NUM_COLS: tl.constexpr):
    """1.1 for a block of rows: (next token id, valid count), both int64.

    One pass over the K + 1 columns in registers: the last valid column seen wins.
    """
    discard = tl.load(discard_ptr + rows, mask=row_mask, other=0) != 0
    next_token = tl.load(backup_ptr + rows, mask=row_mask, other=0).to(tl.int64)
    count = tl.zeros_like(next_token)
    if NUM_COLS <= UNROLLED_COLS:
        for col in tl.static_range(NUM_COLS):
            next_token, count = _take_column(sampled_ptr, sampled_row_stride, rows, row_mask,
                                             discard, vocab_size, col, next_token, count)
    else:
        for col in tl.range(0, NUM_COLS, loop_unroll_factor=1):
            next_token, count = _take_column(sampled_ptr, sampled_row_stride, rows, row_mask,
                                             discard, vocab_size, col, next_token, count)
    return next_token, count


@triton.jit
def _take_column(sampled_ptr, sampled_row_stride, rows, row_mask, discard, vocab_size, col,
                 next_token, count):
    """1.1's pass at sampled column ``col``: (next token, count) after it."""
    token = tl.load(sampled_ptr + rows * sampled_row_stride + col, mask=row_mask,
                    other=-1).to(tl.int64)
    valid = (token >= 0) & (token < vocab_size) & ~discard
    count += valid.to(tl.int64)
    return tl.where(valid, token, next_token), count


@triton.jit
def _sample_index_and_rejected(cu_num_draft_ptr, query_start_loc_ptr, rows, row_mask, valid_count):
    """1.2 for a block of rows: (token index to sample, number rejected), both int64."""
    cu = tl.load(cu_num_draft_ptr + rows, mask=row_mask, other=0).to(tl.int64)
    cu_prev = tl.load(cu_num_draft_ptr + rows - 1, mask=row_mask & (rows > 0), other=0).to(tl.int64)
    num_drafts = cu - cu_prev
    rejected = tl.where(num_drafts > 0, num_drafts + 1 - valid_count, 0)
    query_end = tl.load(query_start_loc_ptr + rows + 1, mask=row_mask, other=0).to(tl.int64)
    return query_end - 1 - rejected, rejected


@spec_kernel
def _next_token_kernel(
    sampled_ptr,            # [R, K + 1], row stride sampled_row_stride
    discard_ptr,            # [R] bool
    backup_ptr,             # [R]
    next_token_ptr,         # [>= R] out
    valid_count_ptr,        # [>= R] out
    num_reqs: tl.int64, sampled_row_stride: tl.int64, vocab_size: tl.int64,
    NUM_COLS: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr,
):
    pdl_prologue(PDL)
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    row_mask = rows < num_reqs
    next_token, count = _next_token_and_count(sampled_ptr, sampled_row_stride, discard_ptr,
                                              backup_ptr, rows, row_mask, vocab_size, NUM_COLS)
    tl.store(next_token_ptr + rows, next_token, mask=row_mask)
    tl.store(valid_count_ptr + rows, count, mask=row_mask)


@spec_kernel
def _prepare_inputs_padded_kernel(
    cu_num_draft_ptr,       # [R] inclusive cumsum
    valid_count_ptr,        # [>= R]
    query_start_loc_ptr,    # [>= R + 1]
    token_indices_ptr,      # [>= R] out
    num_rejected_ptr,       # [>= R] out
    num_reqs: tl.int64,
    BLOCK: tl.constexpr, PDL: tl.constexpr,
):
    pdl_prologue(PDL)
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    row_mask = rows < num_reqs
    valid_count = tl.load(valid_count_ptr + rows, mask=row_mask, other=0).to(tl.int64)
    index, rejected = _sample_index_and_rejected(cu_num_draft_ptr, query_start_loc_ptr, rows,
                                                 row_mask, valid_count)
    tl.store(token_indices_ptr + rows, index, mask=row_mask)
    tl.store(num_rejected_ptr + rows, rejected, mask=row_mask)


@spec_kernel
def _prepare_padded_draft_inputs_kernel(
    sampled_ptr,            # [R, K + 1], row stride sampled_row_stride
    discard_ptr,            # [R] bool
    backup_ptr,             # [R]
    cu_num_draft_ptr,       # [R] inclusive cumsum
    query_start_loc_ptr,    # [R + 1]
    next_token_ptr,         # [>= R] out
    valid_count_ptr,        # [>= R] out
    token_indices_ptr,      # [>= R] out
    num_rejected_ptr,       # [>= R] out
    num_reqs: tl.int64, sampled_row_stride: tl.int64, vocab_size: tl.int64,
    NUM_COLS: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr,
):
    pdl_prologue(PDL)
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    row_mask = rows < num_reqs
    next_token, count = _next_token_and_count(sampled_ptr, sampled_row_stride, discard_ptr,
                                              backup_ptr, rows, row_mask, vocab_size, NUM_COLS)
    index, rejected = _sample_index_and_rejected(cu_num_draft_ptr, query_start_loc_ptr, rows,
                                                 row_mask, count)
    tl.store(next_token_ptr + rows, next_token, mask=row_mask)
    tl.store(valid_count_ptr + rows, count, mask=row_mask)
    tl.store(token_indices_ptr + rows, index, mask=row_mask)
    tl.store(num_rejected_ptr + rows, rejected, mask=row_mask)


_next_token = Launcher(_next_token_kernel)
_prepare_inputs_padded = Launcher(_prepare_inputs_padded_kernel)
_prepare_padded_draft_inputs = Launcher(_prepare_padded_draft_inputs_kernel)


def launch_next_token(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                      next_token_ids, valid_sampled_tokens_count, vocab_size):
    num_reqs, num_cols = sampled_token_ids.shape
    return _next_token(
        cdiv(num_reqs, BLOCK_R),
        (sampled_token_ids, discard_request_mask, backup_next_token_ids, next_token_ids,
         valid_sampled_tokens_count, num_reqs, sampled_token_ids.stride()[0], vocab_size,
         num_cols, BLOCK_R))


def launch_prepare_inputs_padded(cu_num_draft_tokens, valid_sampled_tokens_count,
                                 query_start_loc, token_indices_to_sample, num_rejected_tokens,
                                 ):
    num_reqs = cu_num_draft_tokens.shape[0]
    return _prepare_inputs_padded(
        cdiv(num_reqs, BLOCK_R),
        (cu_num_draft_tokens, valid_sampled_tokens_count, query_start_loc,
         token_indices_to_sample, num_rejected_tokens, num_reqs, BLOCK_R))


def launch_prepare_padded_draft_inputs(sampled_token_ids, discard_request_mask,
                                       backup_next_token_ids, cu_num_draft_tokens,
                                       query_start_loc, next_token_ids,
                                       valid_sampled_tokens_count, token_indices_to_sample,
                                       num_rejected_tokens, vocab_size):
    num_reqs, num_cols = sampled_token_ids.shape
    return _prepare_padded_draft_inputs(
        cdiv(num_reqs, BLOCK_R),
        (sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
         query_start_loc, next_token_ids, valid_sampled_tokens_count, token_indices_to_sample,
         num_rejected_tokens, num_reqs, sampled_token_ids.stride()[0], vocab_size,
         num_cols, BLOCK_R))
