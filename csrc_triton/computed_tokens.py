"""1.6 (docs/ops.md): correct computed-token counts after an async-scheduling batch change.

Row i reads num_computed_tokens[prev_positions[i]], which another row may write, and the
contract is "all reads before any write". Up to ONE_PROGRAM_ROWS rows, the whole batch runs in
one program: load everything, barrier, store. Larger batches first snapshot the rows that can
be read (a device copy, so a second launch), then run one program per block of rows that reads
the snapshot and writes the counts: no program reads what another writes.

When the previous batch has no more rows than the program (num_prev_rows <= BLOCK), the one
program loads its three arrays whole (coalesced, in the same round trip as prev_positions)
and picks each row's entries with tl.gather, on chip, instead of a second, dependent round
trip of scattered loads. Measured on the H200 (CUDA graph, µs per call, scattered -> on chip,
R rows, P previous rows; benchmarks/results/batch_change_gather.txt): R = P = 64 0.77 -> 0.71,
R = P = 1024 1.27 -> 1.05, R = P = 4096 3.81 -> 2.61. A previous batch many times larger
than the current one costs more loaded whole (R = 64, P = 1024: 0.84 -> 0.95).
"""

import triton.language as tl

from ._launch import Launcher, cdiv, next_power_of_2, pdl_prologue, spec_kernel

ONE_PROGRAM_ROWS = 16384
BLOCK_ROWS = 1024           # rows per program with a snapshot


@spec_kernel
def _update_num_computed_tokens_kernel(
    num_computed_ptr,           # [>= n] in/out
    num_accepted_ptr,           # [>= n] out where the row participates
    prev_positions_ptr,         # [n]; -1 for a new request
    valid_count_ptr,            # [previous batch]
    prev_num_draft_ptr,         # [previous batch]
    cpu_num_computed_ptr,       # [n]
    prev_computed_ptr,          # [>= num_prev_rows]: num_computed_ptr itself, or its snapshot
    num_rows: tl.int64, num_prev_rows: tl.int64,
    BLOCK: tl.constexpr, ON_CHIP: tl.constexpr, PDL: tl.constexpr,
):
    pdl_prologue(PDL)
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    row_mask = rows < num_rows
    prev = tl.load(prev_positions_ptr + rows, mask=row_mask, other=-1).to(tl.int64)
    cpu_computed = tl.load(cpu_num_computed_ptr + rows, mask=row_mask, other=0).to(tl.int64)
    known = row_mask & (prev >= 0) & (prev < num_prev_rows)
    if ON_CHIP:
        # The previous batch whole (num_prev_rows <= BLOCK), picked on chip.
        prev_rows = tl.arange(0, BLOCK)
        prev_mask = prev_rows < num_prev_rows
        all_drafts = tl.load(prev_num_draft_ptr + prev_rows, mask=prev_mask, other=0)
        all_accepted = tl.load(valid_count_ptr + prev_rows, mask=prev_mask, other=0)
        all_computed = tl.load(prev_computed_ptr + prev_rows, mask=prev_mask, other=0)
        # A row not known picks row 0; its values are used only where the row participates.
        pick = tl.where(known, prev, 0)
        prev_drafts = tl.gather(all_drafts, pick, 0)
        accepted = tl.gather(all_accepted, pick, 0).to(tl.int64)
        prev_computed = tl.gather(all_computed, pick, 0).to(tl.int64)
    else:
        prev_drafts = tl.load(prev_num_draft_ptr + prev, mask=known, other=0)
        accepted = tl.load(valid_count_ptr + prev, mask=known, other=0).to(tl.int64)
        prev_computed = tl.load(prev_computed_ptr + prev, mask=known, other=0).to(tl.int64)
    participates = known & (prev_drafts > 0)
    computed = tl.where(participates, prev_computed + accepted, cpu_computed)
    tl.debug_barrier()      # one program: every read above precedes every write below
    tl.store(num_computed_ptr + rows, computed, mask=row_mask)
    tl.store(num_accepted_ptr + rows, accepted, mask=participates)


_update_num_computed_tokens = Launcher(_update_num_computed_tokens_kernel)


def program_rows(num_rows):
    """Rows per program: the whole batch, at least 128 (a power of two), up to
    ONE_PROGRAM_ROWS rows; BLOCK_ROWS above, after a snapshot."""
    return max(next_power_of_2(num_rows), 128) if num_rows <= ONE_PROGRAM_ROWS else BLOCK_ROWS


def launch_update_num_computed_tokens(num_computed_tokens, num_accepted_tokens, prev_positions,
                                      valid_sampled_token_count, prev_num_draft_tokens,
                                      cpu_num_computed_tokens, num_prev_rows):
    num_rows = prev_positions.shape[0]
    block = program_rows(num_rows)
    if num_rows <= ONE_PROGRAM_ROWS:
        prev_computed, on_chip = num_computed_tokens, num_prev_rows <= block
    else:
        prev_computed, on_chip = num_computed_tokens[:num_prev_rows].clone(), False
    return _update_num_computed_tokens(
        cdiv(num_rows, block),
        (num_computed_tokens, num_accepted_tokens, prev_positions, valid_sampled_token_count,
         prev_num_draft_tokens, cpu_num_computed_tokens, prev_computed, num_rows,
         num_prev_rows, block, on_chip),
        num_warps=min(max(block // 32, 4), 32))
