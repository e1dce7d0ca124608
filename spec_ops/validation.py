"""Argument checks for every op: host-side metadata only, no device reads, before any launch.

Each ``check_<op>`` takes the op's arguments, raises ``TypeError`` (wrong dtype) or
``ValueError`` (rank, length, stride, device, bad scalar) naming the argument and what was
expected, and returns the tuple of extra sizes its kernels take after the op's own
arguments, so those are computed in exactly one place.
"""

import operator

import torch

INDEX_DTYPES = (torch.int32, torch.int64)
MASK_DTYPES = (torch.bool, torch.bool)     # two entries, like INDEX_DTYPES: see vector()
POSITION_DTYPES = (torch.int64, torch.int64)
_DTYPE_NAMES = {INDEX_DTYPES: "int32 or int64", MASK_DTYPES: "bool", POSITION_DTYPES: "int64"}
EXACT, AT_LEAST = True, False


def _none_error(op, name):
    return TypeError(f"spec_ops.{op}: {name} must be a tensor, got None")


def device_of(op, name, t, verified=False):
    """The device of the op's first tensor argument, which every other tensor must share;
    None when ``verified`` (see ``vector``)."""
    if verified:
        return None
    if t is None:
        raise _none_error(op, name)
    return t.device


def vector(op, name, t, device, length, what, exact=AT_LEAST, dtypes=INDEX_DTYPES):
    """A 1-D tensor of ``dtypes`` on ``device`` with unit stride and ``length`` entries
    (at least ``length`` unless ``exact``); returns its length. ``device`` None: the call's
    layout matched an earlier valid call's (``KnownLayouts``), so only the length is read."""
    if device is not None:
        if t is None:
            raise _none_error(op, name)
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


def matrix(op, name, t, device, min_rows, min_cols, what, dtypes=INDEX_DTYPES):
    """A 2-D tensor of ``dtypes`` on ``device``, unit stride along the last dim, rows not
    overlapping, at least [min_rows, min_cols]; returns its shape. ``device`` None: as in
    ``vector``."""
    if device is not None:
        if t is None:
            raise _none_error(op, name)
        dtype = t.dtype
        if dtype is not dtypes[0] and dtype is not dtypes[1]:
            raise TypeError(f"spec_ops.{op}: {name} must be {_DTYPE_NAMES[dtypes]}, got {dtype}")
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


def fits_int64(op, name, value):
    """An integer argument within int64, the type every kernel takes its ints as: checked
    here, as the dispatcher would, for a call that does not dispatch, before the launch would
    try to bind or compile it (Triton's interpreter binds 2**63 ... 2**64 - 1 to an int64
    parameter as they are)."""
    if not -2**63 <= value < 2**63:
        raise ValueError(f"spec_ops.{op}: {name} must fit in int64, got {value}")


def at_least(op, name, value, minimum):
    """``minimum <= value``, and within int64 (``fits_int64``)."""
    if value < minimum:
        raise ValueError(f"spec_ops.{op}: {name} must be >= {minimum}, got {value}")
    fits_int64(op, name, value)


def argument_getter(positions):
    """args -> the tuple of the arguments at ``positions`` (one C call for two or more)."""
    if len(positions) > 1:
        return operator.itemgetter(*positions)
    return (lambda args: (args[positions[0]],)) if positions else (lambda args: ())


def is_tensor_type(schema_type):
    """Whether a schema argument is a Tensor or a Tensor?."""
    if isinstance(schema_type, torch.OptionalType):
        schema_type = schema_type.getElementType()
    return isinstance(schema_type, torch.TensorType)


try:        # dynamo's C++ tensor-metadata guard; without it every call takes the full check
    from torch._C._dynamo.guards import TensorGuards
except ImportError:
    TensorGuards = None


_is_nested = operator.attrgetter("is_nested")


def guardable(tensors):
    """Whether ``TensorGuards.check`` may look at ``tensors``: none of them is a nested tensor.
    The check reads every tensor's strides in C++ first, and a nested tensor of torch.nested's
    strided layout (a plain ``torch.Tensor``) fails that read with an error nothing can catch:
    the process aborts (torch 2.13; torch.compile's own guards abort alike). False where one
    is not a tensor at all, which no guard matches either."""
    try:
        return not any(map(_is_nested, tensors))
    except AttributeError:
        return False


