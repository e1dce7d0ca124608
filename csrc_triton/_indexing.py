"""Device helpers shared by the kernels: paged-KV slot lookup and owner-request search."""

import triton
import triton.language as tl


@triton.jit
def slot_lookup(block_table_ptr, block_table_row_stride, num_block_cols, rows, position,
                block_size, mask):
    """slot(row, position), int64, with the block index clamped into [0, n_cols).

    Division and remainder are C-style (what Triton and the engines' kernels do); for the
    non-negative positions of real inputs they equal Python's // and %.
    """
    block_index = tl.minimum(tl.maximum(position // block_size, 0), num_block_cols - 1)
    block_id = tl.load(block_table_ptr + rows * block_table_row_stride + block_index,
                       mask=mask, other=0).to(tl.int64)
    return block_id * block_size + position % block_size


@triton.jit
def find_request(query_start_loc_ptr, index, mask, num_reqs, extra_per_request, base,
                 search_steps):
    """For each lane, the largest r in [0, R) with qsl[r] - base + r * extra <= index.

    Request r's flat range starts at qsl[r] - base + r * extra; search_steps >= log2(R) binary
    search steps find the owner. Loads stay inside qsl[0:max(R, 1)]; with R = 0 every lane gets
    0, which callers reject with ``req < num_reqs``.
    """
    lo = tl.zeros_like(index)
    hi = tl.zeros_like(index) + num_reqs
    for _ in range(search_steps):
        mid = (lo + hi) // 2
        start = tl.load(query_start_loc_ptr + mid, mask=mask, other=0).to(tl.int64)
        go_right = start - base + mid * extra_per_request <= index
        lo = tl.where(go_right, mid, lo)
        hi = tl.where(go_right, hi, mid)
    return lo
