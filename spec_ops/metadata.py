"""CommonAttentionMetadata and the adapters that rebuild it from op outputs (SPEC §3).

Every adapter also accepts the engine's own CommonAttentionMetadata: it reads only the fields
below and builds the result with ``replace``. None reads a device value back to the host.
Inside a CUDA graph (or a torch.compile'd graph meant for one) leave query_start_loc_cpu as
None: the adapters then leave it None instead of adding CPU work to the graph.
"""

import dataclasses
from typing import Any, Optional

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

    def batch_size(self):
        return self.seq_lens.shape[0]

    def naive_query_lens(self):
        return self.query_start_loc[1:] - self.query_start_loc[:-1]

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def unpadded(self, num_actual_tokens, num_actual_reqs):
        """The first num_actual_reqs requests and num_actual_tokens tokens (CUDA-graph padding
        removed)."""
        return self.replace(
            query_start_loc=self.query_start_loc[: num_actual_reqs + 1],
            query_start_loc_cpu=_cpu_twin(self, lambda cpu: cpu[: num_actual_reqs + 1]),
            seq_lens=self.seq_lens[:num_actual_reqs],
            num_reqs=num_actual_reqs,
            num_actual_tokens=num_actual_tokens,
            block_table_tensor=self.block_table_tensor[:num_actual_reqs],
            slot_mapping=self.slot_mapping[:num_actual_tokens],
        )


def _as(dtype_of, tensor):
    """tensor in dtype_of's dtype (a no-op when they already agree)."""
    return tensor if tensor.dtype == dtype_of.dtype else tensor.to(dtype_of.dtype)


def _cpu_twin(cad, update):
    """update(cad.query_start_loc_cpu), or None when the CPU twin is not tracked."""
    return None if cad.query_start_loc_cpu is None else update(cad.query_start_loc_cpu)


def _cpu_arange(length, like):
    return torch.arange(length, dtype=like.dtype)


def extend_all_queries_by_N(cad, N, arange, new_slot_mapping):  # noqa: N802,N803 (engine name)
    """Every query and sequence grows by N tokens (after SPEC 1.3 + 1.7).

    arange: a device int tensor [>= B + 1] with arange[i] = i (the caller's persistent buffer).
    new_slot_mapping: the slot mapping of the extended tokens (SPEC 1.7's result).
    """
    batch = cad.batch_size()
    return cad.replace(
        query_start_loc=_as(cad.query_start_loc, cad.query_start_loc + N * arange[: batch + 1]),
        query_start_loc_cpu=_cpu_twin(cad, lambda cpu: cpu + N * _cpu_arange(batch + 1, cpu)),
        seq_lens=cad.seq_lens + N,
        num_actual_tokens=cad.num_actual_tokens + batch * N,
        max_query_len=cad.max_query_len + N,
        max_seq_len=cad.max_seq_len + N,
        slot_mapping=new_slot_mapping,
    )


def dflash_query_metadata(cad, arange, num_query_per_req, out_query_slot_mapping,
                          num_rejected_tokens=None):
    """Metadata of the DFlash query pass (after SPEC 1.4): Q query tokens per request.

    seq_lens drop the rejected tokens (when given) and grow by Q; the slot mapping is the
    first R * Q entries of out_query_slot_mapping; the block table is unchanged.
    """
    batch = cad.batch_size()
    q = num_query_per_req
    seq_lens = cad.seq_lens
    if num_rejected_tokens is not None:
        seq_lens = _as(seq_lens, seq_lens - num_rejected_tokens[:batch])
    return cad.replace(
        query_start_loc=_as(cad.query_start_loc, arange[: batch + 1] * q),
        query_start_loc_cpu=_cpu_twin(cad, lambda cpu: _cpu_arange(batch + 1, cpu) * q),
        seq_lens=seq_lens + q,
        num_actual_tokens=batch * q,
        max_query_len=q,
        max_seq_len=cad.max_seq_len + q,
        slot_mapping=out_query_slot_mapping[: batch * q],
    )


def draft_decode_metadata(cad, arange, num_rejected_tokens=None):
    """Metadata for the draft decode loop, before its first step: one query token per request.

    With a padded drafter batch, pass num_rejected_tokens (SPEC 1.2's output): the rejected
    tokens leave each sequence. The step op then advances seq_lens in place.
    """
    batch = cad.batch_size()
    seq_lens = cad.seq_lens
    if num_rejected_tokens is not None:
        seq_lens = _as(seq_lens, seq_lens - num_rejected_tokens[:batch])
    return cad.replace(
        query_start_loc=_as(cad.query_start_loc, arange[: batch + 1]),
        query_start_loc_cpu=_cpu_twin(cad, lambda cpu: _cpu_arange(batch + 1, cpu)),
        seq_lens=seq_lens,
        num_actual_tokens=batch,
        max_query_len=1,
    )


def advance_draft_step_metadata(cad, out_slot_mapping, max_model_len, seq_lens=None):
    """Metadata after one draft step (SPEC 1.5, or one row of SPEC 5.2).

    slot_mapping = the step's slot mapping for the R real rows; max_seq_len grows by one,
    capped at max_model_len. SPEC 1.5 updates seq_lens in place; with SPEC 5.2 pass the step's
    row of out_seq_lens as seq_lens.
    """
    batch = cad.batch_size()
    return cad.replace(
        slot_mapping=out_slot_mapping[:batch],
        max_seq_len=min(cad.max_seq_len + 1, max_model_len),
        seq_lens=cad.seq_lens if seq_lens is None else seq_lens[:batch],
    )
