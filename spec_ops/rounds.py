"""One launch per draft round (docs/round_ops.md): 6.1 chain EAGLE / MTP, 6.2 parallel
drafting, PARD and draft models, 6.3 DFlash.

Each op: its CPU kernel (vectorized torch, built from the CPU kernels of the helper ops the
round is defined from), its schema and CUDA kernel (one Triton launch), and the public
function. The fakes are in meta.py.
"""

import torch

from . import validation
from ._library import define
from ._torch_indexing import find_request, take, take_or_zero, write
from ._triton import (
    launch_prepare_dflash_round,
    launch_prepare_eagle_round,
    launch_prepare_parallel_round,
)
from .dflash import _copy_and_expand_dflash_cpu
from .draft_step import _multi_step_cpu
from .expand import _copy_and_expand_cpu, _new_slot_mapping_cpu
from .padded_batch import _next_token_and_count, _sample_index_and_rejected


def _request_state(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                   cu_num_draft_tokens, query_start_loc, next_token_ids,
                   valid_sampled_tokens_count, vocab_size):
    """6.0's per-request state: writes 1.1's two outs and returns (next, last, rejected), int64
    [R], where last is 1.2's index to sample."""
    next_token, count = _next_token_and_count(sampled_token_ids, discard_request_mask,
                                              backup_next_token_ids, vocab_size)
    last, rejected = _sample_index_and_rejected(cu_num_draft_tokens, query_start_loc, count)
    write(next_token_ids, next_token)
    write(valid_sampled_tokens_count, count)
    return next_token, last, rejected


# --- 6.1 prepare_eagle_round ---------------------------------------------------------------

def _eagle_round_cuda(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                      cu_num_draft_tokens, query_start_loc, target_token_ids, target_positions,
                      target_slot_mapping, block_table, seq_lens, next_token_ids,
                      valid_sampled_tokens_count, token_indices_to_sample, out_input_ids,
                      out_positions, out_slot_mapping, out_step_positions,
                      out_step_slot_mapping, out_step_seq_lens, vocab_size, block_size,
                      max_model_len, num_steps, num_input_tokens=None, input_batch_size=None):
    return launch_prepare_eagle_round(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, target_token_ids, target_positions, target_slot_mapping, block_table,
        seq_lens, next_token_ids, valid_sampled_tokens_count, token_indices_to_sample,
        out_input_ids, out_positions, out_slot_mapping, out_step_positions,
        out_step_slot_mapping, out_step_seq_lens, vocab_size, block_size, max_model_len,
        num_steps, validation.padded_size(target_token_ids.shape[0], num_input_tokens),
        validation.padded_size(sampled_token_ids.shape[0], input_batch_size))


def _eagle_round_cpu(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                     cu_num_draft_tokens, query_start_loc, target_token_ids, target_positions,
                     target_slot_mapping, block_table, seq_lens, next_token_ids,
                     valid_sampled_tokens_count, token_indices_to_sample, out_input_ids,
                     out_positions, out_slot_mapping, out_step_positions, out_step_slot_mapping,
                     out_step_seq_lens, vocab_size, block_size, max_model_len, num_steps,
                     num_input_tokens=None, input_batch_size=None):
    next_token, last, rejected = _request_state(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, next_token_ids, valid_sampled_tokens_count, vocab_size)
    num_reqs, num_tokens = next_token.shape[0], target_token_ids.shape[0]
    write(token_indices_to_sample, last)
    out_slot_mapping[num_tokens:validation.padded_size(num_tokens, num_input_tokens)].fill_(-1)
    # A discarded row with drafts may point in front of the batch: read as position 0.
    start_position = torch.where((last >= 0) & (last < num_tokens),
                                 take(target_positions, last), 0)
    _multi_step_cpu(start_position, block_table, seq_lens[:num_reqs].long() - rejected,
                    block_size, max_model_len, num_steps, out_step_positions,
                    out_step_slot_mapping, out_step_seq_lens, input_batch_size)
    if num_reqs == 0:
        return
    # The target batch one token to the left, the next token at the last accepted index.
    query_start_loc = query_start_loc.long()
    token = torch.arange(num_tokens)
    req = find_request(query_start_loc[:-1], token)
    owned = (token >= query_start_loc[req]) & (token < query_start_loc[req + 1])
    is_last = token == last[req]
    write(out_input_ids, torch.where(is_last, next_token[req], take(target_token_ids, token + 1)),
          owned & (is_last | (token + 1 < num_tokens)))
    write(out_positions, target_positions, owned)
    write(out_slot_mapping, target_slot_mapping, owned)


