"""Autoregressive draft steps: 1.5 (one step), 5.2 (every step in one launch) and 7.1
(one M-RoPE step, docs/mrope.md).

Each op: its schema, the CUDA kernel (a Triton launch), the CPU kernel (vectorized torch) and
the public function. The fakes are in meta.py.
"""

import torch

from . import validation
from ._library import define
from ._torch_indexing import slot_lookup, write
from ._triton import launch_mrope_step, launch_multi_step, launch_step


def _advance(block_table, positions, seq_lens, block_size, max_model_len):
    """One draft step on CPU tensors: (clamped positions, slot mapping, seq_lens), int64 [R]."""
    next_position = positions.long() + 1
    over = next_position >= max_model_len
    clamped = torch.where(over, 0, next_position)
    slot = slot_lookup(block_table, torch.arange(positions.shape[0]), clamped, block_size)
    new_seq_lens = torch.where(over, 1, seq_lens.long() + 1).clamp(max=max_model_len)
    return clamped, torch.where(over, -1, slot), new_seq_lens


# --- 1.5 eagle_step_update_slot_mapping_and_metadata ---------------------------------------

def _step_cuda(positions, block_table, seq_lens, block_size, max_model_len,
               out_clamped_positions, out_slot_mapping, input_batch_size=None):
    return launch_step(positions, block_table, seq_lens, block_size, max_model_len,
                       out_clamped_positions, out_slot_mapping,
                       validation.padded_rows(positions, input_batch_size))


def _step_cpu(positions, block_table, seq_lens, block_size, max_model_len,
              out_clamped_positions, out_slot_mapping, input_batch_size=None):
    num_reqs = positions.shape[0]
    clamped, slot, new_seq_lens = _advance(block_table, positions, seq_lens[:num_reqs],
                                           block_size, max_model_len)
    write(out_clamped_positions, clamped)
    write(seq_lens, new_seq_lens)
    write(out_slot_mapping, slot)
    out_slot_mapping[num_reqs:validation.padded_rows(positions, input_batch_size)].fill_(-1)


_step_op = define(
    "eagle_step_update_slot_mapping_and_metadata(Tensor positions, Tensor block_table, "
    "Tensor(a!) seq_lens, int block_size, int max_model_len, "
    "Tensor(b!) out_clamped_positions, Tensor(c!) out_slot_mapping, "
    "SymInt? input_batch_size=None) -> ()",
    validation.check_eagle_step_update_slot_mapping_and_metadata, _step_cuda, _step_cpu,
    may_alias=[("positions", "out_clamped_positions")])


def eagle_step_update_slot_mapping_and_metadata(positions, block_table, seq_lens, block_size,
                                                max_model_len, out_clamped_positions,
                                                out_slot_mapping, input_batch_size=None):
    """One autoregressive draft step (docs/ops.md, 1.5).

    np = positions[r] + 1; over = np >= max_model_len. out_clamped_positions[r] = 0 if over
    else np; out_slot_mapping[r] = -1 if over else slot(r, np); seq_lens[r] =
    min(1 if over else seq_lens[r] + 1, max_model_len). Rows R..input_batch_size - 1 of
    out_slot_mapping get -1. positions may be out_clamped_positions itself.
    """
    _step_op(positions, block_table, seq_lens, block_size, max_model_len,
             out_clamped_positions, out_slot_mapping, input_batch_size)


# --- 5.2 eagle_multi_step_slot_mapping -----------------------------------------------------

def _multi_step_cuda(positions, block_table, seq_lens, block_size, max_model_len, num_steps,
                     out_positions, out_slot_mapping, out_seq_lens, input_batch_size=None):
    return launch_multi_step(positions, block_table, seq_lens, block_size, max_model_len,
                             num_steps, out_positions, out_slot_mapping, out_seq_lens,
                             validation.padded_rows(positions, input_batch_size))


