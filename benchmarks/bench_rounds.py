"""Benchmark each round op (docs/round_ops.md, 6.1-6.3) against the sequence it replaces.

Methods: chain EAGLE (6.1, K - 1 draft steps), parallel drafting (6.2, P-EAGLE: shift, S = K),
the draft model (6.2 without shift, S = 1, K - 1 draft steps) and DFlash (6.3, Q = K + 1), on
decode batches of R = 1, 64 and 1024 requests with K + 1 tokens each (1 in 10 without drafts),
K = 1, 3 and 7. Variants:

  round     torch.ops.spec_ops.<round op>.default
  sequence  the engine's sequence for the same round (tests/round_sequences.py): the helper
            ops of docs/ops.md (torch.ops.spec_ops) with the engine's torch glue in between
  round fn, sequence fn   the same through the public functions, spec_ops.<op> (their eager
            entry skips the dispatcher once a call's layout is known, and replays the launch
            of a call whose sizes repeat): host µs only, the GPU work being the same
  ..., two sizes   the functions with batches of R + 1 and R + 2 requests in turn (the
            micro-batches of a pipeline): each size's launch plan replays
  ..., sizes changing   the functions with batches of R + 3, R + 4, ... requests in turn,
            one size more than an op remembers launches of (KnownCalls), as if the size
            changed on every call: no launch plan forms
  round, seq_lens off   the round op with every request's seq_len one block past what its
            positions say (GPU µs only): the kernels read the block table at the positions a
            serving engine's batch has alongside the positions themselves, and once more where
            those are in another block, which here is every time

For each: host µs per eager round (back-to-back calls, synchronized at both ends, median of
repeats), GPU µs per round inside a CUDA graph, and launches per round (CUDA kernels, memcpys
and memsets a call issues, counted with torch.profiler). The targets (host <= 0.15x the
sequence, through torch.ops and through the functions; GPU <= 0.3x the sequence, the round
op's graph node <= 2x an empty kernel's) are
printed PASS/FAIL; every number goes to a JSON file and a plot in benchmarks/results/ (and
$OUT when set).

Without CUDA, or with --smoke, it runs small CPU inputs instead: it checks that the round op's
CPU kernel and its (interpreted) Triton kernel equal the sequence on every buffer and runs the
code paths, timing only the host side of the CPU kernels.
"""

import argparse
import functools
import itertools
import json
import sys
import tempfile
import time
import types
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

# bench_ops sets TRITON_INTERPRET for smoke mode before triton is imported: import it first.
import bench_ops  # noqa: E402
from bench_ops import (  # noqa: E402
    SMOKE, _block_table, _check, _fresh, _op_args, _out, _outputs, _padded_batch, _randint,
    _slot, empty_kernel_floor, floor_line, host_us, machine_info, measure,
)

from round_sequences import SEQUENCES, cuda_launches_per_call, engine_batch  # noqa: E402
import spec_ops  # noqa: E402
from spec_ops._library import KERNELS, KnownCalls  # noqa: E402

BLOCK_SIZE = bench_ops.BLOCK_SIZE
MAX_MODEL_LEN = bench_ops.MAX_MODEL_LEN
VOCAB_SIZE = bench_ops.VOCAB_SIZE
PARALLEL_DRAFTING_TOKEN_ID = bench_ops.PARALLEL_DRAFTING_TOKEN_ID
CUDA_GRAPH_TOKEN_MULTIPLE = 8     # first passes are padded up to this (num_input_tokens)

NUM_REQS, NUM_DRAFTS = ((1, 5), (1, 3)) if SMOKE else ((1, 64, 1024), (1, 3, 7))
HOST_LIMIT, GRAPH_LIMIT, FLOOR_LIMIT = 0.15, 0.3, 2.0
# The functions' host-time variants with other batch sizes (bench_case).
TWO_SIZES, SIZES_CHANGING = "two sizes", "sizes changing"
# The round op's GPU variant whose seq_lens are one block off the target positions (bench_case).
OFF = "round, seq_lens off"

I32, I64 = torch.int32, torch.int64


# --- inputs: a verified decode batch and each method's out buffers, keyed by argument name ----

