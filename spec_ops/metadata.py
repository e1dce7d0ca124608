"""CommonAttentionMetadata and the adapters that rebuild it from op outputs (docs/metadata.md).

Every adapter also accepts the engine's own CommonAttentionMetadata: it reads only the fields
below and builds the result with ``replace``. None reads a device value back to the host.
Inside a CUDA graph (or a torch.compile'd graph meant for one) leave the host twins None: the
adapters then leave them None instead of adding CPU work to the graph.
"""

import dataclasses
import inspect
import types
from typing import Any, Callable, Optional

import torch


@dataclasses.dataclass
class CommonAttentionMetadata:
    """Per-batch attention metadata, with the engine's field names."""

    query_start_loc: torch.Tensor       # [B + 1] int32, device
    query_start_loc_cpu: Optional[torch.Tensor]   # [B + 1] int32, CPU (None: not tracked)
    seq_lens: torch.Tensor              # [B] int32, device
    num_reqs: int
    num_actual_tokens: int
    max_query_len: int
    max_seq_len: int
    block_table_tensor: torch.Tensor    # [B, n_blocks] int32, device
    slot_mapping: torch.Tensor          # [T] int64, device
    causal: bool = True
    # Pass-through fields: carried unchanged by every adapter.
    logits_indices_padded: Optional[torch.Tensor] = None
    num_logits_indices: Optional[int] = None
    encoder_seq_lens: Optional[Any] = None
    # Further host twins (None: not tracked), kept current by every adapter.
    seq_lens_cpu: Optional[torch.Tensor] = None               # [B] CPU, equal to seq_lens
    seq_lens_cpu_upper_bound: Optional[torch.Tensor] = None   # [B] CPU, >= seq_lens
    num_computed_tokens_cpu: Optional[torch.Tensor] = None    # [B] CPU, seq_lens - query lens

    def batch_size(self):
        return self.seq_lens.shape[0]

    def naive_query_lens(self):
        return self.query_start_loc[1:] - self.query_start_loc[:-1]

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def unpadded(self, num_actual_tokens, num_actual_reqs):
        """The first num_actual_reqs requests and num_actual_tokens tokens (CUDA-graph padding
        removed)."""
        per_request = _on_host(lambda twin: twin[:num_actual_reqs])
        return _rebuild(
            self,
            {"query_start_loc": _on_host(lambda twin: twin[: num_actual_reqs + 1]),
             "seq_lens": per_request, "num_computed_tokens": per_request},
            query_start_loc=self.query_start_loc[: num_actual_reqs + 1],
            seq_lens=self.seq_lens[:num_actual_reqs],
            num_reqs=num_actual_reqs,
            num_actual_tokens=num_actual_tokens,
            block_table_tensor=self.block_table_tensor[:num_actual_reqs],
            slot_mapping=self.slot_mapping[:num_actual_tokens],
        )


# --- host twins ------------------------------------------------------------------------------
#
# The host twins of each quantity an adapter changes, under the names engines give them, and
# whether the twin is an upper bound rather than a copy. "num_computed_tokens" is no device
# field: it is the engine's host count seq_lens - query lens (the tokens in the KV cache before
# the batch's queries), which changes whenever seq_lens and the query lengths do not change
# together.
_TWINS = {
    "query_start_loc": (("query_start_loc_cpu", False),),
    "seq_lens": (("seq_lens_cpu", False), ("_seq_lens_cpu", False),
                 ("seq_lens_cpu_upper_bound", True)),
    "num_computed_tokens": (("num_computed_tokens_cpu", False),
                            ("_num_computed_tokens_cpu", False)),
}
# Device values the engine derives lazily from these quantities and caches on the object;
# a change drops them, so that they are derived again from the new values.
_DERIVED_CACHES = {
    "query_start_loc": ("_num_computed_tokens_cache", "_token_to_req_indices_cache"),
    "seq_lens": ("_num_computed_tokens_cache",),
}


@dataclasses.dataclass(frozen=True)
class _Change:
    """How a quantity changes, as the host sees it: ``copy(twin)`` gives a copy twin's new
    value, ``bound(twin)`` an upper-bound twin's; None for either means the new value lives on
    the device only, so that twin becomes None."""

    copy: Optional[Callable]
    bound: Optional[Callable]


def _on_host(update):
    """A change the host knows exactly (+ N, * Q, a fresh arange, a slice). Each such update is
    non-decreasing in the old value, so it maps an upper bound to an upper bound."""
    return _Change(update, update)


