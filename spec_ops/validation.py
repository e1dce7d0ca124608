"""Argument checks for every op: host-side metadata only, no device reads, before any launch.

Each ``check_<op>`` takes the op's arguments, raises ``TypeError`` (wrong dtype) or
``ValueError`` (rank, length, stride, device, bad scalar) naming the argument and what was
expected, and returns the tuple of extra sizes its kernels take after the op's own
arguments, so those are computed in exactly one place.
"""

import torch

from ._triton import UPDATE_NUM_COMPUTED_TOKENS_MAX_ROWS

INDEX_DTYPES = (torch.int32, torch.int64)
MASK_DTYPES = (torch.bool,)
_DTYPE_NAMES = {INDEX_DTYPES: "int32 or int64", MASK_DTYPES: "bool"}


def _dtype(op, name, t, dtypes):
    if t.dtype not in dtypes:
        raise TypeError(f"spec_ops.{op}: {name} must be {_DTYPE_NAMES[dtypes]}, got {t.dtype}")


def vector(op, name, t, min_len=0, what="", dtypes=INDEX_DTYPES):
    """A 1-D tensor of ``dtypes`` with unit stride and at least ``min_len`` entries."""
    _dtype(op, name, t, dtypes)
    if t.dim() != 1:
        raise ValueError(f"spec_ops.{op}: {name} must be 1-D, got shape {tuple(t.shape)}")
    length = t.shape[0]
    if length > 1 and t.stride(0) != 1:
        raise ValueError(f"spec_ops.{op}: {name} must have unit stride, got stride {t.stride(0)}")
    if length < min_len:
        raise ValueError(
            f"spec_ops.{op}: {name} needs at least {min_len} entries ({what}), got {length}")
    return length


def exact_vector(op, name, t, length, what, dtypes=INDEX_DTYPES):
    """A 1-D tensor of exactly ``length`` entries."""
    if vector(op, name, t, 0, "", dtypes) != length:
        raise ValueError(
            f"spec_ops.{op}: {name} must have {what} = {length} entries, got {t.shape[0]}")


def matrix(op, name, t, min_rows=0, min_cols=0, what="", dtypes=INDEX_DTYPES):
    """A 2-D tensor, unit stride along the last dim, rows not overlapping; returns its shape."""
    _dtype(op, name, t, dtypes)
    if t.dim() != 2:
        raise ValueError(f"spec_ops.{op}: {name} must be 2-D, got shape {tuple(t.shape)}")
    rows, cols = t.shape
    if cols > 1 and t.stride(1) != 1:
        raise ValueError(
            f"spec_ops.{op}: {name} must have unit stride along its last dim, "
            f"got strides {t.stride()}")
    if rows > 1 and t.stride(0) < cols:
        raise ValueError(
            f"spec_ops.{op}: {name} rows overlap: row stride {t.stride(0)} < {cols} columns")
    if rows < min_rows or cols < min_cols:
        raise ValueError(
            f"spec_ops.{op}: {name} must be at least [{min_rows}, {min_cols}] ({what}), "
            f"got {list(t.shape)}")
    return rows, cols


def same_device(op, names, tensors):
    device = tensors[0].get_device()
    for name, t in zip(names, tensors):
        if t.get_device() != device:
            raise ValueError(
                f"spec_ops.{op}: all tensors must be on one device; {names[0]} is on "
                f"{tensors[0].device} but {name} is on {t.device}")


def at_least(op, name, value, minimum):
    if value < minimum:
        raise ValueError(f"spec_ops.{op}: {name} must be >= {minimum}, got {value}")


# --- one check per op ----------------------------------------------------------------------

_NEXT_TOKEN_NAMES = ("sampled_token_ids", "discard_request_mask", "backup_next_token_ids",
                     "next_token_ids", "valid_sampled_tokens_count")