class KnownLayouts:
    """The tensor layouts of an op's earlier valid calls, matched in one C++ call.

    Checking dtype, rank, unit stride and device tensor by tensor costs a few hundred
    nanoseconds each in Python. After a call passes its full check, its required tensor
    arguments are remembered as a dynamo ``TensorGuards`` (a private torch API; without it
    nothing is remembered): type, dispatch keys, dtype, device, rank and a unit last stride,
    sizes free. A later call whose tensors match one of the few remembered layouts has
    per-tensor metadata the check already accepted, so its check reads sizes only.
    Thread-safe by construction: ``guards`` is an immutable tuple, replaced whole; a reader
    iterates the tuple it got, and a lost update only costs a later full check.
    """

    MAX_REMEMBERED = 8      # e.g. one dtype mix on each of 8 GPUs

    def __init__(self, tensor_positions):
        self.tensors = argument_getter(tensor_positions)
        self.guards = ()

    @classmethod
    def for_schema(cls, schema):
        return cls([i for i, argument in enumerate(schema.arguments)
                    if isinstance(argument.type, torch.TensorType)])

    def match(self, tensors):
        """The positions of the 2-D tensors among a call's required tensors (``tensors``, as
        ``self.tensors(args)`` gives them; ``guardable``) when these match a remembered valid
        call's layout, else None."""
        for guard, matrices in self.guards:
            if guard.check(*tensors):
                return matrices
        return None

    def remember(self, args):
        """Remember the layout of ``args``, which passed the full check. Tensors a guard could
        never match again (a size-1 dim with another stride) are not remembered."""
        tensors = self.tensors(args)
        if TensorGuards is None or any(t.stride()[-1] != 1 for t in tensors if t.dim()):
            return
        try:
            guard = TensorGuards(*tensors,
                                 dynamic_dims_sizes=[[None] * t.dim() for t in tensors],
                                 dynamic_dims_strides=[[None] * (t.dim() - 1) + [1]
                                                       for t in tensors])
        except (TypeError, RuntimeError):
            return
        if guard.check(*tensors):
            matrices = tuple(k for k, t in enumerate(tensors) if t.dim() == 2)
            self.guards = ((guard, matrices), *self.guards[:self.MAX_REMEMBERED - 1])


# (reads, {}, written) -> whether a written tensor shares a storage object with another
# tensor among both (torch's C check of a custom op's outputs against its inputs); where a
# torch lacks it, every call takes the byte-range check.
_shares_storage = getattr(torch._C, "_any_output_is_alias_to_input_or_output", None)
_data_ptr = torch.Tensor.data_ptr
_dim = torch.Tensor.dim
_nbytes = operator.attrgetter("nbytes")


def writable_outside_inference_mode(op, arguments, args):
    """Outside ``torch.inference_mode`` an inference tensor (one made inside it) cannot be
    updated in place, torch's rule: a written one is a TypeError naming it, raised before
    anything runs (a CPU kernel would fail part way, having written the outs before it, and
    the Triton kernels write memory without asking). ``arguments``: OverlapCheck's."""
    if torch.is_inference_mode_enabled():
        return
    for i, name, written in arguments:
        if written and args[i] is not None and args[i].is_inference():
            raise TypeError(f"spec_ops.{op}: {name} is an inference tensor (made under "
                            f"torch.inference_mode), which cannot be written outside it")


