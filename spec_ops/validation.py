"""Argument checks for every op: host-side metadata only, no device reads, before any launch.

Each ``check_<op>`` takes the op's arguments, raises ``TypeError`` (wrong dtype) or
``ValueError`` (rank, length, stride, device, bad scalar) naming the argument and what was
expected, and returns the tuple of extra sizes its kernels take after the op's own
arguments, so those are computed in exactly one place.
"""

import collections
import operator
import threading

import torch

from ._triton import UPDATE_NUM_COMPUTED_TOKENS_MAX_ROWS

INDEX_DTYPES = (torch.int32, torch.int64)
MASK_DTYPES = (torch.bool, torch.bool)     # two entries, like INDEX_DTYPES: see vector()
_DTYPE_NAMES = {INDEX_DTYPES: "int32 or int64", MASK_DTYPES: "bool"}
EXACT, AT_LEAST = True, False

try:        # dynamo's C++ tensor-metadata guard; without it every call takes the full check
    from torch._C._dynamo.guards import TensorGuards
except ImportError:
    TensorGuards = None

# These run on every eager call, and the eager overhead of an op is a measured target. So each
# op's tensors are first matched against the metadata of earlier valid calls in one C++ call
# (``VerifiedMetadata``); on a match the checks pass ``device=None`` and only sizes are read.


def vector(op, name, t, device, length, what, exact=AT_LEAST, dtypes=INDEX_DTYPES):
    """A 1-D tensor of ``dtypes`` on ``device`` with unit stride and ``length`` entries
    (at least ``length`` unless ``exact``); returns its length. ``device`` None means the
    caller has verified the metadata already (see ``VerifiedMetadata``): only the length is
    checked."""
    if device is not None:
        dtype = t.dtype
        if dtype is not dtypes[0] and dtype is not dtypes[1]:
            raise TypeError(f"spec_ops.{op}: {name} must be {_DTYPE_NAMES[dtypes]}, got {dtype}")
        if t.dim() != 1:
            raise ValueError(f"spec_ops.{op}: {name} must be 1-D, got shape {tuple(t.shape)}")
        if not t.is_contiguous():
            raise ValueError(
                f"spec_ops.{op}: {name} must have unit stride, got stride {t.stride(0)}")
        if t.device != device:
            _device_error(op, name, t, device)
    size = t.numel()
    if size < length or (exact and size != length):
        raise ValueError(f"spec_ops.{op}: {name} must have {'' if exact else 'at least '}"
                         f"{what} = {length} entries, got {size}")
    return size


def matrix(op, name, t, device, min_rows, min_cols, what):
    """A 2-D int tensor on ``device``, unit stride along the last dim, rows not overlapping,
    at least [min_rows, min_cols]; returns its shape. ``device`` None: as in ``vector``."""
    if device is not None:
        dtype = t.dtype
        if dtype is not torch.int32 and dtype is not torch.int64:
            raise TypeError(f"spec_ops.{op}: {name} must be int32 or int64, got {dtype}")
        if t.dim() != 2:
            raise ValueError(f"spec_ops.{op}: {name} must be 2-D, got shape {tuple(t.shape)}")
        if t.shape[1] > 1 and t.stride(1) != 1:
            raise ValueError(f"spec_ops.{op}: {name} must have unit stride along its last dim, "
                             f"got strides {t.stride()}")
        if t.device != device:
            _device_error(op, name, t, device)
    rows, cols = t.shape
    if rows > 1 and t.stride()[0] < cols:
        raise ValueError(
            f"spec_ops.{op}: {name} rows overlap: row stride {t.stride()[0]} < {cols} columns")
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


_numel = torch.Tensor.numel


def _tensor_guard(tensors, exact):
    """A dynamo TensorGuards over ``tensors``: their type, dispatch keys, dtype, device and
    rank, with sizes and strides as they are (``exact``) or free but for a unit last stride;
    None for tensors the guards do not take."""
    try:
        return TensorGuards(
            *tensors,
            dynamic_dims_sizes=[list(t.shape) if exact else [None] * t.dim() for t in tensors],
            dynamic_dims_strides=[list(t.stride()) if exact else [None] * (t.dim() - 1) + [1]
                                  for t in tensors])
    except (TypeError, RuntimeError):
        return None


def _compared_by_value(argument_type):
    """An int, SymInt or bool argument, optional or not (the dispatcher hands these to the
    kernels as Python ints, bools or None, so ``==`` compares them)."""
    if isinstance(argument_type, torch.OptionalType):
        argument_type = argument_type.getElementType()
    return isinstance(argument_type, (torch.IntType, torch.SymIntType, torch.BoolType))