def _on_device(bound=None):
    """A change that depends on device values (- num_rejected, a step op's update)."""
    return _Change(None, bound)


def _batch_size(cad):
    """B, the number of requests cad describes: seq_lens.shape[0] (what batch_size() gives;
    read from the field, so that metadata without the method works too)."""
    return cad.seq_lens.shape[0]


_ABSENT = object()


def _carried(cad, name):
    """cad's field ``name``, or None when cad has no such field. Never a property or other
    computed attribute: the engine's deprecated ``seq_lens_cpu`` property copies seq_lens from
    the device (a sync) when read. A dataclass's fields; for another class, what its instances,
    class body or ``__slots__`` hold."""
    if dataclasses.is_dataclass(cad):
        names = {field.name for field in dataclasses.fields(cad)}
        return getattr(cad, name) if name in names else None
    raw = inspect.getattr_static(cad, name, _ABSENT)
    if isinstance(raw, types.MemberDescriptorType):     # a __slots__ field (None while unset)
        return getattr(cad, name, None)
    if raw is _ABSENT or hasattr(type(raw), "__get__"):     # absent, or computed when read
        return None
    return raw


def _rebuild(cad, changes, **fields):
    """cad.replace(**fields), with every host twin cad carries updated per ``changes`` (quantity
    -> _Change; a quantity absent from it is unchanged) and the caches derived from a changed
    quantity dropped. A twin that is None stays None; only fields cad has reach replace()."""
    for quantity, change in changes.items():
        for name, is_bound in _TWINS[quantity]:
            twin = _carried(cad, name)
            if twin is not None:
                update = change.bound if is_bound else change.copy
                fields[name] = None if update is None else update(twin)
        for name in _DERIVED_CACHES.get(quantity, ()):
            if _carried(cad, name) is not None:
                fields[name] = None
    return cad.replace(**fields)


def _cpu_arange(length, like):
    return torch.arange(length, dtype=like.dtype)


def _as(dtype_of, tensor):
    """tensor in dtype_of's dtype (a no-op when they already agree)."""
    return tensor if tensor.dtype == dtype_of.dtype else tensor.to(dtype_of.dtype)


def _computed_tokens_change(cad, offset, drops_rejected):
    """The change of the computed tokens when seq_lens drop the rejected tokens (if
    drops_rejected) and the new seq_lens - query lens differ from the old seq_lens by offset:
    computed + old query lens - rejected + offset. Known on the host when nothing is rejected
    and query_start_loc_cpu gives the old query lengths."""
    qsl_cpu = _carried(cad, "query_start_loc_cpu")
    if drops_rejected or qsl_cpu is None:
        return _on_device()
    old_query_lens = qsl_cpu[1:] - qsl_cpu[:-1]
    return _on_host(lambda computed: computed + old_query_lens + offset)


def _step_bound(max_model_len, num_steps=1):
    """Maps an upper bound of seq_lens to one num_steps draft steps later: a step adds one or
    resets to 1, and never passes max_model_len."""
    return lambda bound: torch.clamp(bound + num_steps, max=max_model_len)


# --- the adapters ----------------------------------------------------------------------------

def _extend(cad, num_new_tokens, query_start_loc, seq_lens, slot_mapping):
    """cad with every query and sequence longer by num_new_tokens; the computed tokens stay
    (queries and sequences grow together)."""
    batch = _batch_size(cad)
    n = num_new_tokens
    return _rebuild(
        cad,
        {"query_start_loc": _on_host(lambda cpu: cpu + n * _cpu_arange(batch + 1, cpu)),
         "seq_lens": _on_host(lambda cpu: cpu + n)},
        query_start_loc=query_start_loc,
        seq_lens=seq_lens,
        num_actual_tokens=cad.num_actual_tokens + batch * n,
        max_query_len=cad.max_query_len + n,
        max_seq_len=cad.max_seq_len + n,
        slot_mapping=slot_mapping,
    )


def extend_all_queries_by_N(cad, N, arange, new_slot_mapping):  # noqa: N802,N803 (engine name)
    """Every query and sequence grows by N tokens (after 1.3 + 1.7; docs/metadata.md).

    arange: a device int tensor [>= B + 1] with arange[i] = i (the caller's persistent buffer).
    new_slot_mapping: the slot mapping of the extended tokens (1.7's result).
    """
    batch = _batch_size(cad)
    return _extend(cad, N,
                   _as(cad.query_start_loc, cad.query_start_loc + N * arange[: batch + 1]),
                   cad.seq_lens + N, new_slot_mapping)