class OverlapCheck:
    """Rejects a call in which a written tensor shares memory with any other tensor argument.

    Built from the op's schema (``Tensor(a!)`` marks what is written). Memory is compared the
    way torch compares its own ops' ``out=`` tensors with their inputs: storage first, then byte
    ranges within it. A call in which no written tensor shares a storage object with another
    tensor argument (each buffer its own allocation, the usual case) passes in one C call
    (``_shares_storage``). Two storage objects made over one allocation (DLPack, ``from_blob``,
    slices of an untyped storage) count as disjoint there, as they do for torch's ops.

    Otherwise each tensor covers the byte range from its first to one past its last element;
    two tensors overlap when their ranges intersect: device addresses for real tensors, and for
    fake or meta tensors (which have none) the storage object plus the byte offset in it.
    ``may_alias`` names pairs that may be the very same memory (same first element, same dtype
    and, for matrices, the same row stride, so that each element is the other's element of the
    same index), never a shifted overlap or an int32 view of an int64 buffer. Decided from
    metadata only. No two ranges intersecting (an allowed alias counting as one) is settled
    from the sorted starts and ends; anything else (inputs sharing memory, an error) takes the
    pairwise look, which names the arguments.
    """

    def __init__(self, op, schema, may_alias=()):
        self.op = op
        self.arguments = [
            (i, argument.name, argument.alias_info is not None and argument.alias_info.is_write)
            for i, argument in enumerate(schema.arguments) if is_tensor_type(argument.type)]
        # Required tensors first, in schema order (the order KnownLayouts.match counts in).
        required = [i for i, argument in enumerate(schema.arguments)
                    if isinstance(argument.type, torch.TensorType)]
        self.optional = [i for i, _, _ in self.arguments if i not in required]
        positions = required + self.optional
        self.tensors = argument_getter(positions)
        self.may_alias = {frozenset(pair) for pair in may_alias}
        self.writes = any(written for _, _, written in self.arguments)
        # The allowed pairs as places in self.tensors(args) (both are required tensors).
        names = [schema.arguments[i].name for i in positions]
        self.alias_slots = [(names.index(a), names.index(b)) for a, b in may_alias]
        self.reads = argument_getter([i for i, _, written in self.arguments if not written])
        self.written = argument_getter([i for i, _, written in self.arguments if written])

    def __call__(self, args, fake=False, matrices=None):
        """``matrices``: the positions of the 2-D tensors among the required ones, when known
        (KnownLayouts.match); else read from the tensors."""
        if not self.writes:
            return          # an op that only reads its arguments (1.7 returns a new tensor)
        if fake:
            return self._pairwise(args, fake)
        if _shares_storage is not None and not _shares_storage(self.reads(args), {},
                                                               self.written(args)):
            return      # no written tensor shares a storage with any other tensor argument
        tensors = self.tensors(args)
        if self.optional:       # optional tensors come last: the required ones keep their places
            tensors = [t for t in tensors if t is not None]
        starts = [*map(_data_ptr, tensors)]
        ends = [*map(operator.add, starts, map(_nbytes, tensors))]
        if matrices is None:
            matrices = [k for k, dim in enumerate(map(_dim, tensors)) if dim == 2]
        for k in matrices:          # a row-strided view spans its row stride
            t = tensors[k]
            if not t.is_contiguous():
                rows, cols = t.shape
                if rows and cols:
                    ends[k] = starts[k] + ((rows - 1) * t.stride()[0] + cols) * t.element_size()
        for a, b in self.alias_slots:   # an allowed alias, the very same memory: one range
            if (starts[a] == starts[b] and tensors[a].dtype == tensors[b].dtype
                    and (tensors[a].dim() < 2
                         or tensors[a].stride()[0] == tensors[b].stride()[0])):
                ends[a] = max(ends[a], ends[b])
                ends[b] = starts[b]     # empty: overlaps nothing
        # No two ranges intersect exactly when, with starts and ends sorted on their own,
        # the i-th smallest end is at most the (i+1)-th smallest start (at any address,
        # ranges begun minus ranges ended is then at most 1). Two C sorts of ints.
        starts.sort()
        ends.sort()
        if not all(map(operator.le, ends, starts[1:])):
            self._pairwise(args, fake)

    def _pairwise(self, args, fake):
        spans = []          # (first byte, one past the last byte, written, name, row stride)
        for i, name, written in self.arguments:
            t = args[i]
            if t is None:
                continue
            count, offset = t.numel(), t.storage_offset()
            if t.dim() == 2 and count:      # a row-strided view spans its row stride
                rows, cols = t.shape
                count = (rows - 1) * t.stride()[0] + cols
            if not (isinstance(count, int) and isinstance(offset, int)):
                # Symbolic sizes while tracing: comparing them would add guards. Eager calls,
                # and the compiled graph's calls of the real kernel, check these tensors.
                continue
            if not count:
                continue            # an empty tensor overlaps nothing
            size = t.element_size()
            start = (id(t.untyped_storage()) << 64) + offset * size if fake else t.data_ptr()
            # An allowed alias must match in layout: row stride and element type.
            layout = (t.stride()[0] if t.dim() == 2 else None, t.dtype)
            spans.append((start, start + count * size, written, name, layout))
        spans.sort(key=lambda span: span[:4])
        for i, (start, end, written, name, layout) in enumerate(spans):
            for other_start, _, other_written, other, other_layout in spans[i + 1:]:
                if other_start >= end:
                    break
                if (written or other_written) and not (
                        other_start == start and other_layout == layout
                        and frozenset((name, other)) in self.may_alias):
                    first, second = (name, other) if written else (other, name)
                    raise ValueError(
                        f"spec_ops.{self.op}: {first} overlaps {second} in memory; a tensor "
                        f"the op writes must not share memory with any other argument")