def _optional_tensor(argument_type):
    return (isinstance(argument_type, torch.OptionalType)
            and isinstance(argument_type.getElementType(), torch.TensorType))


def _scalars_getter(schema):
    """args -> the op's non-tensor arguments as a tuple (trailing ones the dispatcher left out
    as defaults are left out here too); None where they cannot be compared by value: an
    optional tensor that is given, or an argument of another type (no such op keeps exact
    metadata)."""
    arguments = schema.arguments
    others = [i for i, argument in enumerate(arguments)
              if not isinstance(argument.type, torch.TensorType)]
    optional_tensors = [i for i in others if _optional_tensor(arguments[i].type)]
    if not all(_compared_by_value(arguments[i].type) for i in others
               if i not in optional_tensors):
        return lambda args: None
    runs = []           # slices of consecutive non-tensor positions, the last one open-ended
    for i in others:
        if runs and runs[-1][1] == i:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1])
    if runs and runs[-1][1] == len(arguments):
        runs[-1][1] = None
    slices = [slice(start, stop) for start, stop in runs]
    if not slices:
        return lambda args: ()
    if len(slices) == 1:
        scalars = operator.itemgetter(slices[0])
    else:
        def scalars(args):
            return sum(map(args.__getitem__, slices), ())
    if not optional_tensors:
        return scalars

    def scalars_unless_a_tensor(args):
        for i in optional_tensors:
            if i < len(args) and isinstance(args[i], torch.Tensor):
                return None
        return scalars(args)
    return scalars_unless_a_tensor


class VerifiedMetadata:
    """The tensor metadata of an op's earlier valid calls, matched in one C++ call.

    After a call passes its full check, its required tensor arguments are remembered as a
    dynamo ``TensorGuards``: Python type, dispatch keys, dtype, device, rank and a unit last
    stride, with sizes and other strides left free. A later call whose tensors match one of
    the few remembered sets has per-tensor metadata its check already accepted, so the check
    runs with ``verified=True`` and reads sizes only. Anything else takes the full check.

    A loop in steady state calls an op with the same sizes step after step. When calls
    matched that way keep coming with the same sizes and scalar arguments, their metadata is
    remembered *exactly* too (``exact``): a guard with those sizes and strides, the scalars,
    and the extras the check derived from them. A call that matches one of those has nothing
    left to check, so it skips the check. (Validation reads metadata and scalars only, so
    equal metadata and scalars pass equally.)

    Each remembered set also names its tensors' dtypes with a small int, the *variant*, which
    the CUDA kernels use in place of the dtypes in their launch keys.
    """

    MAX_REMEMBERED = 8      # e.g. one dtype mix on each of 8 GPUs
    MAX_EXACT = 4           # e.g. a few batch sizes taking turns
    PROMOTE_AFTER, EVICT_AFTER = 3, 64
    RECENT = (PROMOTE_AFTER - 1) * MAX_EXACT + 1  # MAX_EXACT sets in turn all get promoted

    def __init__(self, tensor_positions, scalars=lambda args: None):
        assert len(tensor_positions) >= 2, "itemgetter returns a tuple for two or more"
        self.tensors = operator.itemgetter(*tensor_positions)
        self.scalars = scalars  # args -> non-tensor args, or None: no exact metadata
        self.guards = []        # (guard, variant), most recent first
        self.exact = []         # (guard, scalars, extras, variant), most recent first
        self.recent = collections.deque(maxlen=self.RECENT)    # keys of size-only checks
        self.size_only_calls = self.promoted_at = 0
        self.variants = {}      # dtypes of the tensors -> variant
        self.lock = threading.Lock()

    @classmethod
    def for_schema(cls, schema):
        return cls([i for i, argument in enumerate(schema.arguments)
                    if isinstance(argument.type, torch.TensorType)], _scalars_getter(schema))

    def __call__(self, args):
        """The variant of ``args`` if its tensors match a remembered valid call, else None."""
        tensors = self.tensors(args)
        for guard, variant in self.guards:
            if guard.check(*tensors):
                return variant
        return None

    def checked(self, args, check):
        """(extras, variant) of a call, checked as little as its match allows: nothing on
        exact metadata, sizes only on remembered metadata, in full otherwise (which raises on
        bad input). The CUDA kernels run this inlined (``_library.define``)."""
        tensors, scalars = self.tensors(args), self.scalars(args)
        for guard, known_scalars, extras, variant in self.exact:
            if known_scalars == scalars and guard.check(*tensors):
                return extras, variant
        for guard, variant in self.guards:
            if guard.check(*tensors):
                extras = check(*args, verified=True)
                self.seen(tensors, scalars, extras, variant)
                return extras, variant
        extras = check(*args)
        return extras, self.remember(args)

    def remember(self, args):
        """Remember the tensors of ``args``, which passed the full check; returns their
        variant. Tensors a guard could never match again (a size-1 dim with another stride)
        are not remembered, so such calls do not build a guard each time."""
        tensors = self.tensors(args)
        dtypes = tuple(t.dtype for t in tensors)
        with self.lock:     # two dtype mixes must never share a variant (a launch key)
            variant = self.variants.setdefault(dtypes, len(self.variants))
        if TensorGuards is None or any(t.stride()[-1] != 1 for t in tensors):
            return variant
        guard = _tensor_guard(tensors, exact=False)
        if guard is not None and guard.check(*tensors):
            with self.lock:
                self.guards = [(guard, variant), *self.guards[:self.MAX_REMEMBERED - 1]]
        return variant

    def seen(self, tensors, scalars, extras, variant):
        """After a size-only check of ``tensors`` passed with these scalars and extras: the
        PROMOTE_AFTER-th time the same key comes among the last RECENT such calls, remember
        this call exactly. The key is the scalars and the sizes of the first and last tensor:
        cheap, and only a hint (the guard is what is exact; a hint that repeats while other
        sizes change costs a guard that goes unused). A guard costs several checks to build,
        so sizes that change on every call, or come back only once, never pay for one; and
        once every exact slot is taken, a slot changes hands at most once per EVICT_AFTER
        size-only calls, which also bounds unused guards."""
        if scalars is None:
            return
        self.size_only_calls += 1           # races here lose a promotion at worst
        if (len(self.exact) == self.MAX_EXACT
                and self.size_only_calls - self.promoted_at < self.EVICT_AFTER):
            return
        key = (scalars, _numel(tensors[0]), _numel(tensors[-1]))
        recent = self.recent
        recent.append(key)
        sightings = recent.count(key)
        if sightings < self.PROMOTE_AFTER:
            return
        self.recent = collections.deque((seen for seen in recent if seen != key),
                                        maxlen=self.RECENT)     # no race can make this raise
        self.promoted_at = self.size_only_calls
        guard = _tensor_guard(tensors, exact=True)
        if guard is not None and guard.check(*tensors):
            with self.lock:
                self.exact = [(guard, scalars, extras, variant),
                              *self.exact[:self.MAX_EXACT - 1]]


