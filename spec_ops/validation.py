"""Argument checks for every op: host-side metadata only, no device reads, before any launch.

Each ``check_<op>`` takes the op's arguments, raises ``TypeError`` (wrong dtype) or
``ValueError`` (rank, length, stride, device, bad scalar) naming the argument and what was
expected, and returns the tuple of extra sizes its kernels take after the op's own
arguments, so those are computed in exactly one place.
"""

import torch

INDEX_DTYPES = (torch.int32, torch.int64)
MASK_DTYPES = (torch.bool, torch.bool)     # two entries, like INDEX_DTYPES: see vector()
_DTYPE_NAMES = {INDEX_DTYPES: "int32 or int64", MASK_DTYPES: "bool"}
EXACT, AT_LEAST = True, False


def _none_error(op, name):
    return TypeError(f"spec_ops.{op}: {name} must be a tensor, got None")


def device_of(op, name, t):
    """The device of the op's first tensor argument, which every other tensor must share."""
    if t is None:
        raise _none_error(op, name)
    return t.device


def vector(op, name, t, device, length, what, exact=AT_LEAST, dtypes=INDEX_DTYPES):
    """A 1-D tensor of ``dtypes`` on ``device`` with unit stride and ``length`` entries
    (at least ``length`` unless ``exact``); returns its length."""
    if t is None:
        raise _none_error(op, name)
    dtype = t.dtype
    if dtype is not dtypes[0] and dtype is not dtypes[1]:
        raise TypeError(f"spec_ops.{op}: {name} must be {_DTYPE_NAMES[dtypes]}, got {dtype}")
    if t.dim() != 1:
        raise ValueError(f"spec_ops.{op}: {name} must be 1-D, got shape {tuple(t.shape)}")
    if not t.is_contiguous():
        raise ValueError(f"spec_ops.{op}: {name} must have unit stride, got stride {t.stride(0)}")
    if t.device != device:
        _device_error(op, name, t, device)
    size = t.numel()
    if size < length or (exact and size != length):
        raise ValueError(f"spec_ops.{op}: {name} must have {'' if exact else 'at least '}"
                         f"{what} = {length} entries, got {size}")
    return size


def matrix(op, name, t, device, min_rows, min_cols, what):
    """A 2-D int tensor on ``device``, unit stride along the last dim, rows not overlapping,
    at least [min_rows, min_cols]; returns its shape."""
    if t is None:
        raise _none_error(op, name)
    dtype = t.dtype
    if dtype is not torch.int32 and dtype is not torch.int64:
        raise TypeError(f"spec_ops.{op}: {name} must be int32 or int64, got {dtype}")
    if t.dim() != 2:
        raise ValueError(f"spec_ops.{op}: {name} must be 2-D, got shape {tuple(t.shape)}")
    rows, cols = t.shape
    row_stride, col_stride = t.stride()
    if cols > 1 and col_stride != 1:
        raise ValueError(f"spec_ops.{op}: {name} must have unit stride along its last dim, "
                         f"got strides {(row_stride, col_stride)}")
    if t.device != device:
        _device_error(op, name, t, device)
    if rows > 1 and row_stride < cols:
        raise ValueError(
            f"spec_ops.{op}: {name} rows overlap: row stride {row_stride} < {cols} columns")
    if rows < min_rows or cols < min_cols:
        raise ValueError(f"spec_ops.{op}: {name} must be at least [{min_rows}, {min_cols}] "
                         f"({what}), got {[rows, cols]}")
    return rows, cols


def _device_error(op, name, t, device):
    raise ValueError(f"spec_ops.{op}: all tensors must be on one device; expected {name} on "
                     f"{device} (the first tensor's), got {t.device}")


def at_least(op, name, value, minimum):
    if value < minimum:
        raise ValueError(f"spec_ops.{op}: {name} must be >= {minimum}, got {value}")