_eagle_round_op = define(
    "prepare_eagle_round(Tensor sampled_token_ids, Tensor discard_request_mask, "
    "Tensor backup_next_token_ids, Tensor cu_num_draft_tokens, Tensor query_start_loc, "
    "Tensor target_token_ids, Tensor target_positions, Tensor target_slot_mapping, "
    "Tensor block_table, Tensor seq_lens, Tensor(a!) next_token_ids, "
    "Tensor(b!) valid_sampled_tokens_count, Tensor(c!) token_indices_to_sample, "
    "Tensor(d!) out_input_ids, Tensor(e!) out_positions, Tensor(f!) out_slot_mapping, "
    "Tensor(g!) out_step_positions, Tensor(h!) out_step_slot_mapping, "
    "Tensor(i!) out_step_seq_lens, int vocab_size, int block_size, int max_model_len, "
    "int num_steps, SymInt? num_input_tokens=None, SymInt? input_batch_size=None) -> ()",
    validation.check_prepare_eagle_round, _eagle_round_cuda, _eagle_round_cpu)


def prepare_eagle_round(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                        cu_num_draft_tokens, query_start_loc, target_token_ids,
                        target_positions, target_slot_mapping, block_table, seq_lens,
                        next_token_ids, valid_sampled_tokens_count, token_indices_to_sample,
                        out_input_ids, out_positions, out_slot_mapping, out_step_positions,
                        out_step_slot_mapping, out_step_seq_lens, vocab_size, block_size,
                        max_model_len, num_steps, num_input_tokens=None,
                        input_batch_size=None):
    """A chain-drafting round (EAGLE, MTP) in one launch (docs/round_ops.md, 6.1).

    1.1 and 1.2 per request (next, valid, last = index to sample); the first pass is the target
    batch with ids shifted one left and next[r] at last[r], positions and slots copied, -1
    slots up to num_input_tokens; then num_steps 1.5 steps (as 5.2) from position
    target_positions[last[r]] and length seq_lens[r] - rejected[r].
    """
    _eagle_round_op(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                    cu_num_draft_tokens, query_start_loc, target_token_ids, target_positions,
                    target_slot_mapping, block_table, seq_lens, next_token_ids,
                    valid_sampled_tokens_count, token_indices_to_sample, out_input_ids,
                    out_positions, out_slot_mapping, out_step_positions, out_step_slot_mapping,
                    out_step_seq_lens, vocab_size, block_size, max_model_len, num_steps,
                    num_input_tokens, input_batch_size)


# --- 6.2 prepare_parallel_round ------------------------------------------------------------

