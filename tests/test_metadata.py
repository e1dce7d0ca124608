"""CommonAttentionMetadata and the adapters of docs/metadata.md: the rebuilt fields, inputs left
alone, duck typing (the engine's own metadata class works), host twins never stale, no host
sync (device tensors on meta)."""

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


def test_dflash_adapters_need_a_causal_field():
    """The DFlash query pass is not causal: metadata that cannot say so is refused by name."""
    ours = cad()
    theirs = EngineMetadata(**{f.name: getattr(ours, f.name)
                               for f in dataclasses.fields(EngineMetadata)
                               if f.name != "engine_only_field"})
    slots = torch.zeros(3 * 2, dtype=torch.int64)
    with pytest.raises(TypeError, match="cad .*EngineMetadata.* no causal field"):
        spec_ops.dflash_query_metadata(theirs, arange(), 2, slots)
    with pytest.raises(TypeError, match="cad .*EngineMetadata.* no causal field"):
        spec_ops.dflash_round_metadata(theirs, 2, ours.query_start_loc, ours.seq_lens, slots)
    assert spec_ops.dflash_query_metadata(ours, arange(), 2, slots).causal is False


_FIELDS = ("query_start_loc", "query_start_loc_cpu", "seq_lens", "num_reqs",
           "num_actual_tokens", "max_query_len", "max_seq_len", "block_table_tensor",
           "slot_mapping")


class PlainMetadata:
    """Metadata that is no dataclass and has no batch_size(): the fields and replace only,
    which is all an adapter may use."""

    def __init__(self, **fields):
        for name, value in fields.items():
            setattr(self, name, value)

    def replace(self, **changes):
        return type(self)(**{**{name: getattr(self, name) for name in self._names()},
                             **changes})

    def _names(self):
        return [*_FIELDS, "causal"]


class ClassCausalMetadata(PlainMetadata):
    """causal as a class attribute, set on an instance only when it changes."""

    causal = True


class SlottedMetadata(PlainMetadata):
    __slots__ = (*_FIELDS, "causal")


def _every_adapter(m):
    """{adapter: its result on m} for every adapter, on fixed op outputs."""
    slots = torch.arange(16, dtype=torch.int64)
    return {
        "extend": spec_ops.extend_all_queries_by_N(m, 2, arange(), slots),
        "parallel round": spec_ops.parallel_round_metadata(m, 2, arange(), arange(), slots),
        "dflash": spec_ops.dflash_query_metadata(m, arange(), 2, slots, arange()),
        "dflash round": spec_ops.dflash_round_metadata(m, 2, arange(), arange(), slots),
        "decode": spec_ops.draft_decode_metadata(m, arange(), arange()),
        "step": spec_ops.advance_draft_step_metadata(m, slots, MAX_MODEL_LEN),
        "mrope step": spec_ops.advance_mrope_draft_step_metadata(m, slots, MAX_MODEL_LEN),
        "round step": spec_ops.draft_step_metadata(m, 1, arange(), slots.reshape(2, 8),
                                                   arange().reshape(2, 8), MAX_MODEL_LEN),
        "eagle round": spec_ops.eagle_round_metadata(m, slots),
    }


@pytest.mark.parametrize("kind", [PlainMetadata, ClassCausalMetadata, SlottedMetadata])
def test_adapters_accept_metadata_of_any_class(kind):
    """A plain class, one with causal in its class body, one with __slots__: every adapter
    gives what it gives ours, reading only the fields and replace (no batch_size())."""
    ours = cad()
    fields = {name: getattr(ours, name) for name in _FIELDS}
    theirs = kind(**fields) if kind is ClassCausalMetadata else kind(**fields, causal=True)
    expected = _every_adapter(ours)
    for name, result in _every_adapter(theirs).items():
        assert type(result) is kind, name
        for field in (*_FIELDS, "causal"):
            got, want = getattr(result, field), getattr(expected[name], field)
            assert (torch.equal(got, want) if isinstance(want, torch.Tensor) else got == want), \
                (name, field, got, want)