def _check_next_token_args(op, sampled_token_ids, discard_request_mask, backup_next_token_ids,
                           next_token_ids, valid_sampled_tokens_count, vocab_size):
    num_reqs, _ = matrix(op, "sampled_token_ids", sampled_token_ids, 0, 1,
                         "num_reqs, K + 1 >= 1")
    exact_vector(op, "discard_request_mask", discard_request_mask, num_reqs, "num_reqs",
                 MASK_DTYPES)
    exact_vector(op, "backup_next_token_ids", backup_next_token_ids, num_reqs, "num_reqs")
    vector(op, "next_token_ids", next_token_ids, num_reqs, "num_reqs")
    vector(op, "valid_sampled_tokens_count", valid_sampled_tokens_count, num_reqs, "num_reqs")
    at_least(op, "vocab_size", vocab_size, 1)
    return num_reqs


def check_eagle_prepare_next_token_padded(sampled_token_ids, discard_request_mask,
                                          backup_next_token_ids, next_token_ids,
                                          valid_sampled_tokens_count, vocab_size):
    op = "eagle_prepare_next_token_padded"
    _check_next_token_args(op, sampled_token_ids, discard_request_mask, backup_next_token_ids,
                           next_token_ids, valid_sampled_tokens_count, vocab_size)
    same_device(op, _NEXT_TOKEN_NAMES, (sampled_token_ids, discard_request_mask,
                                        backup_next_token_ids, next_token_ids,
                                        valid_sampled_tokens_count))
    return ()


def _check_prepare_inputs_args(op, num_reqs, valid_sampled_tokens_count, query_start_loc,
                               token_indices_to_sample, num_rejected_tokens):
    vector(op, "valid_sampled_tokens_count", valid_sampled_tokens_count, num_reqs, "num_reqs")
    exact_vector(op, "query_start_loc", query_start_loc, num_reqs + 1, "num_reqs + 1")
    vector(op, "token_indices_to_sample", token_indices_to_sample, num_reqs, "num_reqs")
    vector(op, "num_rejected_tokens", num_rejected_tokens, num_reqs, "num_reqs")


def check_eagle_prepare_inputs_padded(cu_num_draft_tokens, valid_sampled_tokens_count,
                                      query_start_loc, token_indices_to_sample,
                                      num_rejected_tokens):
    op = "eagle_prepare_inputs_padded"
    num_reqs = vector(op, "cu_num_draft_tokens", cu_num_draft_tokens)
    _check_prepare_inputs_args(op, num_reqs, valid_sampled_tokens_count, query_start_loc,
                               token_indices_to_sample, num_rejected_tokens)
    same_device(op, ("cu_num_draft_tokens", "valid_sampled_tokens_count", "query_start_loc",
                     "token_indices_to_sample", "num_rejected_tokens"),
                (cu_num_draft_tokens, valid_sampled_tokens_count, query_start_loc,
                 token_indices_to_sample, num_rejected_tokens))
    return ()


def check_prepare_padded_draft_inputs(sampled_token_ids, discard_request_mask,
                                      backup_next_token_ids, cu_num_draft_tokens,
                                      query_start_loc, next_token_ids,
                                      valid_sampled_tokens_count, token_indices_to_sample,
                                      num_rejected_tokens, vocab_size):
    op = "prepare_padded_draft_inputs"
    num_reqs = _check_next_token_args(op, sampled_token_ids, discard_request_mask,
                                      backup_next_token_ids, next_token_ids,
                                      valid_sampled_tokens_count, vocab_size)
    exact_vector(op, "cu_num_draft_tokens", cu_num_draft_tokens, num_reqs, "num_reqs")
    _check_prepare_inputs_args(op, num_reqs, valid_sampled_tokens_count, query_start_loc,
                               token_indices_to_sample, num_rejected_tokens)
    same_device(op, _NEXT_TOKEN_NAMES + ("cu_num_draft_tokens", "query_start_loc",
                                         "token_indices_to_sample", "num_rejected_tokens"),
                (sampled_token_ids, discard_request_mask, backup_next_token_ids,
                 next_token_ids, valid_sampled_tokens_count, cu_num_draft_tokens,
                 query_start_loc, token_indices_to_sample, num_rejected_tokens))
    return ()


