"""CommonAttentionMetadata and the adapters of SPEC §3: the rebuilt fields, inputs left alone,
duck typing (the engine's own metadata class works), no host sync (device tensors on meta)."""

import dataclasses

import pytest
import torch

import spec_ops
from spec_ops import CommonAttentionMetadata

I32 = torch.int32


def cad(device="cpu", qsl=(0, 3, 7, 8), seq_lens=(10, 20, 30), slots=8, cpu_twin=True):
    query_start_loc = torch.tensor(qsl, dtype=I32, device=device)
    return CommonAttentionMetadata(
        query_start_loc=query_start_loc,
        query_start_loc_cpu=torch.tensor(qsl, dtype=I32) if cpu_twin else None,
        seq_lens=torch.tensor(seq_lens, dtype=I32, device=device), num_reqs=len(seq_lens),
        num_actual_tokens=qsl[-1], max_query_len=4, max_seq_len=30,
        block_table_tensor=torch.arange(12, dtype=I32, device=device).reshape(3, 4),
        slot_mapping=torch.arange(slots, dtype=torch.int64, device=device))


def arange(n=16, device="cpu"):
    return torch.arange(n, dtype=I32, device=device)


def test_methods():
    c = cad()
    assert c.batch_size() == 3
    assert c.naive_query_lens().tolist() == [3, 4, 1]
    assert c.replace(max_query_len=9).max_query_len == 9 and c.max_query_len == 4
    u = c.unpadded(num_actual_tokens=7, num_actual_reqs=2)
    assert u.query_start_loc.tolist() == [0, 3, 7] and u.query_start_loc_cpu.tolist() == [0, 3, 7]
    assert u.seq_lens.tolist() == [10, 20] and u.num_reqs == 2 and u.num_actual_tokens == 7
    assert u.block_table_tensor.shape == (2, 4) and u.slot_mapping.tolist() == list(range(7))
    assert c.causal


def test_extend_all_queries_by_N():
    c = cad()
    new_slots = torch.arange(14, dtype=torch.int64)
    e = spec_ops.extend_all_queries_by_N(c, 2, arange(), new_slots)
    assert e.query_start_loc.tolist() == [0, 5, 11, 14] and e.query_start_loc.dtype == I32
    assert e.query_start_loc_cpu.tolist() == [0, 5, 11, 14] and e.query_start_loc_cpu.dtype == I32
    assert e.seq_lens.tolist() == [12, 22, 32]
    assert (e.num_actual_tokens, e.max_query_len, e.max_seq_len) == (14, 6, 32)
    assert e.slot_mapping is new_slots and e.block_table_tensor is c.block_table_tensor
    assert c.query_start_loc.tolist() == [0, 3, 7, 8] and c.seq_lens.tolist() == [10, 20, 30]


def test_extend_keeps_dtype_with_an_int64_arange():
    e = spec_ops.extend_all_queries_by_N(cad(), 1, torch.arange(8), torch.zeros(11))
    assert e.query_start_loc.dtype == I32


@pytest.mark.parametrize("rejected", [None, (1, 0, 2)])
def test_dflash_query_metadata(rejected):
    c = cad()
    out_query_slots = torch.arange(20, dtype=torch.int64)
    num_rejected = None if rejected is None else torch.tensor(rejected, dtype=I32)
    d = spec_ops.dflash_query_metadata(c, arange(), 3, out_query_slots, num_rejected)
    assert d.query_start_loc.tolist() == [0, 3, 6, 9] == d.query_start_loc_cpu.tolist()
    base = [10, 20, 30] if rejected is None else [9, 20, 28]
    assert d.seq_lens.tolist() == [s + 3 for s in base] and d.seq_lens.dtype == I32
    assert (d.num_actual_tokens, d.max_query_len, d.max_seq_len) == (9, 3, 33)
    assert d.slot_mapping.tolist() == list(range(9))
    assert d.block_table_tensor is c.block_table_tensor


def test_draft_decode_loop_metadata():
    c = cad()
    decode = spec_ops.draft_decode_metadata(c, arange(), torch.tensor([1, 0, 2], dtype=I32))
    assert decode.query_start_loc.tolist() == [0, 1, 2, 3] == decode.query_start_loc_cpu.tolist()
    assert decode.seq_lens.tolist() == [9, 20, 28]
    assert (decode.num_actual_tokens, decode.max_query_len) == (3, 1)
    step_slots = torch.tensor([5, 6, 7, -1, -1], dtype=torch.int64)
    after = spec_ops.advance_draft_step_metadata(decode, step_slots, max_model_len=31)
    assert after.slot_mapping.tolist() == [5, 6, 7] and after.max_seq_len == 31
    assert spec_ops.advance_draft_step_metadata(after, step_slots, 31).max_seq_len == 31
    multi_seq = torch.tensor([[11, 22, 33]], dtype=I32)
    from_5_2 = spec_ops.advance_draft_step_metadata(decode, step_slots, 64, multi_seq[0])
    assert from_5_2.seq_lens.tolist() == [11, 22, 33] and from_5_2.max_seq_len == 31


def test_adapters_never_read_device_values():
    """Device tensors on meta: any .item()/.tolist() of one would raise."""
    c = cad(device="meta")
    rejected = torch.zeros(3, dtype=I32, device="meta")
    spec_ops.extend_all_queries_by_N(c, 2, arange(device="meta"),
                                     torch.zeros(14, dtype=torch.int64, device="meta"))
    spec_ops.dflash_query_metadata(c, arange(device="meta"), 3,
                                   torch.zeros(9, dtype=torch.int64, device="meta"), rejected)
    decode = spec_ops.draft_decode_metadata(c, arange(device="meta"), rejected)
    spec_ops.advance_draft_step_metadata(decode, torch.zeros(5, dtype=torch.int64,
                                                             device="meta"), 64)


def test_untracked_cpu_twin_stays_none():
    c = cad(cpu_twin=False)
    assert spec_ops.extend_all_queries_by_N(c, 1, arange(), c.slot_mapping).query_start_loc_cpu \
        is None
    assert spec_ops.draft_decode_metadata(c, arange()).query_start_loc_cpu is None


@dataclasses.dataclass
class EngineMetadata:
    """Stands in for an engine's own CommonAttentionMetadata: same fields, its own class."""

    query_start_loc: torch.Tensor
    query_start_loc_cpu: torch.Tensor
    seq_lens: torch.Tensor
    num_reqs: int
    num_actual_tokens: int
    max_query_len: int
    max_seq_len: int
    block_table_tensor: torch.Tensor
    slot_mapping: torch.Tensor
    logits_indices_padded: object = None
    engine_only_field: str = "kept"

    def batch_size(self):
        return self.seq_lens.shape[0]

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


def test_adapters_accept_the_engines_own_metadata():
    ours = cad()
    theirs = EngineMetadata(**{f.name: getattr(ours, f.name)
                               for f in dataclasses.fields(EngineMetadata)
                               if f.name != "engine_only_field"})
    extended = spec_ops.extend_all_queries_by_N(theirs, 2, arange(), ours.slot_mapping)
    assert isinstance(extended, EngineMetadata) and extended.engine_only_field == "kept"
    assert extended.query_start_loc.tolist() == [0, 5, 11, 14]
    decode = spec_ops.draft_decode_metadata(theirs, arange())
    assert isinstance(decode, EngineMetadata) and decode.num_actual_tokens == 3
