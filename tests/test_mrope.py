"""7.1 beyond what the sample-driven tests cover (docs/mrope.md): text-only requests step
exactly as 1.5 on positions[0], the [3, R] shape rules, and which aliasing of positions and
out_positions is allowed."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from backends import BACKENDS, call, place, run
from reference import REFERENCES
from samples import POISON, sample

MROPE = "eagle_mrope_step_update_slot_mapping_and_metadata"
STEP = "eagle_step_update_slot_mapping_and_metadata"


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=min(40, settings.default.max_examples))
@given(seed=st.integers(0, 2**32 - 1), num_reqs=st.integers(0, 24))
def test_text_only_rows_step_like_1_5_on_the_temporal_row(backend, seed, num_reqs):
    """With positions[d, r] = seq_lens[r] - 1 for every d, the index and the position agree,
    so 7.1 writes what 1.5 writes from positions[0], in every rotary row."""
    args = sample(MROPE, seed, num_reqs)
    positions, table, seq_lens, block_size, max_model_len, _, out_slots, batch = args
    positions.copy_((seq_lens[:num_reqs].long() - 1).expand(3, num_reqs))
    mrope = run(MROPE, args, backend)
    step = run(STEP, (positions[0].clone(), table, seq_lens, block_size, max_model_len,
                      torch.full((num_reqs,), POISON, dtype=torch.int64), out_slots, batch),
               backend)
    assert mrope[0].tolist() == step[0].tolist()                      # seq_lens
    assert mrope[1][:, :num_reqs].tolist() == [step[1].tolist()] * 3  # positions
    assert mrope[2].tolist() == step[2].tolist()                      # slot mapping


def _args(num_reqs=4):
    return sample(MROPE, 3, num_reqs)


def _replaced(args, index, value):
    return args[:index] + (value,) + args[index + 1:]


@pytest.mark.parametrize("index,value,error,message", [
    (0, lambda p: p.int(), TypeError, "positions must be int64"),
    (0, lambda p: p[0].clone(), ValueError, "positions must be 2-D"),
    (0, lambda p: p[:2], ValueError, "positions must be at least \\[3, 0\\]"),
    (0, lambda p: torch.cat([p, p[:1]]), ValueError, "positions must have 3 rows"),
    (5, lambda p: p.int(), TypeError, "out_positions must be int64"),
    (5, lambda p: p[:, :3], ValueError, "out_positions must be at least \\[3, 4\\]"),
    (5, lambda p: torch.cat([p, p[:1]]), ValueError, "out_positions must have 3 rows"),
])
@pytest.mark.parametrize("backend", BACKENDS)
def test_positions_are_int64_with_three_rows(index, value, error, message, backend):
    args = _args()
    bad = _replaced(args, index, value(args[index]))
    with pytest.raises(error, match=rf"spec_ops\.{MROPE}: {message}"):
        call(MROPE, place(bad, backend), backend)


def _in_one_buffer(row_stride, out_row_stride, out_offset, device, num_reqs=4):
    """(positions, out_positions): [3, num_reqs] views of one buffer on ``device``, the first
    elements out_offset entries apart."""
    buffer = torch.arange(3 * max(row_stride, out_row_stride) + out_offset + num_reqs,
                          device=device)
    return (buffer.as_strided((3, num_reqs), (row_stride, 1)),
            buffer.as_strided((3, num_reqs), (out_row_stride, 1), out_offset))


def _with_positions(positions, out_positions):
    device = positions.device
    args = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in _args())
    return (positions,) + args[1:5] + (out_positions,) + args[6:]


@pytest.mark.parametrize("row_stride", [4, 6])
@pytest.mark.parametrize("backend", BACKENDS)
def test_views_with_the_same_first_element_and_row_stride_may_alias(row_stride, backend):
    """Two view objects of the same memory, as an engine slicing one persistent buffer twice."""
    args = _with_positions(*_in_one_buffer(row_stride, row_stride, 0,
                                           "cuda" if backend == "cuda" else "cpu"))
    expected = REFERENCES[MROPE](*[a.cpu() if isinstance(a, torch.Tensor) else a for a in args])
    call(MROPE, args, backend)
    assert [args[i].tolist() for i in (2, 5, 6)] == expected


@pytest.mark.parametrize("row_strides,offset", [
    ((6, 7), 0),    # same first element, rows apart by other strides: other columns
    ((6, 6), 1),    # shifted by a column
    ((6, 6), 6),    # shifted by a row
])
@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_any_other_overlap_of_positions_and_out_positions_is_rejected(row_strides, offset,
                                                                      device):
    args = _with_positions(*_in_one_buffer(*row_strides, offset, device))
    with pytest.raises(ValueError, match="out_positions overlaps positions"):
        torch.ops.spec_ops.eagle_mrope_step_update_slot_mapping_and_metadata(*args)