def parallel_round_metadata(cad, num_new_tokens, out_query_start_loc, out_seq_lens,
                            out_slot_mapping):
    """Metadata of 6.2's first pass: the verification batch's, with every query and sequence
    longer by N = num_new_tokens (N = S - 1 with shift, S without; docs/round_ops.md, 6.2).

    The device fields are 6.2's outs: query_start_loc = out_query_start_loc[:R + 1], seq_lens =
    out_seq_lens[:R], slot_mapping = out_slot_mapping[:T + R * N]. Host fields and twins as
    extend_all_queries_by_N.
    """
    batch = _batch_size(cad)
    return _extend(cad, num_new_tokens, out_query_start_loc[: batch + 1], out_seq_lens[:batch],
                   out_slot_mapping[: cad.num_actual_tokens + batch * num_new_tokens])


def _dflash(cad, num_query_per_req, query_start_loc, seq_lens, slot_mapping, drops_rejected):
    """The DFlash query pass: Q queries per request, attending to each other both ways, after
    the request's accepted tokens (seq_lens - rejected, when drops_rejected)."""
    if _carried(cad, "causal") is None:
        raise TypeError(f"spec_ops: cad ({type(cad).__name__}) has no causal field, and the "
                        f"DFlash query pass is not causal: metadata for it needs causal=False")
    batch = _batch_size(cad)
    q = num_query_per_req
    grow = _on_host(lambda cpu: cpu + q)
    return _rebuild(
        cad,
        {"query_start_loc": _on_host(lambda cpu: _cpu_arange(batch + 1, cpu) * q),
         # The rejected counts live on the device; the old bound + Q still bounds the new value.
         "seq_lens": _on_device(grow.bound) if drops_rejected else grow,
         # seq_lens and query lens both become Q longer than the accepted tokens.
         "num_computed_tokens": _computed_tokens_change(cad, 0, drops_rejected)},
        query_start_loc=query_start_loc,
        seq_lens=seq_lens,
        num_actual_tokens=batch * q,
        max_query_len=q,
        max_seq_len=cad.max_seq_len + q,
        slot_mapping=slot_mapping,
        causal=False,
    )


def dflash_query_metadata(cad, arange, num_query_per_req, out_query_slot_mapping,
                          num_rejected_tokens=None):
    """Metadata of the DFlash query pass (after 1.4): Q query tokens per request, attending to
    each other both ways (causal=False; docs/metadata.md).

    seq_lens drop the rejected tokens (when given) and grow by Q; the slot mapping is the
    first R * Q entries of out_query_slot_mapping; the block table is unchanged.
    """
    batch = _batch_size(cad)
    q = num_query_per_req
    seq_lens = cad.seq_lens
    if num_rejected_tokens is not None:
        seq_lens = _as(seq_lens, seq_lens - num_rejected_tokens[:batch])
    return _dflash(cad, q, _as(cad.query_start_loc, arange[: batch + 1] * q), seq_lens + q,
                   out_query_slot_mapping[: batch * q], num_rejected_tokens is not None)


def dflash_round_metadata(cad, num_query_per_req, out_query_start_loc, out_seq_lens,
                          out_query_slot_mapping):
    """Metadata of 6.3's query pass, from the verification batch's (docs/round_ops.md, 6.3):
    query_start_loc = out_query_start_loc[:R + 1], seq_lens = out_seq_lens[:R] (rejected
    tokens dropped on the device), slot_mapping = out_query_slot_mapping[:R * Q],
    causal=False; host fields as dflash_query_metadata's with num_rejected_tokens.
    """
    batch = _batch_size(cad)
    q = num_query_per_req
    return _dflash(cad, q, out_query_start_loc[: batch + 1], out_seq_lens[:batch],
                   out_query_slot_mapping[: batch * q], drops_rejected=True)