# --- one check per op ----------------------------------------------------------------------

def _check_next_token_args(op, sampled_token_ids, discard_request_mask, backup_next_token_ids,
                           next_token_ids, valid_sampled_tokens_count, vocab_size, verified=False):
    """1.1's arguments; returns (num_reqs, device)."""
    device = device_of(op, "sampled_token_ids", sampled_token_ids, verified)
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
    """1.2's arguments other than cu_num_draft_tokens and valid_sampled_tokens_count."""
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
    device = device_of(op, "cu_num_draft_tokens", cu_num_draft_tokens, verified)
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
    fits_int64(op, "padding_token_id", padding_token_id)
    fits_int64(op, "parallel_drafting_token_id", parallel_drafting_token_id)
    device = device_of(op, "target_token_ids", target_token_ids, verified)
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
    at_least(op, "num_speculative_tokens", num_speculative_tokens, 0)      # and below 2**63
    fits_int64(op, "parallel_drafting_token_id", parallel_drafting_token_id)
    device = device_of(op, "next_token_ids", next_token_ids, verified)
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
        # Optional, so in no remembered layout: always checked in full.
        vector(op, "num_rejected_tokens", num_rejected_tokens,
               device_of(op, "next_token_ids", next_token_ids), num_reqs,
               "num_reqs")
    return ()


def padded_rows(positions, input_batch_size):
    """Rows of a draft step's slot mapping: input_batch_size, by default the real rows (the
    last dim of positions: [R], or [3, R] for M-RoPE)."""
    return positions.shape[-1] if input_batch_size is None else input_batch_size


def _check_step_args(op, positions, block_table, seq_lens, block_size, max_model_len,
                     input_batch_size, verified=False, mrope=False):
    """Returns (num_reqs, padded rows, device). ``mrope``: positions are [3, R] (7.1)."""
    at_least(op, "block_size", block_size, 1)
    at_least(op, "max_model_len", max_model_len, 1)
    device = device_of(op, "positions", positions, verified)
    if mrope:
        num_reqs = _mrope_positions(op, "positions", positions, device, 0, "3, num_reqs")
    else:
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


def _mrope_positions(op, name, t, device, num_reqs, what):
    """An int64 [3, >= num_reqs] tensor, one row per rotary dimension; returns its columns."""
    rows, cols = matrix(op, name, t, device, 3, num_reqs, what, POSITION_DTYPES)
    if rows != 3:
        raise ValueError(f"spec_ops.{op}: {name} must have 3 rows (temporal, height, width), "
                         f"got shape {[rows, cols]}")
    return cols


