"""Padded-drafter bookkeeping after verification: 1.1, 1.2 and their fusion 5.1
(docs/ops.md).

Each op: its schema, the CUDA kernel (a Triton launch), the CPU kernel (vectorized torch) and
the public function. The fakes are in meta.py.
"""

import torch

from . import validation
from ._library import define
from ._torch_indexing import write
from ._triton import (
    launch_next_token,
    launch_prepare_inputs_padded,
    launch_prepare_padded_draft_inputs,
)


def _next_token_and_count(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                          vocab_size):
    """1.1 on CPU tensors: (next token ids, valid counts), int64 [R]."""
    tokens = sampled_token_ids.long()                                   # [R, K + 1]
    valid = (tokens >= 0) & (tokens < vocab_size)
    columns = torch.arange(tokens.shape[1])
    last_col = torch.where(valid, columns, -1).amax(dim=1)              # -1: none valid
    last_token = tokens.gather(1, last_col.clamp(min=0)[:, None])[:, 0]
    keep_backup = discard_request_mask | (last_col < 0)
    next_token = torch.where(keep_backup, backup_next_token_ids.long(), last_token)
    count = torch.where(discard_request_mask, 0, valid.sum(dim=1))
    return next_token, count


def _sample_index_and_rejected(cu_num_draft_tokens, query_start_loc, valid_count):
    """1.2 on CPU tensors: (token indices to sample, rejected counts), int64 [R]."""
    cu = cu_num_draft_tokens.long()
    num_drafts = cu - torch.cat([cu.new_zeros(1), cu[:-1]])
    rejected = torch.where(num_drafts > 0, num_drafts + 1 - valid_count.long(), 0)
    return query_start_loc[1:].long() - 1 - rejected, rejected


# --- 1.1 eagle_prepare_next_token_padded ---------------------------------------------------

def _next_token_cpu(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                    next_token_ids, valid_sampled_tokens_count, vocab_size):
    next_token, count = _next_token_and_count(sampled_token_ids, discard_request_mask,
                                              backup_next_token_ids, vocab_size)
    write(next_token_ids, next_token)
    write(valid_sampled_tokens_count, count)


_next_token_op = define(
    "eagle_prepare_next_token_padded(Tensor sampled_token_ids, Tensor discard_request_mask, "
    "Tensor backup_next_token_ids, Tensor(a!) next_token_ids, "
    "Tensor(b!) valid_sampled_tokens_count, int vocab_size) -> ()",
    validation.check_eagle_prepare_next_token_padded, launch_next_token, _next_token_cpu)


def eagle_prepare_next_token_padded(sampled_token_ids, discard_request_mask,
                                    backup_next_token_ids, next_token_ids,
                                    valid_sampled_tokens_count, vocab_size):
    """Seed drafting after verification (docs/ops.md, 1.1).

    sampled_token_ids: [R, K + 1], rejected entries -1. A column is valid when
    0 <= id < vocab_size. next_token_ids[r] = id at the highest valid column, or
    backup_next_token_ids[r] when the row is discarded or has none;
    valid_sampled_tokens_count[r] = number of valid columns (0 when discarded).
    """
    _next_token_op(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                   next_token_ids, valid_sampled_tokens_count, vocab_size)


# --- 1.2 eagle_prepare_inputs_padded -------------------------------------------------------

def _prepare_inputs_cpu(cu_num_draft_tokens, valid_sampled_tokens_count, query_start_loc,
                        token_indices_to_sample, num_rejected_tokens):
    num_reqs = cu_num_draft_tokens.shape[0]
    index, rejected = _sample_index_and_rejected(
        cu_num_draft_tokens, query_start_loc, valid_sampled_tokens_count[:num_reqs])
    write(token_indices_to_sample, index)
    write(num_rejected_tokens, rejected)


_prepare_inputs_op = define(
    "eagle_prepare_inputs_padded(Tensor cu_num_draft_tokens, Tensor valid_sampled_tokens_count, "
    "Tensor query_start_loc, Tensor(a!) token_indices_to_sample, "
    "Tensor(b!) num_rejected_tokens) -> ()",
    validation.check_eagle_prepare_inputs_padded, launch_prepare_inputs_padded,
    _prepare_inputs_cpu)


def eagle_prepare_inputs_padded(cu_num_draft_tokens, valid_sampled_tokens_count,
                                query_start_loc, token_indices_to_sample, num_rejected_tokens):
    """Find each request's last accepted token in the padded drafter batch (docs/ops.md, 1.2).

    drafts[r] = cu[r] - cu[r - 1] (cu is an inclusive cumsum);
    rejected[r] = drafts[r] + 1 - valid[r] if drafts[r] > 0 else 0;
    token_indices_to_sample[r] = qsl[r + 1] - 1 - rejected[r]. Nothing is clamped.
    """
    _prepare_inputs_op(cu_num_draft_tokens, valid_sampled_tokens_count, query_start_loc,
                       token_indices_to_sample, num_rejected_tokens)


# --- 5.1 prepare_padded_draft_inputs -------------------------------------------------------

def _fused_cpu(sampled_token_ids, discard_request_mask, backup_next_token_ids,
               cu_num_draft_tokens, query_start_loc, next_token_ids, valid_sampled_tokens_count,
               token_indices_to_sample, num_rejected_tokens, vocab_size):
    next_token, count = _next_token_and_count(sampled_token_ids, discard_request_mask,
                                              backup_next_token_ids, vocab_size)
    index, rejected = _sample_index_and_rejected(cu_num_draft_tokens, query_start_loc, count)
    write(next_token_ids, next_token)
    write(valid_sampled_tokens_count, count)
    write(token_indices_to_sample, index)
    write(num_rejected_tokens, rejected)


_fused_op = define(
    "prepare_padded_draft_inputs(Tensor sampled_token_ids, Tensor discard_request_mask, "
    "Tensor backup_next_token_ids, Tensor cu_num_draft_tokens, Tensor query_start_loc, "
    "Tensor(a!) next_token_ids, Tensor(b!) valid_sampled_tokens_count, "
    "Tensor(c!) token_indices_to_sample, Tensor(d!) num_rejected_tokens, int vocab_size) -> ()",
    validation.check_prepare_padded_draft_inputs, launch_prepare_padded_draft_inputs,
    _fused_cpu)


def prepare_padded_draft_inputs(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                                cu_num_draft_tokens, query_start_loc, next_token_ids,
                                valid_sampled_tokens_count, token_indices_to_sample,
                                num_rejected_tokens, vocab_size):
    """1.1 followed by 1.2 (reading 1.1's counts) in one launch (docs/ops.md, 5.1)."""
    _fused_op(sampled_token_ids, discard_request_mask, backup_next_token_ids,
              cu_num_draft_tokens, query_start_loc, next_token_ids, valid_sampled_tokens_count,
              token_indices_to_sample, num_rejected_tokens, vocab_size)
