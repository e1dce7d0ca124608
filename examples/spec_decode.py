"""Speculative decoding with spec_ops: a serving engine's step, three ways to draft.

A tiny target model and a tiny drafter (decoder-only transformers, seeded random weights,
float64) serve a batch of requests. Both keep their keys and values only in a paged KV cache:
blocks from one shared pool, a block table per batch row, a slot mapping per batch. Each
engine step:

  1. verify: the target reads, per request, its last token and its K drafts (or a chunk of its
     prompt); greedy acceptance keeps the drafts that match the target's own argmax;
  2. spec_ops turns that result into the drafter's seeds: the next token, the index of the last
     accepted token, the number of rejected tokens (1.1 + 1.2, or the fused 5.1);
  3. the drafter proposes K new drafts per request:
       eagle     chain EAGLE: a first pass over the verify batch, then K - 1 autoregressive
                 steps (1.5 per step, or 5.2 for every step at once);
       parallel  parallel drafting: one pass with K - 1 mask tokens per request
                 (1.3 + 1.7 + extend_all_queries_by_N);
       dflash    DFlash-style: the target's hidden states become the drafter's K/V, then one
                 pass of K + 1 query tokens per request (1.4 + dflash_query_metadata).
       eagle-mrope  chain EAGLE on requests whose prompts carry an image: the models rotate by
                 M-RoPE positions (temporal, height, width), which after the image trail the
                 token index, so each draft step is docs/mrope.md's 7.1 (slots from the index).
                 It also counts what slots from the temporal position would have overwritten.
  With --round-ops, steps 2 and 3's bookkeeping is one launch per round instead: the round op
  of the mode (docs/round_ops.md: 6.1 prepare_eagle_round, which also computes every draft
  step's positions, slots and seq_lens; 6.2 prepare_parallel_round; 6.3
  prepare_dflash_round), its outputs turned into attention metadata by the round adapters.

Prompts differ in length (long ones are prefilled in chunks) and so do token budgets, so the
batch shrinks and rows move as requests finish. Whatever the drafts, the generated tokens must
equal greedy decoding with the target alone; the program checks that and exits 1 otherwise.
Per mode it prints tokens/s, the mean accepted length and the share of step time spent in
spec_ops calls. With --device cuda the chain-EAGLE draft steps run as CUDA graphs.

    python examples/spec_decode.py [--mode {eagle,parallel,dflash,eagle-mrope,all}]
                                   [--fused | --round-ops] [--device cuda]
                                   [--num-requests N] [--seed S]
                                   [--no-progress]
"""

import argparse
import contextlib
import copy
import dataclasses
import math
import os
import sys
import time
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # a checkout
import spec_ops  # noqa: E402

MODES = ("eagle", "parallel", "dflash")
MROPE_MODE = "eagle-mrope"      # chain EAGLE over requests with images (docs/mrope.md)


@dataclasses.dataclass(frozen=True)
class Config:
    """Model sizes and engine settings."""

    vocab_size: int = 64
    hidden_size: int = 64
    num_heads: int = 4
    num_target_layers: int = 2
    draft_noise: float = 0.3            # noise on the drafters' copy of the target, per std
    num_speculative_tokens: int = 3     # K
    block_size: int = 4
    max_model_len: int = 128
    prefill_chunk_size: int = 8
    end_token_id: int = 1
    padding_token_id: int = 0

    @property
    def mask_token_id(self):
        """The drafters' one extra token: a slot to fill (parallel drafting, DFlash)."""
        return self.vocab_size


# --- models ------------------------------------------------------------------------------------

