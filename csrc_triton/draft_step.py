"""Autoregressive draft steps: 1.5 (one step), 5.2 (all steps in one launch) and 7.1
(one M-RoPE step, docs/mrope.md).

Positions and sequence lengths advance the same way whatever token is drafted, so a step is a
pure function of (position, seq_len). 5.2 runs one program per (block of rows, step): program
(b, s) applies the step s + 1 times in registers and writes row s, so every step's block-table
gather is one round trip, all in parallel. 7.1 is 1.5's step with the token index seq_len in
place of the position (M-RoPE positions trail the index), its three rotary positions carried
along.
"""

import triton
import triton.language as tl

from ._indexing import slot_lookup
from ._launch import Launcher, cdiv, pdl_prologue, spec_kernel

# Rows and warps per program: one row per thread. At R = 1024 on the H200 (CUDA graph, µs per
# call; benchmarks/results/step_grid.txt) 64 rows / 2 warps took 0.98 / 1.03 / 1.05 for 1.5 /
# 5.2 / 7.1, 128 / 4 0.98 / 1.06 / 1.08, 256 / 8 1.02 / 1.21 / 1.20; two rows per thread (128 /
# 2) 1.22 / 1.13 / 1.29.
BLOCK_R = 64
STEP_WARPS = 2


@triton.jit
def _advance(position, seq_len, max_model_len):
    """One draft step for a block of rows: (clamped position, over, new seq_len)."""
    next_position = position + 1
    over = next_position >= max_model_len
    clamped = tl.where(over, 0, next_position)
    new_seq_len = tl.minimum(tl.where(over, 1, seq_len + 1), max_model_len)
    return clamped, over, new_seq_len


@spec_kernel
def _step_kernel(
    positions_ptr,          # [R]; may alias clamped_positions_ptr
    block_table_ptr,        # [>= R, n_cols], row stride block_table_row_stride
    seq_lens_ptr,           # [>= R] in/out
    clamped_positions_ptr,  # [>= R] out
    slot_mapping_ptr,       # [>= input_batch_size] out
    num_reqs: tl.int64, input_batch_size: tl.int64, block_table_row_stride: tl.int64,
    num_block_cols: tl.int64, max_model_len: tl.int64,
    BLOCK_SIZE: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr,
):
    pdl_prologue(PDL)
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    real = rows < num_reqs
    position = tl.load(positions_ptr + rows, mask=real, other=0).to(tl.int64)
    seq_len = tl.load(seq_lens_ptr + rows, mask=real, other=0).to(tl.int64)
    clamped, over, new_seq_len = _advance(position, seq_len, max_model_len)
    slot = slot_lookup(block_table_ptr, block_table_row_stride, num_block_cols, rows, clamped,
                       real & ~over, BLOCK_SIZE)
    slot = tl.where(real & ~over, slot, -1)
    tl.store(clamped_positions_ptr + rows, clamped, mask=real)
    tl.store(seq_lens_ptr + rows, new_seq_len, mask=real)
    tl.store(slot_mapping_ptr + rows, slot, mask=rows < input_batch_size)


@spec_kernel
def _mrope_step_kernel(
    positions_ptr,          # [3, R], row stride positions_row_stride; may alias out_positions_ptr
    block_table_ptr,        # [>= R, n_cols], row stride block_table_row_stride
    seq_lens_ptr,           # [>= R] in/out
    out_positions_ptr,      # [3, >= R] out, row stride out_positions_row_stride
    slot_mapping_ptr,       # [>= input_batch_size] out
    num_reqs: tl.int64, input_batch_size: tl.int64, positions_row_stride: tl.int64,
    out_positions_row_stride: tl.int64, block_table_row_stride: tl.int64,
    num_block_cols: tl.int64, max_model_len: tl.int64,
    BLOCK_SIZE: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr,
):
    pdl_prologue(PDL)
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    real = rows < num_reqs
    seq_len = tl.load(seq_lens_ptr + rows, mask=real, other=0).to(tl.int64)
    # The drafted token sits at index seq_len: 1.5's step advancing from index seq_len - 1.
    index, over, new_seq_len = _advance(seq_len - 1, seq_len, max_model_len)
    slot = slot_lookup(block_table_ptr, block_table_row_stride, num_block_cols, rows, index,
                       real & ~over, BLOCK_SIZE)
    slot = tl.where(real & ~over, slot, -1)
    # The three rotary rows as one [4, BLOCK] tile (a power of two; the fourth row masked off).
    # Every element is loaded before any is stored, so an aliased out_positions is safe.
    dims = tl.arange(0, 4).to(tl.int64)[:, None]
    tile = (dims < 3) & real[None, :]
    position = tl.load(positions_ptr + dims * positions_row_stride + rows[None, :], mask=tile)
    tl.store(out_positions_ptr + dims * out_positions_row_stride + rows[None, :],
             tl.where(over[None, :], 0, position + 1), mask=tile)
    tl.store(seq_lens_ptr + rows, new_seq_len, mask=real)
    tl.store(slot_mapping_ptr + rows, slot, mask=rows < input_batch_size)