class OverlapCheck:
    """Rejects a call in which a written tensor shares memory with any other tensor argument.

    Built from the op's schema (``Tensor(a!)`` marks what is written). Each tensor covers the
    byte range from its first to one past its last element; two tensors overlap when their
    ranges intersect: device addresses for real tensors, and for fake or meta tensors (which
    have none) the storage object plus the byte offset in it. ``may_alias`` names pairs that
    may be the very same memory (same first element), never a shifted overlap. Decided from
    metadata only.
    """

    def __init__(self, op, schema, may_alias=()):
        self.op = op
        self.arguments = [
            (i, argument.name, argument.alias_info is not None and argument.alias_info.is_write)
            for i, argument in enumerate(schema.arguments)
            if isinstance(argument.type, torch.TensorType)
            or (isinstance(argument.type, torch.OptionalType)
                and isinstance(argument.type.getElementType(), torch.TensorType))]
        self.may_alias = {frozenset(pair) for pair in may_alias}

    def __call__(self, args, fake=False):
        spans = []
        for i, name, written in self.arguments:
            t = args[i]
            if t is None:
                continue
            count = t.numel()
            if count == 0:
                continue
            if t.dim() == 2:
                rows, cols = t.shape
                count = (rows - 1) * t.stride()[0] + cols
            size = t.element_size()
            if fake:
                start = (id(t.untyped_storage()) << 64) + t.storage_offset() * size
            else:
                start = t.data_ptr()
            spans.append((start, start + count * size, written, name))
        spans.sort()
        for i, (start, end, written, name) in enumerate(spans):
            for other_start, _, other_written, other in spans[i + 1:]:
                if other_start >= end:
                    break
                if (written or other_written) and not (
                        other_start == start and frozenset((name, other)) in self.may_alias):
                    first, second = (name, other) if written else (other, name)
                    raise ValueError(
                        f"spec_ops.{self.op}: {first} overlaps {second} in memory; a tensor "
                        f"the op writes must not share memory with any other argument")


# --- one check per op ----------------------------------------------------------------------

def _check_next_token_args(op, sampled_token_ids, discard_request_mask, backup_next_token_ids,
                           next_token_ids, valid_sampled_tokens_count, vocab_size):
    """SPEC 1.1's arguments; returns (num_reqs, device)."""
    device = device_of(op, "sampled_token_ids", sampled_token_ids)
    num_reqs, _ = matrix(op, "sampled_token_ids", sampled_token_ids, device, 0, 1,
                         "num_reqs, K + 1 >= 1")
    vector(op, "discard_request_mask", discard_request_mask, device, num_reqs, "num_reqs",
           EXACT, MASK_DTYPES)
    vector(op, "backup_next_token_ids", backup_next_token_ids, device, num_reqs, "num_reqs",
           EXACT)
    vector(op, "next_token_ids", next_token_ids, device, num_reqs, "num_reqs")
    vector(op, "valid_sampled_tokens_count", valid_sampled_tokens_count, device, num_reqs,
           "num_reqs")
    at_least(op, "vocab_size", vocab_size, 1)
    return num_reqs, device


def _check_prepare_inputs_args(op, num_reqs, device, query_start_loc, token_indices_to_sample,
                               num_rejected_tokens):
    """SPEC 1.2's arguments other than cu_num_draft_tokens and valid_sampled_tokens_count."""
    vector(op, "query_start_loc", query_start_loc, device, num_reqs + 1, "num_reqs + 1", EXACT)
    vector(op, "token_indices_to_sample", token_indices_to_sample, device, num_reqs,
           "num_reqs")
    vector(op, "num_rejected_tokens", num_rejected_tokens, device, num_reqs, "num_reqs")


def check_eagle_prepare_next_token_padded(sampled_token_ids, discard_request_mask,
                                          backup_next_token_ids, next_token_ids,
                                          valid_sampled_tokens_count, vocab_size):
    _check_next_token_args("eagle_prepare_next_token_padded", sampled_token_ids,
                           discard_request_mask, backup_next_token_ids, next_token_ids,
                           valid_sampled_tokens_count, vocab_size)
    return ()


def check_eagle_prepare_inputs_padded(cu_num_draft_tokens, valid_sampled_tokens_count,
                                      query_start_loc, token_indices_to_sample,
                                      num_rejected_tokens):
    op = "eagle_prepare_inputs_padded"
    device = device_of(op, "cu_num_draft_tokens", cu_num_draft_tokens)
    num_reqs = vector(op, "cu_num_draft_tokens", cu_num_draft_tokens, device, 0, "")
    vector(op, "valid_sampled_tokens_count", valid_sampled_tokens_count, device, num_reqs,
           "num_reqs")
    _check_prepare_inputs_args(op, num_reqs, device, query_start_loc, token_indices_to_sample,
                               num_rejected_tokens)
    return ()


