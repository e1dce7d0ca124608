"""One launch per draft round (docs/round_ops.md): 6.1 chain EAGLE / MTP, 6.2 parallel
drafting, PARD and draft models, 6.3 DFlash.

No output needs a value another request produced, so each round is one grid with no barrier.
Every program that needs a request's 1.1 and 1.2 state recomputes it in registers (one pass
over the request's W sampled columns), then issues every load its first chunk of tokens needs
before its first store, so its chain of dependent global reads is at most three round trips:
the inputs, the positions its slots start from, the block table (all draft steps' rows at
once, as lanes of one vector); 6.1's lanes tile, which copies its slots, two. 6.1's lanes
draft-step programs and 6.3's lanes tile take two as well where the positions are those of a
serving engine's batch: they read the block table at those with the positions' own loads
(_indexing.checked_block). Further chunks of a long request load after that. (How ptxas
schedules the loads can add round trips: scripts/load_trips.py counts them; 6.2's lanes tile,
6.1's lanes draft steps and 6.3's lanes tile hold their loads in groups with barriers.)

Program (r, c) of a request's C programs writes chunk c of its first-pass tokens, BLOCK
of them, and past the first C * BLOCK its chunks c, c + C, ... of WIDE_CHUNK (a long request
in a decode-sized batch); program (r, 0) alone writes the per-request outputs and the
request's draft steps.

The grid has at least one program, so an empty batch still writes its padding entries: those
are constants, dealt out chunk by chunk over all programs, each entry stored by exactly one.

Each op has a second layout, the lanes layout, for decode-sized batches (at most LANES
first-pass items per request on average, from shapes; 6.2 and 6.3 also need LANES_MIN_REQS
requests or LANES_MIN_COLS sampled columns, 6.2 with draft steps neither: lanes_pay) and for
batches of several requests above that whose PER_REQUEST_BLOCK chunks are no more than
their groups' remainder programs (6.2 with LANES_MIN_REQS requests or LANES_MIN_COLS columns;
lanes_split): one warp holds 32 / LANES requests, LANES lanes each, and every lane of a
request computes the request's state. Lane c reads sampled column c and writes first-pass
item c. A round with draft steps has step programs of its own after the tile's, lane c of a
request writing step c (_programs_before_remainder): 6.1's over a tile's requests, 6.2's over
as many as lanes for the sampled columns and the steps hold where those are few
(parallel_step_lanes: the draft model with K = 3, whose tile holds its W + 1 items, gets half
as many step programs as tile programs). Items past a
request's lanes (a chunked prefill among decodes) are written by remainder programs launched
after those (_remainder_requests).
"""

import triton
import triton.language as tl

from ._indexing import (
    block_of,
    checked_block,
    request_chunks,
    row_value,
    slot_lookup,
    slot_of,
    wide_chunks,
)
from ._launch import (
    PER_REQUEST_BLOCK,
    PER_REQUEST_WARPS,
    WIDE_CHUNK,
    Launcher,
    cdiv,
    next_power_of_2,
    num_chunks,
    pdl_prologue,
    spec_kernel,
)
from .dflash import (
    context_slots,
    context_tokens,
    more_queries,
    query_block,
    query_slots,
    store_queries,
)
from .draft_step import _advance
from .expand import (
    expanded_entries,
    expanded_input_ids,
    expanded_tokens,
    store_expanded_indices,
)
from .padded_batch import _next_token_and_count, _sample_index_and_rejected

# 6.2's kernel runs with 2 warps per program, 6.1's and 6.3's with PER_REQUEST_WARPS (1). At
# 1024 requests, K = 3 (scripts/mixed_batch.py --round-warps 1 / 2 / 4), 6.2 took 2.47 us
# on pure decodes against 2.69 with 1 warp, 2.65-3.05 against 3.55-3.63 with 256-token
# chunked prefills among them and 7.9-8.2 against 15.0-15.3 with 2048-token ones (the draft
# model's use of it: 2.69 / 2.96-3.18 / 9.0-9.3 against 2.73 / 3.36-3.53 / 15.1-15.3). A
# wide chunk (WIDE_CHUNK lanes) then holds 4 items per thread, not 8: see
# expand.SLOT_LONE_TAIL. 6.1 and 6.3 were slower on pure decodes with 2 warps (3.25 against
# 2.53, 2.34 against 1.89 us), 4 warps slower on pure decodes for all three.
PARALLEL_ROUND_WARPS = 2

# Draft steps computed side by side, as lanes of one vector (a round with more steps takes them
# this many at a time).
STEP_LANES = tl.constexpr(16)
# The round ops have no row layout. Measured in a CUDA graph on the H200 at K = 1, 3, 7
# (scripts/sweep_row_layout.py, benchmarks/results/row_layout_rounds.txt): 6.1 in rows lost at
# nearly every size; 6.2 and 6.3 in rows of 8 consecutive requests won at 1024 requests
# (2.58-3.87 us against 2.99-4.45, 1.74-2.43 against 2.18-2.62) but not at 512 or fewer, and in
# rows of strided requests (which keep adjacent long requests apart, as 1.3, 1.4 and 1.7 do)
# won or lost by up to 14% at 1024 requests, case by case.


# The lanes layout: at most this many lanes per request (sampled columns, first-pass items and
# draft steps), in programs of one warp. 6.1 in a CUDA graph on the H200 at K = 1 / 3 / 7
# (scripts/sweep_round_layouts.py, benchmarks/results/round_lanes.txt): 1024 decode requests
# took 1.30 / 1.34 / 1.56 us per call against 2.18 / 2.52 / 2.81 with one program per request
# (1.38 / 1.50 / 1.71 with REMAINDER_SPLIT below), one request 1.22 / 1.24 / 1.20 against
# 1.36 / 1.48 / 1.67; programs of 2 or 4 warps were 0.2-0.3 us slower, and 2 warps each
# holding its own requests (no exchange between warps in the tile's code) 0.5-0.8 us slower
# (chain EAGLE K = 3: 1.93 / 2.22 at R = 1 / 1024 against 1.31 / 1.41).
MAX_LANES = 32
LANES_WARPS = 1
# CUDA-graph padding entries per program and chunk: the per-request kernels' chunk.
LANES_PADDING_CHUNK = tl.constexpr(PER_REQUEST_BLOCK)
# Requests per remainder program (two per thread): after the tile's programs, programs that
# give a request its items past its lanes. A check at the end of the tile's programs instead
# (a reduction over the tile, then the loop) cost 6.1 0.11-0.32 us per call at K = 1 / 3 / 7
# on the H200, whether or not a request had such items. Fewer remainder programs cost 1024
# pure decodes less: 6.1 at K = 1 / 3 / 7 took 1.45 / 1.49 / 1.68 us with 32 requests per
# program, 1.41 / 1.42 / 1.52 with 64, 1.38 / 1.39 / 1.60 with 128; 6.3 1.45 / 1.48 / 1.52,
# 1.39 / 1.45 / 1.44, 1.35 / 1.36 / 1.46. With one 256-token request among them 128 lost
# (6.2 for P-EAGLE 3.26 us with 32, 3.78 with 128; 6.3 2.75 against 3.58), 64 less so
# (P-EAGLE 3.54 against 3.91 with 32 in the same run, 6.3 3.06 against 2.76;
# benchmarks/results/round_lanes.txt).
REMAINDER_REQS = tl.constexpr(64)
# Remainder programs per group of REMAINDER_REQS requests in a decode-sized batch (lanes_split
# gives a batch above that one per request): the group's programs deal out its requests'
# chunks (_remainder_requests), so one long request among short ones is not one warp's alone.
# 1024 requests with one 2048-token request, groups of 32: 6.2 (P-EAGLE, K = 3) 4.8 us,
# against 14.1 with one program per group and 7.9 with one per request and chunk (program c
# then taking chunks c, c + SPLIT, ... of every request); with groups of 32 the extra
# programs cost 1024 pure decodes 0.09-0.14 us (6.1 1.35 -> 1.48, 6.3 1.42 -> 1.51;
# scripts/mixed_batch.py --only rounds). (With groups of 64, 6.2's load groups and chunks of
# 256: 6.0 us there; with REMAINDER_CHUNK's chunks: 4.9.)
REMAINDER_SPLIT = tl.constexpr(4)
# Items per chunk of a remainder program (6.2: PARALLEL_...), two per thread (four): a
# 256-token request among 1024 decodes (K = 3) is one chunk of 256 otherwise, a single warp's
# eight items per thread while the group's other programs have nothing to do. H200, CUDA graph,
# us per call, chunks of 256 -> these (scripts/mixed_batch.py --only rounds; benchmarks/
# results/round_lanes.txt, section 7): one 256-token request: 6.1 1.85 -> 1.63, P-EAGLE 3.74 ->
# 2.42, the draft model 3.18 -> 2.35, 6.3 3.06 -> 1.68; eight: P-EAGLE 3.94 -> 2.52; one
# 2048-token request: P-EAGLE 5.97 -> 4.90 (7.09 with 64-item chunks), the draft model 4.77 ->
# 4.61. Pure decodes, whose remainder programs find nothing to do, came out 0.03-0.13 us slower
# with K = 7 (6.2 for P-EAGLE at R = 1024: 1.83 -> 1.95; 6.3 at R = 1: 1.25 -> 1.28) and
# within 0.03 either way with K <= 3 but for 6.2 at R = 1024 (P-EAGLE 1.74 -> 1.67, the draft
# model 1.70 -> 1.77): the tile's code keeps its instructions (to within three) but compiles
# in another order with other registers.
REMAINDER_CHUNK = tl.constexpr(64)
PARALLEL_REMAINDER_CHUNK = tl.constexpr(128)
I64_MAX = tl.constexpr(2**63 - 1)

# How a kernel computes the draft steps (its STEP_FORM, from the host's num_steps and
# max_model_len): none at all (num_steps = 0: P-EAGLE, PARD, one-draft rounds), each step from
# the round's start in closed form (_lane_steps), or 1.5 applied step after step (a
# max_model_len a position can pass more than once in num_steps steps). Code for steps a round
# does not take still costs a warp its place in the instruction stream, masked off or not.
# H200, CUDA graph, us per call at R = 1 / 64 / 1024 before -> after
# (benchmarks/results/round_lanes.txt, section 12): chain EAGLE with one draft 1.29 / 1.32 /
# 1.41 -> 0.99 / 1.00 / 1.08, P-EAGLE with K = 3 1.43 / 1.55 / 1.66 -> 1.13 / 1.19 / 1.44, the
# draft model with one draft 1.31 / 1.46 / 1.54 -> 1.18 / 1.29 / 1.27; the per-request layout's
# steps in closed form: the draft model with K = 3 at R = 1 / 64 1.47 / 1.66 -> 1.38 / 1.52.
NO_STEPS = tl.constexpr(0)
CLOSED_STEPS = tl.constexpr(1)
ITERATED_STEPS = tl.constexpr(2)


def round_lanes(*counts):
    """Lanes per request in the lanes layout, a power of two: one for each of every count's
    items (6.1: sampled columns and draft steps; 6.3: sampled columns and queries). None where
    that exceeds MAX_LANES."""
    lanes = next_power_of_2(max(*counts, 1))
    return lanes if lanes <= MAX_LANES else None


# 6.2's lanes layout holds at least this many lanes per request. P-EAGLE with one draft
# needs two, 16 requests to a warp, and was slower so: H200, CUDA graph, lanes layout, us per
# call at R = 256 / 1024 with 2 lanes 1.50 / 1.54, with 4 1.31 / 1.38, with 8 1.37 / 1.43; the
# draft model with one draft (4 lanes) 1.26 / 1.28 with 4, 1.22 / 1.37 with 8
# (benchmarks/results/round_lanes.txt, section 13). 6.1 and 6.3 gain nothing from it.
PARALLEL_MIN_LANES = 4