def check_eagle_mrope_step_update_slot_mapping_and_metadata(positions, block_table, seq_lens,
                                                            block_size, max_model_len,
                                                            out_positions, out_slot_mapping,
                                                            input_batch_size=None, *,
                                                            verified=False):
    op = "eagle_mrope_step_update_slot_mapping_and_metadata"
    num_reqs, padded, device = _check_step_args(op, positions, block_table, seq_lens,
                                                block_size, max_model_len, input_batch_size,
                                                verified, mrope=True)
    _mrope_positions(op, "out_positions", out_positions, device, num_reqs, "3, num_reqs")
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
    device = device_of(op, "num_computed_tokens", num_computed_tokens, verified)
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
    """The result of 1.7, before it is written: int64, shaped like new_positions."""
    return torch.empty_like(new_positions, dtype=torch.int64)


def check_compute_new_slot_mapping(block_table, query_start_loc, new_positions,
                                   is_rejected_token_mask, block_size, num_new_tokens,
                                   max_model_len, *, verified=False):
    op = "compute_new_slot_mapping"
    at_least(op, "block_size", block_size, 1)
    at_least(op, "num_new_tokens", num_new_tokens, 0)
    at_least(op, "max_model_len", max_model_len, 1)
    device = device_of(op, "block_table", block_table, verified)
    num_reqs = vector(op, "query_start_loc", query_start_loc, device, 1, "num_reqs + 1") - 1
    num_entries = vector(op, "new_positions", new_positions, device, 0, "")
    # Request r owns qsl[r + 1] - qsl[r] + num_new_tokens entries and they add up to
    # new_positions.shape[0]: with query_start_loc never decreasing, R * num_new_tokens at most.
    if num_reqs * num_new_tokens > num_entries:
        raise ValueError(
            f"spec_ops.{op}: num_new_tokens must be <= new_positions.shape[0] / num_reqs = "
            f"{num_entries} / {num_reqs} (each request owns its query_start_loc span plus "
            f"num_new_tokens entries of new_positions), got {num_new_tokens}")
    vector(op, "is_rejected_token_mask", is_rejected_token_mask, device, num_entries,
           "new_positions.shape[0]", EXACT, MASK_DTYPES)
    matrix(op, "block_table", block_table, device, num_reqs, min(num_reqs, 1),
           "num_reqs, >= 1 block when num_reqs > 0")
    return ()


# --- the round ops (docs/round_ops.md) -----------------------------------------------------

def padded_size(size, padded):
    """A CUDA-graph padded count (num_input_tokens, input_batch_size): by default the real one."""
    return size if padded is None else padded


def parallel_round_sizes(target_token_ids, num_reqs, num_padding_slots_per_request,
                         shift_input_ids):
    """(N, F) of 6.2: the tokens each request gains in the first pass (S - 1 with shift, else
    S), and the first pass's token count T + R * N."""
    new = num_padding_slots_per_request - (1 if shift_input_ids else 0)
    return new, target_token_ids.shape[0] + num_reqs * new


def _check_round_inputs(op, sampled_token_ids, discard_request_mask, backup_next_token_ids,
                        cu_num_draft_tokens, query_start_loc, block_table, seq_lens,
                        next_token_ids, valid_sampled_tokens_count, vocab_size, block_size,
                        verified):
    """6.0's inputs from verification and the 1.1 outs; returns (num_reqs, device)."""
    at_least(op, "block_size", block_size, 1)
    num_reqs, device = _check_next_token_args(
        op, sampled_token_ids, discard_request_mask, backup_next_token_ids, next_token_ids,
        valid_sampled_tokens_count, vocab_size, verified)
    vector(op, "cu_num_draft_tokens", cu_num_draft_tokens, device, num_reqs, "num_reqs", EXACT)
    vector(op, "query_start_loc", query_start_loc, device, num_reqs + 1, "num_reqs + 1", EXACT)
    matrix(op, "block_table", block_table, device, num_reqs, min(num_reqs, 1),
           "num_reqs, >= 1 block when num_reqs > 0")
    vector(op, "seq_lens", seq_lens, device, num_reqs, "num_reqs")
    return num_reqs, device


def _check_first_pass_padding(op, num_first_pass, num_input_tokens, out_name, out, device):
    """num_input_tokens >= F and the first-pass slot mapping that holds that many entries."""
    padded = padded_size(num_first_pass, num_input_tokens)
    at_least(op, "num_input_tokens", padded, num_first_pass)
    vector(op, out_name, out, device, padded, "num_input_tokens")