@spec_kernel
def _multi_step_kernel(
    positions_ptr,          # [R]
    block_table_ptr,        # [>= R, n_cols]
    seq_lens_ptr,           # [>= R]
    out_positions_ptr,      # [num_steps, >= R] out
    out_slot_mapping_ptr,   # [num_steps, >= input_batch_size] out
    out_seq_lens_ptr,       # [num_steps, >= R] out
    num_reqs: tl.int64, input_batch_size: tl.int64, block_table_row_stride: tl.int64,
    num_block_cols: tl.int64, max_model_len: tl.int64, out_positions_row_stride: tl.int64,
    out_slot_mapping_row_stride: tl.int64, out_seq_lens_row_stride: tl.int64,
    BLOCK_SIZE: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr,
):
    pdl_prologue(PDL)
    # Steps along the grid's first axis, which takes 2**31 - 1 programs (the second, 65535).
    step = tl.program_id(0).to(tl.int64)
    rows = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    real = rows < num_reqs
    position = tl.load(positions_ptr + rows, mask=real, other=0).to(tl.int64)
    seq_len = tl.load(seq_lens_ptr + rows, mask=real, other=0).to(tl.int64)
    over = tl.zeros_like(rows) != 0
    for _ in range(step + 1):
        position, over, seq_len = _advance(position, seq_len, max_model_len)
    slot = slot_lookup(block_table_ptr, block_table_row_stride, num_block_cols, rows, position,
                       real & ~over, BLOCK_SIZE)
    slot = tl.where(real & ~over, slot, -1)
    tl.store(out_positions_ptr + step * out_positions_row_stride + rows, position, mask=real)
    tl.store(out_seq_lens_ptr + step * out_seq_lens_row_stride + rows, seq_len, mask=real)
    tl.store(out_slot_mapping_ptr + step * out_slot_mapping_row_stride + rows, slot,
             mask=rows < input_batch_size)


_step = Launcher(_step_kernel, STEP_WARPS)
_mrope_step = Launcher(_mrope_step_kernel, STEP_WARPS)
_multi_step = Launcher(_multi_step_kernel, STEP_WARPS)


def launch_step(positions, block_table, seq_lens, block_size, max_model_len,
                out_clamped_positions, out_slot_mapping, input_batch_size):
    return _step(
        cdiv(input_batch_size, BLOCK_R),
        (positions, block_table, seq_lens, out_clamped_positions, out_slot_mapping,
         positions.shape[0], input_batch_size, block_table.stride()[0], block_table.shape[1],
         max_model_len, block_size, BLOCK_R))


def launch_mrope_step(positions, block_table, seq_lens, block_size, max_model_len,
                      out_positions, out_slot_mapping, input_batch_size):
    return _mrope_step(
        cdiv(input_batch_size, BLOCK_R),
        (positions, block_table, seq_lens, out_positions, out_slot_mapping,
         positions.shape[1], input_batch_size, positions.stride()[0], out_positions.stride()[0],
         block_table.stride()[0], block_table.shape[1], max_model_len, block_size, BLOCK_R))


def launch_multi_step(positions, block_table, seq_lens, block_size, max_model_len, num_steps,
                      out_positions, out_slot_mapping, out_seq_lens, input_batch_size):
    return _multi_step(
        num_steps,
        (positions, block_table, seq_lens, out_positions, out_slot_mapping, out_seq_lens,
         positions.shape[0], input_batch_size, block_table.stride()[0], block_table.shape[1],
         max_model_len, out_positions.stride()[0], out_slot_mapping.stride()[0],
         out_seq_lens.stride()[0], block_size, BLOCK_R),
        grid_y=cdiv(input_batch_size, BLOCK_R))