def check_prepare_padded_draft_inputs(sampled_token_ids, discard_request_mask,
                                      backup_next_token_ids, cu_num_draft_tokens,
                                      query_start_loc, next_token_ids,
                                      valid_sampled_tokens_count, token_indices_to_sample,
                                      num_rejected_tokens, vocab_size):
    op = "prepare_padded_draft_inputs"
    num_reqs, device = _check_next_token_args(
        op, sampled_token_ids, discard_request_mask, backup_next_token_ids, next_token_ids,
        valid_sampled_tokens_count, vocab_size)
    vector(op, "cu_num_draft_tokens", cu_num_draft_tokens, device, num_reqs, "num_reqs", EXACT)
    _check_prepare_inputs_args(op, num_reqs, device, query_start_loc, token_indices_to_sample,
                               num_rejected_tokens)
    return ()


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
    device = device_of(op, "target_token_ids", target_token_ids)
    num_input = vector(op, "target_token_ids", target_token_ids, device, 0, "")
    vector(op, "target_positions", target_positions, device, num_input,
           "target_token_ids.shape[0]", EXACT)
    num_reqs = vector(op, "next_token_ids", next_token_ids, device, 0, "")
    # Every input token plus S slots per request, minus one per request with shift.
    num_outputs = num_input + num_reqs * (num_padding_slots_per_request - 1 if shift_input_ids
                                          else num_padding_slots_per_request)
    outputs = "T_in + num_reqs * (S - 1)" if shift_input_ids else "T_in + num_reqs * S"
    vector(op, "out_input_ids", out_input_ids, device, num_outputs, outputs)
    vector(op, "out_positions", out_positions, device, num_outputs, outputs)
    vector(op, "out_is_rejected_token_mask", out_is_rejected_token_mask, device, num_outputs,
           outputs, AT_LEAST, MASK_DTYPES)
    vector(op, "out_is_masked_token_mask", out_is_masked_token_mask, device, num_outputs,
           outputs, AT_LEAST, MASK_DTYPES)
    vector(op, "out_new_token_indices", out_new_token_indices, device,
           num_reqs * num_padding_slots_per_request, "num_reqs * S")
    vector(op, "out_hidden_state_mapping", out_hidden_state_mapping, device,
           num_input if shift_input_ids else 0, "T_in (with shift_input_ids)")
    vector(op, "query_start_loc", query_start_loc, device, num_reqs + 1, "num_reqs + 1", EXACT)
    vector(op, "query_end_loc", query_end_loc, device, num_reqs, "num_reqs", EXACT)
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
    device = device_of(op, "next_token_ids", next_token_ids)
    num_reqs = vector(op, "query_start_loc", query_start_loc, device, 1, "num_reqs + 1") - 1
    num_context = vector(op, "target_positions", target_positions, device, 0, "")
    num_queries = num_reqs * num_query_per_req
    queries = "num_reqs * num_query_per_req"
    vector(op, "next_token_ids", next_token_ids, device, num_reqs, "num_reqs")
    vector(op, "out_input_ids", out_input_ids, device, num_queries, queries)
    vector(op, "out_context_positions", out_context_positions, device, num_context,
           "target_positions.shape[0]")
    vector(op, "out_query_positions", out_query_positions, device, num_queries, queries)
    vector(op, "out_context_slot_mapping", out_context_slot_mapping, device, num_context,
           "target_positions.shape[0]")
    vector(op, "out_query_slot_mapping", out_query_slot_mapping, device, num_queries, queries)
    vector(op, "out_token_indices", out_token_indices, device,
           num_reqs * num_speculative_tokens, "num_reqs * num_speculative_tokens")
    matrix(op, "block_table", block_table, device, num_reqs, min(num_reqs, 1),
           "num_reqs, >= 1 block when num_reqs > 0")
    if num_rejected_tokens is not None:
        vector(op, "num_rejected_tokens", num_rejected_tokens, device, num_reqs,
               "num_reqs")
    return ()