def _check_round_steps(op, num_reqs, device, max_model_len, num_steps, input_batch_size,
                       out_step_positions, out_step_slot_mapping, out_step_seq_lens):
    """6.0's draft-step outs: [>= num_steps, >= R] (slot mapping: >= input_batch_size)."""
    at_least(op, "max_model_len", max_model_len, 1)
    at_least(op, "num_steps", num_steps, 0)
    padded = padded_size(num_reqs, input_batch_size)
    at_least(op, "input_batch_size", padded, num_reqs)
    # Nothing is written with num_steps = 0, so any (even empty) step outs will do.
    cols, padded_cols = (num_reqs, padded) if num_steps > 0 else (0, 0)
    matrix(op, "out_step_positions", out_step_positions, device, num_steps, cols,
           "num_steps, num_reqs")
    matrix(op, "out_step_slot_mapping", out_step_slot_mapping, device, num_steps, padded_cols,
           "num_steps, input_batch_size")
    matrix(op, "out_step_seq_lens", out_step_seq_lens, device, num_steps, cols,
           "num_steps, num_reqs")


def check_prepare_eagle_round(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                              cu_num_draft_tokens, query_start_loc, target_token_ids,
                              target_positions, target_slot_mapping, block_table, seq_lens,
                              next_token_ids, valid_sampled_tokens_count,
                              token_indices_to_sample, out_input_ids, out_positions,
                              out_slot_mapping, out_step_positions, out_step_slot_mapping,
                              out_step_seq_lens, vocab_size, block_size, max_model_len,
                              num_steps, num_input_tokens=None, input_batch_size=None, *,
                              verified=False):
    op = "prepare_eagle_round"
    num_reqs, device = _check_round_inputs(
        op, sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, block_table, seq_lens, next_token_ids, valid_sampled_tokens_count,
        vocab_size, block_size, verified)
    num_tokens = vector(op, "target_token_ids", target_token_ids, device, 0, "")
    vector(op, "target_positions", target_positions, device, num_tokens,
           "target_token_ids.shape[0]", EXACT)
    vector(op, "target_slot_mapping", target_slot_mapping, device, num_tokens,
           "target_token_ids.shape[0]", EXACT)
    vector(op, "token_indices_to_sample", token_indices_to_sample, device, num_reqs,
           "num_reqs")
    vector(op, "out_input_ids", out_input_ids, device, num_tokens, "T")
    vector(op, "out_positions", out_positions, device, num_tokens, "T")
    _check_first_pass_padding(op, num_tokens, num_input_tokens, "out_slot_mapping",
                              out_slot_mapping, device)
    _check_round_steps(op, num_reqs, device, max_model_len, num_steps, input_batch_size,
                       out_step_positions, out_step_slot_mapping, out_step_seq_lens)
    return ()


