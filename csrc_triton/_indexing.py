"""Device helpers shared by the kernels: the paged-KV slot lookup, the chunk loops of the
per-request grids, the row layout's requests and the loops over their items past the tile."""

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
    return slot_of(block_of(block_table_ptr, block_table_row_stride, num_block_cols, rows,
                            position, mask, BLOCK_SIZE), position, BLOCK_SIZE)


@triton.jit
def block_of(block_table_ptr, block_table_row_stride, num_block_cols, rows, position, mask,
             BLOCK_SIZE: tl.constexpr):
    """slot_lookup's load alone: the block id of (row, position), int64 (0 where not
    ``mask``). A kernel that needs several lookups issues them all before using any: ptxas
    keeps a load whose result is used before the next load is issued as a round trip of its
    own."""
    block_index = _block_index(position, num_block_cols, BLOCK_SIZE)
    return tl.load(block_table_ptr + rows * block_table_row_stride + block_index,
                   mask=mask, other=0).to(tl.int64)


@triton.jit
def _block_index(position, num_block_cols, BLOCK_SIZE: tl.constexpr):
    """The block-table column of ``position``, clamped into [0, n_cols)."""
    return tl.minimum(tl.maximum(position // BLOCK_SIZE, 0), num_block_cols - 1)


@triton.jit
def checked_block(block_table_ptr, block_table_row_stride, num_block_cols, rows, position,
                  guess, guessed, mask, BLOCK_SIZE: tl.constexpr):
    """block_of(``position``) where ``mask``, given ``guessed``: block_of(``guess``) read
    under a mask that covers ``mask`` before ``position`` was known. Where the two positions
    fall in the same block-table column the guessed entry is the one, else it is read again:
    a further round trip for the programs that hold such an entry, and for them alone.

    The round ops read a position from the target batch and then the block table at it, two
    dependent round trips. A serving engine's batch runs each request's positions up to
    seq_lens[r] - 1, so the position follows from values the first round trip brings, and
    its block-table read can go out with the position's own. H200, CUDA graph, us per call
    (benchmarks/results/round_lanes.txt, section 20): chain EAGLE with K = 3 at R = 1 / 1024
    1.23 / 1.42 -> 1.17 / 1.35, DFlash with K = 7 1.27 / 1.48 -> 1.13 / 1.35; every request's
    seq_len a block off (each program reading again) up to 0.12 slower than without.
    The second read is a branch: predicated off, a load is still waited for (chain EAGLE 0.03
    slower than without the guess, DFlash no faster)."""
    missed = mask & (_block_index(position, num_block_cols, BLOCK_SIZE)
                     != _block_index(guess, num_block_cols, BLOCK_SIZE))
    if tl.max(missed.to(tl.int32)) > 0:
        guessed = tl.where(missed, block_of(block_table_ptr, block_table_row_stride,
                                            num_block_cols, rows, position, missed, BLOCK_SIZE),
                           guessed)
    return guessed


@triton.jit
def slot_of(block_id, position, BLOCK_SIZE: tl.constexpr):
    """slot_lookup's slot from block_of's block id."""
    return block_id * BLOCK_SIZE + position % BLOCK_SIZE


@triton.jit
def request_chunks(start, count, size, BLOCK: tl.constexpr):
    """This program's chunk loop over a request's items: (first, stop, step) for ``range``.

    The request owns j in [0, count), stored at start + j in a buffer of ``size``; program
    (r, c) of a C-chunk grid takes chunks c, c + C, ... Both bounds hold whatever start and
    count are, so a garbage query_start_loc neither leaves the buffer nor loops for long, and
    every j in the loop below ``stop`` is in range.
    """
    first = tl.maximum(-start, 0)
    stop = tl.minimum(count, size - start)
    return (first + tl.program_id(1).to(tl.int64) * BLOCK, stop,
            tl.num_programs(1).to(tl.int64) * BLOCK)


@triton.jit
def wide_chunks(first, step, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    """The chunk loop past this program's first chunk (request_chunks' ``first``, ``step``),
    WIDE items at a time: (first, step) for ``range`` with request_chunks' stop. The C
    programs of a request take its first C * BLOCK items as one chunk of BLOCK each, then
    chunks c, c + C, ... of WIDE after those."""
    chunk = tl.program_id(1).to(tl.int64)
    return first + step + chunk * (WIDE - BLOCK), step // BLOCK * WIDE


@triton.jit
def row_group(ROWS: tl.constexpr):
    """The requests of this program in a row layout of P programs: p, p + P, p + 2P, ... (ROWS
    of them, int64). Strided, so that requests next to each other (chunked prefills scheduled
    together among decodes) land in different programs and their remainders run in parallel."""
    return tl.program_id(0).to(tl.int64) + tl.arange(0, ROWS).to(tl.int64) * tl.num_programs(0)


@triton.jit
def flat_remainders(first, last):
    """The items [first, last) of each row of a [ROWS] group laid end to end, a row with none
    taking no room: (each row's flat start, its flat end, the total). The row layout's loop
    after its tiles runs over the flat indices: one loop for the group, whichever rows hold the
    remainders."""
    count = tl.maximum(last - first, 0)
    flat_end = tl.cumsum(count, 0)
    return flat_end - count, flat_end, tl.sum(count)


@triton.jit
def flat_rows(f, flat_start, flat_end):
    """[ROWS, LANES]: whether flat index f (a [LANES] vector) falls in each row's
    [flat_start, flat_end). One row per lane at most (none past the total), for ``pick``."""
    return (f[None, :] >= flat_start[:, None]) & (f[None, :] < flat_end[:, None])


@triton.jit
def pick(in_row, values):
    """Per lane, the entry of ``values`` ([ROWS]) of the row ``in_row`` marks, 0 for none.

    Rows run along axis 0: Triton's default layout of a [ROWS, LANES] tile with at least as
    many lanes as threads gives each thread whole columns, so the sum stays in its registers
    (no shuffles, no shared memory). Each thread then needs all of ``values``: the row kernels
    load them again inside their remainder branch, since for values carried over from the
    tile Triton repeats the loads in that layout where the tile's are, before the branch,
    in every program (1.3 with shift, sm_90 PTX: 49 loads per thread ahead of the branch with
    the values carried over, 9 with them loaded again)."""
    return tl.sum(tl.where(in_row, values[:, None], 0), axis=0)


@triton.jit
def lone_remainder(count):
    """(whether, which): exactly one row of the group has items past the tile (``count`` > 0),
    and the [ROWS] mask of the rows that have. Such a group runs that row's items with its
    values as scalars (``row_value``), wider than the flat loop, whose lanes each hold every
    row's values."""
    has_items = count > 0
    return tl.sum(has_items.to(tl.int32)) == 1, has_items


@triton.jit
def row_value(values, row):
    """The entry of ``values`` ([ROWS]) at the row ``row`` (a one-hot [ROWS] mask) marks."""
    return tl.sum(tl.where(row, values, 0))
