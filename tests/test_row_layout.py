"""The row layout of 1.3, 1.4 and 1.7 (decode-sized batches, several requests per program) on
garbage query_start_loc values, which no check can see without reading the device: it writes
nothing outside its out buffers, and 1.7's row layout writes what the per-request layout
writes wherever one request owns an entry. Then valid batches whose long requests share a
program, with remainders past the tile longer than a loop iteration: the row layout writes
what the per-request layout writes. (Valid inputs take either layout in the property tests.)
Last, the round ops' lanes layout against their per-request layout and the CPU kernel, with
discarded rows that had drafts, chunked prefills among decodes, 6.1's draft steps from int64
extremes and garbage query_start_loc values."""

import contextlib
import random
from unittest import mock

import pytest
import torch
import triton.language as tl

from backends import HAS_CUDA, TRITON, call, run
from round_sequences import engine_batch
from samples import (
    arg_names,
    clone_args,
    parallel_round_past_int32,
    sample,
    written_arg_indices,
)
from spec_ops._triton import dflash, expand, rounds
from spec_ops._triton._launch import ROW_COLS, Launcher, cdiv, next_power_of_2
from spec_ops.validation import parallel_round_sizes

DEVICE = "cuda" if HAS_CUDA else "cpu"
POISON, PAD = -7777, 32
CASES = 40


def guarded(size, dtype=torch.int64):
    """(buffer with PAD poisoned entries on each side, the view between them)."""
    fill = False if dtype == torch.bool else POISON
    buffer = torch.full((size + 2 * PAD,), fill, dtype=dtype, device=DEVICE)
    return buffer, buffer[PAD:PAD + size]


def assert_bands_intact(buffers, views):
    for buffer, view in zip(buffers, views):
        fill = False if buffer.dtype == torch.bool else POISON
        assert (buffer[:PAD] == fill).all() and (buffer[PAD + view.shape[0]:] == fill).all()


def garbage_starts(rng, num_reqs):
    return torch.tensor([rng.randint(-60, 60) for _ in range(num_reqs + 1)],
                        dtype=torch.int32, device=DEVICE)


def forced(module, cols):
    """The launch functions' layout choice fixed: ``cols`` wide rows, or None (per request)."""
    return mock.patch.object(module, "row_cols", lambda *args: cols)


@pytest.mark.parametrize("seed", range(CASES))
def test_new_slot_mapping_rows_equal_per_request_on_garbage(seed):
    rng = random.Random(seed)
    num_reqs, num_new = rng.choice([0, 1, 7, 9, 17]), rng.randint(0, 3)
    starts = garbage_starts(rng, num_reqs)
    num_entries = rng.randint(0, 12 * max(num_reqs, 1))
    block_table = torch.randint(0, 100, (max(num_reqs, 1), 8), dtype=torch.int32,
                                device=DEVICE)
    positions = torch.randint(0, 60, (num_entries,), device=DEVICE)
    rejected = torch.rand(num_entries, device=DEVICE) < 0.2
    results = {}
    for cols in (None, *ROW_COLS):
        buffer, out = guarded(num_entries)
        with forced(expand, cols):
            expand.launch_compute_new_slot_mapping(block_table, starts, positions, rejected,
                                                   out, 16, num_new, 50)
        assert_bands_intact([buffer], [out])
        results[cols] = out.cpu()
    # Entries that two requests own (overlapping garbage ranges) may be written by either.
    owners = [0] * num_entries
    first = int(starts[0])
    for r in range(num_reqs + 1):
        start = int(starts[r]) - first + r * num_new
        count = (int(starts[r + 1]) - int(starts[r]) + num_new if r < num_reqs
                 else num_entries - start)
        for j in range(max(-start, 0), min(count, num_entries - start)):
            owners[start + j] += 1
    single = torch.tensor([n <= 1 for n in owners], dtype=torch.bool)
    for cols in ROW_COLS:
        assert torch.equal(results[cols][single], results[None][single]), cols