# --- host twins --------------------------------------------------------------------------------

MAX_MODEL_LEN = 32
COPY_TWINS = ("seq_lens_cpu", "_seq_lens_cpu")
COMPUTED_TWINS = ("num_computed_tokens_cpu", "_num_computed_tokens_cpu")


@dataclasses.dataclass
class EngineWithTwins:
    """An engine's metadata class carrying every host twin, and a cache derived on the device."""

    query_start_loc: torch.Tensor
    query_start_loc_cpu: torch.Tensor
    seq_lens: torch.Tensor
    num_reqs: int
    num_actual_tokens: int
    max_query_len: int
    max_seq_len: int
    block_table_tensor: torch.Tensor
    slot_mapping: torch.Tensor
    causal: bool = True
    seq_lens_cpu: torch.Tensor = None
    _seq_lens_cpu: torch.Tensor = None
    seq_lens_cpu_upper_bound: torch.Tensor = None
    num_computed_tokens_cpu: torch.Tensor = None
    _num_computed_tokens_cpu: torch.Tensor = None
    _num_computed_tokens_cache: torch.Tensor = None

    def batch_size(self):
        return self.seq_lens.shape[0]

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)


def with_twins(device="cpu", seq_lens=(10, 20, 30), upper_bound=(12, 20, 31)):
    """The verification batch of cad(), with every twin: 3 requests of 3, 4 and 1 tokens."""
    c = cad(device, seq_lens=seq_lens)
    seq_cpu = torch.tensor(seq_lens, dtype=I32)
    computed = seq_cpu - torch.tensor([3, 4, 1], dtype=I32)
    return EngineWithTwins(
        query_start_loc=c.query_start_loc, query_start_loc_cpu=c.query_start_loc_cpu,
        seq_lens=c.seq_lens, num_reqs=3, num_actual_tokens=8, max_query_len=4,
        max_seq_len=max(upper_bound), block_table_tensor=c.block_table_tensor,
        slot_mapping=c.slot_mapping, seq_lens_cpu=seq_cpu, _seq_lens_cpu=seq_cpu.clone(),
        seq_lens_cpu_upper_bound=torch.tensor(upper_bound, dtype=I32),
        num_computed_tokens_cpu=computed, _num_computed_tokens_cpu=computed.clone(),
        _num_computed_tokens_cache=computed.clone())


def assert_current(m, known=()):
    """Every twin m carries agrees with its device field (copies equal, bounds above, computed
    tokens = seq_lens - query lens), max_seq_len bounds seq_lens, the derived cache is gone;
    the twins in ``known`` are carried (not None)."""
    query_lens = m.query_start_loc[1:] - m.query_start_loc[:-1]
    assert m.query_start_loc_cpu is None or m.query_start_loc_cpu.tolist() == \
        m.query_start_loc.tolist()
    for name in COPY_TWINS:
        assert getattr(m, name) is None or getattr(m, name).tolist() == m.seq_lens.tolist(), name
    for name in COMPUTED_TWINS:
        assert getattr(m, name) is None or \
            getattr(m, name).tolist() == (m.seq_lens - query_lens).tolist(), name
    assert m.seq_lens_cpu_upper_bound is not None
    assert (m.seq_lens_cpu_upper_bound >= m.seq_lens).all()
    assert m.max_seq_len >= int(m.seq_lens.max())
    assert m._num_computed_tokens_cache is None
    for name in known:
        assert getattr(m, name) is not None, name
    assert all(getattr(m, name).dtype == I32 for name in ("query_start_loc_cpu", *COPY_TWINS,
                                                          *COMPUTED_TWINS)
               if getattr(m, name) is not None)


def assert_unknown(m, names):
    for name in names:
        assert getattr(m, name) is None, name


ALL_KNOWN = ("query_start_loc_cpu", *COPY_TWINS, *COMPUTED_TWINS)
REJECTED = torch.tensor([1, 0, 1], dtype=I32)