def expanded_num_outputs(num_input_tokens, num_reqs, num_padding_slots, shift_input_ids):
    """Outputs of SPEC 1.3: every input token plus S slots per request, minus one with shift."""
    return num_input_tokens + num_reqs * (num_padding_slots - 1 if shift_input_ids
                                          else num_padding_slots)


def check_copy_and_expand_eagle_inputs(target_token_ids, target_positions, next_token_ids,
                                       out_input_ids, out_positions, out_is_rejected_token_mask,
                                       out_is_masked_token_mask, out_new_token_indices,
                                       out_hidden_state_mapping, query_start_loc,
                                       query_end_loc, padding_token_id,
                                       parallel_drafting_token_id,
                                       num_padding_slots_per_request, shift_input_ids):
    """Extra: the number of outputs the op writes at most."""
    op = "copy_and_expand_eagle_inputs"
    at_least(op, "num_padding_slots_per_request", num_padding_slots_per_request, 1)
    num_input_tokens = vector(op, "target_token_ids", target_token_ids)
    exact_vector(op, "target_positions", target_positions, num_input_tokens,
                 "target_token_ids.shape[0]")
    num_reqs = vector(op, "next_token_ids", next_token_ids)
    num_outputs = expanded_num_outputs(num_input_tokens, num_reqs,
                                       num_padding_slots_per_request, shift_input_ids)
    outputs_what = ("T_in + num_reqs * (S - 1)" if shift_input_ids else "T_in + num_reqs * S")
    vector(op, "out_input_ids", out_input_ids, num_outputs, outputs_what)
    vector(op, "out_positions", out_positions, num_outputs, outputs_what)
    vector(op, "out_is_rejected_token_mask", out_is_rejected_token_mask, num_outputs,
           outputs_what, MASK_DTYPES)
    vector(op, "out_is_masked_token_mask", out_is_masked_token_mask, num_outputs,
           outputs_what, MASK_DTYPES)
    vector(op, "out_new_token_indices", out_new_token_indices,
           num_reqs * num_padding_slots_per_request, "num_reqs * S")
    vector(op, "out_hidden_state_mapping", out_hidden_state_mapping,
           num_input_tokens if shift_input_ids else 0, "T_in, with shift_input_ids")
    exact_vector(op, "query_start_loc", query_start_loc, num_reqs + 1, "num_reqs + 1")
    exact_vector(op, "query_end_loc", query_end_loc, num_reqs, "num_reqs")
    same_device(op, ("target_token_ids", "target_positions", "next_token_ids", "out_input_ids",
                     "out_positions", "out_is_rejected_token_mask", "out_is_masked_token_mask",
                     "out_new_token_indices", "out_hidden_state_mapping", "query_start_loc",
                     "query_end_loc"),
                (target_token_ids, target_positions, next_token_ids, out_input_ids,
                 out_positions, out_is_rejected_token_mask, out_is_masked_token_mask,
                 out_new_token_indices, out_hidden_state_mapping, query_start_loc,
                 query_end_loc))
    return (num_outputs,)


