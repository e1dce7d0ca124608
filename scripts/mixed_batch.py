"""GPU µs of 1.3, 1.4 and 1.7, and of the round ops, on decode batches that hold a few long
requests next to each other: what shape-only grid choices cost when the batch's average hides
them.

    python scripts/mixed_batch.py [--tail LANES] [--lone LANES] [--wide LANES]
                                  [--round-warps WARPS] [--only single|rounds]
                                  [--round-layouts]

(Before any kernel compiles: --tail sets the row layouts' lanes per iteration of their flat
loop, ROW_TAIL and 1.3's EXPAND_ROW_TAIL; --lone those of the loop of a group with one long
request, LONE_TAIL and 1.7's SLOT_LONE_TAIL; --wide the per-request kernels' lanes per chunk
past a program's first, WIDE_CHUNK (64: chunks all alike); --round-warps the warps per
program of the three round kernels.)

1024 requests: 1024 - n decode requests of K + 1 tokens and n adjacent requests of L tokens
(chunked prefills), n, L in CASES (160 of 32 tokens: more long requests than row programs,
so some groups hold two). The batch's average stays decode-sized, so the launch
functions take the row layout (8 requests per program, strided), whose programs run their
requests' remainders after the tile; against that, the same calls with the row layout
turned off (one program per request and chunk). bench_ops' inputs otherwise, outputs of both
layouts compared. CUDA graph µs per call (bench_ops.graph_us).

Round ops: the same 1024 requests from bench_rounds' batches (K = 3), n adjacent requests
made chunked prefills of L tokens (no drafts, one sampled token); outputs compared with the
sequence each replaces. --round-layouts: other batch sizes and long requests, each op's own
layout choice against one program per request and chunk forced and its lanes layout forced
(with REMAINDER_SPLIT remainder programs per group, and with REMAINDER_REQS).
"""

import os

# The layout is forced per measurement: no launch plan may replay an earlier one's.
os.environ["SPEC_OPS_LAUNCH_PLANS"] = "0"      # before spec_ops is imported

import argparse
import contextlib
import functools
import sys
from pathlib import Path
from unittest import mock

import torch
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import bench_ops  # noqa: E402
from spec_ops._triton import dflash, expand, rounds  # noqa: E402

NUM_REQS = 1024
CASES = ((0, 0), (1, 256), (8, 256), (16, 256), (1, 2048), (4, 2048), (160, 32))
ROUND_CASES = ((0, 0), (1, 256), (8, 256), (1, 2048), (4, 2048))
ITEMS = {"1.3": "out_input_ids", "1.4": "target_positions", "1.7": "new_positions"}
OPS = {"1.3": expand, "1.4": dflash, "1.7": expand}
K, I32, I64 = bench_ops.K, torch.int32, torch.int64


def verified_batch(lengths, gen):
    """bench_ops._verified_batch with one length per request."""
    lengths = torch.tensor(lengths)
    num_reqs, num_tokens = lengths.shape[0], int(lengths.sum())
    starts = torch.cat([torch.zeros(1, dtype=I64), lengths.cumsum(0)])
    request = torch.repeat_interleave(torch.arange(num_reqs), lengths)
    first_position = (torch.rand(num_reqs, generator=gen)
                      * (bench_ops.MAX_MODEL_LEN - lengths)).long()
    num_rejected = (torch.rand(num_reqs, generator=gen)
                    * (torch.clamp(lengths - 1, max=K) + 1)).long().to(I32)
    query_start_loc = starts.to(I32)
    return {
        "target_token_ids": bench_ops._randint(0, bench_ops.VOCAB_SIZE, (num_tokens,), gen),
        "target_positions": first_position[request] + torch.arange(num_tokens) - starts[request],
        "next_token_ids": bench_ops._randint(0, bench_ops.VOCAB_SIZE, (num_reqs,), gen),
        "query_start_loc": query_start_loc,
        "query_end_loc": query_start_loc[1:] - 1 - num_rejected,
        "num_rejected_tokens": num_rejected,
        "block_table": bench_ops._block_table(num_reqs, gen),
        "block_size": bench_ops.BLOCK_SIZE,
        "max_model_len": bench_ops.MAX_MODEL_LEN,
    }