def test_twins_extend_all_queries_by_N():
    m = with_twins()
    e = spec_ops.extend_all_queries_by_N(m, 2, arange(), torch.arange(14))
    assert_current(e, known=ALL_KNOWN)
    assert e.seq_lens_cpu_upper_bound.tolist() == [14, 22, 33]
    assert e.num_computed_tokens_cpu.tolist() == m.num_computed_tokens_cpu.tolist()


@pytest.mark.parametrize("rejected", [None, REJECTED])
def test_twins_dflash_query_metadata(rejected):
    m = with_twins()
    d = spec_ops.dflash_query_metadata(m, arange(), 3, torch.arange(20), rejected)
    assert not d.causal
    if rejected is None:
        assert_current(d, known=ALL_KNOWN)
    else:
        assert_current(d, known=("query_start_loc_cpu",))
        assert_unknown(d, COPY_TWINS + COMPUTED_TWINS)
    assert d.seq_lens_cpu_upper_bound.tolist() == [15, 23, 34]


@pytest.mark.parametrize("rejected", [None, REJECTED])
def test_twins_through_the_draft_decode_loop(rejected):
    """draft_decode_metadata, then 1.5 steps (run on CPU) and advance_draft_step_metadata; row 2
    reaches max_model_len."""
    m = with_twins()
    decode = spec_ops.draft_decode_metadata(m, arange(), rejected)
    if rejected is None:
        assert_current(decode, known=ALL_KNOWN)
    else:
        assert_current(decode, known=("query_start_loc_cpu",))
        assert_unknown(decode, COPY_TWINS + COMPUTED_TWINS)
    seq_lens = decode.seq_lens.clone()
    positions = (seq_lens - 1).long()
    m_step = decode.replace(seq_lens=seq_lens)
    slots = torch.zeros(3, dtype=torch.int64)
    for _ in range(4):
        spec_ops.eagle_step_update_slot_mapping_and_metadata(
            positions, m_step.block_table_tensor, seq_lens, 4, MAX_MODEL_LEN, positions, slots)
        m_step = spec_ops.advance_draft_step_metadata(m_step, slots, MAX_MODEL_LEN)
        assert_current(m_step, known=("query_start_loc_cpu",))
        assert_unknown(m_step, COPY_TWINS + COMPUTED_TWINS)
    assert seq_lens.tolist()[2] <= 2 and m_step.seq_lens_cpu_upper_bound.tolist()[2] == 32


@pytest.mark.parametrize("rejected", [None, REJECTED])
def test_twins_through_the_mrope_decode_loop(rejected):
    """7.1 steps (run on CPU) with advance_mrope_draft_step_metadata: the exact twins follow on
    the host, through the reset at max_model_len."""
    m = with_twins()
    decode = spec_ops.draft_decode_metadata(m, arange(), rejected)
    seq_lens = decode.seq_lens.clone()
    positions = (seq_lens - 5).long().expand(3, 3).clone()      # behind the index: an image
    m_step = decode.replace(seq_lens=seq_lens)
    slots = torch.zeros(3, dtype=torch.int64)
    known = ALL_KNOWN if rejected is None else ("query_start_loc_cpu",)
    for _ in range(4):
        spec_ops.eagle_mrope_step_update_slot_mapping_and_metadata(
            positions, m_step.block_table_tensor, seq_lens, 4, MAX_MODEL_LEN, positions, slots)
        m_step = spec_ops.advance_mrope_draft_step_metadata(m_step, slots, MAX_MODEL_LEN)
        assert_current(m_step, known=known)
    assert seq_lens.tolist()[2] <= 2
    assert m_step.slot_mapping is not None and m_step.max_seq_len == MAX_MODEL_LEN