def draft_decode_metadata(cad, arange, num_rejected_tokens=None):
    """Metadata for the draft decode loop, before its first step: one query token per request.

    With a padded drafter batch, pass num_rejected_tokens (1.2's output): the rejected tokens
    leave each sequence. The step op then advances seq_lens in place: without
    num_rejected_tokens those are cad's own seq_lens. slot_mapping stays cad's, for the step
    adapters to replace (docs/metadata.md).
    """
    batch = _batch_size(cad)
    drops_rejected = num_rejected_tokens is not None
    seq_lens = cad.seq_lens
    # One query token per request: the computed tokens become seq_lens - 1.
    changes = {"query_start_loc": _on_host(lambda cpu: _cpu_arange(batch + 1, cpu)),
               "num_computed_tokens": _computed_tokens_change(cad, -1, drops_rejected)}
    if drops_rejected:
        seq_lens = _as(seq_lens, seq_lens - num_rejected_tokens[:batch])
        changes["seq_lens"] = _on_device(bound=lambda cpu: cpu)
    return _rebuild(
        cad, changes,
        query_start_loc=_as(cad.query_start_loc, arange[: batch + 1]),
        seq_lens=seq_lens,
        num_actual_tokens=batch,
        max_query_len=1,
    )


def advance_draft_step_metadata(cad, out_slot_mapping, max_model_len, seq_lens=None):
    """Metadata after one draft step (1.5, or one row of 5.2; docs/metadata.md).

    slot_mapping = the step's slot mapping for the R real rows; max_seq_len grows by one,
    capped at max_model_len. 1.5 updates seq_lens in place; with 5.2 pass the step's row of
    out_seq_lens as seq_lens. Whether a row reached max_model_len follows from its position,
    which only the device holds, so exact seq_lens twins become None.
    """
    batch = _batch_size(cad)
    return _rebuild(
        cad,
        # One query token per request: the computed tokens are seq_lens - 1, on the device.
        {"seq_lens": _on_device(_step_bound(max_model_len)),
         "num_computed_tokens": _on_device()},
        slot_mapping=out_slot_mapping[:batch],
        max_seq_len=min(cad.max_seq_len + 1, max_model_len),
        seq_lens=cad.seq_lens if seq_lens is None else seq_lens[:batch],
    )


def advance_mrope_draft_step_metadata(cad, out_slot_mapping, max_model_len):
    """Metadata after one M-RoPE draft step (7.1, which updates seq_lens in place; docs/mrope.md).

    As advance_draft_step_metadata, except for the host twins: 7.1's new seq_lens (t + 1, or 1
    once t reaches max_model_len) follow from the old ones alone, so the host computes them,
    and the computed tokens (seq_lens - 1 with one query token) with them.
    """
    batch = _batch_size(cad)

    def step(seq_lens):
        return torch.where(seq_lens >= max_model_len, 1, seq_lens + 1)

    return _rebuild(
        cad,
        {"seq_lens": _Change(step, _step_bound(max_model_len)),
         "num_computed_tokens": _on_host(lambda computed: step(computed + 1) - 1)},
        slot_mapping=out_slot_mapping[:batch],
        max_seq_len=min(cad.max_seq_len + 1, max_model_len),
    )


def draft_step_metadata(cad, step, arange, out_step_slot_mapping, out_step_seq_lens,
                        max_model_len):
    """Metadata of draft step ``step`` from a multi-step op's outs (5.2, 6.1, 6.2), one query
    token per request (docs/round_ops.md, 6.0).

    cad is the metadata of the pass before the steps: the verification batch's for 6.1, 6.2's
    first pass (parallel_round_metadata), or draft_decode_metadata's result for 5.2. Its
    seq_lens bound the steps' start lengths, so max_seq_len becomes min(max_seq_len + step +
    1, max_model_len). slot_mapping = out_step_slot_mapping[step, :R], seq_lens =
    out_step_seq_lens[step, :R].
    """
    batch = _batch_size(cad)
    return _rebuild(
        cad,
        {"query_start_loc": _on_host(lambda cpu: _cpu_arange(batch + 1, cpu)),
         # The start lengths drop the rejected tokens on the device.
         "seq_lens": _on_device(_step_bound(max_model_len, step + 1)),
         "num_computed_tokens": _on_device()},
        query_start_loc=_as(cad.query_start_loc, arange[: batch + 1]),
        seq_lens=out_step_seq_lens[step, :batch],
        num_actual_tokens=batch,
        max_query_len=1,
        max_seq_len=min(cad.max_seq_len + step + 1, max_model_len),
        slot_mapping=out_step_slot_mapping[step, :batch],
    )


def eagle_round_metadata(cad, out_slot_mapping):
    """Metadata of 6.1's first pass: the verification batch's own, with the slot mapping
    out_slot_mapping[:T] (docs/round_ops.md, 6.1). Nothing else changes, so every host twin
    stays valid as it is."""
    return cad.replace(slot_mapping=out_slot_mapping[: cad.num_actual_tokens])
