"""Device helper shared by the kernels: the paged-KV slot lookup."""

import triton
import triton.language as tl


@triton.jit
def slot_lookup(block_table_ptr, block_table_row_stride, num_block_cols, rows, position, mask,
                BLOCK_SIZE: tl.constexpr):
    """slot(row, position), int64, with the block index clamped into [0, n_cols).

    BLOCK_SIZE is a constexpr so the division compiles to shifts or a multiply. Division and
    remainder are C-style (what Triton and the engines' kernels do); for the non-negative
    positions of real inputs they equal Python's // and %.
    """
    block_index = tl.minimum(tl.maximum(position // BLOCK_SIZE, 0), num_block_cols - 1)
    block_id = tl.load(block_table_ptr + rows * block_table_row_stride + block_index,
                       mask=mask, other=0).to(tl.int64)
    return block_id * BLOCK_SIZE + position % BLOCK_SIZE