def rms_norm(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * weight


def rotary(x, positions):
    """Rotary position embedding of [tokens, heads, head_dim]: channel pair i of a token at
    position p turns by the angle p * 10000^(-i / (head_dim / 2)). With M-RoPE positions
    [3, T] (temporal, height, width) each axis turns a third of the pairs: pair i takes the
    position of axis 3i // (head_dim / 2), so text (three equal positions) turns as with [T]."""
    half = x.shape[-1] // 2
    pairs = torch.arange(half, device=x.device)
    frequency = 10000.0 ** (-pairs.to(x.dtype) / half)
    if positions.dim() == 1:
        positions = positions[None]                                       # one axis for all
    axis = pairs * positions.shape[0] // half                             # [half]
    angle = (positions[axis].T.to(x.dtype) * frequency)[:, None, :]      # [T, 1, half]
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def mrope_position(image, index):
    """(temporal, height, width) of the token at `index` in a sequence whose image span is
    `image` = (first, height, width), or None. Text before the image counts like its index;
    the image's tokens share the temporal position `first` and count their row and column
    from it; text after it resumes at first + max(height, width), so it trails its index by
    height * width - max(height, width)."""
    if image is None or index < image[0]:
        return index, index, index
    first, height, width = image
    patch = index - first
    if patch < height * width:
        return first, first + patch // width, first + patch % width
    return (index - height * width + max(height, width),) * 3


def greedy(logits):
    return logits.argmax(dim=-1).to(torch.int32)


class DecoderLayer(nn.Module):
    """A pre-norm transformer layer. Where past keys and values live is the business of the
    `attention(layer_index, q, k, v)` callable it is given (PagedAttention, or plain causal
    attention for the reference)."""

    def __init__(self, hidden_size, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.attention_norm = nn.Parameter(torch.ones(hidden_size))
        self.qkv = nn.Linear(hidden_size, 3 * hidden_size, bias=False)
        self.out = nn.Linear(hidden_size, hidden_size, bias=False)
        self.mlp_norm = nn.Parameter(torch.ones(hidden_size))
        self.up = nn.Linear(hidden_size, 4 * hidden_size, bias=False)
        self.down = nn.Linear(4 * hidden_size, hidden_size, bias=False)

    def query_key_value(self, x, positions):
        """Queries, keys and values, [T, heads, head_dim] each, rotated to their positions."""
        qkv = self.qkv(rms_norm(x, self.attention_norm)).unflatten(-1, (3, self.num_heads, -1))
        q, k, v = qkv.unbind(1)
        return rotary(q, positions), rotary(k, positions), v

    def forward(self, x, positions, attention, layer_index):
        q, k, v = self.query_key_value(x, positions)
        x = x + self.out(attention(layer_index, q, k, v).flatten(1))
        return x + self.down(F.gelu(self.up(rms_norm(x, self.mlp_norm))))


def run_layers(layers, x, positions, attention):
    for layer_index, layer in enumerate(layers):
        x = layer(x, positions, attention, layer_index)
    return x


class TargetModel(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config.hidden_size, config.num_heads)
                                    for _ in range(config.num_target_layers))
        self.norm = nn.Parameter(torch.ones(config.hidden_size))
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    def forward(self, input_ids, positions, attention):
        """The last layer's hidden states, [T, hidden]: what the drafters read."""
        return run_layers(self.layers, self.embed(input_ids), positions, attention)

    def logits(self, hidden):
        return self.lm_head(rms_norm(hidden, self.norm))


def noisy_copy(module, noise):
    """module's weights plus Gaussian noise of `noise` times each weight's own std."""
    module = copy.deepcopy(module)
    with torch.no_grad():
        for weight in module.parameters():
            weight.add_(noise * weight.std() * torch.randn_like(weight))
    return module


class EagleDrafter(nn.Module):
    """EAGLE: reads the token at position p + 1 fused with a hidden state at p (the target's in
    a first pass, its own output in later steps) and predicts the token at p + 2.

    It shares the target's embedding and LM head. Its layers are a noisy copy of the
    target's: the simplest way to get drafts that are often, not always, right (a real
    drafter is trained, and much smaller). Parallel drafting fills its mask slots with the
    mask token and `mask_hidden` in place of a target hidden state.
    """

    def __init__(self, target, config):
        super().__init__()
        size = config.hidden_size
        # The target's token embedding, plus a row for parallel drafting's mask token.
        self.embed = nn.Embedding.from_pretrained(
            torch.cat([target.embed.weight, torch.randn(1, size)]))
        self.fuse = nn.Linear(2 * size, size, bias=False)       # [embedding, hidden] -> hidden
        with torch.no_grad():
            self.fuse.weight.copy_(torch.cat(
                [torch.eye(size), 0.1 * torch.randn(size, size) / math.sqrt(size)], dim=1))
        self.layers = nn.ModuleList(noisy_copy(layer, config.draft_noise)
                                    for layer in target.layers)
        self.mask_hidden = nn.Parameter(torch.randn(size))
        self.logits = target.logits

    def forward(self, input_ids, positions, hidden, attention):
        x = self.fuse(torch.cat([self.embed(input_ids), hidden], dim=-1))
        return run_layers(self.layers, x, positions, attention)


class DFlashDrafter(nn.Module):
    """DFlash-style block drafter: the target's hidden state at each verified position becomes
    every layer's K/V there (the "context"); a block of K + 1 queries [next token, mask, ...,
    mask] attends to the context and, both ways, within the block, and the mask at position p
    predicts the token at p. Its layers are a noisy copy of the target's.

    A trained drafter learns to read the block's first token from its masks; this untrained one
    gets that wired in: every query of a block starts from the embedding of its first token.
    """

    def __init__(self, target, config):
        super().__init__()
        size = config.hidden_size
        self.num_queries = config.num_speculative_tokens + 1
        self.embed = target.embed
        self.context = nn.Linear(size, size, bias=False)    # target hidden -> layer input
        with torch.no_grad():
            self.context.weight.copy_(
                torch.eye(size) + config.draft_noise * torch.randn(size, size) / math.sqrt(size))
        self.layers = nn.ModuleList(noisy_copy(layer, config.draft_noise)
                                    for layer in target.layers)
        self.logits = target.logits

    def write_context(self, target_hidden, positions, slot_mapping, cache):
        context = self.context(target_hidden)
        for layer_index, layer in enumerate(self.layers):
            _, key, value = layer.query_key_value(context, positions)
            cache.write(layer_index, slot_mapping, key, value)

    def forward(self, input_ids, positions, attention):
        first_token_ids = input_ids.view(-1, self.num_queries)[:, :1]      # [R, 1]
        x = self.embed(first_token_ids.expand(-1, self.num_queries).flatten())
        return run_layers(self.layers, x, positions, attention)


def build_models(config, seed, device):
    """The target and its drafters (EAGLE, also used for parallel drafting, and DFlash),
    seeded, in float64 on `device`."""
    torch.manual_seed(seed)
    target = TargetModel(config).double()
    drafters = {"eagle": EagleDrafter(target, config).double(),
                "dflash": DFlashDrafter(target, config).double()}
    return target.to(device), {mode: drafter.to(device) for mode, drafter in drafters.items()}


# --- paged KV cache ------------------------------------------------------------------------------

class BlockTable:
    """Which KV-cache blocks each batch row owns, from one pool shared by every request.

    Both models' caches are indexed by the same block ids (as in vLLM), so one table serves
    the target and the drafter. The host lists decide; `tensor` is the device copy the kernels
    read, [max_num_reqs, max_model_len / block_size] int32, persistent so that CUDA graphs can
    read it by address. Rows move up when earlier rows finish.
    """

    def __init__(self, num_blocks, max_num_reqs, config, device):
        self.block_size = config.block_size
        self.free_blocks = list(range(num_blocks - 1, -1, -1))
        self.rows = []                                              # per row: its block ids
        max_blocks_per_req = -(-config.max_model_len // config.block_size)
        self.host = torch.zeros(max_num_reqs, max_blocks_per_req, dtype=torch.int32)
        self.tensor = self.host.to(device)

    def add_row(self):
        self.rows.append([])

    def reserve(self, row, num_tokens):
        """Own enough blocks for positions [0, num_tokens)."""
        blocks = self.rows[row]
        while len(blocks) * self.block_size < num_tokens:
            if not self.free_blocks:
                raise RuntimeError("the KV cache is out of blocks")
            self.host[row, len(blocks)] = self.free_blocks[-1]
            blocks.append(self.free_blocks.pop())

    def remove_rows(self, finished_rows):
        """Free the finished rows' blocks and move the remaining rows up, in order."""
        for row in finished_rows:
            self.free_blocks.extend(self.rows[row])
        kept = [row for row in range(len(self.rows)) if row not in finished_rows]
        self.rows = [self.rows[row] for row in kept]
        self.host[:len(kept)] = self.host[kept].clone()
        self.host[len(kept):] = 0

    def upload(self):
        self.tensor.copy_(self.host)

    def slot_mapping(self, rows, positions):
        """slot(row, p) = block_table[row, p // block_size] * block_size + p % block_size."""
        block_ids = self.tensor[rows, positions // self.block_size].long()
        return block_ids * self.block_size + positions % self.block_size


class PagedKVCache:
    """One model's keys and values, every layer, in blocks of block_size token slots.

    Slot s = block * block_size + offset holds one token's K/V. A batch writes to the slots of
    its slot mapping (-1: do not write); a query reads its request's keys back through the
    block table.
    """

    def __init__(self, num_layers, num_blocks, config, device):
        self.block_size = config.block_size
        num_slots = num_blocks * config.block_size
        # The slot past the end takes the writes of padding tokens (slot -1), so a write has no
        # data-dependent branch and can be captured in a CUDA graph. Nothing reads it.
        self.padding_slot = num_slots
        head_dim = config.hidden_size // config.num_heads
        shape = (num_layers, num_slots + 1, config.num_heads, head_dim)
        self.key = torch.zeros(shape, dtype=torch.float64, device=device)
        self.value = torch.zeros_like(self.key)

    def write(self, layer, slot_mapping, key, value):
        slots = torch.where(slot_mapping == spec_ops.PADDING_SLOT_ID, self.padding_slot,
                            slot_mapping)
        self.key[layer].index_copy_(0, slots, key)
        self.value[layer].index_copy_(0, slots, value)

    def attend(self, layer, query, cad, query_positions):
        """softmax(q k / sqrt(d)) v for each query token over its request's keys at positions
        < seq_len, and <= its own position when cad.causal. Keys are gathered through the
        block table up to cad.max_seq_len (any upper bound of seq_lens is correct)."""
        num_tokens = query.shape[0]
        token_ids = torch.arange(num_tokens, device=query.device, dtype=cad.query_start_loc.dtype)
        request = torch.searchsorted(cad.query_start_loc[1:], token_ids, right=True)   # [T]
        key_positions = torch.arange(cad.max_seq_len, device=query.device)              # [S]
        block_ids = cad.block_table_tensor[request][:, key_positions // self.block_size]
        slots = block_ids.long() * self.block_size + key_positions % self.block_size    # [T, S]
        keys, values = self.key[layer][slots], self.value[layer][slots]           # [T, S, H, D]
        visible = key_positions < cad.seq_lens[request][:, None]                        # [T, S]
        if cad.causal:
            visible = visible & (key_positions <= query_positions[:, None])
        scores = torch.einsum("thd,tshd->ths", query, keys) / math.sqrt(query.shape[-1])
        scores = scores.masked_fill(~visible[:, None, :], -math.inf)
        return torch.einsum("ths,tshd->thd", scores.softmax(dim=-1), values)


class PagedAttention:
    """The attention one forward pass of a batch uses: write K/V by slot mapping, then attend."""

    def __init__(self, cache, cad, positions):
        self.cache, self.cad, self.positions = cache, cad, positions

    def __call__(self, layer, query, key, value):
        self.cache.write(layer, self.cad.slot_mapping, key, value)
        return self.cache.attend(layer, query, self.cad, self.positions)


# --- measurement and CUDA graphs ---------------------------------------------------------------

class StepTimer:
    """Time inside spec_ops calls and inside whole engine steps. CPU: perf_counter. CUDA: event
    pairs on the stream, read once at the end (reading them per call would sync)."""

    def __init__(self, device):
        self.cuda = device.type == "cuda"
        self.reset()

    def reset(self):
        self.seconds = {"spec_ops": 0.0, "step": 0.0}
        self.events = {"spec_ops": [], "step": []}

    @contextlib.contextmanager
    def measure(self, kind):
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            self.events[kind].append((start, end))
        else:
            start = time.perf_counter()
            yield
            self.seconds[kind] += time.perf_counter() - start

    def total(self, kind):
        if self.cuda:
            torch.cuda.synchronize()
            return sum(start.elapsed_time(end) for start, end in self.events[kind]) / 1000
        return self.seconds[kind]


class Progress:
    """Requests finished out of all of a run's requests, as one "\r" line on stderr. Shown only
    when stderr is a terminal, and erased at the end, so a log gets the result lines alone."""

    def __init__(self, total, label, enabled=True):
        self.total, self.label, self.done = total, label, 0
        self.enabled = enabled and sys.stderr.isatty()
        self.width = 0

    def __enter__(self):
        self.show()
        return self

    def __exit__(self, *exc_info):
        self.write("")

    def update(self, count=1):
        self.done += count
        self.show()

    def show(self):
        self.write(f"{self.label:>9}: {self.done}/{self.total} requests finished")

    def write(self, line):
        if self.enabled:
            sys.stderr.write("\r" + line.ljust(self.width) + ("\r" if not line else ""))
            sys.stderr.flush()
            self.width = max(self.width, len(line))


class CudaGraphs:
    """Runs a draft-step function as a CUDA graph, one per key (batch size, step).

    The first call of a key runs the function eagerly (the real work; it also compiles the
    Triton kernels), then captures it; later calls replay the capture, which reads and writes
    the same persistent buffers. On CPU the function simply runs.
    """

    def __init__(self, device):
        self.enabled = device.type == "cuda"
        self.graphs = {}

    def run(self, key, fn):
        if not self.enabled:
            fn()
        elif key in self.graphs:
            self.graphs[key].replay()
        else:
            fn()
            self.graphs[key] = self.capture(fn)

    @staticmethod
    def capture(fn):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        return graph


# --- the engine ----------------------------------------------------------------------------------

@dataclasses.dataclass
class Request:
    prompt: list
    max_new_tokens: int
    output: list = dataclasses.field(default_factory=list)
    num_computed: int = 0           # tokens whose K/V the target cache holds
    draft_token_ids: list = dataclasses.field(default_factory=list)   # to verify next step
    image: tuple = None             # (first index, height, width) of an image span (M-RoPE)

    @property
    def tokens(self):
        return self.prompt + self.output

    def finished(self, end_token_id):
        return (len(self.output) >= self.max_new_tokens
                or self.output[-1:] == [end_token_id])


@dataclasses.dataclass
class VerifyBatch:
    """The target's input for one engine step and what verification needs to know of it."""

    input_ids: torch.Tensor              # [T] int32: per request a prompt chunk, or its last
    #                                      token and drafts
    positions: torch.Tensor              # [T] int64
    rotary_positions: torch.Tensor       # positions, or [3, T] M-RoPE positions (eagle-mrope)
    cad: spec_ops.CommonAttentionMetadata
    num_draft_tokens: torch.Tensor       # [R] int32
    cu_num_draft_tokens: torch.Tensor    # [R] int32, inclusive cumsum
    discard_request_mask: torch.Tensor   # [R] bool: partial prefills (their token is not kept)
    backup_next_token_ids: torch.Tensor  # [R] int32
    query_lens: list                     # [R] host ints
    is_partial_prefill: list             # [R] host bools: discard_request_mask's host copy


@dataclasses.dataclass
class DrafterSeeds:
    """What 1.1 + 1.2 (or 5.1) hand the drafter, [R] int32 each."""

    next_token_ids: torch.Tensor           # the token after each request's last accepted one
    token_indices_to_sample: torch.Tensor  # that last accepted token's index in the batch
    num_rejected_tokens: torch.Tensor


def greedy_verify(target, target_hidden, batch, num_speculative_tokens):
    """Verification with greedy acceptance, in the rejection sampler's output format.

    For a request with d drafts, the target's argmax at its last d + 1 tokens is g_0..g_d;
    draft j is accepted while it equals g_j, a of them in all. Its row of the result is
    [g_0, ..., g_a, -1, ...]: the accepted drafts, then the target's token at the first
    mismatch (or the bonus token when all d are accepted), -1 for the rest. [R, K + 1] int32.
    """
    query_start_loc = batch.cad.query_start_loc.long()
    last = query_start_loc[1:, None] - 1                                  # [R, 1]
    first = last - batch.num_draft_tokens[:, None]                        # [R, 1]
    columns = torch.arange(num_speculative_tokens + 1, device=last.device)
    index = torch.minimum(first + columns, last)                          # [R, K + 1]
    target_token_ids = greedy(target.logits(target_hidden[index]))       # [R, K + 1]
    draft_token_ids = batch.input_ids[torch.minimum(index + 1, last)]     # draft j at column j
    is_draft = columns < batch.num_draft_tokens[:, None]
    matches = (draft_token_ids == target_token_ids) & is_draft
    num_accepted = matches.int().cumprod(dim=1).sum(dim=1, keepdim=True)  # [R, 1]
    return torch.where(columns <= num_accepted, target_token_ids, -1).to(torch.int32)


class ChainEagleProposer:
    """Chain EAGLE: a first pass over the verify batch, then K - 1 autoregressive steps.

    First pass (padded drafter batch; no op needed): the verify batch itself, each token
    replaced by its successor, so the target's hidden state at p meets the token at p + 1.
    Rejected tokens stay in; their K/V land beyond the decode seq_lens and are overwritten by
    later passes. The first draft is read at token_indices_to_sample. Each further step:
    1.5 moves every request one position on (or 5.2 has computed every step's positions,
    slots and seq_lens up front); the drafter reads its last draft and its own hidden state.
    With round ops, 6.1 computes the seeds, the first pass's inputs and every step's metadata
    in one launch (propose_round).
    """

    def __init__(self, drafter, cache, config, timer, max_num_reqs, max_num_tokens, device,
                 fused):
        self.drafter, self.cache, self.config = drafter, cache, config
        self.timer, self.fused = timer, fused
        self.graphs = CudaGraphs(device)
        num_steps = config.num_speculative_tokens - 1
        self.arange = torch.arange(max_num_reqs + 1, dtype=torch.int32, device=device)
        # The decode steps' state, persistent: CUDA graphs read it by address.
        int64 = dict(dtype=torch.int64, device=device)
        self.input_ids = torch.zeros(max_num_reqs, dtype=torch.int32, device=device)  # last draft
        self.hidden = torch.zeros(max_num_reqs, config.hidden_size, dtype=torch.float64,
                                  device=device)                                  # [R, hidden]
        self.positions = torch.zeros(max_num_reqs, **int64)
        self.seq_lens = torch.zeros(max_num_reqs, dtype=torch.int32, device=device)
        self.slot_mapping = torch.zeros(max_num_reqs, **int64)
        self.step_positions = torch.zeros(num_steps, max_num_reqs, **int64)      # 5.2 outs
        self.step_slot_mapping = torch.zeros(num_steps, max_num_reqs, **int64)
        self.step_seq_lens = torch.zeros(num_steps, max_num_reqs, dtype=torch.int32,
                                         device=device)
        self.draft_token_ids = torch.zeros(max_num_reqs, config.num_speculative_tokens,
                                           dtype=torch.int32, device=device)
        # 6.1's first-pass outs
        self.token_indices_to_sample = torch.zeros(max_num_reqs, dtype=torch.int32,
                                                   device=device)
        self.first_pass_input_ids = torch.zeros(max_num_tokens, dtype=torch.int32,
                                                device=device)
        self.first_pass_positions = torch.zeros(max_num_tokens, **int64)
        self.first_pass_slot_mapping = torch.zeros(max_num_tokens, **int64)

    def first_pass(self, batch, target_hidden, seeds):
        """The first draft, over the verify batch; leaves the draft steps' state (last draft,
        hidden state, positions, seq_lens) in the persistent buffers and returns the steps'
        metadata."""
        num_reqs = batch.cad.num_reqs
        sample = seeds.token_indices_to_sample
        input_ids = batch.input_ids.roll(-1)
        input_ids[sample] = seeds.next_token_ids
        attention = PagedAttention(self.cache, batch.cad, batch.positions)
        hidden = self.drafter(input_ids, batch.rotary_positions, target_hidden,
                              attention)[sample]
        self.input_ids[:num_reqs] = greedy(self.drafter.logits(hidden))
        self.hidden[:num_reqs] = hidden
        self.positions[..., :num_reqs] = batch.rotary_positions[..., sample]
        self.draft_token_ids[:num_reqs, 0] = self.input_ids[:num_reqs]

        with self.timer.measure("spec_ops"):
            cad = spec_ops.draft_decode_metadata(batch.cad, self.arange,
                                                 seeds.num_rejected_tokens)
        # seq_lens move to a persistent buffer: 1.5 updates them in place, and CUDA
        # graphs read them by address.
        self.seq_lens[:num_reqs] = cad.seq_lens
        cad = cad.replace(seq_lens=self.seq_lens[:num_reqs])
        if self.graphs.enabled:
            # A graph replays at later steps with longer sequences: gather up to the longest.
            cad = cad.replace(max_seq_len=self.config.max_model_len)
        return cad

    def propose(self, batch, target_hidden, seeds):
        cad = self.first_pass(batch, target_hidden, seeds)
        num_reqs = cad.num_reqs
        if self.fused:
            with self.timer.measure("spec_ops"):
                self.graphs.run(("all steps", num_reqs), partial(self.all_steps_metadata, cad))
        for step in range(self.config.num_speculative_tokens - 1):
            with self.timer.measure("spec_ops"):
                if self.fused:
                    cad = spec_ops.advance_draft_step_metadata(
                        cad, self.step_slot_mapping[step], self.config.max_model_len,
                        seq_lens=self.step_seq_lens[step])
                    positions = self.step_positions[step, :num_reqs]
                else:
                    self.graphs.run(("step", num_reqs), partial(self.step_metadata, cad))
                    cad = spec_ops.advance_draft_step_metadata(cad, self.slot_mapping,
                                                               self.config.max_model_len)
                    positions = self.positions[:num_reqs]
            self.graphs.run(("draft", num_reqs, step),
                            partial(self.draft_step, cad, positions, step))
        return self.draft_token_ids[:num_reqs]

    def propose_round(self, batch, target_hidden, sampled_token_ids, next_token_ids,
                      valid_sampled_tokens_count):
        """6.1: one launch gives the seeds, the first pass's shifted input ids, positions
        and slot mapping, and every draft step's positions, slots and seq_lens (rows of the
        step outs). Each step copies its positions into the buffer its forward reads."""
        config = self.config
        num_reqs, num_tokens = batch.cad.num_reqs, batch.cad.num_actual_tokens
        with self.timer.measure("spec_ops"):
            spec_ops.prepare_eagle_round(
                sampled_token_ids, batch.discard_request_mask, batch.backup_next_token_ids,
                batch.cu_num_draft_tokens, batch.cad.query_start_loc, batch.input_ids,
                batch.positions, batch.cad.slot_mapping, batch.cad.block_table_tensor,
                batch.cad.seq_lens, next_token_ids, valid_sampled_tokens_count,
                self.token_indices_to_sample, self.first_pass_input_ids,
                self.first_pass_positions, self.first_pass_slot_mapping, self.step_positions,
                self.step_slot_mapping, self.step_seq_lens, config.vocab_size,
                config.block_size, config.max_model_len, config.num_speculative_tokens - 1)
            cad = spec_ops.eagle_round_metadata(batch.cad, self.first_pass_slot_mapping)
        sample = self.token_indices_to_sample[:num_reqs]
        positions = self.first_pass_positions[:num_tokens]
        attention = PagedAttention(self.cache, cad, positions)
        hidden = self.drafter(self.first_pass_input_ids[:num_tokens], positions, target_hidden,
                              attention)[sample]
        self.input_ids[:num_reqs] = greedy(self.drafter.logits(hidden))
        self.hidden[:num_reqs] = hidden
        self.draft_token_ids[:num_reqs, 0] = self.input_ids[:num_reqs]

        for step in range(config.num_speculative_tokens - 1):
            with self.timer.measure("spec_ops"):
                step_cad = spec_ops.draft_step_metadata(
                    batch.cad, step, self.arange, self.step_slot_mapping, self.step_seq_lens,
                    config.max_model_len)
            if self.graphs.enabled:
                # A graph replays at later steps with longer sequences: gather up to the longest.
                step_cad = step_cad.replace(max_seq_len=config.max_model_len)
            self.positions[:num_reqs].copy_(self.step_positions[step, :num_reqs])
            self.graphs.run(("draft", num_reqs, step),
                            partial(self.draft_step, step_cad, self.positions[:num_reqs], step))
        return self.draft_token_ids[:num_reqs]

    def step_metadata(self, cad):
        """1.5: positions (in place), seq_lens (in place) and slot mapping of one step."""
        num_reqs = cad.num_reqs
        spec_ops.eagle_step_update_slot_mapping_and_metadata(
            self.positions[:num_reqs], cad.block_table_tensor, self.seq_lens[:num_reqs],
            self.config.block_size, self.config.max_model_len, self.positions[:num_reqs],
            self.slot_mapping)

    def all_steps_metadata(self, cad):
        """5.2: every step's positions, slot mapping and seq_lens in one launch."""
        num_reqs = cad.num_reqs
        spec_ops.eagle_multi_step_slot_mapping(
            self.positions[:num_reqs], cad.block_table_tensor, self.seq_lens[:num_reqs],
            self.config.block_size, self.config.max_model_len,
            self.config.num_speculative_tokens - 1, self.step_positions,
            self.step_slot_mapping, self.step_seq_lens)

    def draft_step(self, cad, positions, step):
        """The drafter reads its last draft at its new position; the argmax is the next draft
        (column step + 1 of draft_token_ids)."""
        num_reqs = cad.num_reqs
        # The query is its sequence's last token, index seq_len - 1 (M-RoPE positions trail it).
        attention = PagedAttention(self.cache, cad, cad.seq_lens - 1)
        hidden = self.drafter(self.input_ids[:num_reqs], positions, self.hidden[:num_reqs],
                              attention)
        self.hidden[:num_reqs].copy_(hidden)
        self.input_ids[:num_reqs].copy_(greedy(self.drafter.logits(hidden)))
        self.draft_token_ids[:num_reqs, step + 1].copy_(self.input_ids[:num_reqs])


class MropeChainEagleProposer(ChainEagleProposer):
    """Chain EAGLE over requests with images: the draft steps carry M-RoPE positions [3, R]
    and each is 7.1 (5.2 and 6.1 step 1-D positions only), whose slot comes from the
    token index seq_len, not from a position.

    Before each step it also runs the engines' way, 1.5 on the temporal row, and counts
    in `engines_way` (on the device) the drafts whose slot would differ from 7.1's and those
    whose slot already holds an earlier token's K/V.
    """

    def __init__(self, drafter, cache, config, timer, max_num_reqs, max_num_tokens, device,
                 fused):
        super().__init__(drafter, cache, config, timer, max_num_reqs, max_num_tokens, device,
                         fused=False)
        self.positions = torch.zeros(3, max_num_reqs, dtype=torch.int64, device=device)
        self.engines_way = torch.zeros(2, dtype=torch.int64, device=device)

    def propose(self, batch, target_hidden, seeds):
        cad = self.first_pass(batch, target_hidden, seeds)
        num_reqs = cad.num_reqs
        for step in range(self.config.num_speculative_tokens - 1):
            self.graphs.run(("engines' way", num_reqs), partial(self.count_engines_way, cad))
            with self.timer.measure("spec_ops"):
                self.graphs.run(("step", num_reqs), partial(self.step_metadata, cad))
                cad = spec_ops.advance_mrope_draft_step_metadata(cad, self.slot_mapping,
                                                                 self.config.max_model_len)
            self.graphs.run(("draft", num_reqs, step),
                            partial(self.draft_step, cad, self.positions[:, :num_reqs], step))
        return self.draft_token_ids[:num_reqs]

    def step_metadata(self, cad):
        """7.1: M-RoPE positions (in place), seq_lens (in place) and slot mapping."""
        num_reqs = cad.num_reqs
        positions = self.positions[:, :num_reqs]
        spec_ops.eagle_mrope_step_update_slot_mapping_and_metadata(
            positions, cad.block_table_tensor, self.seq_lens[:num_reqs], self.config.block_size,
            self.config.max_model_len, positions, self.slot_mapping)

    def count_engines_way(self, cad):
        """1.5 on the temporal row takes the slot of its next position; 7.1 takes that of the
        index seq_len, which is 1.5's from seq_len - 1 (docs/mrope.md, relation to 1.5)."""
        num_reqs, config = cad.num_reqs, self.config
        seq_lens = self.seq_lens[:num_reqs]

        def step(positions):
            """1.5's next positions and slots, on copies (the step's state stays as it is)."""
            next_positions, slots = torch.empty_like(positions), torch.empty_like(positions)
            spec_ops.eagle_step_update_slot_mapping_and_metadata(
                positions, cad.block_table_tensor, seq_lens.clone(), config.block_size,
                config.max_model_len, next_positions, slots)
            return next_positions, slots

        temporal, engines_slots = step(self.positions[0, :num_reqs])
        _, slots = step(seq_lens.long() - 1)
        differ = engines_slots != slots
        collide = differ & (temporal < seq_lens)        # the slot of a token before this one
        self.engines_way += torch.stack([differ.sum(), collide.sum()])


class ParallelProposer:
    """Parallel drafting (P-EAGLE): one pass proposes all K drafts.

    1.3 lays each request out as its accepted tokens shifted by one, the next token, then
    K - 1 mask tokens at the following positions, then its rejected tokens as padding (slot
    -1, via 1.7). The target's hidden states follow their tokens; mask slots read the
    drafter's mask_hidden. The drafts are read at the next token and at every mask. With round
    ops, 6.2 does all of it, and the seeds, in one launch (propose_round).
    """

    def __init__(self, drafter, cache, config, timer, max_num_reqs, max_num_tokens, device):
        self.drafter, self.cache, self.config, self.timer = drafter, cache, config, timer
        num_slots = config.num_speculative_tokens    # per request: next token + K - 1 masks
        max_num_outputs = max_num_tokens + max_num_reqs * (num_slots - 1)
        self.arange = torch.arange(max_num_reqs + 1, dtype=torch.int32, device=device)
        self.input_ids = torch.zeros(max_num_outputs, dtype=torch.int32, device=device)
        self.positions = torch.zeros(max_num_outputs, dtype=torch.int64, device=device)
        self.is_rejected_token_mask = torch.zeros(max_num_outputs, dtype=torch.bool,
                                                  device=device)
        self.is_masked_token_mask = torch.zeros_like(self.is_rejected_token_mask)
        self.new_token_indices = torch.zeros(max_num_reqs * num_slots, dtype=torch.int32,
                                             device=device)
        self.hidden_state_mapping = torch.zeros(max_num_tokens, dtype=torch.int32,
                                                device=device)
        # 6.2's own outs: the metadata fields it computes; no draft steps (empty).
        self.slot_mapping = torch.zeros(max_num_outputs, dtype=torch.int64, device=device)
        self.query_start_loc = torch.zeros(max_num_reqs + 1, dtype=torch.int32, device=device)
        self.seq_lens = torch.zeros(max_num_reqs, dtype=torch.int32, device=device)
        self.no_steps = [torch.empty(0, 0, dtype=dtype, device=device)
                         for dtype in (torch.int64, torch.int64, torch.int32)]

    def propose(self, batch, target_hidden, seeds):
        config = self.config
        num_reqs, num_tokens = batch.cad.num_reqs, batch.cad.num_actual_tokens
        num_slots = config.num_speculative_tokens
        num_outputs = num_tokens + num_reqs * (num_slots - 1)
        with self.timer.measure("spec_ops"):
            spec_ops.copy_and_expand_eagle_inputs(
                batch.input_ids, batch.positions, seeds.next_token_ids, self.input_ids,
                self.positions, self.is_rejected_token_mask, self.is_masked_token_mask,
                self.new_token_indices, self.hidden_state_mapping,
                batch.cad.query_start_loc, seeds.token_indices_to_sample,
                padding_token_id=config.padding_token_id,
                parallel_drafting_token_id=config.mask_token_id,
                num_padding_slots_per_request=num_slots, shift_input_ids=True)
            positions = self.positions[:num_outputs]
            slot_mapping = spec_ops.compute_new_slot_mapping(
                batch.cad.block_table_tensor, batch.cad.query_start_loc, positions,
                self.is_rejected_token_mask[:num_outputs], config.block_size,
                num_new_tokens=num_slots - 1, max_model_len=config.max_model_len)
            cad = spec_ops.extend_all_queries_by_N(batch.cad, num_slots - 1, self.arange,
                                                   slot_mapping)
        return self.draft(target_hidden, cad)

    def propose_round(self, batch, target_hidden, sampled_token_ids, next_token_ids,
                      valid_sampled_tokens_count):
        """6.2 with shift and S = K: the seeds, 1.3's layout, 1.7's slot mapping and the
        extended query_start_loc and seq_lens, in one launch."""
        config = self.config
        num_slots = config.num_speculative_tokens
        with self.timer.measure("spec_ops"):
            spec_ops.prepare_parallel_round(
                sampled_token_ids, batch.discard_request_mask, batch.backup_next_token_ids,
                batch.cu_num_draft_tokens, batch.cad.query_start_loc, batch.input_ids,
                batch.positions, batch.cad.block_table_tensor, batch.cad.seq_lens,
                next_token_ids, valid_sampled_tokens_count, self.input_ids, self.positions,
                self.is_masked_token_mask, self.new_token_indices, self.hidden_state_mapping,
                self.slot_mapping, self.query_start_loc, self.seq_lens, *self.no_steps,
                config.vocab_size, config.padding_token_id, config.mask_token_id, num_slots,
                True, config.block_size, config.max_model_len, 0)
            cad = spec_ops.parallel_round_metadata(batch.cad, num_slots - 1,
                                                   self.query_start_loc, self.seq_lens,
                                                   self.slot_mapping)
        return self.draft(target_hidden, cad)

    def draft(self, target_hidden, cad):
        """The one drafting pass over the expanded batch (cad: its metadata)."""
        config = self.config
        num_reqs, num_tokens = cad.num_reqs, target_hidden.shape[0]
        num_slots = config.num_speculative_tokens
        num_outputs = cad.num_actual_tokens
        positions = self.positions[:num_outputs]
        input_hidden = target_hidden.new_zeros(num_outputs, config.hidden_size)
        input_hidden[self.hidden_state_mapping[:num_tokens]] = target_hidden
        input_hidden = torch.where(self.is_masked_token_mask[:num_outputs, None],
                                   self.drafter.mask_hidden, input_hidden)
        attention = PagedAttention(self.cache, cad, positions)
        hidden = self.drafter(self.input_ids[:num_outputs], positions, input_hidden, attention)
        new_tokens = self.new_token_indices[:num_reqs * num_slots]
        return greedy(self.drafter.logits(hidden[new_tokens])).view(num_reqs, num_slots)


class DFlashProposer:
    """DFlash-style drafting: 1.4 gives the context's slots (the target's hidden states
    become the drafter's K/V at the verified positions) and K + 1 queries per request, [next
    token, mask, ...] right after each request's last accepted token; the drafts are read at
    the masks. The query block attends both ways (causal=False). With round ops, 6.3 does the
    bookkeeping, and the seeds, in one launch (propose_round)."""

    def __init__(self, drafter, cache, config, timer, max_num_reqs, max_num_tokens, device):
        self.drafter, self.cache, self.config, self.timer = drafter, cache, config, timer
        num_queries = max_num_reqs * (config.num_speculative_tokens + 1)
        int64 = dict(dtype=torch.int64, device=device)
        self.arange = torch.arange(max_num_reqs + 1, dtype=torch.int32, device=device)
        self.input_ids = torch.zeros(num_queries, dtype=torch.int32, device=device)
        self.context_positions = torch.zeros(max_num_tokens, **int64)
        self.query_positions = torch.zeros(num_queries, **int64)
        self.context_slot_mapping = torch.zeros(max_num_tokens, **int64)
        self.query_slot_mapping = torch.zeros(num_queries, **int64)
        self.token_indices = torch.zeros(max_num_reqs * config.num_speculative_tokens,
                                         dtype=torch.int32, device=device)
        # 6.3's own outs: the query pass's query_start_loc and seq_lens
        self.query_start_loc = torch.zeros(max_num_reqs + 1, dtype=torch.int32, device=device)
        self.seq_lens = torch.zeros(max_num_reqs, dtype=torch.int32, device=device)

    def propose(self, batch, target_hidden, seeds):
        config = self.config
        num_drafts = config.num_speculative_tokens
        num_queries = num_drafts + 1
        with self.timer.measure("spec_ops"):
            spec_ops.copy_and_expand_dflash_inputs(
                seeds.next_token_ids, batch.positions, self.input_ids, self.context_positions,
                self.query_positions, self.context_slot_mapping, self.query_slot_mapping,
                self.token_indices, batch.cad.block_table_tensor, batch.cad.query_start_loc,
                seeds.num_rejected_tokens, parallel_drafting_token_id=config.mask_token_id,
                block_size=config.block_size, num_query_per_req=num_queries,
                num_speculative_tokens=num_drafts)
            cad = spec_ops.dflash_query_metadata(batch.cad, self.arange, num_queries,
                                                 self.query_slot_mapping,
                                                 seeds.num_rejected_tokens)
        return self.draft(target_hidden, cad)

    def propose_round(self, batch, target_hidden, sampled_token_ids, next_token_ids,
                      valid_sampled_tokens_count):
        """6.3: the seeds, 1.4's context and query layout, and the query pass's
        query_start_loc and seq_lens, in one launch."""
        config = self.config
        num_drafts = config.num_speculative_tokens
        with self.timer.measure("spec_ops"):
            spec_ops.prepare_dflash_round(
                sampled_token_ids, batch.discard_request_mask, batch.backup_next_token_ids,
                batch.cu_num_draft_tokens, batch.cad.query_start_loc, batch.positions,
                batch.cad.block_table_tensor, batch.cad.seq_lens, next_token_ids,
                valid_sampled_tokens_count, self.input_ids, self.context_positions,
                self.query_positions, self.context_slot_mapping, self.query_slot_mapping,
                self.token_indices, self.query_start_loc, self.seq_lens, config.vocab_size,
                config.mask_token_id, config.block_size, num_drafts)
            cad = spec_ops.dflash_round_metadata(batch.cad, num_drafts + 1,
                                                 self.query_start_loc, self.seq_lens,
                                                 self.query_slot_mapping)
        return self.draft(target_hidden, cad)

    def draft(self, target_hidden, cad):
        """Write the context's K/V, then the one query pass (cad: its metadata)."""
        num_reqs, num_tokens = cad.num_reqs, target_hidden.shape[0]
        num_drafts = self.config.num_speculative_tokens
        num_queries = num_drafts + 1
        self.drafter.write_context(target_hidden, self.context_positions[:num_tokens],
                                   self.context_slot_mapping[:num_tokens], self.cache)
        positions = self.query_positions[:num_reqs * num_queries]
        attention = PagedAttention(self.cache, cad, positions)
        hidden = self.drafter(self.input_ids[:num_reqs * num_queries], positions, attention)
        masks = self.token_indices[:num_reqs * num_drafts]
        return greedy(self.drafter.logits(hidden[masks])).view(num_reqs, num_drafts)


@dataclasses.dataclass
class Stats:
    num_generated: int = 0
    num_drafted: int = 0            # drafts verified (rows that had drafts)
    num_accepted: int = 0
    num_draft_rows: int = 0         # verified rows that had drafts
    batch_sizes: list = dataclasses.field(default_factory=list)   # rows per engine step


class Engine:
    """Continuous batching with speculative decoding: one target, one drafter, one block pool.

    Every running request is a batch row. A row's first steps prefill its prompt in chunks;
    then each step verifies its K drafts and drafts K more. Finished rows leave the batch.
    """

    def __init__(self, target, drafters, config, mode, fused, device, max_num_reqs, num_blocks,
                 round_ops=False):
        self.target, self.config, self.fused, self.device = target, config, fused, device
        self.mrope = mode == MROPE_MODE
        self.round_ops = round_ops and not self.mrope       # no round op steps M-RoPE positions
        self.max_num_reqs = max_num_reqs
        self.block_table = BlockTable(num_blocks, max_num_reqs, config, device)
        self.target_cache = PagedKVCache(config.num_target_layers, num_blocks, config, device)
        draft_cache = PagedKVCache(config.num_target_layers, num_blocks, config, device)
        self.timer = StepTimer(device)
        # A verify batch holds at most a prefill chunk or K + 1 tokens per row.
        max_num_tokens = max_num_reqs * max(config.prefill_chunk_size,
                                            config.num_speculative_tokens + 1)
        if mode in ("eagle", MROPE_MODE):
            proposer = MropeChainEagleProposer if self.mrope else ChainEagleProposer
            self.proposer = proposer(drafters["eagle"], draft_cache, config, self.timer,
                                     max_num_reqs, max_num_tokens, device, fused)
        elif mode == "parallel":
            self.proposer = ParallelProposer(drafters["eagle"], draft_cache, config, self.timer,
                                             max_num_reqs, max_num_tokens, device)
        else:
            self.proposer = DFlashProposer(drafters["dflash"], draft_cache, config, self.timer,
                                           max_num_reqs, max_num_tokens, device)
        # 1.1 / 1.2 outputs, persistent (the ops write the first R entries)
        int32 = dict(dtype=torch.int32, device=device)
        self.next_token_ids = torch.zeros(max_num_reqs, **int32)
        self.valid_sampled_tokens_count = torch.zeros(max_num_reqs, **int32)
        self.token_indices_to_sample = torch.zeros(max_num_reqs, **int32)
        self.num_rejected_tokens = torch.zeros(max_num_reqs, **int32)

    def generate(self, requests, progress=False, label=""):
        """Decode every request to its end; returns the Stats (outputs land in requests)."""
        assert len(requests) <= self.max_num_reqs
        for request in requests:
            # Drafts reach 2K positions past the last token; none may pass max_model_len.
            if (len(request.prompt) + request.max_new_tokens
                    + 2 * self.config.num_speculative_tokens > self.config.max_model_len):
                raise ValueError("a request could outgrow max_model_len")
        self.running, self.stats = [], Stats()
        for request in requests:
            self.running.append(request)
            self.block_table.add_row()
        with Progress(len(requests), label, progress) as self.bar:
            while self.running:
                with self.timer.measure("step"):
                    self.step()
        return self.stats

    def step(self):
        batch = self.schedule()
        num_reqs = len(self.running)
        attention = PagedAttention(self.target_cache, batch.cad, batch.positions)
        target_hidden = self.target(batch.input_ids, batch.rotary_positions, attention)
        sampled_token_ids = greedy_verify(self.target, target_hidden, batch,
                                          self.config.num_speculative_tokens)
        if self.round_ops:
            draft_token_ids = self.proposer.propose_round(
                batch, target_hidden, sampled_token_ids, self.next_token_ids,
                self.valid_sampled_tokens_count)
            self.update(batch, sampled_token_ids, draft_token_ids)
            return
        with self.timer.measure("spec_ops"):
            if self.fused:
                spec_ops.prepare_padded_draft_inputs(
                    sampled_token_ids, batch.discard_request_mask, batch.backup_next_token_ids,
                    batch.cu_num_draft_tokens, batch.cad.query_start_loc, self.next_token_ids,
                    self.valid_sampled_tokens_count, self.token_indices_to_sample,
                    self.num_rejected_tokens, self.config.vocab_size)
            else:
                spec_ops.eagle_prepare_next_token_padded(
                    sampled_token_ids, batch.discard_request_mask, batch.backup_next_token_ids,
                    self.next_token_ids, self.valid_sampled_tokens_count,
                    self.config.vocab_size)
                spec_ops.eagle_prepare_inputs_padded(
                    batch.cu_num_draft_tokens, self.valid_sampled_tokens_count,
                    batch.cad.query_start_loc, self.token_indices_to_sample,
                    self.num_rejected_tokens)
        seeds = DrafterSeeds(self.next_token_ids[:num_reqs],
                             self.token_indices_to_sample[:num_reqs],
                             self.num_rejected_tokens[:num_reqs])
        draft_token_ids = self.proposer.propose(batch, target_hidden, seeds)
        self.update(batch, sampled_token_ids, draft_token_ids)

    def schedule(self):
        """The target's input: each row's next prompt chunk, or its last token and drafts."""
        config, device = self.config, self.device
        input_ids, positions, rows, query_lens, seq_lens = [], [], [], [], []
        mrope_positions = []                                # per token: (temporal, height, width)
        num_draft_tokens, discard, backup = [], [], []
        for row, request in enumerate(self.running):
            tokens = request.tokens
            if request.num_computed < len(request.prompt):
                query = request.prompt[request.num_computed:][:config.prefill_chunk_size]
                drafts = []
            else:
                drafts = request.draft_token_ids
                query = [tokens[-1]] + drafts
            seq_len = request.num_computed + len(query)
            input_ids += query
            positions += range(request.num_computed, seq_len)
            mrope_positions += [mrope_position(request.image, index)
                                for index in range(request.num_computed, seq_len)]
            rows += [row] * len(query)
            query_lens.append(len(query))
            seq_lens.append(seq_len)
            num_draft_tokens.append(len(drafts))
            # A partial prefill keeps no sampled token: 1.1 seeds the drafter with its
            # backup, the next prompt token. Other rows always sample one; their backup is moot.
            discard.append(seq_len < len(request.prompt))
            backup.append(tokens[seq_len] if seq_len < len(tokens) else tokens[-1])
            # Drafting writes K/V up to K + 1 positions past the verified tokens (DFlash).
            self.block_table.reserve(row, seq_len + config.num_speculative_tokens + 1)
        self.block_table.upload()
        self.stats.batch_sizes.append(len(self.running))

        def tensor(values, dtype):
            return torch.tensor(values, dtype=dtype, device=device)

        positions = tensor(positions, torch.int64)
        query_start_loc = [0]
        for query_len in query_lens:
            query_start_loc.append(query_start_loc[-1] + query_len)
        num_draft_tokens = tensor(num_draft_tokens, torch.int32)
        cad = spec_ops.CommonAttentionMetadata(
            query_start_loc=tensor(query_start_loc, torch.int32),
            query_start_loc_cpu=torch.tensor(query_start_loc, dtype=torch.int32),
            seq_lens=tensor(seq_lens, torch.int32),
            num_reqs=len(self.running),
            num_actual_tokens=len(input_ids),
            max_query_len=max(query_lens),
            max_seq_len=max(seq_lens),
            block_table_tensor=self.block_table.tensor[:len(self.running)],
            slot_mapping=self.block_table.slot_mapping(tensor(rows, torch.int64), positions),
        )
        return VerifyBatch(
            input_ids=tensor(input_ids, torch.int32),
            positions=positions,
            rotary_positions=(tensor(mrope_positions, torch.int64).T.contiguous() if self.mrope
                              else positions),
            cad=cad,
            num_draft_tokens=num_draft_tokens,
            cu_num_draft_tokens=num_draft_tokens.cumsum(0).to(torch.int32),
            discard_request_mask=tensor(discard, torch.bool),
            backup_next_token_ids=tensor(backup, torch.int32),
            query_lens=query_lens,
            is_partial_prefill=discard,
        )

    def update(self, batch, sampled_token_ids, draft_token_ids):
        """Back on the host (the step's only sync): keep the verified tokens, store the new
        drafts, retire the finished requests. As a scheduler does, it counts a request's
        computed tokens from its accepted ones: a verified row keeps the KV of as many query
        tokens as it accepted tokens (the one before the drafts and the accepted drafts), a
        row without drafts that of its whole query."""
        sampled = sampled_token_ids.tolist()
        drafts = draft_token_ids.tolist()
        end_token_id, finished_rows = self.config.end_token_id, []
        for row, request in enumerate(self.running):
            new_tokens = [token for token in sampled[row] if token >= 0]
            request.num_computed += (len(new_tokens) if request.draft_token_ids
                                     else batch.query_lens[row])
            if batch.is_partial_prefill[row]:
                continue
            if request.draft_token_ids:
                self.stats.num_drafted += len(request.draft_token_ids)
                self.stats.num_accepted += len(new_tokens) - 1
                self.stats.num_draft_rows += 1
            for token in new_tokens:
                request.output.append(token)
                self.stats.num_generated += 1
                if request.finished(end_token_id):
                    break
            request.draft_token_ids = drafts[row]
            if request.finished(end_token_id):
                finished_rows.append(row)
                self.bar.update()
        self.running = [request for row, request in enumerate(self.running)
                        if row not in finished_rows]
        self.block_table.remove_rows(finished_rows)


# --- the reference, and a whole run ------------------------------------------------------------

def causal_attention(layer, query, key, value):
    """Plain causal self-attention over one whole sequence: no cache at all."""
    num_tokens = query.shape[0]
    scores = torch.einsum("qhd,khd->hqk", query, key) / math.sqrt(query.shape[-1])
    future = torch.ones(num_tokens, num_tokens, dtype=torch.bool,
                        device=query.device).triu(diagonal=1)
    scores = scores.masked_fill(future, -math.inf)
    return torch.einsum("hqk,khd->qhd", scores.softmax(dim=-1), value)


def greedy_reference(target, prompt, max_new_tokens, end_token_id, image=None):
    """Greedy decoding with the target alone, recomputing the whole sequence for each token
    (M-RoPE positions with an image)."""
    tokens = list(prompt)
    device = target.lm_head.weight.device
    while len(tokens) - len(prompt) < max_new_tokens and (
            len(tokens) == len(prompt) or tokens[-1] != end_token_id):
        input_ids = torch.tensor(tokens, device=device)
        positions = torch.arange(len(tokens), device=device)
        if image is not None:
            positions = torch.tensor([mrope_position(image, index)
                                      for index in range(len(tokens))], device=device).T
        hidden = target(input_ids, positions, causal_attention)
        tokens.append(int(greedy(target.logits(hidden[-1]))))
    return tokens[len(prompt):]


def make_requests(num_requests, config, seed, images=False):
    """Prompts of 3..20 tokens, budgets of 12..40 new tokens, seeded. Prompts hold neither
    padding nor the end token. With `images`, each prompt also gets an image span of 2..4 x
    2..4 tokens somewhere in it (random tokens stand in for the patch embeddings)."""
    generator = torch.Generator().manual_seed(seed)
    requests = []
    for _ in range(num_requests):
        prompt_len = int(torch.randint(3, 21, (1,), generator=generator))
        prompt = torch.randint(config.end_token_id + 1, config.vocab_size, (prompt_len,),
                               generator=generator).tolist()
        max_new_tokens = int(torch.randint(12, 41, (1,), generator=generator))
        image = None
        if images:
            height, width = (int(n) for n in torch.randint(2, 5, (2,), generator=generator))
            first = int(torch.randint(0, prompt_len, (1,), generator=generator))
            prompt[first:first] = torch.randint(config.end_token_id + 1, config.vocab_size,
                                                (height * width,), generator=generator).tolist()
            image = (first, height, width)
        requests.append(Request(prompt, max_new_tokens, image=image))
    return requests


@contextlib.contextmanager
def one_cpu_thread():
    """Tensors this small gain nothing from intra-op threads, and on a busy machine handing work
    between threads costs several times the work itself."""
    num_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(num_threads)


@dataclasses.dataclass
class RunResult:
    mode: str
    fused: bool
    outputs: list                  # per request: its generated tokens
    reference: list                # per request: greedy decoding with the target alone
    tokens_per_s: float
    mean_accepted_length: float    # per row that had drafts: accepted drafts + 1
    acceptance_rate: float         # accepted drafts / verified drafts
    spec_ops_share: float          # share of engine-step time spent in spec_ops calls
    batch_sizes: list              # rows per engine step
    engines_way: tuple = None      # eagle-mrope: draft slots 1.5 on the temporal row would get
    #                                wrong, and those of them holding an earlier token's K/V

    @property
    def lossless(self):
        return self.outputs == self.reference


def run(mode, device="cpu", fused=False, num_requests=6, seed=0, progress=False,
        config=Config(), round_ops=False):
    """Speculative decoding of `num_requests` seeded requests in `mode`, and its reference;
    with `round_ops`, each round's bookkeeping is the mode's round op (6.1 - 6.3)."""
    device = torch.device(device)
    target, drafters = build_models(config, seed, device)
    num_blocks = num_requests * -(-config.max_model_len // config.block_size)
    engine = Engine(target, drafters, config, mode, fused, device, num_requests, num_blocks,
                    round_ops)
    images = mode == MROPE_MODE
    with torch.inference_mode(), one_cpu_thread():
        if device.type == "cuda":
            # Compile the Triton kernels and capture the CUDA graphs before timing.
            engine.generate(make_requests(num_requests, config, seed, images))
            engine.timer.reset()
            if images:
                engine.proposer.engines_way.zero_()
        requests = make_requests(num_requests, config, seed, images)
        start = time.perf_counter()
        stats = engine.generate(requests, progress, label=mode)
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        reference = [greedy_reference(target, request.prompt, request.max_new_tokens,
                                      config.end_token_id, request.image)
                     for request in requests]
    return RunResult(
        mode=mode,
        fused=fused,
        outputs=[request.output for request in requests],
        reference=reference,
        tokens_per_s=stats.num_generated / seconds,
        mean_accepted_length=1 + stats.num_accepted / max(stats.num_draft_rows, 1),
        acceptance_rate=stats.num_accepted / max(stats.num_drafted, 1),
        spec_ops_share=engine.timer.total("spec_ops") / engine.timer.total("step"),
        batch_sizes=stats.batch_sizes,
        engines_way=tuple(engine.proposer.engines_way.tolist()) if images else None,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=MODES + (MROPE_MODE, "all"), default="all")
    parser.add_argument("--fused", action="store_true",
                        help="5.1 instead of 1.1 + 1.2, and 5.2 instead of 1.5 per step")
    parser.add_argument("--round-ops", action="store_true",
                        help="one round op per round (6.1 - 6.3) instead of the separate "
                             "ops")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--num-requests", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress line on stderr (it only shows on a terminal anyway)")
    args = parser.parse_args()

    config = Config()
    requests = make_requests(args.num_requests, config, args.seed)
    print(f"{len(requests)} requests, prompt lengths {[len(r.prompt) for r in requests]}, "
          f"max new tokens {[r.max_new_tokens for r in requests]}, "
          f"K = {config.num_speculative_tokens}, block size {config.block_size}, "
          f"{'round' if args.round_ops else 'fused' if args.fused else 'unfused'} ops, "
          f"{args.device}")
    modes = MODES + (MROPE_MODE,) if args.mode == "all" else (args.mode,)
    results = []
    for mode in modes:
        results.append(run(mode, args.device, args.fused, args.num_requests, args.seed,
                           progress=not args.no_progress, config=config,
                           round_ops=args.round_ops))
        result = results[-1]
        print(f"{mode:>11}: lossless {'yes' if result.lossless else 'NO'}, "
              f"{result.tokens_per_s:7.1f} tokens/s, "
              f"mean accepted length {result.mean_accepted_length:.2f} "
              f"(acceptance {result.acceptance_rate:.0%}), "
              f"spec_ops {result.spec_ops_share:.1%} of step time, "
              f"batch sizes {result.batch_sizes[0]}..{result.batch_sizes[-1]} "
              f"over {len(result.batch_sizes)} steps")
        if result.engines_way:
            differ, collide = result.engines_way
            print(f"{'':>13}the engines' way (slots from the temporal position, 1.5 on "
                  f"positions[0]): {differ} draft slots differ, {collide} of them overwrite an "
                  f"earlier token's K/V")
    sys.exit(0 if all(result.lossless for result in results) else 1)


if __name__ == "__main__":
    main()