def check_copy_and_expand_dflash_inputs(next_token_ids, target_positions, out_input_ids,
                                        out_context_positions, out_query_positions,
                                        out_context_slot_mapping, out_query_slot_mapping,
                                        out_token_indices, block_table, query_start_loc,
                                        num_rejected_tokens, parallel_drafting_token_id,
                                        block_size, num_query_per_req, num_speculative_tokens):
    op = "copy_and_expand_dflash_inputs"
    at_least(op, "block_size", block_size, 1)
    at_least(op, "num_query_per_req", num_query_per_req, 1)
    if num_speculative_tokens < num_query_per_req - 1:
        raise ValueError(
            f"spec_ops.{op}: num_speculative_tokens must be >= num_query_per_req - 1 = "
            f"{num_query_per_req - 1} (query q >= 1 of request r writes token index "
            f"r * num_speculative_tokens + q - 1), got {num_speculative_tokens}")
    num_reqs = vector(op, "query_start_loc", query_start_loc, 1, "num_reqs + 1") - 1
    num_context = vector(op, "target_positions", target_positions)
    num_queries = num_reqs * num_query_per_req
    vector(op, "next_token_ids", next_token_ids, num_reqs, "num_reqs")
    vector(op, "out_input_ids", out_input_ids, num_queries, "num_reqs * num_query_per_req")
    vector(op, "out_context_positions", out_context_positions, num_context,
           "target_positions.shape[0]")
    vector(op, "out_query_positions", out_query_positions, num_queries,
           "num_reqs * num_query_per_req")
    vector(op, "out_context_slot_mapping", out_context_slot_mapping, num_context,
           "target_positions.shape[0]")
    vector(op, "out_query_slot_mapping", out_query_slot_mapping, num_queries,
           "num_reqs * num_query_per_req")
    vector(op, "out_token_indices", out_token_indices, num_reqs * num_speculative_tokens,
           "num_reqs * num_speculative_tokens")
    matrix(op, "block_table", block_table, num_reqs, 1, "num_reqs, >= 1 block")
    names = ["next_token_ids", "target_positions", "out_input_ids", "out_context_positions",
             "out_query_positions", "out_context_slot_mapping", "out_query_slot_mapping",
             "out_token_indices", "block_table", "query_start_loc"]
    tensors = [next_token_ids, target_positions, out_input_ids, out_context_positions,
               out_query_positions, out_context_slot_mapping, out_query_slot_mapping,
               out_token_indices, block_table, query_start_loc]
    if num_rejected_tokens is not None:
        vector(op, "num_rejected_tokens", num_rejected_tokens, num_reqs, "num_reqs")
        names.append("num_rejected_tokens")
        tensors.append(num_rejected_tokens)
    same_device(op, names, tensors)
    return ()


def padded_rows(positions, input_batch_size):
    """Rows of a draft step's slot mapping: input_batch_size, by default the real rows."""
    return positions.shape[0] if input_batch_size is None else input_batch_size


def _check_step_args(op, positions, block_table, seq_lens, block_size, max_model_len,
                     input_batch_size):
    """Returns the number of padded rows (input_batch_size with its default applied)."""
    at_least(op, "block_size", block_size, 1)
    at_least(op, "max_model_len", max_model_len, 1)
    num_reqs = vector(op, "positions", positions)
    input_batch_size = padded_rows(positions, input_batch_size)
    at_least(op, "input_batch_size", input_batch_size, num_reqs)
    matrix(op, "block_table", block_table, num_reqs, 1, "num_reqs, >= 1 block")
    vector(op, "seq_lens", seq_lens, num_reqs, "num_reqs")
    return input_batch_size


def check_eagle_step_update_slot_mapping_and_metadata(positions, block_table, seq_lens,
                                                      block_size, max_model_len,
                                                      out_clamped_positions, out_slot_mapping,
                                                      input_batch_size=None):
    op = "eagle_step_update_slot_mapping_and_metadata"
    input_batch_size = _check_step_args(op, positions, block_table, seq_lens, block_size,
                                        max_model_len, input_batch_size)
    num_reqs = positions.shape[0]
    vector(op, "out_clamped_positions", out_clamped_positions, num_reqs, "num_reqs")
    vector(op, "out_slot_mapping", out_slot_mapping, input_batch_size, "input_batch_size")
    same_device(op, ("positions", "block_table", "seq_lens", "out_clamped_positions",
                     "out_slot_mapping"),
                (positions, block_table, seq_lens, out_clamped_positions, out_slot_mapping))
    return ()