# --- one check per op ----------------------------------------------------------------------

def _check_next_token_args(op, sampled_token_ids, discard_request_mask, backup_next_token_ids,
                           next_token_ids, valid_sampled_tokens_count, vocab_size, verified):
    """SPEC 1.1's arguments; returns (num_reqs, device)."""
    device = None if verified else sampled_token_ids.device
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
                                          valid_sampled_tokens_count, vocab_size, *,
                                          verified=False):
    _check_next_token_args("eagle_prepare_next_token_padded", sampled_token_ids,
                           discard_request_mask, backup_next_token_ids, next_token_ids,
                           valid_sampled_tokens_count, vocab_size, verified)
    return ()


def check_eagle_prepare_inputs_padded(cu_num_draft_tokens, valid_sampled_tokens_count,
                                      query_start_loc, token_indices_to_sample,
                                      num_rejected_tokens, *, verified=False):
    op = "eagle_prepare_inputs_padded"
    device = None if verified else cu_num_draft_tokens.device
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
                                      num_rejected_tokens, vocab_size, *, verified=False):
    op = "prepare_padded_draft_inputs"
    num_reqs, device = _check_next_token_args(
        op, sampled_token_ids, discard_request_mask, backup_next_token_ids, next_token_ids,
        valid_sampled_tokens_count, vocab_size, verified)
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
                                       num_padding_slots_per_request, shift_input_ids, *,
                                       verified=False):
    """Extra: the number of outputs the op writes at most."""
    op = "copy_and_expand_eagle_inputs"
    at_least(op, "num_padding_slots_per_request", num_padding_slots_per_request, 1)
    device = None if verified else target_token_ids.device
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
                                        block_size, num_query_per_req, num_speculative_tokens,
                                        *, verified=False):
    op = "copy_and_expand_dflash_inputs"
    at_least(op, "block_size", block_size, 1)
    at_least(op, "num_query_per_req", num_query_per_req, 1)
    if num_speculative_tokens < num_query_per_req - 1:
        raise ValueError(
            f"spec_ops.{op}: num_speculative_tokens must be >= num_query_per_req - 1 = "
            f"{num_query_per_req - 1} (query q >= 1 of request r writes token index "
            f"r * num_speculative_tokens + q - 1), got {num_speculative_tokens}")
    device = None if verified else next_token_ids.device
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
    if num_rejected_tokens is not None:      # optional, so never among the verified tensors
        vector(op, "num_rejected_tokens", num_rejected_tokens, next_token_ids.device, num_reqs,
               "num_reqs")
    return ()