def test_twins_unpadded():
    m = with_twins()
    ours = CommonAttentionMetadata(**{
        f.name: getattr(m, f.name) for f in dataclasses.fields(CommonAttentionMetadata)
        if hasattr(m, f.name) and f.name not in ("logits_indices_padded", "num_logits_indices",
                                                 "encoder_seq_lens")})
    u = ours.unpadded(num_actual_tokens=7, num_actual_reqs=2)
    assert u.query_start_loc_cpu.tolist() == [0, 3, 7]
    assert u.seq_lens_cpu.tolist() == [10, 20]
    assert u.seq_lens_cpu_upper_bound.tolist() == [12, 20]
    assert u.num_computed_tokens_cpu.tolist() == [7, 16]


# --- the round ops' adapters (hand-made outs, as docs/round_ops.md defines them) ----------------

def step_outs(start_seq_lens, num_steps, width=4):
    """Step outs as 1.5 run num_steps times from start_seq_lens would leave them (position =
    seq_len - 1); padding columns -1."""
    seq_lens, rows_seq, rows_slot = start_seq_lens.clone(), [], []
    positions = (seq_lens - 1).long()
    slots = torch.full((width,), -1, dtype=torch.int64)
    table = torch.arange(12, dtype=I32).reshape(3, 4) * 8
    for _ in range(num_steps):
        spec_ops.eagle_step_update_slot_mapping_and_metadata(
            positions, table, seq_lens, 8, MAX_MODEL_LEN, positions, slots, width)
        rows_seq.append(seq_lens.clone())
        rows_slot.append(slots.clone())
    return torch.stack(rows_slot), torch.stack(rows_seq)


def test_eagle_round_metadata():
    m = with_twins()
    out_slot_mapping = torch.arange(100, 112)
    first = spec_ops.eagle_round_metadata(m, out_slot_mapping)
    assert first.slot_mapping.tolist() == list(range(100, 108))
    assert first.query_start_loc is m.query_start_loc and first.seq_lens is m.seq_lens
    assert first.seq_lens_cpu is m.seq_lens_cpu
    step_slots, step_seq_lens = step_outs(m.seq_lens - REJECTED, 3)
    for step in range(3):
        s = spec_ops.draft_step_metadata(m, step, arange(), step_slots, step_seq_lens,
                                         MAX_MODEL_LEN)
        assert s.query_start_loc.tolist() == [0, 1, 2, 3] and s.query_start_loc.dtype == I32
        assert s.seq_lens.tolist() == step_seq_lens[step].tolist()
        assert s.slot_mapping.tolist() == step_slots[step, :3].tolist()
        assert (s.num_actual_tokens, s.max_query_len) == (3, 1)
        assert s.max_seq_len == min(31 + step + 1, MAX_MODEL_LEN)
        assert s.seq_lens_cpu_upper_bound.tolist() == torch.clamp(
            m.seq_lens_cpu_upper_bound + step + 1, max=MAX_MODEL_LEN).tolist()
        assert_current(s, known=("query_start_loc_cpu",))
        assert_unknown(s, COPY_TWINS + COMPUTED_TWINS)


def test_parallel_round_metadata():
    """6.2 with N = 2, then (draft model) steps from its first pass."""
    m = with_twins()
    out_qsl = torch.tensor([0, 5, 11, 14, -7], dtype=I32)
    out_seq_lens = torch.tensor([12, 22, 32, -7], dtype=I32)
    out_slot_mapping = torch.arange(20)
    p = spec_ops.parallel_round_metadata(m, 2, out_qsl, out_seq_lens, out_slot_mapping)
    assert p.query_start_loc.tolist() == [0, 5, 11, 14]
    assert p.seq_lens.tolist() == [12, 22, 32]
    assert p.slot_mapping.tolist() == list(range(14))
    assert (p.num_actual_tokens, p.max_query_len, p.max_seq_len) == (14, 6, 33)
    assert_current(p, known=ALL_KNOWN)
    step_slots, step_seq_lens = step_outs(p.seq_lens - REJECTED, 2)
    s = spec_ops.draft_step_metadata(p, 1, arange(), step_slots, step_seq_lens, MAX_MODEL_LEN)
    assert s.seq_lens.tolist() == step_seq_lens[1].tolist()
    assert s.max_seq_len == MAX_MODEL_LEN
    assert s.seq_lens_cpu_upper_bound.tolist() == torch.clamp(
        p.seq_lens_cpu_upper_bound + 2, max=MAX_MODEL_LEN).tolist()
    assert_current(s, known=("query_start_loc_cpu",))