def check_prepare_parallel_round(sampled_token_ids, discard_request_mask,
                                 backup_next_token_ids, cu_num_draft_tokens, query_start_loc,
                                 target_token_ids, target_positions, block_table, seq_lens,
                                 next_token_ids, valid_sampled_tokens_count, out_input_ids,
                                 out_positions, out_is_masked_token_mask, out_new_token_indices,
                                 out_hidden_state_mapping, out_slot_mapping,
                                 out_query_start_loc, out_seq_lens, out_step_positions,
                                 out_step_slot_mapping, out_step_seq_lens, vocab_size,
                                 padding_token_id, parallel_drafting_token_id,
                                 num_padding_slots_per_request, shift_input_ids, block_size,
                                 max_model_len, num_steps, num_input_tokens=None,
                                 input_batch_size=None, *, verified=False):
    op = "prepare_parallel_round"
    slots = num_padding_slots_per_request
    at_least(op, "num_padding_slots_per_request", slots, 1)
    at_least(op, "num_steps", num_steps, 0)     # before the pairing below reads it
    fits_int64(op, "padding_token_id", padding_token_id)
    fits_int64(op, "parallel_drafting_token_id", parallel_drafting_token_id)
    if num_steps > 0 and (slots != 1 or shift_input_ids):
        raise ValueError(
            f"spec_ops.{op}: num_steps > 0 (draft steps, for the draft-model method) needs "
            f"num_padding_slots_per_request = 1 and shift_input_ids = False, got "
            f"num_steps = {num_steps}, num_padding_slots_per_request = {slots}, "
            f"shift_input_ids = {shift_input_ids}")
    num_reqs, device = _check_round_inputs(
        op, sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, block_table, seq_lens, next_token_ids, valid_sampled_tokens_count,
        vocab_size, block_size, verified)
    num_tokens = vector(op, "target_token_ids", target_token_ids, device, 0, "")
    vector(op, "target_positions", target_positions, device, num_tokens,
           "target_token_ids.shape[0]", EXACT)
    _, num_first_pass = parallel_round_sizes(target_token_ids, num_reqs, slots, shift_input_ids)
    first_pass = "T + num_reqs * N"
    vector(op, "out_input_ids", out_input_ids, device, num_first_pass, first_pass)
    vector(op, "out_positions", out_positions, device, num_first_pass, first_pass)
    vector(op, "out_is_masked_token_mask", out_is_masked_token_mask, device, num_first_pass,
           first_pass, AT_LEAST, MASK_DTYPES)
    vector(op, "out_new_token_indices", out_new_token_indices, device, num_reqs * slots,
           "num_reqs * S")
    vector(op, "out_hidden_state_mapping", out_hidden_state_mapping, device,
           num_tokens if shift_input_ids else 0, "T (with shift_input_ids)")
    _check_first_pass_padding(op, num_first_pass, num_input_tokens, "out_slot_mapping",
                              out_slot_mapping, device)
    vector(op, "out_query_start_loc", out_query_start_loc, device, num_reqs + 1,
           "num_reqs + 1")
    vector(op, "out_seq_lens", out_seq_lens, device, num_reqs, "num_reqs")
    _check_round_steps(op, num_reqs, device, max_model_len, num_steps, input_batch_size,
                       out_step_positions, out_step_slot_mapping, out_step_seq_lens)
    return ()


def check_prepare_dflash_round(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                               cu_num_draft_tokens, query_start_loc, target_positions,
                               block_table, seq_lens, next_token_ids,
                               valid_sampled_tokens_count, out_input_ids,
                               out_context_positions, out_query_positions,
                               out_context_slot_mapping, out_query_slot_mapping,
                               out_token_indices, out_query_start_loc, out_seq_lens, vocab_size,
                               parallel_drafting_token_id, block_size, num_speculative_tokens,
                               num_input_tokens=None, *, verified=False):
    op = "prepare_dflash_round"
    at_least(op, "num_speculative_tokens", num_speculative_tokens, 0)
    fits_int64(op, "parallel_drafting_token_id", parallel_drafting_token_id)
    num_reqs, device = _check_round_inputs(
        op, sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, block_table, seq_lens, next_token_ids, valid_sampled_tokens_count,
        vocab_size, block_size, verified)
    num_context = vector(op, "target_positions", target_positions, device, 0, "")
    num_queries = num_reqs * (num_speculative_tokens + 1)
    queries = "num_reqs * (num_speculative_tokens + 1)"
    vector(op, "out_input_ids", out_input_ids, device, num_queries, queries)
    vector(op, "out_context_positions", out_context_positions, device, num_context,
           "target_positions.shape[0]")
    vector(op, "out_query_positions", out_query_positions, device, num_queries, queries)
    vector(op, "out_context_slot_mapping", out_context_slot_mapping, device, num_context,
           "target_positions.shape[0]")
    _check_first_pass_padding(op, num_queries, num_input_tokens, "out_query_slot_mapping",
                              out_query_slot_mapping, device)
    vector(op, "out_token_indices", out_token_indices, device,
           num_reqs * num_speculative_tokens, "num_reqs * num_speculative_tokens")
    vector(op, "out_query_start_loc", out_query_start_loc, device, num_reqs + 1,
           "num_reqs + 1")
    vector(op, "out_seq_lens", out_seq_lens, device, num_reqs, "num_reqs")
    return ()