def padded_rows(positions, input_batch_size):
    """Rows of a draft step's slot mapping: input_batch_size, by default the real rows."""
    return positions.shape[0] if input_batch_size is None else input_batch_size


def _check_step_args(op, positions, block_table, seq_lens, block_size, max_model_len,
                     input_batch_size, verified):
    """Returns (num_reqs, padded rows, device)."""
    at_least(op, "block_size", block_size, 1)
    at_least(op, "max_model_len", max_model_len, 1)
    device = None if verified else positions.device
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
                                                      input_batch_size=None, *,
                                                      verified=False):
    op = "eagle_step_update_slot_mapping_and_metadata"
    num_reqs, padded, device = _check_step_args(op, positions, block_table, seq_lens,
                                                block_size, max_model_len, input_batch_size,
                                                verified)
    vector(op, "out_clamped_positions", out_clamped_positions, device, num_reqs, "num_reqs")
    vector(op, "out_slot_mapping", out_slot_mapping, device, padded, "input_batch_size")
    return ()


def check_eagle_multi_step_slot_mapping(positions, block_table, seq_lens, block_size,
                                        max_model_len, num_steps, out_positions,
                                        out_slot_mapping, out_seq_lens, input_batch_size=None,
                                        *, verified=False):
    op = "eagle_multi_step_slot_mapping"
    at_least(op, "num_steps", num_steps, 0)
    num_reqs, padded, device = _check_step_args(op, positions, block_table, seq_lens,
                                                block_size, max_model_len, input_batch_size,
                                                verified)
    matrix(op, "out_positions", out_positions, device, num_steps, num_reqs,
           "num_steps, num_reqs")
    matrix(op, "out_slot_mapping", out_slot_mapping, device, num_steps, padded,
           "num_steps, input_batch_size")
    matrix(op, "out_seq_lens", out_seq_lens, device, num_steps, num_reqs, "num_steps, num_reqs")
    return ()


def check_update_num_computed_tokens_for_batch_change(num_computed_tokens, num_accepted_tokens,
                                                      prev_positions, valid_sampled_token_count,
                                                      prev_num_draft_tokens,
                                                      cpu_num_computed_tokens, *,
                                                      verified=False):
    """Extra: how many previous-batch rows a prev_positions entry may point at."""
    op = "update_num_computed_tokens_for_batch_change"
    device = None if verified else num_computed_tokens.device
    num_rows = vector(op, "prev_positions", prev_positions, device, 0, "")
    if num_rows > UPDATE_NUM_COMPUTED_TOKENS_MAX_ROWS:
        raise ValueError(
            f"spec_ops.{op}: prev_positions has {num_rows} rows; at most "
            f"{UPDATE_NUM_COMPUTED_TOKENS_MAX_ROWS} are supported (one program reads all rows "
            f"before writing any)")
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
                                   max_model_len, *, verified=False):
    op = "compute_new_slot_mapping"
    at_least(op, "block_size", block_size, 1)
    at_least(op, "num_new_tokens", num_new_tokens, 0)
    at_least(op, "max_model_len", max_model_len, 1)
    device = None if verified else block_table.device
    num_reqs = vector(op, "query_start_loc", query_start_loc, device, 1, "num_reqs + 1") - 1
    num_entries = vector(op, "new_positions", new_positions, device, 0, "")
    vector(op, "is_rejected_token_mask", is_rejected_token_mask, device, num_entries,
           "new_positions.shape[0]", EXACT, MASK_DTYPES)
    matrix(op, "block_table", block_table, device, num_reqs, min(num_reqs, 1),
           "num_reqs, >= 1 block when num_reqs > 0")
    return ()