def test_dflash_round_metadata():
    m = with_twins()
    out_qsl = torch.tensor([0, 3, 6, 9, -7], dtype=I32)
    out_seq_lens = torch.tensor([12, 23, 31, -7], dtype=I32)       # seq_lens - rejected + 3
    out_query_slot_mapping = torch.arange(12)
    d = spec_ops.dflash_round_metadata(m, 3, out_qsl, out_seq_lens, out_query_slot_mapping)
    assert d.query_start_loc.tolist() == [0, 3, 6, 9] and d.seq_lens.tolist() == [12, 23, 31]
    assert d.slot_mapping.tolist() == list(range(9)) and not d.causal
    assert (d.num_actual_tokens, d.max_query_len, d.max_seq_len) == (9, 3, 34)
    assert_current(d, known=("query_start_loc_cpu",))
    assert_unknown(d, COPY_TWINS + COMPUTED_TWINS)


def _read_seq_lens_cpu(self):
    raise AssertionError("an adapter read the seq_lens_cpu property (a device sync)")


# The engine's deprecated seq_lens_cpu is a property that copies seq_lens from the device.
EngineWithSyncingProperty = dataclasses.make_dataclass(
    "EngineWithSyncingProperty",
    [(f.name, f.type, dataclasses.field(default=f.default))
     if f.default is not dataclasses.MISSING else (f.name, f.type)
     for f in dataclasses.fields(EngineWithTwins) if f.name != "seq_lens_cpu"],
    namespace={"seq_lens_cpu": property(_read_seq_lens_cpu),
               "batch_size": EngineWithTwins.batch_size, "replace": EngineWithTwins.replace})


def test_adapters_never_read_properties():
    m = EngineWithSyncingProperty(**{f.name: getattr(with_twins(), f.name)
                                     for f in dataclasses.fields(EngineWithSyncingProperty)})
    decode = spec_ops.draft_decode_metadata(m, arange(), REJECTED)
    assert decode._seq_lens_cpu is None
    extended = spec_ops.extend_all_queries_by_N(m, 2, arange(), torch.arange(14))
    assert extended._seq_lens_cpu.tolist() == [12, 22, 32]


def test_round_adapters_never_read_device_values():
    """Device tensors on meta (host twins on the CPU): any .item()/.tolist() would raise."""
    m = with_twins(device="meta")
    meta = dict(device="meta")
    spec_ops.eagle_round_metadata(m, torch.zeros(12, dtype=torch.int64, **meta))
    p = spec_ops.parallel_round_metadata(m, 2, torch.zeros(5, dtype=I32, **meta),
                                         torch.zeros(4, dtype=I32, **meta),
                                         torch.zeros(20, dtype=torch.int64, **meta))
    spec_ops.draft_step_metadata(p, 1, arange(device="meta"),
                                 torch.zeros(2, 4, dtype=torch.int64, **meta),
                                 torch.zeros(2, 3, dtype=I32, **meta), MAX_MODEL_LEN)
    spec_ops.dflash_round_metadata(m, 3, torch.zeros(5, dtype=I32, **meta),
                                   torch.zeros(4, dtype=I32, **meta),
                                   torch.zeros(12, dtype=torch.int64, **meta))
    spec_ops.advance_mrope_draft_step_metadata(m, torch.zeros(3, dtype=torch.int64, **meta),
                                               MAX_MODEL_LEN)
    spec_ops.advance_draft_step_metadata(m, torch.zeros(3, dtype=torch.int64, **meta),
                                         MAX_MODEL_LEN)