def _parallel_round_cuda(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                         cu_num_draft_tokens, query_start_loc, target_token_ids,
                         target_positions, block_table, seq_lens, next_token_ids,
                         valid_sampled_tokens_count, out_input_ids, out_positions,
                         out_is_masked_token_mask, out_new_token_indices,
                         out_hidden_state_mapping, out_slot_mapping, out_query_start_loc,
                         out_seq_lens, out_step_positions, out_step_slot_mapping,
                         out_step_seq_lens, vocab_size, padding_token_id,
                         parallel_drafting_token_id, num_padding_slots_per_request,
                         shift_input_ids, block_size, max_model_len, num_steps,
                         num_input_tokens=None, input_batch_size=None):
    num_reqs = sampled_token_ids.shape[0]
    _, num_first_pass = validation.parallel_round_sizes(
        target_token_ids, num_reqs, num_padding_slots_per_request, shift_input_ids)
    return launch_prepare_parallel_round(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, target_token_ids, target_positions, block_table, seq_lens,
        next_token_ids, valid_sampled_tokens_count, out_input_ids, out_positions,
        out_is_masked_token_mask, out_new_token_indices, out_hidden_state_mapping,
        out_slot_mapping, out_query_start_loc, out_seq_lens, out_step_positions,
        out_step_slot_mapping, out_step_seq_lens, vocab_size, padding_token_id,
        parallel_drafting_token_id, num_padding_slots_per_request, shift_input_ids, block_size,
        max_model_len, num_steps, num_first_pass,
        validation.padded_size(num_first_pass, num_input_tokens),
        validation.padded_size(num_reqs, input_batch_size))


def _parallel_round_cpu(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                        cu_num_draft_tokens, query_start_loc, target_token_ids,
                        target_positions, block_table, seq_lens, next_token_ids,
                        valid_sampled_tokens_count, out_input_ids, out_positions,
                        out_is_masked_token_mask, out_new_token_indices,
                        out_hidden_state_mapping, out_slot_mapping, out_query_start_loc,
                        out_seq_lens, out_step_positions, out_step_slot_mapping,
                        out_step_seq_lens, vocab_size, padding_token_id,
                        parallel_drafting_token_id, num_padding_slots_per_request,
                        shift_input_ids, block_size, max_model_len, num_steps,
                        num_input_tokens=None, input_batch_size=None):
    next_token, last, rejected = _request_state(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, next_token_ids, valid_sampled_tokens_count, vocab_size)
    num_reqs = next_token.shape[0]
    new, num_first_pass = validation.parallel_round_sizes(
        target_token_ids, num_reqs, num_padding_slots_per_request, shift_input_ids)
    rejected_mask = torch.ones(num_first_pass, dtype=torch.bool)    # 1.3's, an input of 1.7
    _copy_and_expand_cpu(target_token_ids, target_positions, next_token, out_input_ids,
                         out_positions, rejected_mask, out_is_masked_token_mask,
                         out_new_token_indices, out_hidden_state_mapping, query_start_loc, last,
                         padding_token_id, parallel_drafting_token_id,
                         num_padding_slots_per_request, shift_input_ids, num_first_pass)
    write(out_slot_mapping, _new_slot_mapping_cpu(
        block_table, query_start_loc, out_positions[:num_first_pass], rejected_mask, block_size,
        new, max_model_len))
    out_slot_mapping[num_first_pass:validation.padded_size(num_first_pass,
                                                           num_input_tokens)].fill_(-1)
    query_start_loc = query_start_loc.long()
    write(out_query_start_loc, query_start_loc + new * torch.arange(num_reqs + 1))
    seq_lens = seq_lens[:num_reqs].long()
    write(out_seq_lens, seq_lens + new)
    # The bonus token's position and length: nv = last - qsl[r] + 1 inputs precede it.
    query_start = query_start_loc[:-1]
    start_position = take_or_zero(target_positions, query_start) + last - query_start + 1
    _multi_step_cpu(start_position, block_table, seq_lens + new - rejected, block_size,
                    max_model_len, num_steps, out_step_positions, out_step_slot_mapping,
                    out_step_seq_lens, input_batch_size)