def check_eagle_multi_step_slot_mapping(positions, block_table, seq_lens, block_size,
                                        max_model_len, num_steps, out_positions,
                                        out_slot_mapping, out_seq_lens, input_batch_size=None):
    op = "eagle_multi_step_slot_mapping"
    at_least(op, "num_steps", num_steps, 0)
    input_batch_size = _check_step_args(op, positions, block_table, seq_lens, block_size,
                                        max_model_len, input_batch_size)
    num_reqs = positions.shape[0]
    matrix(op, "out_positions", out_positions, num_steps, num_reqs, "num_steps, num_reqs")
    matrix(op, "out_slot_mapping", out_slot_mapping, num_steps, input_batch_size,
           "num_steps, input_batch_size")
    matrix(op, "out_seq_lens", out_seq_lens, num_steps, num_reqs, "num_steps, num_reqs")
    same_device(op, ("positions", "block_table", "seq_lens", "out_positions",
                     "out_slot_mapping", "out_seq_lens"),
                (positions, block_table, seq_lens, out_positions, out_slot_mapping,
                 out_seq_lens))
    return ()


def check_update_num_computed_tokens_for_batch_change(num_computed_tokens, num_accepted_tokens,
                                                      prev_positions, valid_sampled_token_count,
                                                      prev_num_draft_tokens,
                                                      cpu_num_computed_tokens):
    """Extra: how many previous-batch rows a prev_positions entry may point at."""
    op = "update_num_computed_tokens_for_batch_change"
    num_rows = vector(op, "prev_positions", prev_positions)
    if num_rows > UPDATE_NUM_COMPUTED_TOKENS_MAX_ROWS:
        raise ValueError(
            f"spec_ops.{op}: prev_positions has {num_rows} rows; at most "
            f"{UPDATE_NUM_COMPUTED_TOKENS_MAX_ROWS} are supported (one program reads all rows "
            f"before writing any)")
    num_computed = vector(op, "num_computed_tokens", num_computed_tokens, num_rows,
                          "prev_positions.shape[0]")
    vector(op, "num_accepted_tokens", num_accepted_tokens, num_rows, "prev_positions.shape[0]")
    num_valid = vector(op, "valid_sampled_token_count", valid_sampled_token_count)
    num_prev_drafts = vector(op, "prev_num_draft_tokens", prev_num_draft_tokens)
    vector(op, "cpu_num_computed_tokens", cpu_num_computed_tokens, num_rows,
           "prev_positions.shape[0]")
    same_device(op, ("num_computed_tokens", "num_accepted_tokens", "prev_positions",
                     "valid_sampled_token_count", "prev_num_draft_tokens",
                     "cpu_num_computed_tokens"),
                (num_computed_tokens, num_accepted_tokens, prev_positions,
                 valid_sampled_token_count, prev_num_draft_tokens, cpu_num_computed_tokens))
    return (min(num_valid, num_computed, num_prev_drafts),)


def empty_slot_mapping(new_positions):
    """The result of SPEC 1.7, before it is written: int64, shaped like new_positions."""
    return torch.empty_like(new_positions, dtype=torch.int64)


def check_compute_new_slot_mapping(block_table, query_start_loc, new_positions,
                                   is_rejected_token_mask, block_size, num_new_tokens,
                                   max_model_len):
    op = "compute_new_slot_mapping"
    at_least(op, "block_size", block_size, 1)
    at_least(op, "num_new_tokens", num_new_tokens, 0)
    at_least(op, "max_model_len", max_model_len, 1)
    num_reqs = vector(op, "query_start_loc", query_start_loc, 1, "num_reqs + 1") - 1
    num_entries = vector(op, "new_positions", new_positions)
    exact_vector(op, "is_rejected_token_mask", is_rejected_token_mask, num_entries,
                 "new_positions.shape[0]", MASK_DTYPES)
    matrix(op, "block_table", block_table, num_reqs, 1, "num_reqs, >= 1 block")
    same_device(op, ("block_table", "query_start_loc", "new_positions",
                     "is_rejected_token_mask"),
                (block_table, query_start_loc, new_positions, is_rejected_token_mask))
    return ()
