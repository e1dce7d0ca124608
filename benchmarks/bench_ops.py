"""Benchmark every spec_ops op against its plain-torch composition and its bare Triton launch.

Each op (1.1-1.7, 5.1, 5.2, 7.1 of docs/) runs at R = 1, 64 and 1024 requests with K = 3
drafts, and the copy/expand ops (1.3, 1.4, 1.7) also on a prefill-sized batch of 8 x 2048
tokens, in these variants:

  function  spec_ops.<op>, the eager call a serving loop makes (in plain eager code on CUDA
            it launches without the dispatcher's round trip)
  op        torch.ops.spec_ops.<op>.default: the dispatcher, then what the function does
  triton    the op's kernel launched the plain Triton way, kernel[(grid,)](*args)
  fast      the launcher's cached launch of the compiled kernel alone: the op's launch path
  torch     the op as engines wrote it before fusing: a handful of torch ops
  compiled  torch.compile(dynamic=True) of the torch variant (1.6)
  unfused   the single ops a fused op replaces, called back to back (5.1, 5.2)

For each: host µs per eager call (back-to-back calls, synchronized before and after a batch,
median of repeats) and GPU µs per call inside a CUDA graph of 50 calls (median replay time by
CUDA events, / 50). An empty Triton kernel is the floor, its graph timed after the
process's first timed graph (empty_kernel_floor). The targets are
printed as PASS/FAIL with their ratios, all taken within this run; every number goes to a JSON
file and a plot in benchmarks/results/ (and $OUT when set).

Without CUDA, or with --smoke, it runs on small CPU inputs instead: it checks that each torch
composition and the (interpreted) Triton launch equal the op and runs the code paths, timing
only the host side of the CPU kernels.
"""

import argparse
import contextlib
import functools
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import torch

# Smoke mode runs the Triton kernels interpreted on CPU tensors; TRITON_INTERPRET must be set
# before triton (and so spec_ops) is imported.
SMOKE = "--smoke" in sys.argv[1:] or not torch.cuda.is_available()
if SMOKE:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import triton  # noqa: E402

import spec_ops  # noqa: E402
from spec_ops._library import KERNELS, KnownCalls  # noqa: E402
from spec_ops._triton._launch import Launcher, supports_pdl  # noqa: E402

K = 3                      # drafts per request
NUM_STEPS = 4              # draft steps of 5.2 (and 1.5 calls it replaces)
BLOCK_SIZE = 16
MAX_MODEL_LEN = 4096
VOCAB_SIZE = 32000
NUM_BLOCKS = 1 << 16
PARALLEL_DRAFTING_TOKEN_ID = VOCAB_SIZE - 1
POISON = -7                # initial value of out buffers, so an unwritten element shows

DECODE_BATCHES = ((1, K + 1), (64, K + 1), (1024, K + 1))   # (requests, tokens per request)
PREFILL_BATCH = (8, 2048)
SMOKE_DECODE_BATCHES = ((1, K + 1), (64, K + 1))
SMOKE_PREFILL_BATCH = (3, 50)

WARMUP_CALLS = 5
HOST_CALLS, HOST_REPEATS = (2, 1) if SMOKE else (200, 15)
GRAPH_CALLS, GRAPH_REPLAYS = 50, 50
SLEEP_CYCLES = 2_000_000   # ~1 ms of GPU spin before each timed replay (see graph_us)

RESULTS_DIR = Path(__file__).resolve().parent / "results"
VARIANTS = ("function", "op", "triton", "fast", "torch", "compiled", "unfused")

I32, I64 = torch.int32, torch.int64


# --- inputs: engine-shaped random batches, keyed by the ops' schema argument names ----------

def _randint(low, high, size, gen, dtype=I32):
    return torch.randint(low, high, size, generator=gen, dtype=dtype)


def _out(shape, dtype):
    return torch.full(shape, POISON, dtype=dtype)


