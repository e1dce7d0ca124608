"""Indexing helpers of the CPU kernels (slot_lookup is the twin of csrc_triton/_indexing.py)."""

import torch


def slot_lookup(block_table, rows, positions, block_size):
    """slot(row, position), int64, block index clamped into [0, n_cols), C-style division."""
    block_index = torch.div(positions, block_size, rounding_mode="trunc")
    block_index = block_index.clamp(0, block_table.shape[1] - 1)
    block_id = block_table[rows, block_index].long()
    return block_id * block_size + torch.fmod(positions, block_size)


def find_request(starts, index):
    """Largest r with starts[r] <= index (0 where none): the owner of each flat index."""
    return (torch.searchsorted(starts, index, right=True) - 1).clamp(min=0)


def write(out, values, mask=None):
    """Store ``values`` into the head of ``out``; where ``mask`` is False keep what was there."""
    head = out[: values.shape[0]]
    head.copy_(values if mask is None else torch.where(mask, values, head))


def take(values, index):
    """values[index] with index clamped into range (0 for an empty ``values``).

    The CPU kernels gather at data-dependent indices and then mask; clamping keeps a gather
    at an index the mask discards from failing, as the Triton kernels' masked loads do.
    """
    if values.shape[0] == 0:
        return torch.zeros_like(index)
    return values.long()[index.clamp(0, values.shape[0] - 1)]


def take_or_zero(values, index):
    """values[index] where the index is inside the tensor, else 0: a read the contract defines
    outside the tensor (a request's first position when the request is empty and last in the
    batch), as the Triton kernels' masked loads read it."""
    inside = (index >= 0) & (index < values.shape[0])
    return torch.where(inside, take(values, index), 0)