def padded_rows(positions, input_batch_size):
    """Rows of a draft step's slot mapping: input_batch_size, by default the real rows."""
    return positions.shape[0] if input_batch_size is None else input_batch_size


def _check_step_args(op, positions, block_table, seq_lens, block_size, max_model_len,
                     input_batch_size):
    """Returns (num_reqs, padded rows, device)."""
    at_least(op, "block_size", block_size, 1)
    at_least(op, "max_model_len", max_model_len, 1)
    device = device_of(op, "positions", positions)
    num_reqs = vector(op, "positions", positions, device, 0, "")
    padded = padded_rows(positions, input_batch_size)
    at_least(op, "input_batch_size", padded, num_reqs)
    matrix(op, "block_table", block_table, device, num_reqs, min(num_reqs, 1),
           "num_reqs, >= 1 block when num_reqs > 0")
    vector(op, "seq_lens", seq_lens, device, num_reqs, "num_reqs")
    return num_reqs, padded, device


def check_eagle_step_update_slot_mapping_and_metadata(positions, block_table, seq_lens,
                                                      block_size, max_model_len,
                                                      out_clamped_positions, out_slot_mapping,
                                                      input_batch_size=None):
    op = "eagle_step_update_slot_mapping_and_metadata"
    num_reqs, padded, device = _check_step_args(op, positions, block_table, seq_lens,
                                                block_size, max_model_len, input_batch_size)
    vector(op, "out_clamped_positions", out_clamped_positions, device, num_reqs, "num_reqs")
    vector(op, "out_slot_mapping", out_slot_mapping, device, padded, "input_batch_size")
    return ()


def check_eagle_multi_step_slot_mapping(positions, block_table, seq_lens, block_size,
                                        max_model_len, num_steps, out_positions,
                                        out_slot_mapping, out_seq_lens, input_batch_size=None):
    op = "eagle_multi_step_slot_mapping"
    at_least(op, "num_steps", num_steps, 0)
    num_reqs, padded, device = _check_step_args(op, positions, block_table, seq_lens,
                                                block_size, max_model_len, input_batch_size)
    matrix(op, "out_positions", out_positions, device, num_steps, num_reqs,
           "num_steps, num_reqs")
    matrix(op, "out_slot_mapping", out_slot_mapping, device, num_steps, padded,
           "num_steps, input_batch_size")
    matrix(op, "out_seq_lens", out_seq_lens, device, num_steps, num_reqs, "num_steps, num_reqs")
    return ()


def check_update_num_computed_tokens_for_batch_change(num_computed_tokens, num_accepted_tokens,
                                                      prev_positions, valid_sampled_token_count,
                                                      prev_num_draft_tokens,
                                                      cpu_num_computed_tokens):
    """Extra: how many previous-batch rows a prev_positions entry may point at."""
    op = "update_num_computed_tokens_for_batch_change"
    device = device_of(op, "num_computed_tokens", num_computed_tokens)
    num_rows = vector(op, "prev_positions", prev_positions, device, 0, "")
    rows = "prev_positions.shape[0]"
    num_computed = vector(op, "num_computed_tokens", num_computed_tokens, device, num_rows, rows)
    vector(op, "num_accepted_tokens", num_accepted_tokens, device, num_rows, rows)
    num_valid = vector(op, "valid_sampled_token_count", valid_sampled_token_count, device, 0,
                       "")
    num_prev_drafts = vector(op, "prev_num_draft_tokens", prev_num_draft_tokens, device, 0, "")
    vector(op, "cpu_num_computed_tokens", cpu_num_computed_tokens, device, num_rows, rows)
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
    device = device_of(op, "block_table", block_table)
    num_reqs = vector(op, "query_start_loc", query_start_loc, device, 1, "num_reqs + 1") - 1
    num_entries = vector(op, "new_positions", new_positions, device, 0, "")
    vector(op, "is_rejected_token_mask", is_rejected_token_mask, device, num_entries,
           "new_positions.shape[0]", EXACT, MASK_DTYPES)
    matrix(op, "block_table", block_table, device, num_reqs, min(num_reqs, 1),
           "num_reqs, >= 1 block when num_reqs > 0")
    return ()