def parallel_lanes(num_cols, num_padding_slots, shift, num_steps):
    """6.2's lanes per request: a decode request's W tokens and the S (S - 1 with shift) the
    round adds, and its draft steps; at least PARALLEL_MIN_LANES."""
    return round_lanes(num_cols + num_padding_slots - (1 if shift else 0), num_steps,
                       PARALLEL_MIN_LANES)


# 6.2's step programs take this many lanes per request where its sampled columns and draft
# steps fit them, otherwise the tile's (at least as many: PARALLEL_MIN_LANES). Only the draft
# model with K = 3 differs from its tile so (4 lanes, 8 requests to a warp, against the tile's
# 8 and 4). H200, CUDA graph, us per call at R = 1 / 64 / 1024
# (benchmarks/results/round_lanes.txt, section 25a): 1.188 / 1.223 / 1.654 -> 1.185 / 1.225 /
# 1.539; the draft model with K = 7 at the 8 lanes of its columns and steps, against its
# tile's 16, was slower: 1.217 / 1.241 / 1.779 -> 1.219 / 1.253 / 1.813.
PARALLEL_STEP_LANES = 4


def parallel_step_lanes(num_cols, num_steps, lanes):
    """6.2's lanes per request in its step programs (``lanes``: its tile's)."""
    fits = num_steps and max(num_cols, num_steps) <= PARALLEL_STEP_LANES
    return PARALLEL_STEP_LANES if fits else lanes


def _launch_lanes(launcher, num_reqs, lanes, split, args, form=NO_STEPS.value,
                  step_lanes=None, after=()):
    """A lanes-layout kernel over its programs: the tile's (32 * LANES_WARPS / lanes requests
    each, at least one program), for a round with draft steps (``form``, the kernel's
    STEP_FORM) the steps' (32 * LANES_WARPS / step_lanes requests each; ``step_lanes`` None:
    the tile's lanes, and the kernel takes no step tile of its own:
    _programs_before_remainder), then the remainder's (``split``, a power of two, per
    REMAINDER_REQS requests). ``after``: the kernel's arguments after the remainder's shift."""
    assert form != ITERATED_STEPS.value, "the lanes layout computes steps in closed form only"
    reqs = 32 * LANES_WARPS // lanes
    step_reqs = reqs if step_lanes is None else 32 * LANES_WARPS // step_lanes
    grid = (cdiv(max(num_reqs, 1), reqs)
            + (0 if form == NO_STEPS.value else cdiv(max(num_reqs, 1), step_reqs))
            + split * cdiv(max(num_reqs, 1), REMAINDER_REQS.value))
    tile = (reqs, lanes) if step_lanes is None else (reqs, lanes, step_reqs, step_lanes)
    return launcher(grid, (*args, *tile, split.bit_length() - 1, *after))


# 6.2 and 6.3 take the lanes layout from this many requests, or with this many sampled columns
# (K >= 7), and 6.2 with draft steps at any size: below both, their per-request layout was
# faster, but for the draft steps. H200, CUDA graph, µs per call at
# R = 1 / 64 / 256 / 1024 (scripts/sweep_round_layouts.py, benchmarks/results/round_lanes.txt):
# 6.2 for P-EAGLE at K = 3 1.43 / 1.62 / 2.00 / 2.47 per request against 1.71 / 1.78 / 1.77 /
# 1.91 in lanes, at K = 7 1.73 / 1.93 / 2.28 / 2.91 against 1.67 / 1.74 / 1.76 / 1.99; 6.3 at
# K = 1 1.20 / 1.27 / 1.43 / 1.82 against 1.32 / 1.34 / 1.37 / 1.42. 6.1 takes it at any size
# (1.20-1.34 us against 1.36-2.08 at R <= 256). With the draft steps in programs of their own
# (_programs_before_remainder), the draft model with K = 3 took 1.23 / 1.27 us at R = 1 / 64 in
# lanes against 1.38 / 1.52 per request, while rounds without steps kept their choice (P-EAGLE
# with K = 3 1.32 / 1.35 against 1.13 / 1.19, DFlash with K = 1 at R = 1 1.27 against 1.20;
# round_lanes.txt, section 16).
LANES_MIN_REQS = 256
LANES_MIN_COLS = 8

# Configuration constants. The lanes kernels of 6.1 and 6.2 take vocab_size, max_model_len,
# num_steps and (6.2) num_padding_slots as constexprs: a serving engine passes the same values
# every round (spec_ops.warmup compiles them from its configuration), and a kernel reads every
# runtime parameter from the constant bank, where the first read of each part of it waits for
# the part to arrive. Nsight Compute on 1024 requests: 1.9-3.0 of a warp's 8.4-9.8 cycles per
# instruction stalled on the constant cache (benchmarks/results/round_lanes.txt, section 24). A
# one-warp kernel of three dependent reads took 0.10-0.19 us longer with 18 runtime integers
# read after them than with the same as constexprs (1.08 / 1.43 / 1.72 against 0.93 / 1.24 /
# 1.62 us at 1 / 576 / 1088 programs; scripts/param_reads.py). H200, CUDA graph, us per call
# at R = 1 / 64 / 1024 before -> after: chain EAGLE with K = 7 1.174 / 1.258 / 1.455 -> 1.124 /
# 1.207 / 1.408, P-EAGLE with K = 3 at R = 1024 1.440 -> 1.407, the draft model with K = 3
# 1.228 / 1.267 / 1.676 -> 1.202 / 1.227 / 1.657. Their strides and token ids stay runtime
# values: an engine's buffers and ids are not warm-up's. One exception: 6.2's remainder
# programs read vocab_size from a runtime copy (remainder_vocab_size), as the constexpr their
# loop took the draft model's batches with long requests 0.3-1.7 us longer (section 28).
CONFIG_CONSTEXPRS = ("vocab_size", "max_model_len", "num_steps", "num_padding_slots")


def lanes_pay(num_reqs, num_cols, num_steps=0):
    """Whether 6.2 and 6.3 take the lanes layout for a decode-sized batch: LANES_MIN_REQS
    requests, LANES_MIN_COLS sampled columns, or (6.2) any draft steps."""
    return num_reqs >= LANES_MIN_REQS or num_cols >= LANES_MIN_COLS or num_steps > 0


def closed_form_steps(max_model_len, num_steps):
    """Whether the draft steps' closed form (_lane_steps) is exact for this max_model_len: a
    position wraps at most once in num_steps steps, and seq_len + num_steps cannot overflow.
    Where it is not, the steps are applied one after the other (ITERATED_STEPS), in the
    per-request layout only."""
    return num_steps < max_model_len <= I64_MAX.value - num_steps


def step_form(max_model_len, num_steps):
    """The kernels' STEP_FORM for a round of num_steps draft steps."""
    if num_steps == 0:
        return NO_STEPS.value
    if closed_form_steps(max_model_len, num_steps):
        return CLOSED_STEPS.value
    return ITERATED_STEPS.value


def decode_sized(num_tokens, num_reqs, lanes):
    """Whether a batch is decode-sized: at most ``lanes`` tokens per request on average (from
    shapes only)."""
    return lanes is not None and num_tokens <= max(num_reqs, 1) * lanes


# Batches above decode size: H200, CUDA graph, K = 3, R requests of which n adjacent ones are
# chunked prefills of L tokens, us per call, one program per request and chunk -> the lanes
# layout with one remainder program per request of a group (scripts/mixed_batch.py
# --round-layouts; benchmarks/results/round_lanes.txt, section 9): R = 1024, n = 1, L = 2048:
# 6.1 6.65 -> 2.44, 6.3 11.14 -> 2.59; n = 4: 6.2 for P-EAGLE 8.18 -> 3.17, the draft model
# 9.28 -> 3.29; R = 256, n = 1, L = 1024: 6.1 4.00 -> 1.77, 6.2 4.33 -> 2.68, 6.3 5.84 -> 1.75.
# Many requests a little longer than their lanes cost it: R = 64, n = 64, L = 12: 6.1 1.65 ->
# 1.71, 6.3 1.33 -> 1.73, 6.2 1.58 -> 2.42, which at R = 64 gained little with one long
# request (2.87 -> 2.57): 6.2 takes it from LANES_MIN_REQS requests only (R = 256, n = 32,
# L = 40: 2.03 -> 2.63). With REMAINDER_SPLIT programs instead, the same batch took 11.2 us
# (6.1), and 39.5 when a group's programs took chunks c, c + SPLIT, ... of each request in
# turn, every one-chunk request falling to the first.
# Below REMAINDER_REQS requests the batch is one group, and it takes the lanes layout while its
# chunks are no more than the group's REMAINDER_REQS programs, with a program per request or
# per chunk (section 10): 6.1 / 6.3 at R = 32, n = 1, L = 2048 3.98 -> 1.71 / 5.83 -> 1.65, at
# R = 8, n = 1, L = 2048 2.73 -> 1.72 / 3.49 -> 1.64, at R = 16, n = 2, L = 1024 2.73 -> 1.72 /
# 3.08 -> 1.64; where every request is long it costs them 0.12-0.16 / 0.28-0.36 (R = 4, n = 4,
# L = 1024: 1.56 -> 1.72 / 1.29 -> 1.65). A single request, which no other can hold back,
# keeps one program per chunk (R = 1, L = 2048: 1.52 against 1.69 / 1.30 against 1.64).
def lanes_split(num_items, num_reqs, lanes, pays=True, long_pays=True):
    """The lanes layout's remainder programs per group of REMAINDER_REQS requests, or None for
    one program per request and chunk (from shapes only). A decode-sized batch gets
    REMAINDER_SPLIT where the lanes layout pays (``pays``: lanes_pay for 6.2 and 6.3). A batch
    of several requests above that whose chunks of PER_REQUEST_BLOCK items are no more than its
    groups' REMAINDER_REQS programs each, where the per-request layout would leave a long
    request to its few programs, gets one remainder program per request or per chunk, whichever
    is more (a power of two, at most REMAINDER_REQS; where ``long_pays``: lanes_pay for 6.2):
    the group's chunks go round all of them (_remainder_requests). Longer batches and a single
    request take the per-request layout."""
    if lanes is None:
        return None
    if decode_sized(num_items, num_reqs, lanes):
        return REMAINDER_SPLIT.value if pays else None
    if not long_pays or num_reqs <= 1:
        return None
    chunks = cdiv(num_items, PER_REQUEST_BLOCK)
    if chunks > cdiv(num_reqs, REMAINDER_REQS.value) * REMAINDER_REQS.value:
        return None
    return min(REMAINDER_REQS.value, next_power_of_2(max(num_reqs, chunks)))


@triton.jit
def _lane_request_state(sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr,
                        cu_num_draft_ptr, query_end, req, lane, is_request, vocab_size,
                        NUM_COLS: tl.constexpr):
    """_request_state in the lanes layout ([requests, LANES], each lane holding its request's
    values), from the request's query_start_loc[r + 1] (query_end): lane c reads sampled column
    c and the request's lanes combine theirs (1.1: the count of valid columns, the last valid
    one's token), so a request's first round trip is one load per lane, not NUM_COLS (with 8
    columns ptxas left the query_start_loc read for after the columns' arithmetic: a fourth
    round trip)."""
    loads = _lane_request_loads(sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr,
                                cu_num_draft_ptr, req, lane, is_request, NUM_COLS)
    return _lane_request_combine(loads, query_end, lane, vocab_size)


@triton.jit
def _lane_request_loads(sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr,
                        cu_num_draft_ptr, req, lane, is_request, NUM_COLS: tl.constexpr):
    """_lane_request_state's loads, for a kernel that issues more loads before combining them
    (_lane_request_combine, whose reductions wait for these)."""
    discard = tl.load(discard_ptr + req, mask=is_request, other=0) != 0
    backup = tl.load(backup_ptr + req, mask=is_request, other=0).to(tl.int64)
    cu = tl.load(cu_num_draft_ptr + req, mask=is_request, other=0).to(tl.int64)
    cu_prev = tl.load(cu_num_draft_ptr + req - 1, mask=is_request & (req > 0),
                      other=0).to(tl.int64)
    token = tl.load(sampled_ptr + req * sampled_row_stride + lane,
                    mask=is_request & (lane < NUM_COLS), other=-1)
    return discard, backup, cu - cu_prev, token