def _multi_step_cpu(positions, block_table, seq_lens, block_size, max_model_len, num_steps,
                    out_positions, out_slot_mapping, out_seq_lens, input_batch_size=None):
    num_reqs = positions.shape[0]
    padded = validation.padded_rows(positions, input_batch_size)
    seq_lens = seq_lens[:num_reqs]
    for step in range(num_steps):
        positions, slot, seq_lens = _advance(block_table, positions, seq_lens, block_size,
                                             max_model_len)
        write(out_positions[step], positions)
        write(out_seq_lens[step], seq_lens)
        write(out_slot_mapping[step], slot)
        out_slot_mapping[step, num_reqs:padded].fill_(-1)


_multi_step_op = define(
    "eagle_multi_step_slot_mapping(Tensor positions, Tensor block_table, Tensor seq_lens, "
    "int block_size, int max_model_len, int num_steps, Tensor(a!) out_positions, "
    "Tensor(b!) out_slot_mapping, Tensor(c!) out_seq_lens, "
    "SymInt? input_batch_size=None) -> ()",
    validation.check_eagle_multi_step_slot_mapping, _multi_step_cuda, _multi_step_cpu)


def eagle_multi_step_slot_mapping(positions, block_table, seq_lens, block_size, max_model_len,
                                  num_steps, out_positions, out_slot_mapping, out_seq_lens,
                                  input_batch_size=None):
    """Every draft step's metadata in one launch (docs/ops.md, 5.2).

    Row s of out_positions / out_slot_mapping / out_seq_lens is the state after s + 1
    applications of 1.5 starting from (positions, seq_lens), padding rows included.
    positions and seq_lens are not modified.
    """
    _multi_step_op(positions, block_table, seq_lens, block_size, max_model_len, num_steps,
                   out_positions, out_slot_mapping, out_seq_lens, input_batch_size)


# --- 7.1 eagle_mrope_step_update_slot_mapping_and_metadata ---------------------------------

def _mrope_step_cuda(positions, block_table, seq_lens, block_size, max_model_len,
                     out_positions, out_slot_mapping, input_batch_size=None):
    return launch_mrope_step(positions, block_table, seq_lens, block_size, max_model_len,
                             out_positions, out_slot_mapping,
                             validation.padded_rows(positions, input_batch_size))


def _mrope_step_cpu(positions, block_table, seq_lens, block_size, max_model_len,
                    out_positions, out_slot_mapping, input_batch_size=None):
    num_reqs = positions.shape[1]
    seq_lens_before = seq_lens[:num_reqs].long()
    # The drafted token sits at index seq_len: 1.5's step advancing from index seq_len - 1.
    _, slot, new_seq_lens = _advance(block_table, seq_lens_before - 1, seq_lens_before,
                                     block_size, max_model_len)
    over = seq_lens_before >= max_model_len
    out_positions[:, :num_reqs].copy_(torch.where(over, 0, positions + 1))
    write(seq_lens, new_seq_lens)
    write(out_slot_mapping, slot)
    out_slot_mapping[num_reqs:validation.padded_rows(positions, input_batch_size)].fill_(-1)


_mrope_step_op = define(
    "eagle_mrope_step_update_slot_mapping_and_metadata(Tensor positions, Tensor block_table, "
    "Tensor(a!) seq_lens, int block_size, int max_model_len, Tensor(b!) out_positions, "
    "Tensor(c!) out_slot_mapping, SymInt? input_batch_size=None) -> ()",
    validation.check_eagle_mrope_step_update_slot_mapping_and_metadata, _mrope_step_cuda,
    _mrope_step_cpu, may_alias=[("positions", "out_positions")])


def eagle_mrope_step_update_slot_mapping_and_metadata(positions, block_table, seq_lens,
                                                      block_size, max_model_len, out_positions,
                                                      out_slot_mapping, input_batch_size=None):
    """One autoregressive draft step with [3, R] M-RoPE positions (docs/mrope.md, 7.1).

    t = seq_lens[r]; over = t >= max_model_len. out_positions[d, r] = 0 if over else
    positions[d, r] + 1 for d in 0..2; out_slot_mapping[r] = -1 if over else slot(r, t) (from
    the token index, not the position); seq_lens[r] = 1 if over else t + 1. Columns
    R..input_batch_size - 1 of out_slot_mapping get -1. positions may be out_positions itself.
    """
    _mrope_step_op(positions, block_table, seq_lens, block_size, max_model_len, out_positions,
                   out_slot_mapping, input_batch_size)