def _verified_batch(num_reqs, k, gen, long_requests=None):
    """_padded_batch's verification result, its discarded requests restricted to those
    without drafts as in the engine, plus the target's tokens: each request's tokens at
    consecutive positions, far enough from max_model_len for its draft steps.
    ``long_requests`` (first, n, L): requests first ... first + n - 1 are chunked prefills of
    L tokens instead (no drafts, one sampled token)."""
    batch = _padded_batch(num_reqs, k + 1, gen)
    if long_requests is not None:
        _make_prefills(batch, *long_requests)
    engine_batch([batch[name] for name in ("sampled_token_ids", "discard_request_mask",
                                           "backup_next_token_ids", "cu_num_draft_tokens")])
    query_start_loc = batch["query_start_loc"]
    num_tokens = int(query_start_loc[-1])
    query_lens = (query_start_loc[1:] - query_start_loc[:-1]).long()
    request = torch.repeat_interleave(torch.arange(num_reqs), query_lens)
    first_position = _randint(0, MAX_MODEL_LEN - 2 * k - 2, (num_reqs,), gen, I64)
    if long_requests is not None:       # room for each request's tokens and draft steps
        first_position = torch.minimum(first_position, MAX_MODEL_LEN - 2 * k - 2 - query_lens)
    offset = torch.arange(num_tokens) - query_start_loc[:-1].long()[request]
    positions = first_position[request] + offset
    block_table = _block_table(num_reqs, gen)
    return {
        "sampled_token_ids": batch["sampled_token_ids"],
        "discard_request_mask": batch["discard_request_mask"],
        "backup_next_token_ids": batch["backup_next_token_ids"],
        "cu_num_draft_tokens": batch["cu_num_draft_tokens"],
        "query_start_loc": query_start_loc,
        "target_token_ids": _randint(0, VOCAB_SIZE, (num_tokens,), gen),
        "target_positions": positions,
        "target_slot_mapping": _slot(block_table, request, positions, BLOCK_SIZE),
        "block_table": block_table,
        "seq_lens": (first_position + query_lens).to(I32),
        "next_token_ids": _out((num_reqs,), I32),
        "valid_sampled_tokens_count": _out((num_reqs,), I32),
        "vocab_size": VOCAB_SIZE,
        "block_size": BLOCK_SIZE,
        "max_model_len": MAX_MODEL_LEN,
    }


def _make_prefills(batch, first, count, length):
    """Requests first ... first + count - 1 of a _padded_batch as chunked prefills of
    ``length`` tokens: no drafts, one sampled token."""
    rows = slice(first, first + count)
    cu_num_draft = batch["cu_num_draft_tokens"].long()
    num_drafts = torch.diff(cu_num_draft, prepend=cu_num_draft.new_zeros(1))
    num_drafts[rows] = 0
    batch["cu_num_draft_tokens"] = num_drafts.cumsum(0).to(I32)
    batch["sampled_token_ids"][rows, 1:] = -1
    query_lens = num_drafts + 1
    query_lens[rows] = length
    batch["query_start_loc"] = torch.cat([query_lens.new_zeros(1), query_lens.cumsum(0)]).to(I32)