_parallel_round_op = define(
    "prepare_parallel_round(Tensor sampled_token_ids, Tensor discard_request_mask, "
    "Tensor backup_next_token_ids, Tensor cu_num_draft_tokens, Tensor query_start_loc, "
    "Tensor target_token_ids, Tensor target_positions, Tensor block_table, Tensor seq_lens, "
    "Tensor(a!) next_token_ids, Tensor(b!) valid_sampled_tokens_count, "
    "Tensor(c!) out_input_ids, Tensor(d!) out_positions, Tensor(e!) out_is_masked_token_mask, "
    "Tensor(f!) out_new_token_indices, Tensor(g!) out_hidden_state_mapping, "
    "Tensor(h!) out_slot_mapping, Tensor(i!) out_query_start_loc, Tensor(j!) out_seq_lens, "
    "Tensor(k!) out_step_positions, Tensor(l!) out_step_slot_mapping, "
    "Tensor(m!) out_step_seq_lens, int vocab_size, int padding_token_id, "
    "int parallel_drafting_token_id, int num_padding_slots_per_request, bool shift_input_ids, "
    "int block_size, int max_model_len, int num_steps, SymInt? num_input_tokens=None, "
    "SymInt? input_batch_size=None) -> ()",
    validation.check_prepare_parallel_round, _parallel_round_cuda, _parallel_round_cpu)


def prepare_parallel_round(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                           cu_num_draft_tokens, query_start_loc, target_token_ids,
                           target_positions, block_table, seq_lens, next_token_ids,
                           valid_sampled_tokens_count, out_input_ids, out_positions,
                           out_is_masked_token_mask, out_new_token_indices,
                           out_hidden_state_mapping, out_slot_mapping, out_query_start_loc,
                           out_seq_lens, out_step_positions, out_step_slot_mapping,
                           out_step_seq_lens, vocab_size, padding_token_id,
                           parallel_drafting_token_id, num_padding_slots_per_request,
                           shift_input_ids, block_size, max_model_len, num_steps,
                           num_input_tokens=None, input_batch_size=None):
    """A parallel-drafting, PARD or draft-model round in one launch (docs/round_ops.md, 6.2).

    1.1 and 1.2 per request; the expanded first pass is 1.3 with next as the bonus token and
    last as query_end_loc, its slot mapping 1.7 (-1 up to num_input_tokens); out_query_start_loc
    = qsl + N * r, out_seq_lens = seq_lens + N. Draft steps (S = 1, no shift) as 5.2 from the
    bonus token's position and length seq_lens[r] + N - rejected[r].
    """
    _parallel_round_op(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                       cu_num_draft_tokens, query_start_loc, target_token_ids,
                       target_positions, block_table, seq_lens, next_token_ids,
                       valid_sampled_tokens_count, out_input_ids, out_positions,
                       out_is_masked_token_mask, out_new_token_indices,
                       out_hidden_state_mapping, out_slot_mapping, out_query_start_loc,
                       out_seq_lens, out_step_positions, out_step_slot_mapping,
                       out_step_seq_lens, vocab_size, padding_token_id,
                       parallel_drafting_token_id, num_padding_slots_per_request,
                       shift_input_ids, block_size, max_model_len, num_steps,
                       num_input_tokens, input_batch_size)


# --- 6.3 prepare_dflash_round --------------------------------------------------------------

def _dflash_round_cuda(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                       cu_num_draft_tokens, query_start_loc, target_positions, block_table,
                       seq_lens, next_token_ids, valid_sampled_tokens_count, out_input_ids,
                       out_context_positions, out_query_positions, out_context_slot_mapping,
                       out_query_slot_mapping, out_token_indices, out_query_start_loc,
                       out_seq_lens, vocab_size, parallel_drafting_token_id, block_size,
                       num_speculative_tokens, num_input_tokens=None):
    num_queries = sampled_token_ids.shape[0] * (num_speculative_tokens + 1)
    return launch_prepare_dflash_round(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, target_positions, block_table, seq_lens, next_token_ids,
        valid_sampled_tokens_count, out_input_ids, out_context_positions, out_query_positions,
        out_context_slot_mapping, out_query_slot_mapping, out_token_indices,
        out_query_start_loc, out_seq_lens, vocab_size, parallel_drafting_token_id, block_size,
        num_speculative_tokens, validation.padded_size(num_queries, num_input_tokens))


