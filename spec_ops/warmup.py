"""Compile, before serving, every kernel variant a serving loop will launch.

A compiled kernel is selected by the device, the dtypes of its tensor arguments and its
constexpr values: the width of ``sampled_token_ids`` (K + 1, or 1 in a batch without drafts),
the KV block size, whether 1.3 and 6.2 shift their inputs, whether 1.4 gets rejected counts,
whether 1.3's, 1.4's and 1.7's requests are short enough for the row layout (and its tile
width) or long enough for a query program of their own (1.4), whether a round op's batch takes
its lanes layout and its lanes per request (6.2's depend on S and the draft steps), how a
round op computes its draft steps (none with num_steps = 0, else in closed form but where
max_model_len is at most num_steps: warm-up covers the configuration's K - 1), in 6.1's and
6.2's lanes layout the configuration's constants themselves (vocab_size, max_model_len, the
draft steps and 6.2's S: rounds.CONFIG_CONSTEXPRS), the power of two of K + 1 (1.4, 6.3) and,
for 1.6, the power of two of the row count and whether the previous batch fits in as many
rows. The first launch of a variant compiles it (or loads it from Triton's disk cache), which
takes from milliseconds to a second, so a serving engine warms up once at startup.

``warmup`` runs each op for real on tiny inputs built for the engine's configuration and
dtypes, so that the ops' own launch code chooses the variants, not a copy of it here. On a CPU
device it runs the CPU kernels, which compile nothing.
"""

import dataclasses
import itertools
import logging
import time
from typing import Optional

import torch

from ._library import KERNELS
from ._triton._launch import PER_REQUEST_BLOCK, ROW_COLS, compiled_variants
from ._triton.computed_tokens import program_rows
from ._triton.rounds import LANES_MIN_REQS, parallel_lanes, round_lanes

logger = logging.getLogger(__name__)

# The dtypes the reference engine passes (docs/conventions.md, Dtypes), by kind of tensor.
PRODUCTION_DTYPES = {
    "token_ids": torch.int32,
    "positions": torch.int64,
    "block_table": torch.int32,
    "counts": torch.int32,          # seq_lens, query_start_loc, counts, indices
    "slot_mapping": torch.int64,
}


@dataclasses.dataclass(frozen=True)
class Warmed:
    """One op's warm-up: how many calls it took, the kernel variants they compiled, as
    (kernel name, (device index, num_warps, dtypes..., constexprs...)) pairs, and the time."""

    op: str
    calls: int
    compiled: tuple
    seconds: float