@pytest.mark.parametrize("cols", ROW_COLS)
@pytest.mark.parametrize("seed", range(CASES // 2))
def test_expand_rows_write_inside_their_buffers_on_garbage(seed, cols):
    rng = random.Random(seed)
    num_reqs, slots, shift = rng.choice([1, 7, 9, 17]), rng.randint(1, 4), rng.random() < 0.5
    num_tokens = rng.randint(1, 12 * num_reqs)
    num_outputs = num_tokens + num_reqs * (slots - 1 if shift else slots)
    sizes = [(num_outputs, torch.int64), (num_outputs, torch.int64), (num_outputs, torch.bool),
             (num_outputs, torch.bool), (num_reqs * slots, torch.int64),
             (num_tokens, torch.int64)]
    buffers, outs = zip(*[guarded(size, dtype) for size, dtype in sizes])
    ends = torch.tensor([rng.randint(-60, 60) for _ in range(num_reqs)], dtype=torch.int32,
                        device=DEVICE)
    with forced(expand, cols):
        expand.launch_copy_and_expand_eagle_inputs(
            torch.randint(0, 1000, (num_tokens,), device=DEVICE),
            torch.randint(0, 100, (num_tokens,), device=DEVICE),
            torch.randint(0, 1000, (num_reqs,), dtype=torch.int32, device=DEVICE), *outs,
            garbage_starts(rng, num_reqs), ends, 3, 1001, slots, shift, num_outputs)
    assert_bands_intact(buffers, outs)


@pytest.mark.parametrize("cols", ROW_COLS)
@pytest.mark.parametrize("seed", range(CASES // 2))
def test_dflash_rows_write_inside_their_buffers_on_garbage(seed, cols):
    rng = random.Random(seed)
    num_reqs, num_query = rng.choice([1, 7, 9, 17]), rng.randint(1, 4)
    num_context = rng.randint(1, 12 * num_reqs)
    sizes = [num_reqs * num_query, num_context, num_reqs * num_query, num_context,
             num_reqs * num_query, num_reqs * (num_query - 1)]
    buffers, outs = zip(*[guarded(size) for size in sizes])
    rejected = torch.tensor([rng.randint(-5, 20) for _ in range(num_reqs)], dtype=torch.int32,
                            device=DEVICE)
    with forced(dflash, cols):
        dflash.launch_copy_and_expand_dflash_inputs(
            torch.randint(0, 1000, (num_reqs,), dtype=torch.int32, device=DEVICE),
            torch.randint(0, 100, (num_context,), device=DEVICE), *outs,
            torch.randint(0, 100, (num_reqs, 8), dtype=torch.int32, device=DEVICE),
            garbage_starts(rng, num_reqs), rejected if rng.random() < 0.5 else None, 1001,
            16, num_query, num_query - 1)
    assert_bands_intact(buffers, outs)


# Valid requests, three long ones of different lengths in one program's rows (ROW_GROUP
# requests p, p + P, ... of P = 3 programs): 0, 3 and 6, whose remainders past the tile span
# several ROW_TAIL chunks laid end to end, a fourth long one in another program, a fifth, the
# only one of the third program with items past the tile and more than LONE_TAIL of them (its
# own loop), short ones elsewhere, and the last program's empty rows.
NUM_LONG_REQS = 17
LONG_LENGTHS = {0: 700, 3: 300, 6: 1100, 4: 40, 2: 1300}


def long_among_short_starts(rng):
    lengths = [LONG_LENGTHS.get(r, rng.randint(1, 4)) for r in range(NUM_LONG_REQS)]
    starts = torch.tensor([0, *lengths], device=DEVICE).cumsum(0)
    return lengths, starts.to(torch.int32)


def assert_rows_equal_per_request(module, launch, sizes):
    """``launch(outs)`` with each layout writes the same whole poisoned buffers."""
    results = {}
    for cols in (None, *ROW_COLS):
        buffers, outs = zip(*[guarded(size, dtype) for size, dtype in sizes])
        with forced(module, cols):
            launch(outs)
        results[cols] = [buffer.cpu() for buffer in buffers]
    for cols in ROW_COLS:
        for got, expected in zip(results[cols], results[None]):
            assert torch.equal(got, expected), cols


@pytest.mark.parametrize("shift", [False, True])
def test_expand_rows_equal_per_request_with_long_requests(shift):
    rng = random.Random(int(shift))
    lengths, starts = long_among_short_starts(rng)
    num_tokens, slots = int(starts[-1]), 3
    num_outputs = num_tokens + NUM_LONG_REQS * (slots - 1 if shift else slots)
    ends = torch.tensor([int(starts[r + 1]) - 1 - rng.randint(0, min(lengths[r] - 1, slots))
                         for r in range(NUM_LONG_REQS)], dtype=torch.int32, device=DEVICE)
    args = (torch.randint(0, 1000, (num_tokens,), device=DEVICE),
            torch.randint(0, 100, (num_tokens,), device=DEVICE),
            torch.randint(0, 1000, (NUM_LONG_REQS,), dtype=torch.int32, device=DEVICE))
    assert_rows_equal_per_request(
        expand,
        lambda outs: expand.launch_copy_and_expand_eagle_inputs(
            *args, *outs, starts, ends, 3, 1001, slots, shift, num_outputs),
        [(num_outputs, torch.int64), (num_outputs, torch.int64), (num_outputs, torch.bool),
         (num_outputs, torch.bool), (NUM_LONG_REQS * slots, torch.int64),
         (num_tokens, torch.int64)])


@pytest.mark.parametrize("past_the_last", [600, 0])
def test_new_slot_mapping_rows_equal_per_request_with_long_requests(past_the_last):
    """Also a long row past the last request (entries the padding row sets to -1), in the
    program of the request that is otherwise alone in its group with items past the tile."""
    rng = random.Random(0)
    _, starts = long_among_short_starts(rng)
    num_new = 2
    num_entries = int(starts[-1]) + NUM_LONG_REQS * num_new + past_the_last
    args = (torch.randint(0, 100, (NUM_LONG_REQS, 80), dtype=torch.int32, device=DEVICE),
            starts, torch.randint(0, 1200, (num_entries,), device=DEVICE),
            torch.rand(num_entries, device=DEVICE) < 0.2)
    assert_rows_equal_per_request(
        expand,
        lambda outs: expand.launch_compute_new_slot_mapping(*args, *outs, 16, num_new, 1100),
        [(num_entries, torch.int64)])


@pytest.mark.parametrize("with_rejected", [False, True])
def test_dflash_rows_equal_per_request_with_long_requests(with_rejected):
    rng = random.Random(int(with_rejected))
    lengths, starts = long_among_short_starts(rng)
    num_context, num_query = int(starts[-1]), 3
    rejected = torch.tensor([rng.randint(0, lengths[r] - 1) for r in range(NUM_LONG_REQS)],
                            dtype=torch.int32, device=DEVICE)
    next_token_ids = torch.randint(0, 1000, (NUM_LONG_REQS,), dtype=torch.int32,
                                   device=DEVICE)
    positions = torch.randint(0, 1200, (num_context,), device=DEVICE)
    block_table = torch.randint(0, 100, (NUM_LONG_REQS, 80), dtype=torch.int32, device=DEVICE)
    sizes = [NUM_LONG_REQS * num_query, num_context, NUM_LONG_REQS * num_query, num_context,
             NUM_LONG_REQS * num_query, NUM_LONG_REQS * (num_query - 1)]
    assert_rows_equal_per_request(
        dflash,
        lambda outs: dflash.launch_copy_and_expand_dflash_inputs(
            next_token_ids, positions, *outs, block_table, starts,
            rejected if with_rejected else None, 1001, 16, num_query, num_query - 1),
        [(size, torch.int64) for size in sizes])


# --- the round ops' lanes layout ---------------------------------------------------------------

EAGLE = "prepare_eagle_round"
I64_MAX = 2**63 - 1


def round_layouts():
    """The round ops' layouts, each forced at any batch size: (name, patches of the choice):
    one program per request and chunk, and the lanes layout with REMAINDER_SPLIT remainder
    programs per group and with one per request of a group (rounds.lanes_split)."""
    def split(value):
        return [mock.patch.object(rounds, "lanes_split",
                                  lambda num_items, num_reqs, lanes, *pays: (
                                      None if lanes is None else value(num_reqs)))]
    return [("per request", split(lambda num_reqs: None)),
            ("lanes", split(lambda num_reqs: rounds.REMAINDER_SPLIT.value)),
            ("lanes, a remainder program per request", split(
                lambda num_reqs: min(rounds.REMAINDER_REQS.value,
                                     next_power_of_2(max(num_reqs, 1)))))]


def run_recording(op, args):
    """(the op's outputs through its Triton kernels, the names of the kernels it launched)."""
    original = Launcher.__call__
    kernels = []

    def record(self, grid, args, num_warps=None, grid_y=1):
        kernels.append(self.kernel.fn.__name__)
        return original(self, grid, args, num_warps, grid_y)

    with mock.patch.object(Launcher, "__call__", record):
        return run(op, args, TRITON), kernels


def assert_outputs_equal(got, expected, name=None):
    """Each of the op's outputs holds the expected values (``name``: the layout, for the
    message)."""
    for i, (actual, want) in enumerate(zip(got, expected, strict=True)):
        assert actual.tolist() == want.tolist(), (name, f"output {i}")


def assert_layouts_equal_cpu(op, args, lanes_possible=True):
    """Each layout writes what the CPU kernel writes; the forced lanes layout launched its
    kernel unless ``lanes_possible`` is false (its draft steps have no closed form there)."""
    expected = run(op, args, "cpu")
    for name, patches in round_layouts():
        with contextlib.ExitStack() as stack:
            for patch in patches:
                stack.enter_context(patch)
            got, kernels = run_recording(op, args)
        assert (kernels[0].endswith("_lanes_kernel")
                == (name != "per request" and lanes_possible)), (name, kernels)
        assert_outputs_equal(got, expected, name)


ROUND_OPS = ["prepare_eagle_round", "prepare_parallel_round", "prepare_dflash_round"]
PARALLEL = "prepare_parallel_round"


@pytest.mark.parametrize("seed", [2, 4, 6])
def test_parallel_round_layouts_past_int32(seed):
    """Every layout of 6.2 on int32 buffers with positions past 2^31 - 1: slots looked up at the
    positions as out_positions holds them, draft steps from the int64 start (test_rounds.py
    checks the CPU kernel there)."""
    assert_layouts_equal_cpu("prepare_parallel_round", parallel_round_past_int32(seed))


def op_lanes(op, args):
    """The op's lanes per request for this call (None where they exceed MAX_LANES)."""
    if op == "prepare_dflash_round":
        return rounds.round_lanes(args[0].shape[1], args[21] + 1)
    if op == "prepare_eagle_round":
        return rounds.round_lanes(args[0].shape[1], args[22])
    return rounds.parallel_lanes(args[0].shape[1], args[25], args[26], args[29])


def lanes_possible(op, args):
    """Whether the op's lanes layout can take this call (forced at any size): its lanes fit and
    its draft steps have a closed form."""
    if op == "prepare_dflash_round":
        return op_lanes(op, args) is not None
    max_model_len, num_steps = (args[21], args[22]) if op == "prepare_eagle_round" else (
        args[28], args[29])
    return op_lanes(op, args) is not None and rounds.closed_form_steps(max_model_len, num_steps)


def num_steps_of(op, args):
    return args[22] if op == "prepare_eagle_round" else args[29]


def with_num_steps(op, args, num_steps):
    """The call with ``num_steps`` draft steps: its step outs reallocated with as many rows
    (poisoned, their columns and dtypes kept)."""
    args = list(args)
    first, count = (16, 22) if op == "prepare_eagle_round" else (19, 29)
    for i in range(first, first + 3):
        args[i] = torch.full((num_steps, args[i].shape[1]), -7, dtype=args[i].dtype)
    args[count] = num_steps
    return args


@pytest.mark.parametrize("op", ROUND_OPS[:2])
@pytest.mark.parametrize("many_steps", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_round_steps_step_after_step_equal_closed_form(op, seed, many_steps):
    """The per-request kernels' draft steps in both forms they compile to, 1.5 applied step
    after step (where no closed form holds) and the closed form, write what the CPU kernel
    writes, on batches with draft steps. ``many_steps``: 40 steps, three of the kernel's
    vectors of STEP_LANES steps, each vector going on from the values the one before ended
    at; with max_model_len 24 no closed form holds and only the step-after-step form runs."""
    args = next(args for args in (sample(op, 100 * seed + n, 9) for n in range(100))
                if num_steps_of(op, args) > 0)
    if many_steps:
        args = with_num_steps(op, args, 2 * rounds.STEP_LANES.value + 8)
    expected = run(op, args, "cpu")
    per_request = mock.patch.object(rounds, "lanes_split", lambda *shape: None)
    max_model_len = args[21] if op == "prepare_eagle_round" else args[28]
    closed = rounds.closed_form_steps(max_model_len, num_steps_of(op, args))
    for form in (rounds.ITERATED_STEPS.value, rounds.CLOSED_STEPS.value)[:1 + closed]:
        forms = []

        def pick(max_model_len, num_steps, form=form):
            forms.append(form)
            return form

        with per_request, mock.patch.object(rounds, "step_form", pick):
            got, kernels = run_recording(op, args)
        assert forms and not kernels[0].endswith("_lanes_kernel"), kernels
        assert_outputs_equal(got, expected, f"form {form}")


@pytest.mark.parametrize("op", ROUND_OPS)
@pytest.mark.parametrize("long_requests", [False, "prefill"])
@pytest.mark.parametrize("seed", range(12))
def test_round_layouts_equal_cpu(op, seed, long_requests):
    """Both layouts write what the CPU kernel writes: on decode batches (with discarded rows
    that had drafts, which the engine never schedules: the CPU kernel defines them), and with
    chunked prefills of 300-900 tokens, whose items past their lanes the lanes layout's
    remainder programs write."""
    num_reqs = random.Random(seed).choice([0, 1, 5, 8, 9, 33])
    args = sample(op, seed, num_reqs, long_requests=long_requests)
    assert_layouts_equal_cpu(op, args, lanes_possible=lanes_possible(op, args))


@pytest.mark.parametrize("op", ROUND_OPS)
@pytest.mark.parametrize("seed", range(6))
def test_round_layouts_equal_cpu_with_requests_without_tokens(op, seed):
    """Requests without tokens among the others and last (the request count padded for a CUDA
    graph): every layout writes what the CPU kernel writes."""
    num_reqs = random.Random(seed).choice([1, 5, 8, 9])
    args = sample(op, seed, num_reqs, empty_requests=True)
    assert_layouts_equal_cpu(op, args, lanes_possible=lanes_possible(op, args))


@pytest.mark.parametrize("op", ROUND_OPS)
@pytest.mark.parametrize("seed", range(8))
def test_round_layouts_equal_cpu_where_positions_do_not_follow_seq_lens(op, seed):
    """The lanes kernels of 6.1 and 6.3 read the block table at the positions a serving
    engine's batch has (each request's up to seq_lens[r] - 1) together with the positions, and
    again where a position falls in another block (csrc_triton/_indexing.checked_block). Here
    every other request's seq_len is off, by one, by a block or more, so each program of two or
    more requests holds both kinds (6.1 with draft steps): every layout writes what the CPU
    kernel writes."""
    num_reqs = random.Random(seed).choice([5, 8, 9, 33])
    args = next(args for args in (list(engine_batch(sample(op, 100 * seed + n, num_reqs)))
                                  for n in range(100))
                if (op != EAGLE or num_steps_of(op, args) > 0)
                and (op_lanes(op, args) or rounds.MAX_LANES) < rounds.MAX_LANES)
    names = arg_names(op)
    seq_lens_arg = names.index("seq_lens")
    seq_lens, block_size = args[seq_lens_arg], args[names.index("block_size")]
    off = [block_size, -block_size, 1, 3 * block_size, -1, 97]
    offsets = [0 if r % 2 == 0 else off[(r // 2 + seed) % len(off)]
               for r in range(seq_lens.shape[0])]
    args[seq_lens_arg] = seq_lens + torch.tensor(offsets, dtype=seq_lens.dtype)
    assert_layouts_equal_cpu(op, tuple(args), lanes_possible=lanes_possible(op, args))


@pytest.mark.parametrize("op", ROUND_OPS)
def test_round_layouts_with_int32_tokens_and_a_vocabulary_past_int32(op):
    """vocab_size is a constexpr of 6.1's and 6.2's lanes kernels (rounds.CONFIG_CONSTEXPRS):
    int32 sampled ids compared with a vocab_size past 2^31 - 1 are compared in int64 there,
    as in the other kernels; every layout writes what the CPU kernel writes."""
    args = list(engine_batch(sample(op, 5, 9, fixed_dtype=torch.int32)))
    names = arg_names(op)
    assert args[names.index("sampled_token_ids")].dtype == torch.int32
    args[names.index("vocab_size")] = 2**31 + 5
    assert_layouts_equal_cpu(op, tuple(args), lanes_possible=lanes_possible(op, args))


@pytest.mark.parametrize("op", ROUND_OPS)
def test_round_remainders_dealt_over_strided_groups(op):
    """150 requests, three strided groups of remainder programs: a dozen 300-900-token chunked
    prefills and many requests a few tokens past their lanes, whose chunks each group's
    programs deal out as one sequence. Every layout writes what the CPU kernel writes;
    the op's own choice (the batch is above its lanes, its chunks no more than its groups'
    programs) is the lanes layout with a remainder program per request of a group, for 6.1
    and 6.3."""
    args = engine_batch(sample(op, 3, 150, long_requests="prefill"))
    lengths = (args[4][1:] - args[4][:-1]).tolist()
    assert sum(n >= 300 for n in lengths) >= 5 and sum(5 <= n < 300 for n in lengths) >= 10
    assert_layouts_equal_cpu(op, args, lanes_possible=lanes_possible(op, args))
    if op != "prepare_parallel_round" and lanes_possible(op, args):
        # The items the launch counts: 6.1's target tokens, 6.3's context positions.
        assert (rounds.lanes_split(args[5].shape[0], 150, op_lanes(op, args))
                == rounds.REMAINDER_REQS.value)


@pytest.mark.parametrize("op", ["prepare_eagle_round", "prepare_dflash_round"])
def test_round_few_requests_with_a_long_one_take_the_lanes_layout(op):
    """A chunked prefill among a few decodes (12 requests, one group, whose 64-item chunks are
    more than its requests and no more than its programs): the op's own choice is the lanes
    layout with a remainder program per chunk, and it writes what the CPU kernel writes."""
    for seed in range(200):
        args = engine_batch(sample(op, seed, 12, long_requests="prefill"))
        lengths = args[4][1:] - args[4][:-1]
        chunks = cdiv(args[5].shape[0], rounds.PER_REQUEST_BLOCK)
        if lanes_possible(op, args) and (lengths >= 300).any() and 16 < chunks <= 64:
            break
    else:
        raise AssertionError("no sample with a long request")
    assert rounds.lanes_split(args[5].shape[0], 12, op_lanes(op, args)) == next_power_of_2(chunks)
    got, kernels = run_recording(op, args)
    assert kernels == [f"_{op}_lanes_kernel"]
    assert_outputs_equal(got, run(op, args, "cpu"))


def test_lanes_split_follows_the_batch_shape():
    """The round ops' layout choice from shapes (rounds.lanes_split): decode-sized batches take
    the lanes layout with REMAINDER_SPLIT remainder programs per group where it pays; batches
    of several requests whose chunks of PER_REQUEST_BLOCK items do not outnumber their groups'
    REMAINDER_REQS programs each take it with one per request of a group or per chunk (a
    power of two, at most REMAINDER_REQS; 6.2: where it pays); longer batches, a single
    request above its lanes and lanes too wide the per-request layout."""
    split, per_request = rounds.REMAINDER_SPLIT.value, rounds.REMAINDER_REQS.value
    assert rounds.lanes_split(4 * 1024, 1024, 4) == split
    assert rounds.lanes_split(4 * 64, 64, 4, pays=False) is None
    assert rounds.lanes_split(4 * 1024 + 2048, 1024, 4) == per_request
    assert rounds.lanes_split(4 * 20 + 500, 20, 4) == 32     # the group's 20 requests
    assert rounds.lanes_split(4 * 7 + 2048, 8, 4) == 64      # its 33 chunks
    assert rounds.lanes_split(4 * 7 + 300, 8, 4) == 8
    assert rounds.lanes_split(64 * 64 + 1, 8, 4) is None     # 65 chunks, one group
    assert rounds.lanes_split(2048, 1, 4) is None
    assert rounds.lanes_split(4, 1, 4) == split
    assert rounds.lanes_split(4 * 64 + 2048, 64, 4, True, long_pays=False) is None
    assert rounds.lanes_split(64 * 1024 + 1, 1024, 4) is None
    assert rounds.lanes_split(4, 1, None) is None


def test_parallel_round_with_draft_steps_takes_the_lanes_layout_below_256_requests():
    """6.2 below LANES_MIN_REQS requests with fewer than LANES_MIN_COLS sampled columns: a
    decode-sized batch with draft steps (the draft model) takes the lanes layout, the same
    batch without steps (P-EAGLE, PARD) and a batch above decode size with steps one program
    per request and chunk; each writes what the CPU kernel writes."""
    op = "prepare_parallel_round"
    assert rounds.lanes_pay(64, 4, 2) and not rounds.lanes_pay(64, 4, 0)
    seen = set()
    for seed in range(300):
        args = engine_batch(sample(op, seed, 12))
        _, num_first_pass = parallel_round_sizes(args[5], 12, args[25], args[26])
        num_cols = args[0].shape[1]
        if not lanes_possible(op, args) or num_cols >= rounds.LANES_MIN_COLS:
            continue
        decode = rounds.decode_sized(num_first_pass, 12, op_lanes(op, args))
        case = (decode, num_steps_of(op, args) > 0)
        if case in seen or case == (False, False):
            continue
        seen.add(case)
        got, kernels = run_recording(op, args)
        lanes = "_prepare_parallel_round_lanes_kernel"
        assert kernels == [lanes if case == (True, True) else
                           "_prepare_parallel_round_kernel"], (seed, case)
        assert_outputs_equal(got, run(op, args, "cpu"))
    assert seen == {(True, True), (True, False), (False, True)}


@pytest.mark.skipif(HAS_CUDA, reason="a compiled kernel keeps the chunk width it compiled with")
@pytest.mark.parametrize("op", ROUND_OPS)
@pytest.mark.parametrize("seed", range(4))
def test_round_remainders_in_narrow_chunks(op, seed):
    """The remainder programs deal out a long request's items chunk by chunk (the group's
    chunks in request order, the c-th to program c mod S of the group): with 16-item chunks,
    the 300-900-token requests span many more chunks than a group has programs. 33 requests
    in groups of 16: three strided groups, about three long requests among them."""
    args = engine_batch(sample(op, seed, 33, long_requests="prefill"))
    lengths = args[4][1:] - args[4][:-1]
    assert (lengths >= 300).any()
    with mock.patch.object(rounds, "WIDE_CHUNK", tl.constexpr(16)), \
            mock.patch.object(rounds, "REMAINDER_CHUNK", tl.constexpr(16)), \
            mock.patch.object(rounds, "PARALLEL_REMAINDER_CHUNK", tl.constexpr(16)), \
            mock.patch.object(rounds, "REMAINDER_REQS", tl.constexpr(16)):
        assert_layouts_equal_cpu(op, args)


@pytest.mark.parametrize("max_model_len", [1, 2, 3, 2**40, I64_MAX - 1, I64_MAX])
@pytest.mark.parametrize("seed", range(4))
def test_eagle_round_step_edges(seed, max_model_len):
    """Draft steps from int64 extremes: seq_lens at and past max_model_len and 2^63 - 1,
    positions near max_model_len and 2^63. Both layouts equal the CPU kernel's 1.5 applied
    step by step; the lanes layout's closed form where it holds, the per-request layout where
    it would not (max_model_len at most the step count, where positions wrap more than once,
    or within the step count of 2^63, where seq_len + steps would overflow)."""
    rng = random.Random(seed)
    args = list(engine_batch(sample(EAGLE, seed, 9)))
    num_tokens, num_reqs = args[5].shape[0], args[0].shape[0]
    # Positions k steps before max_model_len wrap at step k.
    extremes = [0, 1, I64_MAX - 1, I64_MAX, *(max_model_len - k for k in range(4))]
    args[6] = torch.tensor([rng.choice(extremes + [rng.randint(0, 50)])
                            for _ in range(num_tokens)], dtype=torch.int64)
    args[9] = torch.tensor([rng.choice(extremes + [rng.randint(0, 50)])
                            for _ in range(args[9].shape[0])], dtype=torch.int64)
    args[18] = args[18].to(torch.int64)
    args[21] = max_model_len
    assert num_reqs == 9 and args[22] >= 0
    assert_layouts_equal_cpu(EAGLE, args, lanes_possible=lanes_possible(EAGLE, args))


@pytest.mark.parametrize("max_model_len", [1, 2, 3])
@pytest.mark.parametrize("seed", range(3))
def test_draft_model_round_steps_past_max_model_len(seed, max_model_len):
    """6.2 for the draft model with max_model_len at most its step count, where positions wrap
    more than once and no closed form holds: every layout choice takes the per-request kernel
    with the steps applied one after the other, equal to the CPU kernel."""
    args = next(args for args in (list(sample(PARALLEL, 100 * seed + n, 9)) for n in range(400))
                if args[29] >= max_model_len)
    args[28] = max_model_len
    assert rounds.step_form(max_model_len, args[29]) == rounds.ITERATED_STEPS.value
    assert_layouts_equal_cpu(PARALLEL, args, lanes_possible=False)


@pytest.mark.parametrize("op", ROUND_OPS)
@pytest.mark.parametrize("seed", range(10))
def test_round_layouts_write_inside_their_buffers_on_garbage(op, seed):
    """Garbage query_start_loc values (negative, decreasing, past the batch): both layouts
    write nothing outside any out buffer (every 1-D out sits between poisoned bands)."""
    rng = random.Random(seed)
    num_reqs = rng.choice([1, 7, 9, 33])
    args = list(clone_args(sample(op, seed, num_reqs), DEVICE))
    args[4] = garbage_starts(rng, num_reqs).to(args[4].dtype)
    for name, patches in round_layouts():
        buffers, views = [], []
        for i in written_arg_indices(op):
            if args[i].dim() == 1:
                buffer, args[i] = guarded(args[i].shape[0], args[i].dtype)
                buffers.append(buffer)
                views.append(args[i])
        with contextlib.ExitStack() as stack:
            for patch in patches:
                stack.enter_context(patch)
            call(op, args, TRITON)
        assert_bands_intact(buffers, views)