def _block_table(num_reqs, gen):
    return _randint(0, NUM_BLOCKS, (num_reqs, MAX_MODEL_LEN // BLOCK_SIZE), gen)   # [R, 256]


def _padded_batch(num_reqs, tokens_per_req, gen):
    """After verification (1.1, 1.2, 5.1): 1 in 10 requests had no drafts, 1 in 20 is
    discarded; the rejection sampler accepted a prefix of each row and wrote -1 after it."""
    num_drafts = torch.where(torch.rand(num_reqs, generator=gen) < 0.1, 0, tokens_per_req - 1)
    accepted = (torch.rand(num_reqs, generator=gen) * (num_drafts + 1)).long()  # 0..drafts
    columns = torch.arange(tokens_per_req)
    sampled = torch.where(columns <= accepted[:, None],
                          _randint(0, VOCAB_SIZE, (num_reqs, tokens_per_req), gen), -1)
    discard = torch.rand(num_reqs, generator=gen) < 0.05
    return {
        "sampled_token_ids": sampled.to(I32),                              # [R, K + 1]
        "discard_request_mask": discard,                                   # [R] bool
        "backup_next_token_ids": _randint(0, VOCAB_SIZE, (num_reqs,), gen),
        "cu_num_draft_tokens": num_drafts.cumsum(0).to(I32),               # inclusive
        "query_start_loc": torch.cat([torch.zeros(1, dtype=I64),
                                      (num_drafts + 1).cumsum(0)]).to(I32),  # [R + 1]
        "next_token_ids": _out((num_reqs,), I32),
        "valid_sampled_tokens_count": torch.where(discard, 0, accepted + 1).to(I32),
        "token_indices_to_sample": _out((num_reqs,), I32),
        "num_rejected_tokens": _out((num_reqs,), I32),
        "vocab_size": VOCAB_SIZE,
    }


def _verified_batch(num_reqs, tokens_per_req, gen):
    """Target tokens of R requests of equal length, up to K of each rejected at its end."""
    num_tokens = num_reqs * tokens_per_req
    request = torch.arange(num_tokens) // tokens_per_req
    first_position = _randint(0, MAX_MODEL_LEN - tokens_per_req, (num_reqs,), gen, I64)
    num_rejected = _randint(0, min(K, tokens_per_req - 1) + 1, (num_reqs,), gen)
    query_start_loc = (torch.arange(num_reqs + 1) * tokens_per_req).to(I32)
    return {
        "target_token_ids": _randint(0, VOCAB_SIZE, (num_tokens,), gen),
        "target_positions": first_position[request] + torch.arange(num_tokens) % tokens_per_req,
        "next_token_ids": _randint(0, VOCAB_SIZE, (num_reqs,), gen),
        "query_start_loc": query_start_loc,
        "query_end_loc": query_start_loc[1:] - 1 - num_rejected,           # last accepted
        "num_rejected_tokens": num_rejected,
        "block_table": _block_table(num_reqs, gen),
        "block_size": BLOCK_SIZE,
        "max_model_len": MAX_MODEL_LEN,
    }


def _expand_inputs(num_reqs, tokens_per_req, gen):
    """1.3 as parallel drafting uses it: shifted input ids, S = K padding slots."""
    batch = _verified_batch(num_reqs, tokens_per_req, gen)
    num_tokens = batch["target_token_ids"].shape[0]
    num_outputs = num_tokens + num_reqs * (K - 1)
    return {
        **batch,
        "out_input_ids": _out((num_outputs,), I32),
        "out_positions": _out((num_outputs,), I64),
        "out_is_rejected_token_mask": torch.zeros(num_outputs, dtype=torch.bool),
        "out_is_masked_token_mask": torch.zeros(num_outputs, dtype=torch.bool),
        "out_new_token_indices": _out((num_reqs * K,), I32),
        "out_hidden_state_mapping": _out((num_tokens,), I32),
        "padding_token_id": 0,
        "parallel_drafting_token_id": PARALLEL_DRAFTING_TOKEN_ID,
        "num_padding_slots_per_request": K,
        "shift_input_ids": True,
    }


def _new_slot_mapping_inputs(num_reqs, tokens_per_req, gen):
    """1.7 on what 1.3 wrote: each request owns its tokens plus S - 1 new ones (shift)."""
    batch = _expand_inputs(num_reqs, tokens_per_req, gen)
    _call("copy_and_expand_eagle_inputs", torch.ops.spec_ops.copy_and_expand_eagle_inputs, batch)
    return {
        "block_table": batch["block_table"],
        "query_start_loc": batch["query_start_loc"],
        "new_positions": batch["out_positions"],
        "is_rejected_token_mask": batch["out_is_rejected_token_mask"],
        "block_size": BLOCK_SIZE,
        "num_new_tokens": K - 1,
        "max_model_len": MAX_MODEL_LEN,
    }


def _dflash_inputs(num_reqs, tokens_per_req, gen):
    """1.4 as the engine calls it: Q = K + 1 queries per request."""
    batch = _verified_batch(num_reqs, tokens_per_req, gen)
    num_context = batch["target_positions"].shape[0]
    num_queries = num_reqs * (K + 1)
    return {
        **batch,
        "out_input_ids": _out((num_queries,), I32),
        "out_context_positions": _out((num_context,), I64),
        "out_query_positions": _out((num_queries,), I64),
        "out_context_slot_mapping": _out((num_context,), I64),
        "out_query_slot_mapping": _out((num_queries,), I64),
        "out_token_indices": _out((num_reqs * K,), I32),
        "parallel_drafting_token_id": PARALLEL_DRAFTING_TOKEN_ID,
        "num_query_per_req": K + 1,
        "num_speculative_tokens": K,
    }


def _draft_step_inputs(num_reqs, tokens_per_req, gen):
    """A draft step (1.5): positions anywhere in the context, so some reach max_model_len."""
    positions = _randint(0, MAX_MODEL_LEN, (num_reqs,), gen, I64)
    return {
        "positions": positions,
        "block_table": _block_table(num_reqs, gen),
        "seq_lens": (positions + 1).to(I32),
        "block_size": BLOCK_SIZE,
        "max_model_len": MAX_MODEL_LEN,
        "out_clamped_positions": _out((num_reqs,), I64),
        "out_slot_mapping": _out((num_reqs,), I64),
        "input_batch_size": None,
    }


def _multi_step_inputs(num_reqs, tokens_per_req, gen):
    return {
        **_draft_step_inputs(num_reqs, tokens_per_req, gen),
        "num_steps": NUM_STEPS,
        "out_positions": _out((NUM_STEPS, num_reqs), I64),
        "out_slot_mapping": _out((NUM_STEPS, num_reqs), I64),
        "out_seq_lens": _out((NUM_STEPS, num_reqs), I32),
    }


def _mrope_step_inputs(num_reqs, tokens_per_req, gen):
    """An M-RoPE draft step (7.1): 1.5's batch, its positions three rows that trail the token
    index seq_len - 1 by up to an image's worth of tokens."""
    state = _draft_step_inputs(num_reqs, tokens_per_req, gen)
    index = state.pop("seq_lens").long() - 1
    del state["positions"], state["out_clamped_positions"]
    return {**state,
            "positions": (index - _randint(0, 512, (3, num_reqs), gen, I64)).clamp(min=0),
            "seq_lens": (index + 1).to(I32),
            "out_positions": _out((3, num_reqs), I64)}


def _batch_change_inputs(num_reqs, tokens_per_req, gen):
    """Async scheduling (1.6): the batch reordered, 1 in 10 rows new, 1 in 10 had no drafts."""
    prev_positions = torch.randperm(num_reqs, generator=gen)
    prev_positions[torch.rand(num_reqs, generator=gen) < 0.1] = -1
    return {
        "num_computed_tokens": _randint(1, MAX_MODEL_LEN, (num_reqs,), gen),
        "num_accepted_tokens": _out((num_reqs,), I32),
        "prev_positions": prev_positions,                                   # [R] int64
        "valid_sampled_token_count": _randint(1, K + 2, (num_reqs,), gen),
        "prev_num_draft_tokens": torch.where(torch.rand(num_reqs, generator=gen) < 0.1, 0,
                                             K).to(I32),
        "cpu_num_computed_tokens": _randint(1, MAX_MODEL_LEN, (num_reqs,), gen),
    }


# --- plain-torch compositions: the ops as engines wrote them, same arguments as the op ------

def _slot(block_table, rows, positions, block_size):
    """slot(row, position), block index clamped to the last column."""
    block_index = (positions // block_size).clamp(max=block_table.shape[1] - 1)
    return block_table[rows, block_index].long() * block_size + positions % block_size


def _padded(num_reqs, input_batch_size):
    return num_reqs if input_batch_size is None else input_batch_size


def _torch_next_token(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                      next_token_ids, valid_sampled_tokens_count, vocab_size):
    """The engine's form: token at column count - 1, only -1 rejected. Equals 1.1 where
    the valid columns are a prefix and rejected ids are -1, as the rejection sampler writes."""
    num_reqs = sampled_token_ids.shape[0]
    valid = (sampled_token_ids != -1) & (sampled_token_ids < vocab_size)
    count = valid.sum(dim=1)
    last = sampled_token_ids.gather(1, (count - 1).clamp(min=0)[:, None])[:, 0]
    next_token_ids[:num_reqs] = torch.where(discard_request_mask | (count == 0),
                                            backup_next_token_ids, last)
    valid_sampled_tokens_count[:num_reqs] = count.masked_fill(discard_request_mask, 0)


def _torch_prepare_inputs(cu_num_draft_tokens, valid_sampled_tokens_count, query_start_loc,
                          token_indices_to_sample, num_rejected_tokens):
    num_reqs = cu_num_draft_tokens.shape[0]
    num_drafts = torch.diff(cu_num_draft_tokens, prepend=cu_num_draft_tokens.new_zeros(1))
    rejected = torch.where(num_drafts > 0,
                           num_drafts + 1 - valid_sampled_tokens_count[:num_reqs], 0)
    token_indices_to_sample[:num_reqs] = query_start_loc[1:] - 1 - rejected
    num_rejected_tokens[:num_reqs] = rejected


def _torch_prepare_padded_draft_inputs(sampled_token_ids, discard_request_mask,
                                       backup_next_token_ids, cu_num_draft_tokens,
                                       query_start_loc, next_token_ids,
                                       valid_sampled_tokens_count, token_indices_to_sample,
                                       num_rejected_tokens, vocab_size):
    _torch_next_token(sampled_token_ids, discard_request_mask, backup_next_token_ids,
                      next_token_ids, valid_sampled_tokens_count, vocab_size)
    _torch_prepare_inputs(cu_num_draft_tokens, valid_sampled_tokens_count, query_start_loc,
                          token_indices_to_sample, num_rejected_tokens)


def _torch_copy_and_expand(target_token_ids, target_positions, next_token_ids, out_input_ids,
                           out_positions, out_is_rejected_token_mask, out_is_masked_token_mask,
                           out_new_token_indices, out_hidden_state_mapping, query_start_loc,
                           query_end_loc, padding_token_id, parallel_drafting_token_id,
                           num_padding_slots_per_request, shift_input_ids):
    """Owner of each output by repeat_interleave (assumes qsl[0] = 0, as engines pass)."""
    slots = num_padding_slots_per_request
    extra = slots - 1 if shift_input_ids else slots
    num_reqs, num_inputs = next_token_ids.shape[0], target_token_ids.shape[0]
    num_outputs = num_inputs + num_reqs * extra
    device = target_token_ids.device
    rows = torch.arange(num_reqs, device=device)
    query_start = query_start_loc[:-1].long()
    query_lens = query_start_loc[1:] - query_start_loc[:-1]
    out_start = query_start + rows * extra                                        # [R]
    num_valid = query_end_loc.long() - query_start + (0 if shift_input_ids else 1)  # [R]
    owner = torch.repeat_interleave(rows, query_lens + extra, output_size=num_outputs)
    j = torch.arange(num_outputs, device=device) - out_start[owner]
    valid = num_valid[owner]
    source = (query_start[owner] + int(shift_input_ids) + j).clamp(max=num_inputs - 1)
    rejected = j >= valid + slots
    masked = (j > valid) & ~rejected
    out_input_ids[:num_outputs] = torch.where(
        j < valid, target_token_ids[source],
        torch.where(j == valid, next_token_ids[owner],
                    torch.where(masked, parallel_drafting_token_id, padding_token_id)))
    out_positions[:num_outputs] = torch.where(rejected, 0, target_positions[query_start][owner] + j)
    out_is_rejected_token_mask[:num_outputs] = rejected
    out_is_masked_token_mask[:num_outputs] = masked
    out_new_token_indices[:num_reqs * slots] = (
        (out_start + num_valid)[:, None] + torch.arange(slots, device=device)).flatten()
    if shift_input_ids:
        out_hidden_state_mapping[:num_inputs] = torch.arange(num_inputs, device=device) + (
            torch.repeat_interleave(rows * extra, query_lens, output_size=num_inputs))


def _torch_dflash(next_token_ids, target_positions, out_input_ids, out_context_positions,
                  out_query_positions, out_context_slot_mapping, out_query_slot_mapping,
                  out_token_indices, block_table, query_start_loc, num_rejected_tokens,
                  parallel_drafting_token_id, block_size, num_query_per_req,
                  num_speculative_tokens):
    num_reqs = query_start_loc.shape[0] - 1
    num_context = target_positions.shape[0]
    num_queries = num_reqs * num_query_per_req
    device = target_positions.device
    rows = torch.arange(num_reqs, device=device)
    owner = torch.repeat_interleave(rows, query_start_loc[1:] - query_start_loc[:-1],
                                    output_size=num_context)
    out_context_positions[:num_context] = target_positions
    out_context_slot_mapping[:num_context] = _slot(block_table, owner, target_positions,
                                                   block_size)
    valid_end = query_start_loc[1:]
    if num_rejected_tokens is not None:
        valid_end = valid_end - num_rejected_tokens[:num_reqs]
    q = torch.arange(num_query_per_req, device=device)
    query_positions = target_positions[valid_end - 1][:, None] + 1 + q           # [R, Q]
    out_query_positions[:num_queries] = query_positions.flatten()
    out_query_slot_mapping[:num_queries] = _slot(block_table, rows[:, None], query_positions,
                                                 block_size).flatten()
    out_input_ids[:num_queries] = torch.where(q == 0, next_token_ids[:num_reqs, None],
                                              parallel_drafting_token_id).flatten()
    out_token_indices[(rows[:, None] * num_speculative_tokens + q[1:] - 1).flatten()] = (
        (rows[:, None] * num_query_per_req + q[1:]).flatten().to(out_token_indices.dtype))


def _torch_advance(positions, block_table, seq_lens, block_size, max_model_len):
    """One draft step: (clamped positions, slot mapping, seq_lens)."""
    rows = torch.arange(positions.shape[0], device=positions.device)
    next_positions = positions + 1
    over = next_positions >= max_model_len
    clamped = torch.where(over, 0, next_positions)
    slot = _slot(block_table, rows, clamped, block_size).masked_fill(over, spec_ops.PADDING_SLOT_ID)
    return clamped, slot, torch.where(over, 1, seq_lens + 1).clamp(max=max_model_len)


def _torch_step(positions, block_table, seq_lens, block_size, max_model_len,
                out_clamped_positions, out_slot_mapping, input_batch_size):
    num_reqs = positions.shape[0]
    clamped, slot, new_seq_lens = _torch_advance(positions, block_table, seq_lens[:num_reqs],
                                                 block_size, max_model_len)
    out_clamped_positions[:num_reqs] = clamped
    seq_lens[:num_reqs] = new_seq_lens
    out_slot_mapping[:num_reqs] = slot
    out_slot_mapping[num_reqs:_padded(num_reqs, input_batch_size)] = spec_ops.PADDING_SLOT_ID


def _torch_mrope_step(positions, block_table, seq_lens, block_size, max_model_len,
                      out_positions, out_slot_mapping, input_batch_size):
    """1.5's step from the token index seq_len - 1, the three position rows carried along."""
    num_reqs = positions.shape[1]
    _, slot, new_seq_lens = _torch_advance(seq_lens[:num_reqs].long() - 1, block_table,
                                           seq_lens[:num_reqs], block_size, max_model_len)
    over = seq_lens[:num_reqs] >= max_model_len
    out_positions[:, :num_reqs] = torch.where(over, 0, positions + 1)
    seq_lens[:num_reqs] = new_seq_lens
    out_slot_mapping[:num_reqs] = slot
    out_slot_mapping[num_reqs:_padded(num_reqs, input_batch_size)] = spec_ops.PADDING_SLOT_ID


def _torch_multi_step(positions, block_table, seq_lens, block_size, max_model_len, num_steps,
                      out_positions, out_slot_mapping, out_seq_lens, input_batch_size):
    num_reqs = positions.shape[0]
    seq_lens = seq_lens[:num_reqs]
    for step in range(num_steps):
        positions, slot, seq_lens = _torch_advance(positions, block_table, seq_lens, block_size,
                                                   max_model_len)
        out_positions[step, :num_reqs] = positions
        out_seq_lens[step, :num_reqs] = seq_lens
        out_slot_mapping[step, :num_reqs] = slot
    out_slot_mapping[:num_steps, num_reqs:_padded(num_reqs, input_batch_size)] = (
        spec_ops.PADDING_SLOT_ID)


def _torch_update_num_computed(num_computed_tokens, num_accepted_tokens, prev_positions,
                               valid_sampled_token_count, prev_num_draft_tokens,
                               cpu_num_computed_tokens):
    num_rows = prev_positions.shape[0]
    num_prev_rows = min(valid_sampled_token_count.shape[0], num_computed_tokens.shape[0],
                        prev_num_draft_tokens.shape[0])
    prev = prev_positions.clamp(0, num_prev_rows - 1)
    participates = ((prev_positions >= 0) & (prev_positions < num_prev_rows)
                    & (prev_num_draft_tokens[prev] > 0))
    accepted = valid_sampled_token_count[prev]
    computed = torch.where(participates, num_computed_tokens[prev] + accepted,
                           cpu_num_computed_tokens[:num_rows])
    num_accepted_tokens[:num_rows] = torch.where(participates, accepted,
                                                 num_accepted_tokens[:num_rows])
    num_computed_tokens[:num_rows] = computed


def _torch_new_slot_mapping(block_table, query_start_loc, new_positions, is_rejected_token_mask,
                            block_size, num_new_tokens, max_model_len):
    num_reqs = query_start_loc.shape[0] - 1
    owner = torch.repeat_interleave(
        torch.arange(num_reqs, device=new_positions.device),
        query_start_loc[1:] - query_start_loc[:-1] + num_new_tokens,
        output_size=new_positions.shape[0])
    slot = _slot(block_table, owner, new_positions.clamp(max=max_model_len - 1), block_size)
    return torch.where(is_rejected_token_mask | (new_positions >= max_model_len),
                       spec_ops.PADDING_SLOT_ID, slot)


# --- the unfused sequences the §5 ops replace, same arguments as the fused op ---------------

def _next_token_then_prepare_inputs(sampled_token_ids, discard_request_mask,
                                    backup_next_token_ids, cu_num_draft_tokens, query_start_loc,
                                    next_token_ids, valid_sampled_tokens_count,
                                    token_indices_to_sample, num_rejected_tokens, vocab_size, *,
                                    ops=torch.ops.spec_ops):
    """1.1 then 1.2, the ops from ``ops`` (another namespace with the same schemas: the
    floors in bench_registration.py)."""
    ops.eagle_prepare_next_token_padded.default(
        sampled_token_ids, discard_request_mask, backup_next_token_ids, next_token_ids,
        valid_sampled_tokens_count, vocab_size)
    ops.eagle_prepare_inputs_padded.default(
        cu_num_draft_tokens, valid_sampled_tokens_count, query_start_loc,
        token_indices_to_sample, num_rejected_tokens)


def _step_calls(positions, block_table, seq_lens, block_size, max_model_len, num_steps,
                out_positions, out_slot_mapping, out_seq_lens, input_batch_size, *,
                ops=torch.ops.spec_ops):
    """1.5 num_steps times as an engine's draft loop calls it: positions and slot mapping in
    one buffer each (the positions aliased from step 2 on), seq_lens advanced in place. The
    op from ``ops``, as in _next_token_then_prepare_inputs."""
    clamped_positions, slot_mapping = out_positions[0], out_slot_mapping[0]
    for _ in range(num_steps):
        ops.eagle_step_update_slot_mapping_and_metadata.default(
            positions, block_table, seq_lens, block_size, max_model_len, clamped_positions,
            slot_mapping, input_batch_size)
        positions = clamped_positions


# --- the table of ops -----------------------------------------------------------------------

@dataclass(frozen=True)
class Op:
    label: str                          # section of docs/
    name: str                           # torch.ops.spec_ops.<name>
    inputs: Callable                    # (num_reqs, tokens_per_req, generator) -> state
    torch_fn: Callable                  # plain-torch composition, the op's arguments
    prefill: bool = False               # copy/expand op: prefill batch too, no floor target
    unfused: Callable | None = None     # fused op: the single-op calls it replaces
    fused_limit: float | None = None    # target: fused <= fused_limit x unfused
    compile_torch: bool = False         # also torch.compile(dynamic=True) of torch_fn
    baseline: str | None = None         # target: graph time <= baseline_limit x this op's
    baseline_limit: float | None = None


OPS = (
    Op("1.1", "eagle_prepare_next_token_padded", _padded_batch, _torch_next_token),
    Op("1.2", "eagle_prepare_inputs_padded", _padded_batch, _torch_prepare_inputs),
    Op("1.3", "copy_and_expand_eagle_inputs", _expand_inputs, _torch_copy_and_expand,
       prefill=True),
    Op("1.4", "copy_and_expand_dflash_inputs", _dflash_inputs, _torch_dflash, prefill=True),
    Op("1.5", "eagle_step_update_slot_mapping_and_metadata", _draft_step_inputs, _torch_step),
    Op("1.6", "update_num_computed_tokens_for_batch_change", _batch_change_inputs,
       _torch_update_num_computed, compile_torch=True),
    Op("1.7", "compute_new_slot_mapping", _new_slot_mapping_inputs, _torch_new_slot_mapping,
       prefill=True),
    Op("5.1", "prepare_padded_draft_inputs", _padded_batch, _torch_prepare_padded_draft_inputs,
       unfused=_next_token_then_prepare_inputs, fused_limit=0.6),
    Op("5.2", "eagle_multi_step_slot_mapping", _multi_step_inputs, _torch_multi_step,
       unfused=_step_calls, fused_limit=0.35),
    Op("7.1", "eagle_mrope_step_update_slot_mapping_and_metadata", _mrope_step_inputs,
       _torch_mrope_step, baseline="1.5", baseline_limit=1.1),
)

FLOOR_LIMIT = 1.5          # per-request op in a graph <= 1.5 x the empty-kernel node
LAUNCH_LIMIT = 1.0         # eager op call <= the raw Triton launch of its kernel
# GPU µs per call in a CUDA graph of the token-level ops, at the sizes that carry the most
# tokens: below the engine's own kernels for the same work.
GRAPH_US_LIMITS = {("1.3", "R=1024"): 1.75, ("1.3", "8x2048"): 1.30,
                   ("1.4", "R=1024"): 1.60, ("1.4", "8x2048"): 1.60,
                   ("1.7", "R=1024"): 1.50, ("1.7", "8x2048"): 1.50}
COMPILE_SPEEDUP = 4.0      # 1.6 host time >= 4 x faster than its torch.compile'd version


# --- running an op on a state ---------------------------------------------------------------

def _op_args(name, state):
    """The op's arguments, in schema order, from a state keyed by argument name."""
    schema = getattr(torch.ops.spec_ops, name).default._schema
    return tuple(state[argument.name] for argument in schema.arguments)


def _call(name, fn, state):
    return fn(*_op_args(name, state))


def _fresh(state, device=None):
    return {key: value.to(device or value.device, copy=True)
            if isinstance(value, torch.Tensor) else value for key, value in state.items()}


def _outputs(name, fn, initial):
    """Every tensor of a fresh copy of ``initial`` after one call of ``fn``, and its result."""
    state = _fresh(initial)
    result = _call(name, fn, state)
    outputs = {key: value for key, value in state.items() if isinstance(value, torch.Tensor)}
    if result is not None:
        outputs["(returned)"] = result
    return outputs


def _differences(expected, actual):
    """One line per tensor where ``actual`` differs from ``expected`` (the op's)."""
    lines = []
    for key, want in expected.items():
        got = actual[key]
        if want.dtype != got.dtype or want.shape != got.shape:
            lines.append(f"{key}: op {want.dtype} {list(want.shape)}, "
                         f"got {got.dtype} {list(got.shape)}")
        elif not torch.equal(want, got):
            where = (want != got).nonzero()
            first = tuple(where[0].tolist())
            lines.append(f"{key}: {where.shape[0]} of {want.numel()} differ, first at {first}: "
                         f"op {want[first].item()}, got {got[first].item()}")
    return lines


def _check(name, fn, initial, expected):
    """How ``fn`` differs from the op's ``expected`` outputs (an error counts as one line)."""
    try:
        return _differences(expected, _outputs(name, fn, initial))
    except Exception as error:  # noqa: BLE001 - reported as a mismatch, the run goes on
        return [f"raised {type(error).__name__}: {error}"]


@dataclass
class Launch:
    """One Launcher call an op made, replayable without the op around it."""
    launcher: Launcher
    grid: int
    args: tuple
    num_warps: int
    grid_y: int

    def raw(self):
        """kernel[grid](*args): Triton's own launch (binding, specialization, cache lookup), with
        the op's launch options."""
        kernel, num_warps = self.launcher.kernel, self.num_warps
        pdl = supports_pdl(self.args[0].get_device())
        args, options = (*self.args, pdl), ({"launch_pdl": True} if pdl else {})
        grid = (self.grid, self.grid_y)
        return lambda: kernel[grid](*args, num_warps=num_warps, **options)

    def fast(self):
        """The launcher's cached launch of the compiled kernel: what the op runs after its
        check, from the second call on."""
        launcher, args = self.launcher, self.args
        launch = launcher.launches[launcher.key(args, self.num_warps)]
        grid, grid_y = self.grid, self.grid_y
        return lambda: launch(grid, grid_y, args)


@contextlib.contextmanager
def _recording_launches(launches):
    """Every launch the op's calls make meanwhile appended to ``launches`` (no launch plan
    replays meanwhile: a replay does not go through the launcher's call)."""
    original = Launcher.__call__

    def record(launcher, grid, args, num_warps=None, grid_y=1):
        launches.append(Launch(launcher, grid, args, num_warps or launcher.num_warps, grid_y))
        return original(launcher, grid, args, num_warps, grid_y)

    with (mock.patch.object(Launcher, "__call__", record),
          mock.patch.object(KnownCalls, "match", lambda *_: None)):
        yield


# --- timing ---------------------------------------------------------------------------------

def _synchronize():
    if not SMOKE:
        torch.cuda.synchronize()


def host_us(fns, calls=None, repeats=None):
    """{name: host µs per eager call} of ``fns``: back-to-back calls (``calls``, default
    HOST_CALLS), synchronized at both ends, median of repeats (``repeats``, default
    HOST_REPEATS). The variants take turns within each repeat, so drift of the host's speed
    hits them alike and their ratios hold."""
    calls, repeats = calls or HOST_CALLS, repeats or HOST_REPEATS
    for fn in fns.values():
        for _ in range(WARMUP_CALLS):
            fn()
    samples = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            _synchronize()
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            _synchronize()
            samples[name].append((time.perf_counter() - start) * 1e6 / calls)
    return {name: statistics.median(values) for name, values in samples.items()}


def graph_us(fn):
    """GPU µs per call in a CUDA graph of GRAPH_CALLS calls: median replay / GRAPH_CALLS."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_CALLS):
            fn()
    graph.replay()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(GRAPH_REPLAYS):
        # The GPU spins while the host queues the replay, so the events time the graph alone,
        # not the host's launch of it.
        torch.cuda._sleep(SLEEP_CYCLES)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / GRAPH_CALLS)
    return statistics.median(samples)


def measure(fns, graph):
    """{name: {"host_us", "graph_us"}} of ``fns``; an error is recorded, not raised, so one
    failing variant does not cost the rest of the run."""
    times = {}
    runnable = {}
    for name, fn in fns.items():
        try:
            fn()
            times[name] = {"graph_us": graph_us(fn) if graph else None}
            runnable[name] = fn
        except Exception as error:  # noqa: BLE001 - reported in the tables and the JSON
            times[name] = {"host_us": None, "graph_us": None,
                           "error": f"{type(error).__name__}: {error}"}
    for name, us in host_us(runnable).items():
        times[name]["host_us"] = us
    return times


@triton.jit
def _empty_kernel(x):
    pass


FLOOR_REPEATS = 3


def empty_kernel_floor():
    """The empty Triton kernel: host µs, and GPU µs per node of a CUDA graph of them.

    On the H200 the first CUDA graph a process times runs empty nodes at 0.53 µs and every
    later one at 0.71, while the ops' kernels (launched with PDL) take the same first or later
    (benchmarks/results/empty_node.txt). So the node is timed FLOOR_REPEATS more times
    after the first: ``graph_us`` is their median, the conditions every op is timed in, and
    ``graph_us_first`` the first (the floor of earlier runs, printed beside it)."""
    x = torch.zeros(1, device="cuda")
    times = measure({"empty": lambda: _empty_kernel[(1,)](x)}, graph=True)["empty"]
    later = [graph_us(lambda: _empty_kernel[(1,)](x)) for _ in range(FLOOR_REPEATS)]
    return {**times, "graph_us_first": times["graph_us"], "graph_us": statistics.median(later),
            "graph_us_later": later}


def floor_line(floor):
    """The floor as the tables print it."""
    return (f"empty Triton kernel: {_number(floor['host_us'])} / {_number(floor['graph_us'])} "
            f"(GPU: the median of {len(floor['graph_us_later'])} graphs timed after the "
            f"process's first, which took {_number(floor['graph_us_first'])})")


# --- one case: an op at one batch size ------------------------------------------------------

def bench_case(op, num_reqs, tokens_per_req, size):
    device = "cpu" if SMOKE else "cuda"
    gen = torch.Generator().manual_seed(1000 * num_reqs + tokens_per_req)
    initial = _fresh(op.inputs(num_reqs, tokens_per_req, gen), device)
    fns = {"function": getattr(spec_ops, op.name),
           "op": getattr(torch.ops.spec_ops, op.name).default, "torch": op.torch_fn}
    if op.compile_torch:
        fns["compiled"] = torch.compile(op.torch_fn, dynamic=True)
    expected = _outputs(op.name, fns["op"], initial)
    mismatches = {name: _check(op.name, fns[name], initial, expected)
                  for name in fns if name != "op"}
    launches = []
    with _recording_launches(launches):
        mismatches["triton"] = _check(op.name, KERNELS[op.name].triton, initial, expected)
    (launch,) = launches
    if op.unfused:
        # Timed only: 5.2's unfused steps advance seq_lens in place, as engines do, and so
        # write other tensors than the fused op.
        fns["unfused"] = op.unfused

    calls = {name: functools.partial(fn, *_op_args(op.name, _fresh(initial)))
             for name, fn in fns.items()}
    if SMOKE:
        launch.raw()()          # the code path; interpreted launches are not worth timing
    else:
        calls["triton"], calls["fast"] = launch.raw(), launch.fast()
    times = measure({name: calls[name] for name in VARIANTS if name in calls}, graph=not SMOKE)
    return {"label": op.label, "op": op.name, "size": size, "num_reqs": num_reqs,
            "tokens_per_req": tokens_per_req, "grid": launch.grid, "times": times,
            "mismatches": {name: lines for name, lines in mismatches.items() if lines}}


def _batches(op):
    decode, prefill = ((SMOKE_DECODE_BATCHES, SMOKE_PREFILL_BATCH) if SMOKE
                       else (DECODE_BATCHES, PREFILL_BATCH))
    for num_reqs, tokens_per_req in decode:
        yield num_reqs, tokens_per_req, f"R={num_reqs}"
    if op.prefill:
        yield prefill[0], prefill[1], f"{prefill[0]}x{prefill[1]}"


# --- targets, tables, files -----------------------------------------------------------------

def _ratio(numerator, denominator):
    return None if numerator is None or not denominator else numerator / denominator


def evaluate_targets(cases, floor):
    """Every target as {target, label, size, ratio, limit, passed}."""
    targets = []

    def add(target, case, ratio, limit):
        ratio = None if SMOKE else ratio      # a few CPU-kernel calls say nothing about these
        targets.append({"target": target, "label": case["label"], "size": case["size"],
                        "ratio": ratio, "limit": limit,
                        "passed": None if ratio is None else ratio <= limit})

    ops = {op.label: op for op in OPS}
    graph_times = {(case["label"], case["size"]): case["times"]["op"].get("graph_us")
                   for case in cases}
    for case in cases:
        op, times = ops[case["label"]], case["times"]
        value = {(name, metric): times.get(name, {}).get(metric)
                 for name in VARIANTS for metric in ("host_us", "graph_us")}
        if not op.prefill:
            add(f"graph <= {FLOOR_LIMIT}x empty kernel", case,
                _ratio(value["op", "graph_us"], floor and floor["graph_us"]), FLOOR_LIMIT)
            if floor and not SMOKE:     # information: against the first timed graph's node
                targets.append({"target": "graph / empty kernel, first graph",
                                "label": case["label"], "size": case["size"], "info": True,
                                "ratio": _ratio(value["op", "graph_us"],
                                                floor["graph_us_first"]),
                                "limit": None, "passed": None})
        add(f"eager <= {LAUNCH_LIMIT}x raw Triton launch", case,
            _ratio(value["function", "host_us"], value["triton", "host_us"]), LAUNCH_LIMIT)
        if not SMOKE:       # information: the same call through the dispatcher
            targets.append({"target": "torch.ops / raw Triton launch", "label": case["label"],
                            "size": case["size"], "info": True,
                            "ratio": _ratio(value["op", "host_us"], value["triton", "host_us"]),
                            "limit": None, "passed": None})
        if op.compile_torch:
            add(f"host <= 1/{COMPILE_SPEEDUP:g} of torch.compile", case,
                _ratio(value["function", "host_us"], value["compiled", "host_us"]),
                1 / COMPILE_SPEEDUP)
        if op.unfused:      # in a graph only: eager, both sides pay per-call host costs
            add(f"graph <= {op.fused_limit}x unfused", case,
                _ratio(value["op", "graph_us"], value["unfused", "graph_us"]), op.fused_limit)
        limit = GRAPH_US_LIMITS.get((case["label"], case["size"]))
        if limit:
            add("graph µs <= limit (ratio = µs / limit)", case,
                _ratio(value["op", "graph_us"], limit), 1.0)
        if op.baseline:
            add(f"graph <= {op.baseline_limit}x {op.baseline}", case,
                _ratio(value["op", "graph_us"], graph_times.get((op.baseline, case["size"]))),
                op.baseline_limit)
    return targets


def _number(value):
    return "-" if value is None else f"{value:.2f}" if value < 100 else f"{value:.0f}"


def print_results(cases, floor):
    present = [name for name in VARIANTS if any(name in case["times"] for case in cases)]
    print(f"\nµs per call: host (eager, back to back) / graph (GPU, {GRAPH_CALLS} calls per "
          f"graph); K = {K}, block {BLOCK_SIZE}, max_model_len {MAX_MODEL_LEN}")
    if floor:
        print(floor_line(floor))
    header = f"{'op':<5} {'size':<10}" + "".join(f"{name:>18}" for name in present)
    print(header + f"{'fn/fast host':>14}")
    print("-" * (len(header) + 14))
    for case in cases:
        cells = []
        for name in present:
            time_ = case["times"].get(name)
            cells.append("" if time_ is None else
                         "error" if "error" in time_ else
                         f"{_number(time_['host_us'])} / {_number(time_['graph_us'])}")
        fast = case["times"].get("fast", {})
        ratio = _ratio(case["times"]["function"]["host_us"], fast.get("host_us"))
        print(f"{case['label']:<5} {case['size']:<10}" + "".join(f"{c:>18}" for c in cells)
              + f"{'-' if ratio is None else f'{ratio:.2f}':>14}")
    for case in cases:
        for name, time_ in case["times"].items():
            if "error" in time_:
                print(f"error: {case['label']} {case['size']} {name}: {time_['error']}")


def print_summary(cases, targets):
    sizes = list(dict.fromkeys(case["size"] for case in cases))
    rows = {}
    for target in targets:
        rows.setdefault((target["target"], target["label"]), {})[target["size"]] = target
    print("\n== summary ==")
    header = f"{'target':<36} {'op':<5}" + "".join(f"{size:>14}" for size in sizes)
    print(header)
    print("-" * len(header))
    order = list(dict.fromkeys(target["target"] for target in targets))
    for (name, label), by_size in sorted(rows.items(), key=lambda row: order.index(row[0][0])):
        cells = []
        for size in sizes:
            target = by_size.get(size)
            cells.append("" if target is None else
                         "n/a" if target["ratio"] is None else
                         f"info {target['ratio']:.2f}" if target.get("info") else
                         "n/a" if target["passed"] is None else
                         f"{'PASS' if target['passed'] else 'FAIL'} {target['ratio']:.2f}")
        print(f"{name:<36} {label:<5}" + "".join(f"{cell:>14}" for cell in cells))
    passed = sum(target["passed"] is True for target in targets)
    failed = sum(target["passed"] is False for target in targets)
    mismatched = [(case, name, lines) for case in cases
                  for name, lines in case["mismatches"].items()]
    errors = sum("error" in time_ for case in cases for time_ in case["times"].values())
    judged = [target for target in targets if not target.get("info")]
    print(f"targets: {passed} PASS, {failed} FAIL, {len(judged) - passed - failed} n/a; "
          f"compositions equal to the op: "
          f"{'all' if not mismatched else f'{len(mismatched)} MISMATCH'}; "
          f"measurement errors: {errors}")
    for case, name, lines in mismatched:
        for line in lines:
            print(f"MISMATCH {case['label']} {case['size']} {name}: {line}")


def plot(cases, floor, path):
    plt = pyplot()
    if plt is None:
        return
    metrics = [(metric, title) for metric, title in
               (("host_us", "host µs per eager call"),
                ("graph_us", f"GPU µs per call in a CUDA graph of {GRAPH_CALLS}"))
               if any(time_.get(metric) for case in cases for time_ in case["times"].values())]
    names = [name for name in VARIANTS if any(name in case["times"] for case in cases)]
    figure, axes = plt.subplots(len(metrics), 1, figsize=(max(12, 0.8 * len(cases)),
                                                          4.5 * len(metrics)),
                                sharex=True, squeeze=False)
    width = 0.8 / len(names)
    for ax, (metric, title) in zip(axes[:, 0], metrics):
        for i, name in enumerate(names):
            values = [case["times"].get(name, {}).get(metric) or float("nan") for case in cases]
            ax.bar([x + (i - (len(names) - 1) / 2) * width for x in range(len(cases))],
                   values, width, label=name)
        if floor and floor.get(metric):
            ax.axhline(floor[metric], color="black", linestyle="--", linewidth=1,
                       label="empty Triton kernel")
        ax.set_yscale("log")
        ax.set_ylabel("µs")
        ax.set_title(title)
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0, 0].legend(ncol=len(names) + 1, fontsize="small")
    axes[-1, 0].set_xticks(range(len(cases)))
    axes[-1, 0].set_xticklabels([f"{case['label']} {case['size']}" for case in cases],
                                rotation=60, ha="right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def pyplot():
    """matplotlib's pyplot, drawing to files; None in smoke mode where matplotlib is not
    installed (the package's [bench] extra installs it): the test suite runs the smoke modes
    without it, and a smoke run's plot shows nothing anyway."""
    try:
        import matplotlib
    except ImportError:
        if SMOKE:
            return None
        raise
    matplotlib.use("Agg")
    import matplotlib.pyplot
    return matplotlib.pyplot


def copy_to_out(paths):
    """Copy the result files (those written) to $OUT when it is set and is not where they
    already are."""
    out = os.environ.get("OUT")
    if out and Path(out).resolve() != Path(paths[0]).parent.resolve():
        Path(out).mkdir(parents=True, exist_ok=True)
        for path in paths:
            if Path(path).exists():
                shutil.copy(path, out)


def machine_info():
    return {
        "gpu": None if SMOKE else torch.cuda.get_device_name(),
        "cuda": torch.version.cuda,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "smoke": SMOKE,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help="small CPU inputs: check compositions and code paths, no GPU timing "
                             "(automatic without CUDA)")
    parser.add_argument("--results-dir", type=Path,
                        help=f"where the JSON and PNG go (default {RESULTS_DIR}; a temporary "
                             f"directory in smoke mode); also copied to $OUT when set")
    args = parser.parse_args()
    results_dir = args.results_dir or (Path(tempfile.mkdtemp()) if SMOKE else RESULTS_DIR)

    started = time.perf_counter()
    floor = None if SMOKE else empty_kernel_floor()
    cases = []
    for op in OPS:
        for num_reqs, tokens_per_req, size in _batches(op):
            cases.append(bench_case(op, num_reqs, tokens_per_req, size))
            print(f"[{time.perf_counter() - started:6.1f} s] {op.label} {size}", file=sys.stderr,
                  flush=True)
    targets = evaluate_targets(cases, floor)

    stem = "bench_ops_smoke" if SMOKE else "bench_ops"
    results_dir.mkdir(parents=True, exist_ok=True)
    paths = [results_dir / f"{stem}.json", results_dir / f"{stem}.png"]
    report = {"machine": machine_info(),
              "config": {"K": K, "num_steps": NUM_STEPS, "block_size": BLOCK_SIZE,
                         "max_model_len": MAX_MODEL_LEN, "vocab_size": VOCAB_SIZE,
                         "host_calls": HOST_CALLS, "host_repeats": HOST_REPEATS,
                         "graph_calls": GRAPH_CALLS, "graph_replays": GRAPH_REPLAYS,
                         "seconds": round(time.perf_counter() - started, 1)},
              "empty_kernel": floor, "cases": cases, "targets": targets}
    paths[0].write_text(json.dumps(report, indent=1))
    plot(cases, floor, paths[1])
    copy_to_out(paths)

    print(json.dumps(report["machine"]))
    print_results(cases, floor)
    print(f"\nwrote {', '.join(map(str, paths))} in {report['config']['seconds']} s")
    print_summary(cases, targets)
    failed = any(case["mismatches"] for case in cases) or any(
        "error" in time_ for case in cases for time_ in case["times"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