def _padded(num_tokens):
    return -(-num_tokens // CUDA_GRAPH_TOKEN_MULTIPLE) * CUDA_GRAPH_TOKEN_MULTIPLE


def _step_outs(num_steps, num_reqs):
    return {"num_steps": num_steps, "input_batch_size": num_reqs,
            "out_step_positions": _out((num_steps, num_reqs), I64),
            "out_step_slot_mapping": _out((num_steps, num_reqs), I64),
            "out_step_seq_lens": _out((num_steps, num_reqs), I32)}


def eagle_inputs(num_reqs, k, gen):
    batch = _verified_batch(num_reqs, k, gen)
    num_tokens = batch["target_token_ids"].shape[0]
    return {**batch, **_step_outs(k - 1, num_reqs),
            "token_indices_to_sample": _out((num_reqs,), I32),
            "out_input_ids": _out((num_tokens,), I32),
            "out_positions": _out((num_tokens,), I64),
            "out_slot_mapping": _out((_padded(num_tokens),), I64),
            "num_input_tokens": _padded(num_tokens)}


def _parallel_inputs(num_reqs, k, gen, slots, shift, num_steps):
    batch = _verified_batch(num_reqs, k, gen)
    num_tokens = batch["target_token_ids"].shape[0]
    num_first_pass = num_tokens + num_reqs * (slots - 1 if shift else slots)
    return {**batch, **_step_outs(num_steps, num_reqs),
            "out_input_ids": _out((num_first_pass,), I32),
            "out_positions": _out((num_first_pass,), I64),
            "out_is_masked_token_mask": torch.zeros(num_first_pass, dtype=torch.bool),
            "out_new_token_indices": _out((num_reqs * slots,), I32),
            "out_hidden_state_mapping": _out((num_tokens,), I32),
            "out_slot_mapping": _out((_padded(num_first_pass),), I64),
            "out_query_start_loc": _out((num_reqs + 1,), I32),
            "out_seq_lens": _out((num_reqs,), I32),
            "padding_token_id": 0,
            "parallel_drafting_token_id": PARALLEL_DRAFTING_TOKEN_ID,
            "num_padding_slots_per_request": slots,
            "shift_input_ids": shift,
            "num_input_tokens": _padded(num_first_pass)}


def parallel_inputs(num_reqs, k, gen):
    """P-EAGLE: shifted inputs, S = K slots, one pass."""
    return _parallel_inputs(num_reqs, k, gen, slots=k, shift=True, num_steps=0)


def draft_model_inputs(num_reqs, k, gen):
    """A draft model: no shift, S = 1, then K - 1 draft steps."""
    return _parallel_inputs(num_reqs, k, gen, slots=1, shift=False, num_steps=k - 1)


def dflash_inputs(num_reqs, k, gen):
    batch = _verified_batch(num_reqs, k, gen)
    num_tokens = batch["target_token_ids"].shape[0]
    num_queries = num_reqs * (k + 1)
    return {**batch,
            "out_input_ids": _out((num_queries,), I32),
            "out_context_positions": _out((num_tokens,), I64),
            "out_query_positions": _out((num_queries,), I64),
            "out_context_slot_mapping": _out((num_tokens,), I64),
            "out_query_slot_mapping": _out((_padded(num_queries),), I64),
            "out_token_indices": _out((num_reqs * k,), I32),
            "out_query_start_loc": _out((num_reqs + 1,), I32),
            "out_seq_lens": _out((num_reqs,), I32),
            "parallel_drafting_token_id": PARALLEL_DRAFTING_TOKEN_ID,
            "num_speculative_tokens": k,
            "num_input_tokens": _padded(num_queries)}


METHODS = (   # (label, round op, inputs)
    ("eagle", "prepare_eagle_round", eagle_inputs),
    ("parallel", "prepare_parallel_round", parallel_inputs),
    ("draft model", "prepare_parallel_round", draft_model_inputs),
    ("dflash", "prepare_dflash_round", dflash_inputs),
)


# The sequences call ops.<op>.default: the public functions in that shape.
FUNCTIONS = types.SimpleNamespace(**{
    name: types.SimpleNamespace(default=getattr(spec_ops, name)) for name in KERNELS})


# --- one case: a method at one (R, K) -----------------------------------------------------

def bench_case(method, op, inputs, num_reqs, k):
    device = "cpu" if SMOKE else "cuda"
    gen = torch.Generator().manual_seed(1000 * num_reqs + k)
    initial = _fresh(inputs(num_reqs, k, gen), device)
    fns = {"round": getattr(torch.ops.spec_ops, op).default, "sequence": SEQUENCES[op]}
    expected = _outputs(op, fns["round"], initial)
    mismatches = {"sequence": _check(op, fns["sequence"], initial, expected)}
    if SMOKE:
        mismatches["triton"] = _check(op, KERNELS[op].triton, initial, expected)
    calls = {name: functools.partial(fn, *_op_args(op, _fresh(initial)))
             for name, fn in fns.items()}
    times = measure(calls, graph=not SMOKE)
    for name, call in calls.items():
        if "error" not in times[name]:
            times[name]["launches"] = None if SMOKE else cuda_launches_per_call(call)
    if not SMOKE:
        # The round kernels read the block table at the positions a serving engine's batch has
        # (each request's up to seq_lens[r] - 1) alongside the positions, and once more where
        # a position is in another block: every request's seq_len one block off is that
        # mechanism's worst case.
        off = dict(initial, seq_lens=initial["seq_lens"] + BLOCK_SIZE)
        mismatches[OFF] = _check(op, fns["round"], off, _outputs(op, fns["sequence"], off))
        times[OFF] = measure({OFF: functools.partial(fns["round"], *_op_args(op, _fresh(off)))},
                             graph=True)[OFF]
    # Batches of R + 1 and R + 2 requests in turn, each size's launch plan replaying; and of
    # R + 3 ... more sizes in turn than the entry remembers (KnownCalls), so that no plan forms
    # (the path of a caller whose size changes on every call; the other variants' plans match
    # none of these sizes).
    others = [_fresh(inputs(num_reqs + n, k, torch.Generator().manual_seed(7 + num_reqs + n)),
                     device) for n in range(1, KnownCalls.MAX_REMEMBERED + 4)]
    functions = {}
    for name, fn, keywords in (("round fn", getattr(spec_ops, op), {}),
                               ("sequence fn", SEQUENCES[op], {"ops": FUNCTIONS})):
        functions[name] = functools.partial(fn, *_op_args(op, _fresh(initial)), **keywords)
        for variant, batches in ((TWO_SIZES, others[:2]), (SIZES_CHANGING, others[2:])):
            functions[f"{name}, {variant}"] = _cycling(
                functools.partial(fn, *_op_args(op, _fresh(batch)), **keywords)
                for batch in batches)
    times.update({name: {"host_us": us} for name, us in host_us(functions).items()})
    return {"method": method, "op": op, "num_reqs": num_reqs, "k": k, "times": times,
            "mismatches": {name: lines for name, lines in mismatches.items() if lines}}


def _cycling(calls):
    """A function making the next of ``calls`` on each call, round and round."""
    turns = itertools.cycle(list(calls))
    return lambda: next(turns)()


# --- targets, tables, files ---------------------------------------------------------------

def _ratio(numerator, denominator):
    return None if numerator is None or not denominator else numerator / denominator


def evaluate_targets(cases, floor):
    targets = []
    for case in cases:
        round_, sequence = case["times"]["round"], case["times"]["sequence"]

        def add(target, ratio, limit):
            ratio = None if SMOKE else ratio    # CPU kernels called a few times say nothing
            targets.append({"target": target, "method": case["method"],
                            "num_reqs": case["num_reqs"], "k": case["k"], "ratio": ratio,
                            "limit": limit, "passed": None if ratio is None else ratio <= limit})

        add(f"host <= {HOST_LIMIT}x sequence (functions)",
            _ratio(case["times"]["round fn"].get("host_us"),
                   case["times"]["sequence fn"].get("host_us")), HOST_LIMIT)
        add(f"host <= {HOST_LIMIT}x sequence (torch.ops)",
            _ratio(round_.get("host_us"), sequence.get("host_us")), HOST_LIMIT)
        for variant in (TWO_SIZES, SIZES_CHANGING) if not SMOKE else ():
            # information: callers whose batch sizes take turns or change every call
            ratio = _ratio(case["times"][f"round fn, {variant}"].get("host_us"),
                           case["times"][f"sequence fn, {variant}"].get("host_us"))
            targets.append({"target": f"host <= {HOST_LIMIT}x sequence (functions), {variant}",
                            "method": case["method"], "num_reqs": case["num_reqs"],
                            "k": case["k"], "ratio": ratio, "limit": HOST_LIMIT, "info": True,
                            "passed": None if ratio is None else ratio <= HOST_LIMIT})
        add(f"GPU <= {GRAPH_LIMIT}x sequence",
            _ratio(round_.get("graph_us"), sequence.get("graph_us")), GRAPH_LIMIT)
        add(f"GPU <= {FLOOR_LIMIT:g}x empty kernel",
            _ratio(round_.get("graph_us"), floor and floor["graph_us"]), FLOOR_LIMIT)
        if floor and not SMOKE:     # information: against the first timed graph's node
            ratio = _ratio(round_.get("graph_us"), floor["graph_us_first"])
            targets.append({"target": f"GPU <= {FLOOR_LIMIT:g}x empty kernel, first graph",
                            "method": case["method"], "num_reqs": case["num_reqs"],
                            "k": case["k"], "ratio": ratio, "limit": FLOOR_LIMIT, "info": True,
                            "passed": None if ratio is None else ratio <= FLOOR_LIMIT})
        if OFF in case["times"]:     # information: the guessed block-table reads all missed
            ratio = _ratio(case["times"][OFF].get("graph_us"), floor and floor["graph_us"])
            targets.append({"target": f"GPU <= {FLOOR_LIMIT:g}x empty kernel, seq_lens off",
                            "method": case["method"], "num_reqs": case["num_reqs"],
                            "k": case["k"], "ratio": ratio, "limit": FLOOR_LIMIT, "info": True,
                            "passed": None if ratio is None else ratio <= FLOOR_LIMIT})
        add("1 launch", round_.get("launches"), 1)
    return targets


def _number(value):
    return "-" if value is None else f"{value:.2f}" if value < 100 else f"{value:.0f}"


def _launches(value):
    return "-" if value is None else f"{value:g}"


def print_table(cases, floor):
    """The short table: per case, both variants' host / GPU µs and launches, and the ratios."""
    print(f"\nper round: host µs (eager, back to back) / GPU µs (CUDA graph) / launches; "
          f"block {BLOCK_SIZE}, max_model_len {MAX_MODEL_LEN}; off GPU: the round op's GPU µs "
          f"with every seq_len one block off its request's positions")
    if floor:
        print(floor_line(floor))
    header = (f"{'method':<12}{'R':>5}{'K':>3}{'round':>22}{'sequence':>22}"
              f"{'host x':>8}{'GPU x':>8}{'fn host':>9}{'seq fn':>8}{'fn x':>7}"
              f"{'two x':>7}{'chg fn':>8}{'chg seq':>8}{'chg x':>7}{'off GPU':>8}")
    print(header)
    print("-" * len(header))
    for case in cases:
        cells = []
        for name in ("round", "sequence"):
            time_ = case["times"][name]
            cells.append("error" if "error" in time_ else
                         f"{_number(time_['host_us'])} / {_number(time_['graph_us'])} / "
                         f"{_launches(time_.get('launches'))}")
        round_, sequence = case["times"]["round"], case["times"]["sequence"]
        host = _ratio(round_.get("host_us"), sequence.get("host_us"))
        graph = _ratio(round_.get("graph_us"), sequence.get("graph_us"))
        function, sequence_fn, two, sequence_two, changing, sequence_changing = (
            case["times"].get(f"{side} fn{variant}", {}).get("host_us")
            for variant in ("", f", {TWO_SIZES}", f", {SIZES_CHANGING}")
            for side in ("round", "sequence"))
        print(f"{case['method']:<12}{case['num_reqs']:>5}{case['k']:>3}"
              + "".join(f"{cell:>22}" for cell in cells)
              + "".join(f"{'-' if r is None else f'{r:.2f}':>8}" for r in (host, graph))
              + f"{_number(function):>9}{_number(sequence_fn):>8}"
              + _ratio_cell(function, sequence_fn) + _ratio_cell(two, sequence_two)
              + f"{_number(changing):>8}{_number(sequence_changing):>8}"
              + _ratio_cell(changing, sequence_changing)
              + f"{_number(case['times'].get(OFF, {}).get('graph_us')):>8}")


def _ratio_cell(numerator, denominator):
    ratio = _ratio(numerator, denominator)
    return f"{'-' if ratio is None else f'{ratio:.2f}':>7}"


def print_summary(cases, targets):
    info = [target for target in targets if target.get("info")]
    targets = [target for target in targets if not target.get("info")]
    for name in dict.fromkeys(target["target"] for target in info):
        group = [target for target in info if target["target"] == name]
        print(f"information: {name}: "
              f"{sum(target['passed'] is True for target in group)} of {len(group)} within")
    passed = sum(target["passed"] is True for target in targets)
    failed = [target for target in targets if target["passed"] is False]
    mismatched = [(case, name, line) for case in cases
                  for name, lines in case["mismatches"].items() for line in lines]
    errors = [(case, name, time_["error"]) for case in cases
              for name, time_ in case["times"].items() if "error" in time_]
    for target in failed:
        print(f"FAIL {target['target']}: {target['method']} R={target['num_reqs']} "
              f"K={target['k']}: {target['ratio']:.2f}")
    for case, name, line in mismatched:
        print(f"MISMATCH {case['method']} R={case['num_reqs']} K={case['k']} {name}: {line}")
    for case, name, error in errors:
        print(f"error: {case['method']} R={case['num_reqs']} K={case['k']} {name}: {error}")
    print(f"targets: {passed} PASS, {len(failed)} FAIL, "
          f"{len(targets) - passed - len(failed)} n/a; sequences equal to the round op: "
          f"{'all' if not mismatched else f'{len(mismatched)} MISMATCH'}; "
          f"measurement errors: {len(errors)}")


METHOD_LABELS = {"eagle": "chain EAGLE (6.1)", "parallel": "parallel drafting (6.2, shift, S = K)",
                 "draft model": "draft model (6.2, S = 1, K - 1 steps)", "dflash": "DFlash (6.3)"}


def _span(values, digits=2):
    """'a-b' for the range of ``values`` ('a' when they round alike), '-' if any is missing."""
    if not values or None in values:
        return "-"
    low, high = (f"{value:.{digits}f}" for value in (min(values), max(values)))
    return low if low == high else f"{low}-{high}"


def markdown_table(report):
    """The README's round-op table from a results JSON: a row per method and K, its cells
    over R = 1 / 64 / 1024 (a range where the three are one column's)."""
    floor = report["empty_kernel"]["graph_us"]
    rows = {}
    for case in report["cases"]:
        rows.setdefault((case["method"], case["k"]), []).append(case)
    lines = ["| method | K | round op GPU µs, R = 1 / 64 / 1024 (x the empty node) "
             "| sequence GPU µs | GPU ratio | launches: round op / sequence "
             "| host µs via `spec_ops`: round op / sequence "
             "| host ratio via `spec_ops`: one size / two in turn / size changing "
             "| host ratio via `torch.ops` |",
             "|---|---|---|---|---|---|---|---|---|"]
    for (method, k), cases in rows.items():
        cases.sort(key=lambda case: case["num_reqs"])

        def times(name, key, cases=cases):
            return [case["times"][name].get(key) for case in cases]

        def host_ratios(round_name, sequence_name):
            return _span([_ratio(a, b) for a, b in zip(times(round_name, "host_us"),
                                                       times(sequence_name, "host_us"))])

        def counts(name):
            values = sorted(set(times(name, "launches")), key=lambda n: -1 if n is None else n)
            return "-".join(_launches(n) for n in values)

        graph, sequence = times("round", "graph_us"), times("sequence", "graph_us")
        round_host, sequence_host = times("round fn", "host_us"), times("sequence fn", "host_us")
        lines.append(
            f"| {METHOD_LABELS.get(method, method)} | {k} "
            f"| {' / '.join(_number(us) for us in graph)} "
            f"({_span([_ratio(us, floor) for us in graph])}x) "
            f"| {_span(sequence, 1)} | {_span([_ratio(a, b) for a, b in zip(graph, sequence)])} "
            f"| {counts('round')} / {counts('sequence')} "
            f"| {_span(round_host, 1)} / {_span(sequence_host, 0)} "
            f"| {host_ratios('round fn', 'sequence fn')} "
            f"/ {host_ratios(f'round fn, {TWO_SIZES}', f'sequence fn, {TWO_SIZES}')} "
            f"/ {host_ratios(f'round fn, {SIZES_CHANGING}', f'sequence fn, {SIZES_CHANGING}')} "
            f"| {host_ratios('round', 'sequence')} |")
    return "\n".join(lines)


def plot(cases, floor, path):
    plt = bench_ops.pyplot()
    if plt is None:
        return
    metrics = [(metric, title) for metric, title in
               (("host_us", "host µs per eager round"),
                ("graph_us", "GPU µs per round in a CUDA graph"))
               if any(case["times"]["round"].get(metric) for case in cases)]
    figure, axes = plt.subplots(len(metrics), 1, figsize=(max(12, 0.5 * len(cases)),
                                                          4.5 * len(metrics)),
                                sharex=True, squeeze=False)
    for ax, (metric, title) in zip(axes[:, 0], metrics):
        for offset, name in ((-0.2, "round"), (0.2, "sequence")):
            values = [case["times"][name].get(metric) or float("nan") for case in cases]
            ax.bar([x + offset for x in range(len(cases))], values, 0.4, label=name)
        if floor and floor.get(metric):
            ax.axhline(floor[metric], color="black", linestyle="--", linewidth=1,
                       label="empty Triton kernel")
        ax.set_yscale("log")
        ax.set_ylabel("µs")
        ax.set_title(title)
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0, 0].legend(fontsize="small")
    axes[-1, 0].set_xticks(range(len(cases)))
    axes[-1, 0].set_xticklabels(
        [f"{case['method']} R={case['num_reqs']} K={case['k']}" for case in cases],
        rotation=60, ha="right")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true",
                        help="small CPU inputs: check op == sequence and the code paths, no GPU "
                             "timing (automatic without CUDA)")
    parser.add_argument("--results-dir", type=Path,
                        help=f"where the JSON and PNG go (default {HERE / 'results'}; a "
                             f"temporary directory in smoke mode); also copied to $OUT when set")
    parser.add_argument("--markdown", type=Path, metavar="JSON",
                        help="print the README's round-op table from a results JSON this "
                             "script wrote, and exit (runs nothing)")
    args = parser.parse_args()
    if args.markdown:
        print(markdown_table(json.loads(args.markdown.read_text())))
        return 0
    results_dir = args.results_dir or (Path(tempfile.mkdtemp()) if SMOKE else HERE / "results")

    started = time.perf_counter()
    floor = None if SMOKE else empty_kernel_floor()
    cases = []
    for method, op, inputs in METHODS:
        for k in NUM_DRAFTS:
            for num_reqs in NUM_REQS:
                cases.append(bench_case(method, op, inputs, num_reqs, k))
                print(f"[{time.perf_counter() - started:6.1f} s] {method} R={num_reqs} K={k}",
                      file=sys.stderr, flush=True)
    targets = evaluate_targets(cases, floor)

    stem = "bench_rounds_smoke" if SMOKE else "bench_rounds"
    results_dir.mkdir(parents=True, exist_ok=True)
    paths = [results_dir / f"{stem}.json", results_dir / f"{stem}.png"]
    report = {"machine": machine_info(),
              "config": {"num_reqs": NUM_REQS, "num_drafts": NUM_DRAFTS,
                         "block_size": BLOCK_SIZE, "max_model_len": MAX_MODEL_LEN,
                         "vocab_size": VOCAB_SIZE,
                         "cuda_graph_token_multiple": CUDA_GRAPH_TOKEN_MULTIPLE,
                         "host_calls": bench_ops.HOST_CALLS,
                         "host_repeats": bench_ops.HOST_REPEATS,
                         "graph_calls": bench_ops.GRAPH_CALLS,
                         "graph_replays": bench_ops.GRAPH_REPLAYS,
                         "seconds": round(time.perf_counter() - started, 1)},
              "empty_kernel": floor, "cases": cases, "targets": targets}
    paths[0].write_text(json.dumps(report, indent=1))
    plot(cases, floor, paths[1])
    bench_ops.copy_to_out(paths)

    print(json.dumps(report["machine"]))
    print(f"wrote {', '.join(map(str, paths))} in {report['config']['seconds']} s")
    print_summary(cases, targets)
    print_table(cases, floor)
    failed = any(case["mismatches"] for case in cases) or any(
        "error" in time_ for case in cases for time_ in case["times"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
