"""The shared index helpers (csrc_triton/_indexing.py) cover each item exactly once.

The kernels' own tests compare outputs, which a chunk loop writing some item twice (with the
same value) would pass; these count, with an atomic add per visit, how often each item of a
request or row is visited by the loops the kernels build from the helpers."""

import random

import pytest
import torch
import triton
import triton.language as tl

from backends import HAS_CUDA, TRITON
from spec_ops._triton._indexing import (
    flat_remainders,
    flat_rows,
    lone_remainder,
    pick,
    request_chunks,
    row_value,
    wide_chunks,
)
from spec_ops._triton._launch import LONE_TAIL, ROW_TAIL
from spec_ops._triton.expand import EXPAND_ROW_TAIL, SLOT_LONE_TAIL

DEVICE = "cuda" if HAS_CUDA else "cpu"


@triton.jit
def _count_chunks(count_ptr, start, count, size, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    # A per-request grid's loops: this program's first chunk, then its wide chunks.
    first, stop, step = request_chunks(start, count, size, BLOCK)
    j = first + tl.arange(0, BLOCK)
    tl.atomic_add(count_ptr + j, 1, mask=j < stop)
    first, step = wide_chunks(first, step, BLOCK, WIDE)
    for chunk_start in range(first, stop, step):
        wide = chunk_start + tl.arange(0, WIDE)
        tl.atomic_add(count_ptr + wide, 1, mask=wide < stop)


@pytest.mark.parametrize("backend", [TRITON])
@pytest.mark.parametrize("seed", range(12))
def test_request_chunks_then_wide_chunks_visit_each_item_once(backend, seed):
    """Items [max(-start, 0), min(count, size - start)) of a request, for C programs."""
    rng = random.Random(seed)
    block, wide = rng.choice([(64, 256), (128, 256), (64, 64), (64, 512)])
    programs = rng.choice([1, 2, 3, 5])
    count = rng.randint(0, 3000)
    start = rng.choice([0, rng.randint(-200, 200)])
    size = start + count - rng.choice([0, 0, rng.randint(0, 300)])
    counts = torch.zeros(count + block + wide, dtype=torch.int32, device=DEVICE)
    _count_chunks[(1, programs)](counts, start, count, size, block, wide)
    first, stop = max(-start, 0), min(count, size - start)
    expected = torch.zeros_like(counts)
    expected[first:max(stop, first)] = 1
    assert torch.equal(counts, expected), (block, wide, programs, count, start, size)


@triton.jit
def _count_remainders(count_ptr, first_ptr, last_ptr, MAX_ITEMS: tl.constexpr,
                      ROWS: tl.constexpr, COLS: tl.constexpr, TAIL: tl.constexpr,
                      LONE: tl.constexpr):
    # A row group's items past its COLS-wide tile, [max(first, COLS), last) of each row, as the
    # row kernels run them: one row alone, or all laid end to end.
    row = tl.arange(0, ROWS).to(tl.int64)
    first = tl.load(first_ptr + row)
    last = tl.load(last_ptr + row)
    rest = tl.maximum(first, COLS)
    lone, long_row = lone_remainder(last - rest)
    if lone:
        row_last = row_value(last, long_row)
        for chunk_start in range(row_value(rest, long_row), row_last, LONE):
            j = chunk_start + tl.arange(0, LONE).to(tl.int64)
            tl.atomic_add(count_ptr + row_value(row, long_row) * MAX_ITEMS + j, 1,
                          mask=j < row_last)
    else:
        flat_start, flat_end, flat_total = flat_remainders(rest, last)
        for flat_first in range(0, flat_total, TAIL):
            f = flat_first + tl.arange(0, TAIL).to(tl.int64)
            in_row = flat_rows(f, flat_start, flat_end)
            j = f + pick(in_row, rest - flat_start)
            tl.atomic_add(count_ptr + pick(in_row, row) * MAX_ITEMS + j, 1, mask=f < flat_total)


@pytest.mark.parametrize("backend", [TRITON])
@pytest.mark.parametrize("seed", range(16))
def test_row_remainders_visit_each_item_once(backend, seed):
    """Rows with nothing past the tile, one row with items (its own loop), several (the flat
    loop), empty and garbage ranges (last < first)."""
    rng = random.Random(seed)
    rows, cols, max_items = 8, rng.choice([8, 16]), 1500
    # The widths the row kernels ship: flat loops EXPAND_ROW_TAIL / ROW_TAIL, lone loops
    # LONE_TAIL (1.3, 1.4) / SLOT_LONE_TAIL (1.7).
    tail = rng.choice([EXPAND_ROW_TAIL.value, ROW_TAIL.value])
    lone = rng.choice([LONE_TAIL.value, SLOT_LONE_TAIL.value])
    num_long = rng.choice([0, 1, 1, 2, 3, 8])
    long_rows = set(rng.sample(range(rows), num_long))
    first = [rng.choice([0, 0, 0, rng.randint(0, 40)]) for _ in range(rows)]
    last = [rng.randint(cols + 1, max_items) if r in long_rows else rng.randint(-5, cols)
            for r in range(rows)]
    counts = torch.zeros(rows * max_items, dtype=torch.int32, device=DEVICE)
    _count_remainders[(1,)](counts, torch.tensor(first, device=DEVICE),
                            torch.tensor(last, device=DEVICE), max_items, rows, cols, tail, lone,
                            num_warps=4)
    expected = torch.zeros(rows, max_items, dtype=torch.int32)
    for r in range(rows):
        expected[r, max(first[r], cols):max(last[r], cols)] = 1
    assert torch.equal(counts.view(rows, max_items).cpu(), expected), (first, last, tail, lone)