@triton.jit
def _lane_request_combine(loads, query_end, lane, vocab_size):
    """_lane_request_state from _lane_request_loads' values: (next, valid, last, rejected)."""
    discard, backup, num_drafts, token = loads
    # In int64: vocab_size may be a constexpr past int32 (CONFIG_CONSTEXPRS), which an int32
    # token would otherwise be compared in.
    valid = (token >= 0) & (token.to(tl.int64) < vocab_size) & ~discard
    count = tl.sum(valid.to(tl.int32), axis=1)[:, None].to(tl.int64)
    last_col = tl.max(tl.where(valid, lane, -1), axis=1)[:, None]
    picked = tl.sum(tl.where(lane == last_col, token, 0), axis=1)[:, None].to(tl.int64)
    rejected = tl.where(num_drafts > 0, num_drafts + 1 - count, 0)
    return (tl.where(last_col >= 0, picked, backup), count, query_end - 1 - rejected,
            rejected)


@triton.jit
def _lane_steps(position, seq_len, max_model_len, step):
    """5.2's step ``step`` (each lane's) from (position, seq_len): (position, seq_len, over),
    as 1.5 applied step + 1 times. With max_model_len > num_steps a position wraps at most
    once, so the steps have a closed form: a lane's values take a few operations, not a loop
    over the steps before it. Exact for max_model_len in (num_steps, 2^63 - num_steps]
    (closed_form_steps); other rounds apply the steps one after the other (ITERATED_STEPS,
    the per-request layout)."""
    n = step + 1
    # The first step at which the position reaches max_model_len, k (if any is <= n):
    # compared without forming position + n, which may overflow.
    first_over = position + 1 >= max_model_len
    wrapped = first_over | ((position < max_model_len - 1) & (position >= max_model_len - n))
    k = tl.where(first_over, 1, max_model_len - position)
    # Before it, 1.5 caps seq_len at max_model_len once (an int64 seq_len of 2^63 - 1
    # overflows on its first step and is never capped); at it, position 0 and seq_len 1.
    capped = (seq_len >= max_model_len) & (seq_len != I64_MAX)
    new_seq_len = tl.where(capped, max_model_len, tl.minimum(seq_len + n, max_model_len))
    return (tl.where(wrapped, n - k, position + n), tl.where(wrapped, n - k + 1, new_seq_len),
            wrapped & (n == k))


@triton.jit
def _lane_requests(tile, row, lane, REQS: tl.constexpr):
    """The lanes layout's [REQS, LANES] tile of request indices: tile ``tile``'s requests
    tile * REQS + row, each across its lanes. (Triton then gives the loads of per-request arrays a
    layout of their own and shuffles values into the lanes' layout: hiding the rows'
    contiguity from it removed the shuffles and cost 0.02-0.07 us per call on the H200.)"""
    return tile.to(tl.int64) * REQS + row + tl.zeros_like(lane)