def _dflash_round_cpu(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                      cu_num_draft_tokens, query_start_loc, target_positions, block_table,
                      seq_lens, next_token_ids, valid_sampled_tokens_count, out_input_ids,
                      out_context_positions, out_query_positions, out_context_slot_mapping,
                      out_query_slot_mapping, out_token_indices, out_query_start_loc,
                      out_seq_lens, vocab_size, parallel_drafting_token_id, block_size,
                      num_speculative_tokens, num_input_tokens=None):
    next_token, _, rejected = _request_state(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, next_token_ids, valid_sampled_tokens_count, vocab_size)
    num_reqs = next_token.shape[0]
    num_query = num_speculative_tokens + 1
    _copy_and_expand_dflash_cpu(next_token, target_positions, out_input_ids,
                                out_context_positions, out_query_positions,
                                out_context_slot_mapping, out_query_slot_mapping,
                                out_token_indices, block_table, query_start_loc, rejected,
                                parallel_drafting_token_id, block_size, num_query,
                                num_speculative_tokens)
    num_queries = num_reqs * num_query
    out_query_slot_mapping[num_queries:validation.padded_size(num_queries,
                                                              num_input_tokens)].fill_(-1)
    write(out_query_start_loc, num_query * torch.arange(num_reqs + 1))
    write(out_seq_lens, seq_lens[:num_reqs].long() - rejected + num_query)


_dflash_round_op = define(
    "prepare_dflash_round(Tensor sampled_token_ids, Tensor discard_request_mask, "
    "Tensor backup_next_token_ids, Tensor cu_num_draft_tokens, Tensor query_start_loc, "
    "Tensor target_positions, Tensor block_table, Tensor seq_lens, "
    "Tensor(a!) next_token_ids, Tensor(b!) valid_sampled_tokens_count, "
    "Tensor(c!) out_input_ids, Tensor(d!) out_context_positions, "
    "Tensor(e!) out_query_positions, Tensor(f!) out_context_slot_mapping, "
    "Tensor(g!) out_query_slot_mapping, Tensor(h!) out_token_indices, "
    "Tensor(i!) out_query_start_loc, Tensor(j!) out_seq_lens, int vocab_size, "
    "int parallel_drafting_token_id, int block_size, int num_speculative_tokens, "
    "SymInt? num_input_tokens=None) -> ()",
    validation.check_prepare_dflash_round, _dflash_round_cuda, _dflash_round_cpu)


def prepare_dflash_round(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                         cu_num_draft_tokens, query_start_loc, target_positions, block_table,
                         seq_lens, next_token_ids, valid_sampled_tokens_count, out_input_ids,
                         out_context_positions, out_query_positions, out_context_slot_mapping,
                         out_query_slot_mapping, out_token_indices, out_query_start_loc,
                         out_seq_lens, vocab_size, parallel_drafting_token_id, block_size,
                         num_speculative_tokens, num_input_tokens=None):
    """A DFlash round in one launch (docs/round_ops.md, 6.3).

    1.1 and 1.2 per request; then 1.4 with next, rejected and Q = K + 1 (target_positions read
    as 0 outside the tensor), -1 query slots up to num_input_tokens, out_query_start_loc =
    r * Q and out_seq_lens = seq_lens - rejected + Q.
    """
    _dflash_round_op(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                     cu_num_draft_tokens, query_start_loc, target_positions, block_table,
                     seq_lens, next_token_ids, valid_sampled_tokens_count, out_input_ids,
                     out_context_positions, out_query_positions, out_context_slot_mapping,
                     out_query_slot_mapping, out_token_indices, out_query_start_loc,
                     out_seq_lens, vocab_size, parallel_drafting_token_id, block_size,
                     num_speculative_tokens, num_input_tokens)