class _Inputs:
    """Tiny valid inputs for one configuration: a batch of one request whose verification had
    W - 1 drafts (W tokens). Out buffers are generously long (the ops accept longer outs)."""

    def __init__(self, device, dtypes, vocab_size, block_size, num_speculative_tokens,
                 max_model_len):
        self.device, self.dtypes = device, dtypes
        self.vocab_size, self.block_size = vocab_size, block_size
        self.k, self.max_model_len = num_speculative_tokens, max_model_len
        self.widths = sorted({1, num_speculative_tokens + 1})
        self.out_len = 4 * (num_speculative_tokens + 2)
        self.num_block_cols = -(-max_model_len // block_size)

    def tensor(self, kind, values):
        return torch.tensor(values, dtype=self.dtypes[kind], device=self.device)

    def zeros(self, kind, *shape):
        dtype = torch.bool if kind == "mask" else self.dtypes[kind]
        return torch.zeros(shape, dtype=dtype, device=self.device)

    def out(self, kind):
        return self.zeros(kind, self.out_len)

    def block_table(self, num_reqs=1):
        return self.zeros("block_table", num_reqs, self.num_block_cols)

    def verified(self, width, num_reqs=1, num_tokens=None):
        """sampled_token_ids, discard_request_mask, backup_next_token_ids, cu_num_draft_tokens,
        query_start_loc for ``num_reqs`` requests of ``num_tokens`` tokens (default ``width``),
        ``width`` - 1 drafts each, all accepted."""
        num_tokens = width if num_tokens is None else num_tokens
        return (self.tensor("token_ids", [[1] * width] * num_reqs), self.zeros("mask", num_reqs),
                self.tensor("token_ids", [1] * num_reqs),
                self.tensor("counts", [(width - 1) * (r + 1) for r in range(num_reqs)]),
                self.tensor("counts", [num_tokens * r for r in range(num_reqs + 1)]))

    def target(self, num_tokens, num_reqs=1):
        """target_token_ids, target_positions and seq_lens of those requests."""
        return (self.tensor("token_ids", [1] * (num_reqs * num_tokens)),
                self.tensor("positions", list(range(num_tokens)) * num_reqs),
                self.tensor("counts", [num_tokens] * num_reqs))


_WARMUPS = {}


def _warms(op):
    def register(run):
        _WARMUPS[op] = run
        return run
    return register


def _call(op, *args):
    getattr(torch.ops.spec_ops, op)(*args)


@_warms("eagle_prepare_next_token_padded")
def _next_token(x, max_num_reqs):
    for width in x.widths:
        sampled, discard, backup, _, _ = x.verified(width)
        _call("eagle_prepare_next_token_padded", sampled, discard, backup, x.out("token_ids"),
              x.out("counts"), x.vocab_size)
    return len(x.widths)


@_warms("eagle_prepare_inputs_padded")
def _prepare_inputs(x, max_num_reqs):
    _, _, _, cu_num_draft_tokens, query_start_loc = x.verified(x.k + 1)
    _call("eagle_prepare_inputs_padded", cu_num_draft_tokens, x.tensor("counts", [x.k + 1]),
          query_start_loc, x.out("counts"), x.out("counts"))
    return 1


@_warms("prepare_padded_draft_inputs")
def _padded_draft_inputs(x, max_num_reqs):
    for width in x.widths:
        _call("prepare_padded_draft_inputs", *x.verified(width), x.out("token_ids"),
              x.out("counts"), x.out("counts"), x.out("counts"), x.vocab_size)
    return len(x.widths)


@_warms("copy_and_expand_eagle_inputs")
def _expand(x, max_num_reqs):
    # With and without shift, with S = K slots (P-EAGLE, PARD) and S = 1 (a draft model), a
    # request of 1, 8, 16 and 17 tokens: the row layout's two tile widths and the per-request
    # layout, as far as S lets a request reach them (csrc_triton/_launch.py, row_cols).
    widths = (1, *ROW_COLS, ROW_COLS[-1] + 1)
    calls = 0
    for num_slots, width, shift in itertools.product(sorted({1, x.k}), widths, (False, True)):
        token_ids, positions, _ = x.target(width)
        num_outputs = width + num_slots
        _call("copy_and_expand_eagle_inputs", token_ids, positions, x.tensor("token_ids", [1]),
              x.zeros("token_ids", num_outputs), x.zeros("positions", num_outputs),
              x.zeros("mask", num_outputs), x.zeros("mask", num_outputs),
              x.zeros("counts", num_slots), x.zeros("counts", width),
              x.tensor("counts", [0, width]), x.tensor("counts", [width - 1]), 0, 0, num_slots,
              shift)
        calls += 1
    return calls


@_warms("compute_new_slot_mapping")
def _new_slot_mapping(x, max_num_reqs):
    # A request of up to 8, 16 and 17 entries, N new ones among them (1.3's added entries: K
    # for PARD, K - 1 for P-EAGLE, 1 for a draft model): the row layout's two tile widths and
    # the per-request layout (csrc_triton/_launch.py, row_cols).
    targets = (*ROW_COLS, ROW_COLS[-1] + 1)
    shapes = sorted({(max(target - num_new, 0), num_new) for target in targets
                     for num_new in {1, x.k - 1, x.k} if num_new >= 0})
    for num_tokens, num_new in shapes:
        num_entries = num_tokens + num_new
        _call("compute_new_slot_mapping", x.block_table(), x.tensor("counts", [0, num_tokens]),
              x.tensor("positions", list(range(num_entries))), x.zeros("mask", num_entries),
              x.block_size, num_new, x.max_model_len)
    return len(shapes)


@_warms("copy_and_expand_dflash_inputs")
def _dflash(x, max_num_reqs):
    # Requests of 8 and 16 context tokens (the row layout's two tile widths), 17 (one program
    # per request) and one long enough for a query program of its own (csrc_triton/dflash.py).
    calls = 0
    for num_context in (*ROW_COLS, ROW_COLS[-1] + 1, PER_REQUEST_BLOCK + 1):
        positions = x.tensor("positions", list(range(num_context)))
        for rejected in (None, x.tensor("counts", [0])):
            _call("copy_and_expand_dflash_inputs", x.tensor("token_ids", [1]), positions,
                  x.out("token_ids"), x.zeros("positions", num_context), x.out("positions"),
                  x.zeros("slot_mapping", num_context), x.out("slot_mapping"),
                  x.out("counts"), x.block_table(), x.tensor("counts", [0, num_context]),
                  rejected, 0, x.block_size, x.k + 1, x.k)
            calls += 1
    return calls


@_warms("eagle_step_update_slot_mapping_and_metadata")
def _step(x, max_num_reqs):
    _call("eagle_step_update_slot_mapping_and_metadata", x.tensor("positions", [0]),
          x.block_table(), x.tensor("counts", [1]), x.block_size, x.max_model_len,
          x.out("positions"), x.out("slot_mapping"))
    return 1


@_warms("eagle_mrope_step_update_slot_mapping_and_metadata")
def _mrope_step(x, max_num_reqs):
    # M-RoPE positions are int64 whatever the engine's other positions are (docs/mrope.md).
    positions = torch.zeros((3, 1), dtype=torch.int64, device=x.device)
    _call("eagle_mrope_step_update_slot_mapping_and_metadata", positions, x.block_table(),
          x.tensor("counts", [1]), x.block_size, x.max_model_len, torch.zeros_like(positions),
          x.out("slot_mapping"))
    return 1


@_warms("eagle_multi_step_slot_mapping")
def _multi_step(x, max_num_reqs):
    num_steps = max(x.k - 1, 1)     # a launch of 0 steps launches nothing
    _call("eagle_multi_step_slot_mapping", x.tensor("positions", [0]), x.block_table(),
          x.tensor("counts", [1]), x.block_size, x.max_model_len, num_steps,
          x.zeros("positions", num_steps, 1), x.zeros("slot_mapping", num_steps, 1),
          x.zeros("counts", num_steps, 1))
    return 1


@_warms("update_num_computed_tokens_for_batch_change")
def _computed_tokens(x, max_num_reqs):
    """1.6's launch depends on the row count's power of two and on whether the previous batch
    fits the program's rows: every power of two up to max_num_reqs, and max_num_reqs itself,
    each with a previous batch of as many rows and of more than the program holds, reach every
    launch a batch of up to max_num_reqs rows can take."""
    row_counts = sorted({1 << i for i in range(max_num_reqs.bit_length())} | {max_num_reqs})
    for rows in row_counts:
        prev_positions = torch.full((rows,), -1, dtype=x.dtypes["positions"], device=x.device)
        for prev_rows in (rows, program_rows(rows) + 1):
            previous = [x.zeros("counts", prev_rows) for _ in range(3)]
            _call("update_num_computed_tokens_for_batch_change", previous[0],
                  x.zeros("counts", rows), prev_positions, previous[1], previous[2],
                  x.zeros("counts", rows))
    return 2 * len(row_counts)


def _round_batches(width, lanes, max_num_reqs):
    """(requests, tokens each) of the round ops' warm-up batches at one width: a decode (6.1's
    lanes layout, and 6.2's with draft steps; otherwise 6.2's and 6.3's per-request layout
    below LANES_MIN_REQS requests), a single
    request longer than a per-request chunk (one program per request and chunk), two requests
    a little longer than their lanes where the engine schedules two or more (the lanes layout
    with its remainder programs: 6.1, 6.3, and 6.2 with LANES_MIN_COLS sampled columns;
    rounds.lanes_split) and, where it schedules that many, a decode batch of LANES_MIN_REQS
    requests (6.2's and 6.3's lanes layout). The lanes layout compiles to one variant whatever
    the batch size and the number of remainder programs."""
    shapes = {(1, width), (1, PER_REQUEST_BLOCK + 1)}
    if lanes is not None:
        if max_num_reqs >= 2:
            shapes.add((2, lanes + 1))
        if max_num_reqs >= LANES_MIN_REQS:
            shapes.add((LANES_MIN_REQS, width))
    return sorted(shapes)


def _step_outs(x, num_steps, num_reqs):
    rows = max(num_steps, 1)
    return (x.zeros("positions", rows, num_reqs), x.zeros("slot_mapping", rows, num_reqs),
            x.zeros("counts", rows, num_reqs))


@_warms("prepare_eagle_round")
def _eagle_round(x, max_num_reqs):
    """Both layouts at both widths (_round_batches)."""
    num_steps = x.k - 1
    calls = 0
    for width in x.widths:
        for num_reqs, num_tokens in _round_batches(width, round_lanes(width, num_steps),
                                                   max_num_reqs):
            token_ids, positions, seq_lens = x.target(num_tokens, num_reqs)
            total = num_reqs * num_tokens
            _call("prepare_eagle_round", *x.verified(width, num_reqs, num_tokens), token_ids,
                  positions, x.zeros("slot_mapping", total), x.block_table(num_reqs), seq_lens,
                  x.zeros("token_ids", num_reqs), x.zeros("counts", num_reqs),
                  x.zeros("counts", num_reqs), x.zeros("token_ids", total),
                  x.zeros("positions", total), x.zeros("slot_mapping", total),
                  *_step_outs(x, num_steps, num_reqs), x.vocab_size, x.block_size,
                  x.max_model_len, num_steps)
            calls += 1
    return calls


@_warms("prepare_parallel_round")
def _parallel_round(x, max_num_reqs):
    """Both layouts at both widths (_round_batches) for each method: P-EAGLE (shift, S = K),
    PARD (S = K) and the draft model (S = 1, K - 1 draft steps), whose lanes differ."""
    calls = 0
    methods = ((True, x.k, 0), (False, x.k, 0), (False, 1, x.k - 1))
    for width, (shift, num_slots, num_steps) in itertools.product(x.widths, methods):
        num_new = num_slots - (1 if shift else 0)
        lanes = parallel_lanes(width, num_slots, shift, num_steps)
        for num_reqs, num_tokens in _round_batches(width, lanes, max_num_reqs):
            token_ids, positions, seq_lens = x.target(num_tokens, num_reqs)
            first_pass = num_reqs * (num_tokens + num_new)
            _call("prepare_parallel_round", *x.verified(width, num_reqs, num_tokens), token_ids,
                  positions, x.block_table(num_reqs), seq_lens, x.zeros("token_ids", num_reqs),
                  x.zeros("counts", num_reqs),
                  x.zeros("token_ids", first_pass), x.zeros("positions", first_pass),
                  x.zeros("mask", first_pass), x.zeros("counts", num_reqs * num_slots),
                  x.zeros("counts", num_reqs * num_tokens),
                  x.zeros("slot_mapping", first_pass), x.zeros("counts", num_reqs + 1),
                  x.zeros("counts", num_reqs), *_step_outs(x, num_steps, num_reqs),
                  x.vocab_size, 0, 0, num_slots, shift, x.block_size, x.max_model_len,
                  num_steps)
            calls += 1
    return calls


@_warms("prepare_dflash_round")
def _dflash_round(x, max_num_reqs):
    """Both layouts at both widths (_round_batches)."""
    num_query = x.k + 1
    calls = 0
    for width in x.widths:
        for num_reqs, num_tokens in _round_batches(width, round_lanes(width, num_query),
                                                   max_num_reqs):
            _, positions, seq_lens = x.target(num_tokens, num_reqs)
            total, queries = num_reqs * num_tokens, num_reqs * num_query
            _call("prepare_dflash_round", *x.verified(width, num_reqs, num_tokens), positions,
                  x.block_table(num_reqs), seq_lens, x.zeros("token_ids", num_reqs),
                  x.zeros("counts", num_reqs),
                  x.zeros("token_ids", queries), x.zeros("positions", total),
                  x.zeros("positions", queries), x.zeros("slot_mapping", total),
                  x.zeros("slot_mapping", queries), x.zeros("counts", num_reqs * x.k),
                  x.zeros("counts", num_reqs + 1), x.zeros("counts", num_reqs), x.vocab_size,
                  0, x.block_size, x.k)
            calls += 1
    return calls


def warmup(device, *, vocab_size, block_size, num_speculative_tokens, max_model_len,
           max_num_reqs, ops=None, dtypes: Optional[dict] = None):
    """Compile every kernel variant the ops will launch for this configuration on ``device``.

    ops: the op names to warm (default: every op). dtypes: tensor dtypes by kind, where the
    engine's differ from PRODUCTION_DTYPES ("token_ids", "positions", "block_table",
    "counts", "slot_mapping"); call warmup once per set of dtypes the engine uses.
    Returns one Warmed per op, in the order run, and logs each. On a CPU device the ops run
    their CPU kernels, which compile nothing.
    """
    device = torch.device(device)
    if num_speculative_tokens < 1 or max_num_reqs < 1:
        raise ValueError("spec_ops.warmup: num_speculative_tokens and max_num_reqs must be >= 1, "
                         f"got {num_speculative_tokens} and {max_num_reqs}")
    registered = [op for op in _WARMUPS if op in KERNELS]
    if ops is None:
        ops = registered
    unknown = sorted(set(ops) - set(registered))
    if unknown:
        raise ValueError(f"spec_ops.warmup: unknown ops {unknown}; known: {sorted(registered)}")
    unknown = sorted(set(dtypes or {}) - set(PRODUCTION_DTYPES))
    if unknown:
        raise ValueError(f"spec_ops.warmup: unknown dtype kinds {unknown}; known: "
                         f"{sorted(PRODUCTION_DTYPES)}")
    inputs = _Inputs(device, {**PRODUCTION_DTYPES, **(dtypes or {})}, vocab_size, block_size,
                     num_speculative_tokens, max_model_len)
    report = []
    for op in ops:
        before = compiled_variants()
        start = time.perf_counter()
        calls = _WARMUPS[op](inputs, max_num_reqs)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - start
        compiled = tuple(sorted(compiled_variants() - before, key=repr))
        report.append(Warmed(op, calls, compiled, seconds))
        logger.info("spec_ops.warmup: %s: %d calls, %d kernel variants compiled, %.3f s",
                    op, calls, len(compiled), seconds)
    logger.info("spec_ops.warmup on %s: %d ops, %d kernel variants, %.3f s", device, len(report),
                sum(len(warmed.compiled) for warmed in report),
                sum(warmed.seconds for warmed in report))
    return report