@triton.jit
def _remainder_requests(query_start_loc_ptr, num_reqs, num_items, added, shift, before,
                        LANES: tl.constexpr, CHUNK: tl.constexpr):
    """A remainder program's REMAINDER_REQS requests g, g + G, g + 2G, ... of its group g
    (int64; strided, as row_group's, so that adjacent long requests land in different groups)
    and its chunks of their items past their lanes: ([requests], their qsl[r], first chunk
    start, stop, whether it has any, chunk step). A request has the items [rest, stop) of the
    items j in [0, qsl[r+1] - qsl[r] + added) stored at qsl[r] + r * added + j in a buffer of
    num_items (request_chunks' bounds). The group's S programs (the grid's remainder programs
    over its groups) deal out its requests' chunks of CHUNK items as one sequence: chunk k of a
    request whose chunks follow c chunks of the group's earlier requests goes to program
    (c + k) mod S, so each program gets every S-th chunk of the group, whichever requests hold
    them. (Dealt by the requests' rank instead, chunk k of the q-th request to program
    (q + k) mod S, a program took up to four chunks of as many requests where the group's
    chunks were no more than its programs: 16 requests of 200 tokens, 6.1 3.6 us per call
    against 1.7 on the H200; round_lanes.txt, section 10.) S = 2^shift (an argument: a
    quotient by a value the kernel derives from its grid took the programs 0.3-0.4 us).
    ``before``: the grid's programs ahead of the remainder's."""
    num_groups = (tl.maximum(num_reqs, 1) + REMAINDER_REQS - 1) // REMAINDER_REQS
    shift = shift.to(tl.int32)
    split = 1 << shift
    program = (tl.program_id(0) - before).to(tl.int32)
    req = ((program >> shift).to(tl.int64)
           + tl.arange(0, REMAINDER_REQS).to(tl.int64) * num_groups)
    is_request = req < num_reqs
    query_start = tl.load(query_start_loc_ptr + req, mask=is_request, other=0).to(tl.int64)
    query_next = tl.load(query_start_loc_ptr + req + 1, mask=is_request, other=0).to(tl.int64)
    start = query_start + req * added
    stop = tl.where(is_request, tl.minimum(query_next - query_start + added, num_items - start),
                    0)
    rest = tl.maximum(tl.maximum(-start, 0), LANES)
    pending = rest < stop
    # Chunks per request, and the group's chunks before each request's (int32: only their
    # remainder modulo S is used, which wrapping keeps).
    chunks = tl.where(pending, (stop - rest + CHUNK - 1) // CHUNK, 0).to(tl.int32)
    first_chunk = (program - (tl.cumsum(chunks, 0) - chunks)) & (split - 1)
    first = rest + first_chunk.to(tl.int64) * CHUNK
    return (req, query_start, first, stop, pending & (first < stop),
            split.to(tl.int64) * CHUNK)


@triton.jit
def _take_first(pending):
    """(the first request ``pending`` marks as a one-hot mask, ``pending`` without it)."""
    index = tl.arange(0, REMAINDER_REQS)
    first = index == tl.min(tl.where(pending, index, REMAINDER_REQS))
    return first, pending & ~first


@triton.jit
def _tile_programs(num_reqs, REQS: tl.constexpr):
    """Programs of the lanes layout's tile: REQS requests each, at least one."""
    return (tl.maximum(num_reqs, 1) + REQS - 1) // REQS


@triton.jit
def _programs_before_remainder(num_reqs, REQS: tl.constexpr, STEP_REQS: tl.constexpr,
                               STEP_FORM: tl.constexpr):
    """The tile's programs and, for a round with draft steps, the step programs (STEP_REQS
    requests each: 6.1 passes REQS).

    A tile program and a step program each recompute their requests' state and run side by
    side, so the steps' arithmetic, block-table read and stores are off the first pass's
    chain of dependent instructions. H200, CUDA graph, us per call at R = 1 / 64 / 1024, the
    steps in the tile program -> in programs of their own (benchmarks/results/round_lanes.txt,
    section 15): the draft model with K = 7 1.55 / 1.66 / 2.29 -> 1.24 / 1.26 / 1.81, with
    K = 3 at R = 1024 1.77 -> 1.67; chain EAGLE with K = 7 1.30 / 1.39 / 1.55 -> 1.24 / 1.33 /
    1.49, with K = 3 1.30 / 1.33 / 1.43 -> 1.24 / 1.31 / 1.42; nothing slower."""
    tiles = _tile_programs(num_reqs, REQS)
    if STEP_FORM != NO_STEPS:
        tiles += _tile_programs(num_reqs, STEP_REQS)
    return tiles


@triton.jit
def _request_state(sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr, cu_num_draft_ptr,
                   query_start_loc_ptr, req, is_request, vocab_size, NUM_COLS: tl.constexpr):
    """6.0's state of request req, int64 scalars: (next, valid, last, rejected), where last is
    1.2's index to sample (1.2 reading 1.1's count in registers)."""
    next_token, count = _next_token_and_count(sampled_ptr, sampled_row_stride, discard_ptr,
                                              backup_ptr, req, is_request, vocab_size, NUM_COLS)
    last, rejected = _sample_index_and_rejected(cu_num_draft_ptr, query_start_loc_ptr, req,
                                                is_request, count)
    return next_token, count, last, rejected


@triton.jit
def _fill_padding(ptr, row_stride, num_rows, start, stop, BLOCK: tl.constexpr):
    """-1 at columns [start, stop) of rows [0, num_rows): CUDA-graph padding, in chunks dealt
    out over every program of the grid."""
    program = tl.program_id(0).to(tl.int64) * tl.num_programs(1) + tl.program_id(1)
    num_programs = tl.num_programs(0).to(tl.int64) * tl.num_programs(1)
    for chunk_start in range(start + program * BLOCK, stop, num_programs * BLOCK):
        column = chunk_start + tl.arange(0, BLOCK)
        for row in range(num_rows):
            tl.store(ptr + row * row_stride + column, tl.full((BLOCK,), -1, tl.int64),
                     mask=column < stop)


@triton.jit
def _step_values(block_table_ptr, block_table_row_stride, num_block_cols, req, position,
                 seq_len, max_model_len, first_step, num_steps, valid, BLOCK_SIZE: tl.constexpr,
                 STEPS: tl.constexpr, STEP_FORM: tl.constexpr, reached_position,
                 reached_seq_len):
    """5.2's steps first_step ... first_step + STEPS - 1 of row req, loads only: (step, live,
    position, seq_len, slot), live where step < num_steps and ``valid``. Step s is 1.5's step
    applied s + 1 times to (position, seq_len) in registers (in closed form with
    CLOSED_STEPS), so all the steps' block-table reads are one round trip. ITERATED_STEPS
    starts from (reached_position, reached_seq_len), the values after step first_step - 1
    ((position, seq_len) themselves for first_step 0), so a round's steps take time linear in
    num_steps."""
    step = first_step + tl.arange(0, STEPS).to(tl.int64)
    live = step < tl.where(valid, num_steps, 0)
    if STEP_FORM == CLOSED_STEPS:
        positions = tl.zeros((STEPS,), tl.int64) + position
        seq_lens = tl.zeros((STEPS,), tl.int64) + seq_len
        positions, seq_lens, over = _lane_steps(positions, seq_lens, max_model_len, step)
    else:
        positions = tl.zeros((STEPS,), tl.int64) + reached_position
        seq_lens = tl.zeros((STEPS,), tl.int64) + reached_seq_len
        over = tl.zeros_like(positions) != 0
        for i in range(first_step, tl.minimum(num_steps, first_step + STEPS)):
            advanced, advanced_over, advanced_seq_len = _advance(positions, seq_lens,
                                                                 max_model_len)
            take = step >= i
            positions = tl.where(take, advanced, positions)
            over = tl.where(take, advanced_over, over)
            seq_lens = tl.where(take, advanced_seq_len, seq_lens)
    slot = slot_lookup(block_table_ptr, block_table_row_stride, num_block_cols, req, positions,
                       live & ~over, BLOCK_SIZE)
    return step, live, positions, seq_lens, tl.where(over, -1, slot)


@triton.jit
def _store_steps(out_positions_ptr, out_positions_row_stride, out_slot_mapping_ptr,
                 out_slot_mapping_row_stride, out_seq_lens_ptr, out_seq_lens_row_stride, req,
                 step, live, position, seq_len, slot):
    """Column req of 5.2's step outs at rows ``step`` (where ``live``)."""
    tl.store(out_positions_ptr + step * out_positions_row_stride + req, position, mask=live)
    tl.store(out_seq_lens_ptr + step * out_seq_lens_row_stride + req, seq_len, mask=live)
    tl.store(out_slot_mapping_ptr + step * out_slot_mapping_row_stride + req, slot, mask=live)


@triton.jit
def _draft_steps(block_table_ptr, block_table_row_stride, num_block_cols, out_positions_ptr,
                 out_positions_row_stride, out_slot_mapping_ptr, out_slot_mapping_row_stride,
                 out_seq_lens_ptr, out_seq_lens_row_stride, req, position, seq_len,
                 max_model_len, num_steps, valid, values, BLOCK_SIZE: tl.constexpr,
                 STEPS: tl.constexpr, STEP_FORM: tl.constexpr):
    """Column req of 5.2's step outs (where ``valid``): num_steps successive 1.5 steps from
    (position, seq_len). ``values`` are the first STEPS steps' (``_step_values``, read before
    the first pass's stores); later steps, if any, are computed here."""
    step, live, step_position, step_seq_len, slot = values
    _store_steps(out_positions_ptr, out_positions_row_stride, out_slot_mapping_ptr,
                 out_slot_mapping_row_stride, out_seq_lens_ptr, out_seq_lens_row_stride, req,
                 step, live, step_position, step_seq_len, slot)
    # Programs without a request store nothing: they skip the later steps.
    for first_step in range(STEPS, tl.where(valid, num_steps, 0), STEPS):
        last_lane = step == first_step - 1
        step, live, step_position, step_seq_len, slot = _step_values(
            block_table_ptr, block_table_row_stride, num_block_cols, req, position, seq_len,
            max_model_len, first_step, num_steps, valid, BLOCK_SIZE, STEPS, STEP_FORM,
            tl.sum(tl.where(last_lane, step_position, 0)),
            tl.sum(tl.where(last_lane, step_seq_len, 0)))
        _store_steps(out_positions_ptr, out_positions_row_stride, out_slot_mapping_ptr,
                     out_slot_mapping_row_stride, out_seq_lens_ptr, out_seq_lens_row_stride,
                     req, step, live, step_position, step_seq_len, slot)


@triton.jit
def _lane_draft_steps(block_table_ptr, block_table_row_stride, num_block_cols,
                      out_positions_ptr, out_positions_row_stride, out_slot_mapping_ptr,
                      out_slot_mapping_row_stride, out_seq_lens_ptr, out_seq_lens_row_stride,
                      req, lane, is_request, position, guess, seq_len, max_model_len,
                      num_steps, BLOCK_SIZE: tl.constexpr):
    """A lanes-layout step program's stores: lane c of request req (where ``is_request``)
    writes 5.2's step c from (position, seq_len), in closed form (_lane_steps). ``guess``,
    the start position from the first round trip's values, is what the block-table reads go
    out at, with the position's own load (checked_block); None: they go out at the position
    once it is back. (6.2's draft model was 0.06-0.19 us slower per call on the H200 with a
    guess in its first pass and its steps, and no faster with one in its steps alone:
    benchmarks/results/round_lanes.txt, section 20.)"""
    live = is_request & (lane < num_steps)
    step = lane.to(tl.int64)
    if guess is None:
        step_position, step_seq_len, over = _lane_steps(position, seq_len, max_model_len, step)
        block = block_of(block_table_ptr, block_table_row_stride, num_block_cols, req,
                         step_position, live & ~over, BLOCK_SIZE)
    else:
        guess_position, _, _ = _lane_steps(guess, seq_len, max_model_len, step)
        guessed = block_of(block_table_ptr, block_table_row_stride, num_block_cols, req,
                           guess_position, live, BLOCK_SIZE)
        # Holds the guessed reads with the position's load, ahead of its first use (ptxas
        # issues a load just before its first use: after the position is back, a third trip).
        tl.debug_barrier()
        step_position, step_seq_len, over = _lane_steps(position, seq_len, max_model_len, step)
        block = checked_block(block_table_ptr, block_table_row_stride, num_block_cols, req,
                              step_position, guess_position, guessed, live & ~over, BLOCK_SIZE)
    slot = slot_of(block, step_position, BLOCK_SIZE)
    _store_steps(out_positions_ptr, out_positions_row_stride, out_slot_mapping_ptr,
                 out_slot_mapping_row_stride, out_seq_lens_ptr, out_seq_lens_row_stride, req,
                 step, live, step_position, step_seq_len, tl.where(over, -1, slot))


@triton.jit
def _eagle_first_pass(target_token_ids_ptr, target_positions_ptr, target_slot_mapping_ptr,
                      out_input_ids_ptr, out_positions_ptr, out_slot_mapping_ptr, i, owned,
                      last, next_token, num_tokens):
    """6.1's first-pass tokens i (where ``owned``): the target batch one token to the left,
    the next token at the request's last accepted index."""
    has_successor = i + 1 < num_tokens
    successor = tl.load(target_token_ids_ptr + i + 1, mask=owned & has_successor, other=0)
    position = tl.load(target_positions_ptr + i, mask=owned)
    slot = tl.load(target_slot_mapping_ptr + i, mask=owned)
    is_last = i == last
    tl.store(out_input_ids_ptr + i, tl.where(is_last, next_token, successor.to(tl.int64)),
             mask=owned & (is_last | has_successor))
    tl.store(out_positions_ptr + i, position, mask=owned)
    tl.store(out_slot_mapping_ptr + i, slot, mask=owned)


@triton.jit
def _parallel_first_pass(target_token_ids_ptr, block_table_ptr, block_table_row_stride,
                         num_block_cols, out_input_ids_ptr, out_positions_ptr, out_masked_ptr,
                         out_slot_mapping_ptr, out_new_token_indices_ptr,
                         out_hidden_state_mapping_ptr, j, owned, req, out_start, query_start,
                         query_next, num_valid, next_token, first_position, num_tokens,
                         padding_token_id, parallel_drafting_token_id, num_padding_slots,
                         max_model_len, SHIFT: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """6.2's first-pass entries out_start + j of request req (where ``owned``): 1.3's layout
    with the last accepted index as the query end, and 1.7's slot of every entry."""
    out = out_start + j
    token, position, is_masked, is_rejected = expanded_tokens(
        target_token_ids_ptr, j, owned, query_start, num_valid, num_padding_slots, num_tokens,
        next_token, first_position, parallel_drafting_token_id, padding_token_id, SHIFT)
    keep, slot_position = _entry_slot_position(position, is_rejected, max_model_len,
                                               out_positions_ptr)
    slot = slot_lookup(block_table_ptr, block_table_row_stride, num_block_cols, req,
                       slot_position, owned & keep, BLOCK_SIZE)
    tl.store(out_input_ids_ptr + out, token, mask=owned)
    tl.store(out_positions_ptr + out, position, mask=owned)
    tl.store(out_masked_ptr + out, is_masked, mask=owned)
    tl.store(out_slot_mapping_ptr + out, tl.where(keep, slot, -1), mask=owned)
    store_expanded_indices(out_new_token_indices_ptr, out_hidden_state_mapping_ptr, j, out,
                           owned, req, query_start, query_next, num_valid, num_padding_slots,
                           num_tokens, SHIFT)


@triton.jit
def _as_stored(position, out_positions_ptr):
    """A first-pass position as out_positions holds it, which is what 1.7 reads back for 6.2's
    first-pass slots: in an int32 buffer its low 32 bits, else itself."""
    return position.to(out_positions_ptr.dtype.element_ty).to(tl.int64)


@triton.jit
def _entry_slot_position(position, is_rejected, max_model_len, out_positions_ptr):
    """1.7 for a first-pass entry: (whether it gets a slot, the position its slot is looked
    up at), from the position as stored."""
    stored = _as_stored(position, out_positions_ptr)
    return (~is_rejected & (stored < max_model_len), tl.minimum(stored, max_model_len - 1))


@triton.jit
def _store_parallel_entries(out_input_ids_ptr, out_positions_ptr, out_masked_ptr,
                            out_slot_mapping_ptr, out_new_token_indices_ptr,
                            out_hidden_state_mapping_ptr, j, owned, req, out_start,
                            query_start, query_next, num_valid, num_padding_slots, num_tokens,
                            token, position, is_masked, slot, SHIFT: tl.constexpr):
    """_parallel_first_pass's stores (``slot``: -1 where the entry gets none), for the lanes
    layout. _parallel_first_pass keeps its own: calling this from it changed the per-request
    kernel's schedule, and 6.2 for P-EAGLE with four 2048-token requests among 1024 took 9.9
    us instead of 8.1 on the H200."""
    out = out_start + j
    tl.store(out_input_ids_ptr + out, token, mask=owned)
    tl.store(out_positions_ptr + out, position, mask=owned)
    tl.store(out_masked_ptr + out, is_masked, mask=owned)
    tl.store(out_slot_mapping_ptr + out, slot, mask=owned)
    store_expanded_indices(out_new_token_indices_ptr, out_hidden_state_mapping_ptr, j, out,
                           owned, req, query_start, query_next, num_valid, num_padding_slots,
                           num_tokens, SHIFT)


@spec_kernel
def _prepare_eagle_round_kernel(
    sampled_ptr,                 # [R, W], row stride sampled_row_stride
    discard_ptr,                 # [R] bool
    backup_ptr,                  # [R]
    cu_num_draft_ptr,            # [R] inclusive cumsum
    query_start_loc_ptr,         # [R + 1]
    target_token_ids_ptr,        # [T]
    target_positions_ptr,        # [T]
    target_slot_mapping_ptr,     # [T]
    block_table_ptr,             # [>= R, n_cols], row stride block_table_row_stride
    seq_lens_ptr,                # [>= R]
    next_token_ptr,              # [>= R] out
    valid_count_ptr,             # [>= R] out
    token_indices_ptr,           # [>= R] out
    out_input_ids_ptr,           # [>= T] out
    out_positions_ptr,           # [>= T] out
    out_slot_mapping_ptr,        # [>= num_input_tokens] out
    out_step_positions_ptr,      # [>= num_steps, >= R] out, row stride step_positions_stride
    out_step_slot_mapping_ptr,   # [>= num_steps, >= input_batch_size] out
    out_step_seq_lens_ptr,       # [>= num_steps, >= R] out, row stride step_seq_lens_stride
    num_reqs: tl.int64, num_tokens: tl.int64, num_input_tokens: tl.int64,
    input_batch_size: tl.int64, sampled_row_stride: tl.int64,
    block_table_row_stride: tl.int64, num_block_cols: tl.int64, vocab_size: tl.int64,
    max_model_len: tl.int64, num_steps: tl.int64, step_positions_stride: tl.int64,
    step_slot_mapping_stride: tl.int64, step_seq_lens_stride: tl.int64,
    NUM_COLS: tl.constexpr, BLOCK_SIZE: tl.constexpr, STEP_FORM: tl.constexpr,
    BLOCK: tl.constexpr, PDL: tl.constexpr,
):
    pdl_prologue(PDL)
    req = tl.program_id(0).to(tl.int64)
    is_request = req < num_reqs
    head = is_request & (tl.program_id(1).to(tl.int64) == 0)
    next_token, count, last, rejected = _request_state(
        sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr, cu_num_draft_ptr,
        query_start_loc_ptr, req, is_request, vocab_size, NUM_COLS)
    query_start = tl.load(query_start_loc_ptr + req).to(tl.int64)
    query_next = tl.load(query_start_loc_ptr + req + 1, mask=is_request, other=0).to(tl.int64)
    if STEP_FORM != NO_STEPS:
        seq_len = tl.load(seq_lens_ptr + req, mask=head, other=0).to(tl.int64) - rejected
        # The draft steps start at the last accepted token. A discarded row with drafts may
        # point in front of the batch: read as position 0.
        position = tl.load(target_positions_ptr + last,
                           mask=head & (last >= 0) & (last < num_tokens), other=0).to(tl.int64)
        steps = _step_values(block_table_ptr, block_table_row_stride, num_block_cols, req,
                             position, seq_len, max_model_len, 0, num_steps, head, BLOCK_SIZE,
                             STEP_LANES, STEP_FORM, position, seq_len)

    first, stop, step = request_chunks(query_start,
                                       tl.where(is_request, query_next - query_start, 0),
                                       num_tokens, BLOCK)
    j = first + tl.arange(0, BLOCK)
    _eagle_first_pass(target_token_ids_ptr, target_positions_ptr, target_slot_mapping_ptr,
                      out_input_ids_ptr, out_positions_ptr, out_slot_mapping_ptr,
                      query_start + j, j < stop, last, next_token, num_tokens)
    first, step = wide_chunks(first, step, BLOCK, WIDE_CHUNK)
    for chunk_start in range(first, stop, step):
        wide = chunk_start + tl.arange(0, WIDE_CHUNK)
        _eagle_first_pass(target_token_ids_ptr, target_positions_ptr, target_slot_mapping_ptr,
                          out_input_ids_ptr, out_positions_ptr, out_slot_mapping_ptr,
                          query_start + wide, wide < stop, last, next_token, num_tokens)
    _fill_padding(out_slot_mapping_ptr, 0, 1, num_tokens, num_input_tokens, BLOCK)

    tl.store(next_token_ptr + req, next_token, mask=head)
    tl.store(valid_count_ptr + req, count, mask=head)
    tl.store(token_indices_ptr + req, last, mask=head)
    if STEP_FORM != NO_STEPS:
        _fill_padding(out_step_slot_mapping_ptr, step_slot_mapping_stride, num_steps, num_reqs,
                      input_batch_size, BLOCK)
        _draft_steps(block_table_ptr, block_table_row_stride, num_block_cols,
                     out_step_positions_ptr, step_positions_stride, out_step_slot_mapping_ptr,
                     step_slot_mapping_stride, out_step_seq_lens_ptr, step_seq_lens_stride, req,
                     position, seq_len, max_model_len, num_steps, head, steps, BLOCK_SIZE,
                     STEP_LANES, STEP_FORM)


@spec_kernel
def _prepare_eagle_round_lanes_kernel(
    sampled_ptr,                 # [R, W], row stride sampled_row_stride (W <= LANES)
    discard_ptr,                 # [R] bool
    backup_ptr,                  # [R]
    cu_num_draft_ptr,            # [R] inclusive cumsum
    query_start_loc_ptr,         # [R + 1]
    target_token_ids_ptr,        # [T]
    target_positions_ptr,        # [T]
    target_slot_mapping_ptr,     # [T]
    block_table_ptr,             # [>= R, n_cols], row stride block_table_row_stride
    seq_lens_ptr,                # [>= R]
    next_token_ptr,              # [>= R] out
    valid_count_ptr,             # [>= R] out
    token_indices_ptr,           # [>= R] out
    out_input_ids_ptr,           # [>= T] out
    out_positions_ptr,           # [>= T] out
    out_slot_mapping_ptr,        # [>= num_input_tokens] out
    out_step_positions_ptr,      # [>= num_steps, >= R] out, row stride step_positions_stride
    out_step_slot_mapping_ptr,   # [>= num_steps, >= input_batch_size] out
    out_step_seq_lens_ptr,       # [>= num_steps, >= R] out, row stride step_seq_lens_stride
    num_reqs: tl.int64, num_tokens: tl.int64, num_input_tokens: tl.int64,
    input_batch_size: tl.int64, sampled_row_stride: tl.int64,
    block_table_row_stride: tl.int64, num_block_cols: tl.int64,
    vocab_size: tl.constexpr,  # CONFIG_CONSTEXPRS
    max_model_len: tl.constexpr, num_steps: tl.constexpr, step_positions_stride: tl.int64,
    step_slot_mapping_stride: tl.int64, step_seq_lens_stride: tl.int64,
    NUM_COLS: tl.constexpr, BLOCK_SIZE: tl.constexpr, STEP_FORM: tl.constexpr,
    REQS: tl.constexpr, LANES: tl.constexpr, remainder_shift: tl.int64, PDL: tl.constexpr,
):
    # Programs p < P: requests p * REQS ... as a [REQS, LANES] tile. Lane c of request r:
    # sampled column c, first-pass token qsl[r] + c; lane 0 the per-request outputs. Programs
    # P + p, with draft steps: the same requests' steps, lane c step c (num_steps <= LANES).
    # Then programs of the tokens past their lanes of requests, in groups of REMAINDER_REQS
    # (_remainder_requests), a request at a time.
    pdl_prologue(PDL)
    tl.static_assert(STEP_FORM != ITERATED_STEPS, "lanes layout: closed-form steps only")
    tiles = _tile_programs(num_reqs, REQS)
    before_remainder = _programs_before_remainder(num_reqs, REQS, REQS, STEP_FORM)
    if tl.program_id(0) < tiles:
        lane = tl.arange(0, LANES)[None, :]
        row = tl.arange(0, REQS)[:, None]
        req = _lane_requests(tl.program_id(0), row, lane, REQS)
        is_request = req < num_reqs
        query_start = tl.load(query_start_loc_ptr + req, mask=is_request, other=0).to(tl.int64)
        query_next = tl.load(query_start_loc_ptr + req + 1, mask=is_request, other=0).to(tl.int64)
        next_token, count, last, rejected = _lane_request_state(
            sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr, cu_num_draft_ptr,
            query_next, req, lane, is_request, vocab_size, NUM_COLS)
        # The request's tokens j in [first, stop) (request_chunks' bounds), the first LANES
        # here.
        first = tl.maximum(-query_start, 0)
        stop = tl.where(is_request,
                        tl.minimum(query_next - query_start, num_tokens - query_start), 0)
        _eagle_first_pass(target_token_ids_ptr, target_positions_ptr, target_slot_mapping_ptr,
                          out_input_ids_ptr, out_positions_ptr, out_slot_mapping_ptr,
                          query_start + lane, (lane >= first) & (lane < stop), last, next_token,
                          num_tokens)
        head = is_request & (lane == 0)
        tl.store(next_token_ptr + req, next_token, mask=head)
        tl.store(valid_count_ptr + req, count, mask=head)
        tl.store(token_indices_ptr + req, last, mask=head)
    elif tl.program_id(0) < before_remainder:
        if STEP_FORM != NO_STEPS:
            lane = tl.arange(0, LANES)[None, :]
            row = tl.arange(0, REQS)[:, None]
            req = _lane_requests(tl.program_id(0) - tiles, row, lane, REQS)
            is_request = req < num_reqs
            query_next = tl.load(query_start_loc_ptr + req + 1, mask=is_request,
                                 other=0).to(tl.int64)
            _next_token, _count, last, rejected = _lane_request_state(
                sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr, cu_num_draft_ptr,
                query_next, req, lane, is_request, vocab_size, NUM_COLS)
            seq_len = (tl.load(seq_lens_ptr + req, mask=is_request, other=0).to(tl.int64)
                       - rejected)
            # As in the per-request kernel: a discarded row with drafts may point in front of
            # the batch, read as position 0. In an engine's batch the position is seq_len - 1.
            position = tl.load(target_positions_ptr + last,
                               mask=is_request & (last >= 0) & (last < num_tokens),
                               other=0).to(tl.int64)
            _lane_draft_steps(block_table_ptr, block_table_row_stride, num_block_cols,
                              out_step_positions_ptr, step_positions_stride,
                              out_step_slot_mapping_ptr, step_slot_mapping_stride,
                              out_step_seq_lens_ptr, step_seq_lens_stride, req, lane,
                              is_request, position, seq_len - 1, seq_len, max_model_len,
                              num_steps, BLOCK_SIZE)
    else:
        requests, _, firsts, stop_at, pending, stride = _remainder_requests(
            query_start_loc_ptr, num_reqs, num_tokens, 0, remainder_shift,
            before_remainder, LANES, REMAINDER_CHUNK)
        while tl.max(pending.to(tl.int32)) > 0:
            mine, pending = _take_first(pending)
            request = row_value(requests, mine)
            request_first = row_value(firsts, mine)
            request_stop = row_value(stop_at, mine)
            next_token, count, last, rejected = _request_state(
                sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr,
                cu_num_draft_ptr, query_start_loc_ptr, request, request < num_reqs,
                vocab_size, NUM_COLS)
            # Read again rather than picked from the registers (_remainder_requests): the read
            # shares the request state's round trip, the pick is a reduction over the group
            # (0.01-0.05 us slower on the H200, round_lanes.txt section 10; 6.2 either way).
            query_start = tl.load(query_start_loc_ptr + request).to(tl.int64)
            for chunk_start in range(request_first, request_stop, stride):
                j = chunk_start + tl.arange(0, REMAINDER_CHUNK)
                _eagle_first_pass(target_token_ids_ptr, target_positions_ptr,
                                  target_slot_mapping_ptr, out_input_ids_ptr,
                                  out_positions_ptr, out_slot_mapping_ptr,
                                  query_start + j, j < request_stop, last, next_token,
                                  num_tokens)
    # CUDA-graph padding, dealt out over every program (_fill_padding).
    _fill_padding(out_slot_mapping_ptr, 0, 1, num_tokens, num_input_tokens, LANES_PADDING_CHUNK)
    if STEP_FORM != NO_STEPS:
        _fill_padding(out_step_slot_mapping_ptr, step_slot_mapping_stride, num_steps, num_reqs,
                      input_batch_size, LANES_PADDING_CHUNK)


@spec_kernel
def _prepare_parallel_round_kernel(
    sampled_ptr,                 # [R, W], row stride sampled_row_stride
    discard_ptr,                 # [R] bool
    backup_ptr,                  # [R]
    cu_num_draft_ptr,            # [R] inclusive cumsum
    query_start_loc_ptr,         # [R + 1]
    target_token_ids_ptr,        # [T]
    target_positions_ptr,        # [T]
    block_table_ptr,             # [>= R, n_cols], row stride block_table_row_stride
    seq_lens_ptr,                # [>= R]
    next_token_ptr,              # [>= R] out
    valid_count_ptr,             # [>= R] out
    out_input_ids_ptr,           # [>= F] out
    out_positions_ptr,           # [>= F] out
    out_masked_ptr,              # [>= F] bool out
    out_new_token_indices_ptr,   # [>= R * S] out
    out_hidden_state_mapping_ptr,  # [>= T] out (shift only)
    out_slot_mapping_ptr,        # [>= num_input_tokens] out
    out_query_start_loc_ptr,     # [>= R + 1] out
    out_seq_lens_ptr,            # [>= R] out
    out_step_positions_ptr,      # [>= num_steps, >= R] out, row stride step_positions_stride
    out_step_slot_mapping_ptr,   # [>= num_steps, >= input_batch_size] out
    out_step_seq_lens_ptr,       # [>= num_steps, >= R] out, row stride step_seq_lens_stride
    num_reqs: tl.int64, num_tokens: tl.int64, num_first_pass: tl.int64,
    num_input_tokens: tl.int64, input_batch_size: tl.int64, sampled_row_stride: tl.int64,
    block_table_row_stride: tl.int64, num_block_cols: tl.int64, vocab_size: tl.int64,
    padding_token_id: tl.int64, parallel_drafting_token_id: tl.int64,
    num_padding_slots: tl.int64, max_model_len: tl.int64, num_steps: tl.int64,
    step_positions_stride: tl.int64, step_slot_mapping_stride: tl.int64,
    step_seq_lens_stride: tl.int64,
    NUM_COLS: tl.constexpr, SHIFT: tl.constexpr, BLOCK_SIZE: tl.constexpr,
    STEP_FORM: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr,
):
    pdl_prologue(PDL)
    req = tl.program_id(0).to(tl.int64)
    is_request = req < num_reqs
    head = is_request & (tl.program_id(1).to(tl.int64) == 0)
    next_token, count, last, rejected = _request_state(
        sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr, cu_num_draft_ptr,
        query_start_loc_ptr, req, is_request, vocab_size, NUM_COLS)
    query_start = tl.load(query_start_loc_ptr + req).to(tl.int64)
    query_next = tl.load(query_start_loc_ptr + req + 1, mask=is_request, other=0).to(tl.int64)
    # N: shift drops each request's first input token, so it adds S - 1 tokens, not S.
    num_new = num_padding_slots - 1 if SHIFT else num_padding_slots
    seq_len = tl.load(seq_lens_ptr + req, mask=head, other=0).to(tl.int64) + num_new
    is_last_row = (req == tl.num_programs(0) - 1) & (tl.program_id(1) == 0)
    batch_end = tl.load(query_start_loc_ptr + num_reqs, mask=is_last_row, other=0).to(tl.int64)
    first_position = tl.load(target_positions_ptr + query_start,
                             mask=is_request & (query_start >= 0) & (query_start < num_tokens),
                             other=0).to(tl.int64)
    if STEP_FORM != NO_STEPS:
        # Steps start at the bonus token, after the last - qsl[r] + 1 accepted inputs.
        step_position = first_position + last - query_start + 1
        steps = _step_values(block_table_ptr, block_table_row_stride, num_block_cols, req,
                             step_position, seq_len - rejected, max_model_len, 0, num_steps,
                             head, BLOCK_SIZE, STEP_LANES, STEP_FORM, step_position,
                             seq_len - rejected)

    out_start = query_start + req * num_new
    num_valid = last - query_start + (0 if SHIFT else 1)
    total = tl.where(is_request, query_next - query_start + num_new, 0)
    first, stop, step = request_chunks(out_start, total, num_first_pass, BLOCK)
    j = first + tl.arange(0, BLOCK)
    _parallel_first_pass(
        target_token_ids_ptr, block_table_ptr, block_table_row_stride, num_block_cols,
        out_input_ids_ptr, out_positions_ptr, out_masked_ptr, out_slot_mapping_ptr,
        out_new_token_indices_ptr, out_hidden_state_mapping_ptr, j, j < stop, req, out_start,
        query_start, query_next, num_valid, next_token, first_position, num_tokens,
        padding_token_id, parallel_drafting_token_id, num_padding_slots, max_model_len, SHIFT,
        BLOCK_SIZE)
    first, step = wide_chunks(first, step, BLOCK, WIDE_CHUNK)
    for chunk_start in range(first, stop, step):
        wide = chunk_start + tl.arange(0, WIDE_CHUNK)
        _parallel_first_pass(
            target_token_ids_ptr, block_table_ptr, block_table_row_stride, num_block_cols,
            out_input_ids_ptr, out_positions_ptr, out_masked_ptr, out_slot_mapping_ptr,
            out_new_token_indices_ptr, out_hidden_state_mapping_ptr, wide, wide < stop, req,
            out_start, query_start, query_next, num_valid, next_token, first_position,
            num_tokens, padding_token_id, parallel_drafting_token_id, num_padding_slots,
            max_model_len, SHIFT, BLOCK_SIZE)
    _fill_padding(out_slot_mapping_ptr, 0, 1, num_first_pass, num_input_tokens, BLOCK)

    tl.store(next_token_ptr + req, next_token, mask=head)
    tl.store(valid_count_ptr + req, count, mask=head)
    tl.store(out_query_start_loc_ptr + req, out_start, mask=head)
    tl.store(out_seq_lens_ptr + req, seq_len, mask=head)
    tl.store(out_query_start_loc_ptr + num_reqs, batch_end + num_reqs * num_new,
             mask=is_last_row)
    if STEP_FORM != NO_STEPS:
        _fill_padding(out_step_slot_mapping_ptr, step_slot_mapping_stride, num_steps, num_reqs,
                      input_batch_size, BLOCK)
        _draft_steps(block_table_ptr, block_table_row_stride, num_block_cols,
                     out_step_positions_ptr, step_positions_stride, out_step_slot_mapping_ptr,
                     step_slot_mapping_stride, out_step_seq_lens_ptr, step_seq_lens_stride, req,
                     step_position, seq_len - rejected, max_model_len, num_steps, head, steps,
                     BLOCK_SIZE, STEP_LANES, STEP_FORM)


@spec_kernel
def _prepare_parallel_round_lanes_kernel(
    sampled_ptr,                 # [R, W], row stride sampled_row_stride (W <= LANES)
    discard_ptr,                 # [R] bool
    backup_ptr,                  # [R]
    cu_num_draft_ptr,            # [R] inclusive cumsum
    query_start_loc_ptr,         # [R + 1]
    target_token_ids_ptr,        # [T]
    target_positions_ptr,        # [T]
    block_table_ptr,             # [>= R, n_cols], row stride block_table_row_stride
    seq_lens_ptr,                # [>= R]
    next_token_ptr,              # [>= R] out
    valid_count_ptr,             # [>= R] out
    out_input_ids_ptr,           # [>= F] out
    out_positions_ptr,           # [>= F] out
    out_masked_ptr,              # [>= F] bool out
    out_new_token_indices_ptr,   # [>= R * S] out
    out_hidden_state_mapping_ptr,  # [>= T] out (shift only)
    out_slot_mapping_ptr,        # [>= num_input_tokens] out
    out_query_start_loc_ptr,     # [>= R + 1] out
    out_seq_lens_ptr,            # [>= R] out
    out_step_positions_ptr,      # [>= num_steps, >= R] out, row stride step_positions_stride
    out_step_slot_mapping_ptr,   # [>= num_steps, >= input_batch_size] out
    out_step_seq_lens_ptr,       # [>= num_steps, >= R] out, row stride step_seq_lens_stride
    num_reqs: tl.int64, num_tokens: tl.int64, num_first_pass: tl.int64,
    num_input_tokens: tl.int64, input_batch_size: tl.int64, sampled_row_stride: tl.int64,
    block_table_row_stride: tl.int64, num_block_cols: tl.int64,
    vocab_size: tl.constexpr,  # CONFIG_CONSTEXPRS
    padding_token_id: tl.int64, parallel_drafting_token_id: tl.int64,
    num_padding_slots: tl.constexpr, max_model_len: tl.constexpr, num_steps: tl.constexpr,
    step_positions_stride: tl.int64, step_slot_mapping_stride: tl.int64,
    step_seq_lens_stride: tl.int64,
    NUM_COLS: tl.constexpr, SHIFT: tl.constexpr, BLOCK_SIZE: tl.constexpr,
    STEP_FORM: tl.constexpr, REQS: tl.constexpr, LANES: tl.constexpr,
    STEP_REQS: tl.constexpr, STEP_TILE_LANES: tl.constexpr, remainder_shift: tl.int64,
    remainder_vocab_size: tl.int64, PDL: tl.constexpr,
):
    # Programs p < P: requests p * REQS ... as a [REQS, LANES] tile. Lane c of request r:
    # sampled column c, first-pass entry out_start + c; lane 0 the per-request outputs.
    # Programs P + p, with draft steps: requests p * STEP_REQS ... as a [STEP_REQS,
    # STEP_TILE_LANES] tile (lanes for the sampled columns and the steps only), lane c step c
    # (num_steps <= STEP_TILE_LANES). Then programs of the entries past their lanes of
    # requests, in groups of REMAINDER_REQS (_remainder_requests), a request at a time.
    pdl_prologue(PDL)
    tl.static_assert(STEP_FORM != ITERATED_STEPS, "lanes layout: closed-form steps only")
    num_new = num_padding_slots - 1 if SHIFT else num_padding_slots
    tiles = _tile_programs(num_reqs, REQS)
    before_remainder = _programs_before_remainder(num_reqs, REQS, STEP_REQS, STEP_FORM)
    if tl.program_id(0) < tiles:
        # Loads in three groups, the three round trips: the per-request values, then those at
        # query_start_loc[r] (the first position, the input ids), then the block table (the
        # entries' slots; the steps' are their own programs'). ptxas issues a load as late as it
        # can, just before its first use, and a warp stalls at a use until the load is back, so a
        # load placed after another's use is a round trip of its own: 6.2 had four to seven. A
        # barrier (one warp: cheap) after each group keeps its loads ahead of it: three round
        # trips remain with Triton 3.6's ptxas, three or four with 3.9's (scripts/load_trips.py
        # --tile; benchmarks/results/round_lanes.txt: 6.2 in this layout at R = 1, K = 1 / 3 / 7,
        # us per call on the H200: P-EAGLE 1.61 / 1.67 / 1.70 before, 1.49 / 1.54 / 1.57 after;
        # the draft model 1.80 / 1.70 / 1.76 before, 1.46 / 1.52 / 1.57 after). The barriers hold
        # the loads, not the arithmetic on their values, which ptxas still moves up: on some
        # variants the input ids go out with the block-table reads (the same round trip).
        lane = tl.arange(0, LANES)[None, :]
        row = tl.arange(0, REQS)[:, None]
        req = _lane_requests(tl.program_id(0), row, lane, REQS)
        is_request = req < num_reqs
        query_start = tl.load(query_start_loc_ptr + req, mask=is_request, other=0).to(tl.int64)
        query_next = tl.load(query_start_loc_ptr + req + 1, mask=is_request, other=0).to(tl.int64)
        seq_len = tl.load(seq_lens_ptr + req, mask=is_request, other=0).to(tl.int64) + num_new
        is_first = (req == 0) & (lane == 0)
        batch_end = tl.load(query_start_loc_ptr + num_reqs + tl.zeros_like(req), mask=is_first,
                            other=0).to(tl.int64)
        loads = _lane_request_loads(sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr,
                                    cu_num_draft_ptr, req, lane, is_request, NUM_COLS)
        tl.debug_barrier()

        # The request's entries j in [first, stop) (request_chunks' bounds), the first LANES here.
        out_start = query_start + req * num_new
        owned = ((lane >= tl.maximum(-out_start, 0))
                 & (lane < tl.where(is_request, tl.minimum(query_next - query_start + num_new,
                                                           num_first_pass - out_start), 0)))
        first_position = tl.load(target_positions_ptr + query_start,
                                 mask=is_request & (query_start >= 0) & (query_start < num_tokens),
                                 other=0).to(tl.int64)
        input_id = expanded_input_ids(target_token_ids_ptr, lane, owned, query_start, num_tokens,
                                      SHIFT)
        tl.debug_barrier()

        next_token, count, last, rejected = _lane_request_combine(loads, query_next, lane,
                                                                  vocab_size)
        num_valid = last - query_start + (0 if SHIFT else 1)
        token, position, is_masked, is_rejected = expanded_entries(
            input_id, lane, num_valid, num_padding_slots, next_token, first_position,
            parallel_drafting_token_id, padding_token_id)
        keep, slot_position = _entry_slot_position(position, is_rejected, max_model_len,
                                                   out_positions_ptr)
        block = block_of(block_table_ptr, block_table_row_stride, num_block_cols, req,
                         slot_position, owned & keep, BLOCK_SIZE)
        tl.debug_barrier()

        _store_parallel_entries(
            out_input_ids_ptr, out_positions_ptr, out_masked_ptr, out_slot_mapping_ptr,
            out_new_token_indices_ptr, out_hidden_state_mapping_ptr, lane.to(tl.int64), owned,
            req, out_start, query_start, query_next, num_valid, num_padding_slots, num_tokens,
            token, position, is_masked,
            tl.where(keep, slot_of(block, slot_position, BLOCK_SIZE), -1), SHIFT)
        head = is_request & (lane == 0)
        tl.store(next_token_ptr + req, next_token, mask=head)
        tl.store(valid_count_ptr + req, count, mask=head)
        tl.store(out_query_start_loc_ptr + req, out_start, mask=head)
        tl.store(out_seq_lens_ptr + req, seq_len, mask=head)
        tl.store(out_query_start_loc_ptr + num_reqs + tl.zeros_like(req),
                 batch_end + num_reqs * num_new, mask=is_first)
    elif tl.program_id(0) < before_remainder:
        if STEP_FORM != NO_STEPS:
            tl.static_assert((NUM_COLS <= STEP_TILE_LANES) & (num_steps <= STEP_TILE_LANES),
                             "a step program's lanes hold the sampled columns and the steps")
            lane = tl.arange(0, STEP_TILE_LANES)[None, :]
            row = tl.arange(0, STEP_REQS)[:, None]
            req = _lane_requests(tl.program_id(0) - tiles, row, lane, STEP_REQS)
            is_request = req < num_reqs
            query_start = tl.load(query_start_loc_ptr + req, mask=is_request,
                                  other=0).to(tl.int64)
            query_next = tl.load(query_start_loc_ptr + req + 1, mask=is_request,
                                 other=0).to(tl.int64)
            seq_len = (tl.load(seq_lens_ptr + req, mask=is_request, other=0).to(tl.int64)
                       + num_new)
            loads = _lane_request_loads(sampled_ptr, sampled_row_stride, discard_ptr,
                                        backup_ptr, cu_num_draft_ptr, req, lane, is_request,
                                        NUM_COLS)
            first_position = tl.load(
                target_positions_ptr + query_start,
                mask=is_request & (query_start >= 0) & (query_start < num_tokens),
                other=0).to(tl.int64)
            _next_token, _count, last, rejected = _lane_request_combine(loads, query_next, lane,
                                                                        vocab_size)
            # Steps start at the bonus token, after the last - qsl[r] + 1 accepted inputs.
            _lane_draft_steps(block_table_ptr, block_table_row_stride, num_block_cols,
                              out_step_positions_ptr, step_positions_stride,
                              out_step_slot_mapping_ptr, step_slot_mapping_stride,
                              out_step_seq_lens_ptr, step_seq_lens_stride, req, lane,
                              is_request,
                              first_position + last - query_start + 1,
                              None, seq_len - rejected, max_model_len, num_steps, BLOCK_SIZE)
    else:
        requests, _, firsts, stop_at, pending, stride = _remainder_requests(
            query_start_loc_ptr, num_reqs, num_first_pass, num_new, remainder_shift,
            before_remainder, LANES,
            PARALLEL_REMAINDER_CHUNK)
        while tl.max(pending.to(tl.int32)) > 0:
            mine, pending = _take_first(pending)
            request = row_value(requests, mine)
            request_first = row_value(firsts, mine)
            request_stop = row_value(stop_at, mine)
            # vocab_size as the runtime value here (the tile keeps the constexpr): as the
            # constexpr the draft model's remainder programs took 0.3-1.7 us longer on batches
            # with long requests; the runtime copy moves pure decodes by under 0.01 us
            # (round_lanes.txt, sections 27 and 28).
            next_token, count, last, rejected = _request_state(
                sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr,
                cu_num_draft_ptr, query_start_loc_ptr, request, request < num_reqs,
                remainder_vocab_size, NUM_COLS)
            query_start = tl.load(query_start_loc_ptr + request).to(tl.int64)
            query_next = tl.load(query_start_loc_ptr + request + 1).to(tl.int64)
            first_position = tl.load(
                target_positions_ptr + query_start,
                mask=(query_start >= 0) & (query_start < num_tokens),
                other=0).to(tl.int64)
            for chunk_start in range(request_first, request_stop, stride):
                j = chunk_start + tl.arange(0, PARALLEL_REMAINDER_CHUNK)
                _parallel_first_pass(
                    target_token_ids_ptr, block_table_ptr, block_table_row_stride,
                    num_block_cols, out_input_ids_ptr, out_positions_ptr,
                    out_masked_ptr, out_slot_mapping_ptr, out_new_token_indices_ptr,
                    out_hidden_state_mapping_ptr, j, j < request_stop, request,
                    query_start + request * num_new, query_start, query_next,
                    last - query_start + (0 if SHIFT else 1), next_token,
                    first_position, num_tokens, padding_token_id,
                    parallel_drafting_token_id, num_padding_slots, max_model_len,
                    SHIFT, BLOCK_SIZE)
    # CUDA-graph padding, dealt out over every program (_fill_padding).
    _fill_padding(out_slot_mapping_ptr, 0, 1, num_first_pass, num_input_tokens,
                  LANES_PADDING_CHUNK)
    if STEP_FORM != NO_STEPS:
        _fill_padding(out_step_slot_mapping_ptr, step_slot_mapping_stride, num_steps, num_reqs,
                      input_batch_size, LANES_PADDING_CHUNK)


@spec_kernel
def _prepare_dflash_round_kernel(
    sampled_ptr,                 # [R, W], row stride sampled_row_stride
    discard_ptr,                 # [R] bool
    backup_ptr,                  # [R]
    cu_num_draft_ptr,            # [R] inclusive cumsum
    query_start_loc_ptr,         # [R + 1]
    target_positions_ptr,        # [C]
    block_table_ptr,             # [>= R, n_cols], row stride block_table_row_stride
    seq_lens_ptr,                # [>= R]
    next_token_ptr,              # [>= R] out
    valid_count_ptr,             # [>= R] out
    out_input_ids_ptr,           # [>= R * Q] out
    out_context_positions_ptr,   # [>= C] out
    out_query_positions_ptr,     # [>= R * Q] out
    out_context_slot_ptr,        # [>= C] out
    out_query_slot_ptr,          # [>= num_input_tokens] out
    out_token_indices_ptr,       # [>= R * K] out
    out_query_start_loc_ptr,     # [>= R + 1] out
    out_seq_lens_ptr,            # [>= R] out
    num_reqs: tl.int64, num_context: tl.int64, num_input_tokens: tl.int64,
    sampled_row_stride: tl.int64, block_table_row_stride: tl.int64, num_block_cols: tl.int64,
    vocab_size: tl.int64, parallel_drafting_token_id: tl.int64,
    num_speculative_tokens: tl.int64,
    NUM_COLS: tl.constexpr, BLOCK_SIZE: tl.constexpr, BLOCK_Q: tl.constexpr,
    MORE_QUERIES: tl.constexpr, BLOCK: tl.constexpr, PDL: tl.constexpr,
):
    pdl_prologue(PDL)
    req = tl.program_id(0).to(tl.int64)
    is_request = req < num_reqs
    chunk = tl.program_id(1).to(tl.int64)
    head = is_request & (chunk == 0)
    context_start = tl.load(query_start_loc_ptr + req).to(tl.int64)
    context_end = tl.load(query_start_loc_ptr + req + 1, mask=is_request, other=0).to(tl.int64)
    num_query = num_speculative_tokens + 1
    # Only the queries need the request's state (the context tokens are copied as they are).
    next_token, count, last, rejected = _request_state(
        sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr, cu_num_draft_ptr,
        query_start_loc_ptr, req, head, vocab_size, NUM_COLS)
    seq_len = tl.load(seq_lens_ptr + req, mask=head, other=0).to(tl.int64) - rejected + num_query

    # 1.4's context tokens (their own positions, and slots in the request's blocks): this
    # program's first chunk before any store, any further ones after.
    context_end = tl.where(is_request, context_end, context_start)     # no context outside
    first = tl.maximum(-context_start, 0)
    stop = tl.minimum(context_end - context_start, num_context - context_start)
    num_programs = tl.num_programs(1).to(tl.int64)
    j = first + chunk * BLOCK + tl.arange(0, BLOCK)
    owned = j < stop
    # 1.4's queries after the last valid position; outside the batch it reads as 0.
    last_position = tl.load(target_positions_ptr + last,
                            mask=head & (last >= 0) & (last < num_context), other=0).to(tl.int64)
    context_position, context_slot = context_slots(
        target_positions_ptr, block_table_ptr, block_table_row_stride, num_block_cols, req,
        context_start + j, owned, BLOCK_SIZE)
    q, is_query, out, query_position, query_slot = query_slots(
        block_table_ptr, block_table_row_stride, num_block_cols, req, last_position,
        tl.where(head, num_query, 0), BLOCK_SIZE, BLOCK_Q)

    tl.store(out_context_positions_ptr + context_start + j, context_position, mask=owned)
    tl.store(out_context_slot_ptr + context_start + j, context_slot, mask=owned)
    store_queries(out_input_ids_ptr, out_query_positions_ptr, out_query_slot_ptr,
                  out_token_indices_ptr, req, next_token, parallel_drafting_token_id,
                  num_speculative_tokens, q, is_query, out, query_position, query_slot)
    if MORE_QUERIES:
        more_queries(out_input_ids_ptr, out_query_positions_ptr, out_query_slot_ptr,
                     out_token_indices_ptr, block_table_ptr, block_table_row_stride,
                     num_block_cols, req, next_token, last_position, parallel_drafting_token_id,
                     tl.where(head, num_query, 0), num_speculative_tokens, BLOCK_SIZE, BLOCK_Q)
    tl.store(next_token_ptr + req, next_token, mask=head)
    tl.store(valid_count_ptr + req, count, mask=head)
    tl.store(out_query_start_loc_ptr + req, req * num_query, mask=head)
    tl.store(out_seq_lens_ptr + req, seq_len, mask=head)
    tl.store(out_query_start_loc_ptr + num_reqs, num_reqs * num_query,
             mask=(req == tl.num_programs(0) - 1) & (chunk == 0))
    # The rest of a long request's context, WIDE_CHUNK at a time.
    first, step = wide_chunks(first + chunk * BLOCK, num_programs * BLOCK, BLOCK, WIDE_CHUNK)
    for chunk_start in range(first, stop, step):
        wide = chunk_start + tl.arange(0, WIDE_CHUNK)
        context_tokens(target_positions_ptr, out_context_positions_ptr, out_context_slot_ptr,
                       block_table_ptr, block_table_row_stride, num_block_cols, req,
                       context_start + wide, wide < stop, BLOCK_SIZE)
    _fill_padding(out_query_slot_ptr, 0, 1, num_reqs * num_query, num_input_tokens, BLOCK)


@spec_kernel
def _prepare_dflash_round_lanes_kernel(
    sampled_ptr,                 # [R, W], row stride sampled_row_stride (W <= LANES)
    discard_ptr,                 # [R] bool
    backup_ptr,                  # [R]
    cu_num_draft_ptr,            # [R] inclusive cumsum
    query_start_loc_ptr,         # [R + 1]
    target_positions_ptr,        # [C]
    block_table_ptr,             # [>= R, n_cols], row stride block_table_row_stride
    seq_lens_ptr,                # [>= R]
    next_token_ptr,              # [>= R] out
    valid_count_ptr,             # [>= R] out
    out_input_ids_ptr,           # [>= R * Q] out
    out_context_positions_ptr,   # [>= C] out
    out_query_positions_ptr,     # [>= R * Q] out
    out_context_slot_ptr,        # [>= C] out
    out_query_slot_ptr,          # [>= num_input_tokens] out
    out_token_indices_ptr,       # [>= R * K] out
    out_query_start_loc_ptr,     # [>= R + 1] out
    out_seq_lens_ptr,            # [>= R] out
    num_reqs: tl.int64, num_context: tl.int64, num_input_tokens: tl.int64,
    sampled_row_stride: tl.int64, block_table_row_stride: tl.int64, num_block_cols: tl.int64,
    vocab_size: tl.int64, parallel_drafting_token_id: tl.int64,
    num_speculative_tokens: tl.int64,
    NUM_COLS: tl.constexpr, BLOCK_SIZE: tl.constexpr, REQS: tl.constexpr,
    LANES: tl.constexpr, remainder_shift: tl.int64, PDL: tl.constexpr,
):
    # Programs p < P: requests p * REQS ... as a [REQS, LANES] tile (Q <= LANES). Lane c of
    # request r: sampled column c, context token qsl[r] + c, query c; lane 0 the per-request
    # outputs. Programs P + q: the context tokens past their lanes of requests,
    # in groups of REMAINDER_REQS (_remainder_requests), a request at a time.
    pdl_prologue(PDL)
    num_query = num_speculative_tokens + 1
    if tl.program_id(0) < _tile_programs(num_reqs, REQS):
        lane = tl.arange(0, LANES)[None, :]
        row = tl.arange(0, REQS)[:, None]
        req = _lane_requests(tl.program_id(0), row, lane, REQS)
        is_request = req < num_reqs
        context_start = tl.load(query_start_loc_ptr + req, mask=is_request, other=0).to(tl.int64)
        context_end = tl.load(query_start_loc_ptr + req + 1, mask=is_request,
                              other=0).to(tl.int64)
        next_token, count, last, rejected = _lane_request_state(
            sampled_ptr, sampled_row_stride, discard_ptr, backup_ptr, cu_num_draft_ptr,
            context_end, req, lane, is_request, vocab_size, NUM_COLS)
        seq_len = tl.load(seq_lens_ptr + req, mask=is_request, other=0).to(tl.int64) - rejected
        # The request's context tokens j in [first, stop), as in the per-request kernel; the first
        # LANES here.
        first = tl.maximum(-context_start, 0)
        stop = tl.where(is_request, tl.minimum(context_end - context_start,
                                               num_context - context_start), 0)
        owned = (lane >= first) & (lane < stop)
        is_query = is_request & (lane < num_query)
        # 1.4's queries after the last valid position; outside the batch it reads as 0. The
        # block-table reads go out at the positions an engine's batch has (checked_block).
        last_position = tl.load(target_positions_ptr + last,
                                mask=is_request & (last >= 0) & (last < num_context),
                                other=0).to(tl.int64)
        context_position = tl.load(target_positions_ptr + context_start + lane, mask=owned,
                                   other=0).to(tl.int64)
        # An engine's context runs up to seq_lens[r] - 1 = seq_len + rejected - 1.
        guess_context = (seq_len + rejected) - (context_end - context_start) + lane
        guessed_context = block_of(block_table_ptr, block_table_row_stride, num_block_cols, req,
                                   guess_context, owned, BLOCK_SIZE)
        guess_query = seq_len + lane
        guessed_query = block_of(block_table_ptr, block_table_row_stride, num_block_cols, req,
                                 guess_query, is_query, BLOCK_SIZE)
        # Holds the guessed reads with the positions' loads, ahead of their first use.
        tl.debug_barrier()
        context_slot = slot_of(
            checked_block(block_table_ptr, block_table_row_stride, num_block_cols, req,
                          context_position, guess_context, guessed_context, owned, BLOCK_SIZE),
            context_position, BLOCK_SIZE)
        query_position = last_position + 1 + lane
        query_slot = slot_of(
            checked_block(block_table_ptr, block_table_row_stride, num_block_cols, req,
                          query_position, guess_query, guessed_query, is_query, BLOCK_SIZE),
            query_position, BLOCK_SIZE)

        tl.store(out_context_positions_ptr + context_start + lane, context_position, mask=owned)
        tl.store(out_context_slot_ptr + context_start + lane, context_slot, mask=owned)
        store_queries(out_input_ids_ptr, out_query_positions_ptr, out_query_slot_ptr,
                      out_token_indices_ptr, req, next_token, parallel_drafting_token_id,
                      num_speculative_tokens, lane, is_query, req * num_query + lane,
                      query_position, query_slot)
        head = is_request & (lane == 0)
        tl.store(next_token_ptr + req, next_token, mask=head)
        tl.store(valid_count_ptr + req, count, mask=head)
        tl.store(out_query_start_loc_ptr + req, req * num_query, mask=head)
        tl.store(out_seq_lens_ptr + req, seq_len + num_query, mask=head)
        tl.store(out_query_start_loc_ptr + num_reqs + tl.zeros_like(req), num_reqs * num_query,
                 mask=(req == 0) & (lane == 0))
    else:
        requests, starts, firsts, stop_at, pending, stride = _remainder_requests(
            query_start_loc_ptr, num_reqs, num_context, 0, remainder_shift,
            _tile_programs(num_reqs, REQS), LANES, REMAINDER_CHUNK)
        while tl.max(pending.to(tl.int32)) > 0:
            mine, pending = _take_first(pending)
            request = row_value(requests, mine)
            request_stop = row_value(stop_at, mine)
            # Picked from the registers the dealing loaded: read again here, it was a round
            # trip of its own ahead of the context's reads (0.04-0.05 us per call on the H200,
            # round_lanes.txt section 10).
            context_start = row_value(starts, mine)
            for chunk_start in range(row_value(firsts, mine), request_stop, stride):
                j = chunk_start + tl.arange(0, REMAINDER_CHUNK)
                context_tokens(target_positions_ptr, out_context_positions_ptr,
                               out_context_slot_ptr, block_table_ptr,
                               block_table_row_stride, num_block_cols, request,
                               context_start + j, j < request_stop, BLOCK_SIZE)
    # CUDA-graph padding, dealt out over every program (_fill_padding).
    _fill_padding(out_query_slot_ptr, 0, 1, num_reqs * num_query, num_input_tokens,
                  LANES_PADDING_CHUNK)


_prepare_eagle_round = Launcher(_prepare_eagle_round_kernel, PER_REQUEST_WARPS)
_prepare_eagle_round_lanes = Launcher(_prepare_eagle_round_lanes_kernel, LANES_WARPS)
_prepare_parallel_round = Launcher(_prepare_parallel_round_kernel, PARALLEL_ROUND_WARPS)
_prepare_parallel_round_lanes = Launcher(_prepare_parallel_round_lanes_kernel, LANES_WARPS)
_prepare_dflash_round = Launcher(_prepare_dflash_round_kernel, PER_REQUEST_WARPS)
_prepare_dflash_round_lanes = Launcher(_prepare_dflash_round_lanes_kernel, LANES_WARPS)


def launch_prepare_eagle_round(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, target_token_ids, target_positions, target_slot_mapping, block_table,
        seq_lens, next_token_ids, valid_sampled_tokens_count, token_indices_to_sample,
        out_input_ids, out_positions, out_slot_mapping, out_step_positions,
        out_step_slot_mapping, out_step_seq_lens, vocab_size, block_size, max_model_len,
        num_steps, num_input_tokens, input_batch_size):
    num_reqs, num_cols = sampled_token_ids.shape
    num_tokens = target_token_ids.shape[0]
    form = step_form(max_model_len, num_steps)
    args = (sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
            query_start_loc, target_token_ids, target_positions, target_slot_mapping,
            block_table, seq_lens, next_token_ids, valid_sampled_tokens_count,
            token_indices_to_sample, out_input_ids, out_positions, out_slot_mapping,
            out_step_positions, out_step_slot_mapping, out_step_seq_lens, num_reqs, num_tokens,
            num_input_tokens, input_batch_size, sampled_token_ids.stride()[0],
            block_table.stride()[0], block_table.shape[1], vocab_size, max_model_len,
            num_steps, out_step_positions.stride()[0], out_step_slot_mapping.stride()[0],
            out_step_seq_lens.stride()[0], num_cols, block_size, form)
    lanes = round_lanes(num_cols, num_steps)
    split = lanes_split(num_tokens, num_reqs, lanes)
    if split is not None and form != ITERATED_STEPS.value:
        return _launch_lanes(_prepare_eagle_round_lanes, num_reqs, lanes, split, args, form)
    return _prepare_eagle_round(max(num_reqs, 1), (*args, PER_REQUEST_BLOCK),
                                grid_y=num_chunks(num_tokens, num_reqs))


def launch_prepare_parallel_round(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, target_token_ids, target_positions, block_table, seq_lens,
        next_token_ids, valid_sampled_tokens_count, out_input_ids, out_positions,
        out_is_masked_token_mask, out_new_token_indices, out_hidden_state_mapping,
        out_slot_mapping, out_query_start_loc, out_seq_lens, out_step_positions,
        out_step_slot_mapping, out_step_seq_lens, vocab_size, padding_token_id,
        parallel_drafting_token_id, num_padding_slots_per_request, shift_input_ids, block_size,
        max_model_len, num_steps, num_first_pass, num_input_tokens, input_batch_size):
    num_reqs, num_cols = sampled_token_ids.shape
    form = step_form(max_model_len, num_steps)
    args = (sampled_token_ids, discard_request_mask, backup_next_token_ids,
            cu_num_draft_tokens, query_start_loc, target_token_ids, target_positions,
            block_table, seq_lens, next_token_ids, valid_sampled_tokens_count, out_input_ids,
            out_positions, out_is_masked_token_mask, out_new_token_indices,
            out_hidden_state_mapping, out_slot_mapping, out_query_start_loc, out_seq_lens,
            out_step_positions, out_step_slot_mapping, out_step_seq_lens, num_reqs,
            target_token_ids.shape[0], num_first_pass, num_input_tokens, input_batch_size,
            sampled_token_ids.stride()[0], block_table.stride()[0], block_table.shape[1],
            vocab_size, padding_token_id, parallel_drafting_token_id,
            num_padding_slots_per_request, max_model_len, num_steps,
            out_step_positions.stride()[0], out_step_slot_mapping.stride()[0],
            out_step_seq_lens.stride()[0], num_cols, shift_input_ids, block_size, form)
    lanes = parallel_lanes(num_cols, num_padding_slots_per_request, shift_input_ids, num_steps)
    # Above decode size the draft steps do not change the choice: their gain was measured on
    # decode batches.
    split = lanes_split(num_first_pass, num_reqs, lanes,
                        lanes_pay(num_reqs, num_cols, num_steps), lanes_pay(num_reqs, num_cols))
    if split is not None and form != ITERATED_STEPS.value:
        return _launch_lanes(_prepare_parallel_round_lanes, num_reqs, lanes, split, args,
                             form, parallel_step_lanes(num_cols, num_steps, lanes),
                             after=(vocab_size,))
    return _prepare_parallel_round(max(num_reqs, 1), (*args, PER_REQUEST_BLOCK),
                                   grid_y=num_chunks(num_first_pass, num_reqs))


def launch_prepare_dflash_round(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc, target_positions, block_table, seq_lens, next_token_ids,
        valid_sampled_tokens_count, out_input_ids, out_context_positions, out_query_positions,
        out_context_slot_mapping, out_query_slot_mapping, out_token_indices,
        out_query_start_loc, out_seq_lens, vocab_size, parallel_drafting_token_id, block_size,
        num_speculative_tokens, num_input_tokens):
    num_reqs, num_cols = sampled_token_ids.shape
    num_context = target_positions.shape[0]
    args = (sampled_token_ids, discard_request_mask, backup_next_token_ids,
            cu_num_draft_tokens, query_start_loc, target_positions, block_table, seq_lens,
            next_token_ids, valid_sampled_tokens_count, out_input_ids, out_context_positions,
            out_query_positions, out_context_slot_mapping, out_query_slot_mapping,
            out_token_indices, out_query_start_loc, out_seq_lens, num_reqs, num_context,
            num_input_tokens, sampled_token_ids.stride()[0], block_table.stride()[0],
            block_table.shape[1], vocab_size, parallel_drafting_token_id,
            num_speculative_tokens, num_cols, block_size)
    lanes = round_lanes(num_cols, num_speculative_tokens + 1)
    split = lanes_split(num_context, num_reqs, lanes, lanes_pay(num_reqs, num_cols))
    if split is not None:
        return _launch_lanes(_prepare_dflash_round_lanes, num_reqs, lanes, split, args)
    return _prepare_dflash_round(max(num_reqs, 1),
                                 (*args, *query_block(num_speculative_tokens + 1),
                                  PER_REQUEST_BLOCK),
                                 grid_y=num_chunks(num_context, num_reqs))