def outputs(name, state):
    schema = getattr(torch.ops.spec_ops, name).default._schema
    return [state[a.name].clone() for a in schema.arguments
            if a.alias_info is not None and a.alias_info.is_write]


def round_batch(bench_rounds, inputs, num_reqs, k, num_long, length):
    """A method's inputs (bench_rounds.METHODS' ``inputs``) for ``num_reqs`` of bench_rounds'
    requests with K = k, ``num_long`` adjacent ones from request R - n - min(100, R / 4) on made
    chunked prefills of ``length`` tokens, as CUDA tensors."""
    first = max(num_reqs - num_long - min(100, num_reqs // 4), 0)
    batch = functools.partial(bench_rounds._verified_batch,
                              long_requests=(first, num_long, length))
    with mock.patch.object(bench_rounds, "_verified_batch", batch):
        return bench_ops._fresh(inputs(num_reqs, k, torch.Generator().manual_seed(1)), "cuda")


def round_ops(k=3):
    """Each round method at NUM_REQS requests of bench_rounds' batches, with n adjacent
    chunked prefills of L tokens (ROUND_CASES) from request NUM_REQS - n - 100 on."""
    import bench_rounds
    from round_sequences import SEQUENCES
    print(f"round ops, K = {k}, chunks past a program's first: {rounds.WIDE_CHUNK} lanes; "
          f"warps per program: 6.1 {rounds._prepare_eagle_round.num_warps}, 6.2 "
          f"{rounds._prepare_parallel_round.num_warps}, 6.3 "
          f"{rounds._prepare_dflash_round.num_warps}")
    for method, op, inputs in bench_rounds.METHODS:
        fn = getattr(torch.ops.spec_ops, op).default
        for num_long, length in ROUND_CASES:
            initial = round_batch(bench_rounds, inputs, NUM_REQS, k, num_long, length)
            expected = bench_ops._outputs(op, fn, initial)
            mismatches = bench_ops._check(op, SEQUENCES[op], initial, expected)
            args = bench_ops._op_args(op, bench_ops._fresh(initial))
            print(f"{method:<12} n={num_long:<3} L={length:<5} "
                  f"{bench_ops.graph_us(lambda: fn(*args)):.3f}"
                  + (f"  MISMATCH {mismatches[:2]}" if mismatches else ""), flush=True)


# (R, n, L) for --round-layouts: few long requests among many decodes, and many requests a
# little longer than their lanes.
ROUND_LAYOUT_CASES = ((1024, 1, 2048), (1024, 8, 256), (1024, 2, 1024), (1024, 4, 2048),
                      (256, 1, 1024), (256, 32, 40), (64, 64, 12), (64, 8, 40), (64, 1, 512),
                      (32, 1, 2048), (16, 2, 1024), (8, 1, 2048), (16, 16, 200), (8, 8, 256),
                      (4, 4, 1024), (1, 1, 2048), (1, 1, 300))


def round_layouts(k=3):
    """Each round method on R requests of bench_rounds' batches with n adjacent chunked
    prefills of L tokens (ROUND_LAYOUT_CASES, round_batch): the op's own layout choice against
    the lanes layout forced (rounds.lanes_split)."""
    import bench_rounds
    from round_sequences import SEQUENCES
    def forced(split):
        return mock.patch.object(rounds, "lanes_split",
                                 lambda num_items, num_reqs, lanes, *pays: (
                                     None if lanes is None else split))
    print(f"round ops, K = {k}: the op's layout choice / one program per request and chunk "
          f"forced / the lanes layout forced, {rounds.REMAINDER_SPLIT.value} remainder "
          f"programs per group of {rounds.REMAINDER_REQS.value} requests / forced, "
          f"{rounds.REMAINDER_REQS.value} per group")
    for method, op, inputs in bench_rounds.METHODS:
        fn = getattr(torch.ops.spec_ops, op).default
        for num_reqs, num_long, length in ROUND_LAYOUT_CASES:
            initial = round_batch(bench_rounds, inputs, num_reqs, k, num_long, length)
            expected = bench_ops._outputs(op, SEQUENCES[op], initial)
            cells = []
            for layout in (contextlib.nullcontext(),
                           forced(None),
                           forced(rounds.REMAINDER_SPLIT.value),
                           forced(rounds.REMAINDER_REQS.value)):
                with layout:
                    mismatches = bench_ops._check(op, fn, initial, expected)
                    args = bench_ops._op_args(op, bench_ops._fresh(initial))
                    cells.append(f"{bench_ops.graph_us(lambda: fn(*args)):.3f}"
                                 + ("  MISMATCH" if mismatches else ""))
            print(f"{method:<12} R={num_reqs:<5} n={num_long:<3} L={length:<5} "
                  + " / ".join(cells), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tail", type=int, default=None)
    parser.add_argument("--lone", type=int, default=None)
    parser.add_argument("--wide", type=int, default=None)
    parser.add_argument("--round-warps", type=int, default=None)
    parser.add_argument("--only", choices=("single", "rounds"), default=None)
    parser.add_argument("--round-layouts", action="store_true",
                        help="only the round ops' layout choice against the lanes layout")
    options = parser.parse_args()
    if options.tail is not None:
        for module in set(OPS.values()):
            module.ROW_TAIL = tl.constexpr(options.tail)
        expand.EXPAND_ROW_TAIL = tl.constexpr(options.tail)
    if options.lone is not None:
        for module in set(OPS.values()):
            module.LONE_TAIL = tl.constexpr(options.lone)
        expand.SLOT_LONE_TAIL = tl.constexpr(options.lone)
    if options.wide is not None:
        for module in (expand, rounds):
            module.WIDE_CHUNK = tl.constexpr(options.wide)
    if options.round_warps is not None:
        for launcher in (rounds._prepare_eagle_round, rounds._prepare_parallel_round,
                         rounds._prepare_dflash_round):
            launcher.num_warps = options.round_warps
    floor = bench_ops.empty_kernel_floor()["graph_us"]
    print(f"GPU µs per call (CUDA graph of {bench_ops.GRAPH_CALLS} calls); empty kernel "
          f"{floor:.3f}")
    if options.round_layouts:
        round_layouts()
        return
    print(f"{NUM_REQS} requests, K = {K}: n long requests of L tokens, adjacent, among decodes "
          f"of K + 1")
    if options.only != "single":
        round_ops()
    if options.only == "rounds":
        return
    print(f"row layout flat loop {expand.EXPAND_ROW_TAIL} lanes (1.3), {dflash.ROW_TAIL} (1.4, "
          f"1.7); a lone long request's {expand.LONE_TAIL} (1.3, 1.4), "
          f"{expand.SLOT_LONE_TAIL} (1.7)")
    for label, module in OPS.items():
        op = next(op for op in bench_ops.OPS if op.label == label)
        for num_long, length in CASES:
            lengths = [K + 1] * (NUM_REQS - num_long - 100) + [length] * num_long + [K + 1] * 100
            batch = lambda num_reqs, tokens_per_req, gen, lengths=lengths: verified_batch(  # noqa
                lengths, gen)
            with mock.patch.object(bench_ops, "_verified_batch", batch):
                state = bench_ops._fresh(op.inputs(NUM_REQS, K + 1,
                                                   torch.Generator().manual_seed(1)), "cuda")
            args = bench_ops._op_args(op.name, state)
            fn = getattr(torch.ops.spec_ops, op.name).default
            cells, results = [], []
            for variant in ("rows", "per request"):
                patch = (mock.patch.object(module, "row_cols", lambda *a: None)
                         if variant == "per request" else contextlib.nullcontext())
                with patch:
                    def call():
                        return fn(*args)
                    got = call()
                    results.append(outputs(op.name, state) if got is None else [got])
                    cells.append(f"{variant} {bench_ops.graph_us(call):.3f}")
            same = all(torch.equal(a, b) for a, b in zip(*results))
            cols = module.row_cols(state[ITEMS[label]].shape[0], NUM_REQS)
            print(f"{label} n={num_long:<3} L={length:<5} " + "  ".join(cells)
                  + (f"  (rows of {cols})" if cols else "  (rows not chosen: per request both)")
                  + ("" if same else "  MISMATCH"), flush=True)


if __name__ == "__main__":
    main()
