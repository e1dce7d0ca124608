"""Random valid inputs for every op, shaped the way an engine produces them.

``SAMPLERS[op](rng, num_reqs)`` returns the op's positional arguments (CPU tensors). Out
buffers are longer than the op writes and filled with POISON (bool outs with a random
pattern), 2-D inputs are row-strided views, and integer tensors are int32 or int64 at random,
so every test that iterates these samples also covers layouts, dtypes and untouched regions.
Adding an op means adding a sampler here, not new tests.

``sample(..., fixed_dtype=torch.int32)`` pins what a serving loop keeps fixed from step to
step: dtypes, layouts, per-request lengths, and the scalar arguments (drawn from their own
stream, the same for every seed). Only the batch size and the values change, which is what
torch.compile (no recompilation) and CUDA-graph replay tests need.
"""

import random

import torch

POISON = -7777


class UniformDtypeRandom(random.Random):
    """A Random whose integer tensors all get one dtype (each dtype mix is a Triton compile on
    a GPU, so GPU runs draw one dtype per sample)."""

    def __new__(cls, seed, dtype):      # Python 3.10's Random.__new__ takes the seed alone
        return super().__new__(cls, seed)

    def __init__(self, seed, dtype):
        super().__init__(seed)
        self.dtype = dtype


class FixedLayoutRandom(UniformDtypeRandom):
    """Also fixed layouts, lengths and scalars: only values vary with the seed."""

    def __init__(self, seed, dtype):
        super().__init__(seed, dtype)
        self.scalars = random.Random(0)


def scalars(rng):
    """The stream scalar arguments are drawn from."""
    return rng.scalars if isinstance(rng, FixedLayoutRandom) else rng


def request_length(rng, low, high):
    """A per-request token count (3 under FixedLayoutRandom; 100-300 for long requests, or for
    about one request in 30 with long_requests="some"; 300-900 for about one in 10 with
    long_requests="prefill")."""
    long_requests = getattr(rng, "long_requests", False)
    if long_requests is True or (long_requests == "some" and rng.random() < 1 / 30):
        return rng.randint(100, 300)
    if long_requests == "prefill" and rng.random() < 1 / 10:
        return rng.randint(300, 900)
    return pick(rng, range(low, high + 1), 3)


def empty_request(rng, r, num_reqs):
    """Whether request r of num_reqs gets no tokens (only with empty_requests; the last request
    more often than the others)."""
    return (getattr(rng, "empty_requests", False)
            and rng.random() < (0.6 if r == num_reqs - 1 else 0.25))


def pick(rng, options, fixed):
    """A random choice of ``options``, or ``fixed`` under FixedLayoutRandom."""
    return fixed if isinstance(rng, FixedLayoutRandom) else rng.choice(options)


def int_dtype(rng):
    if isinstance(rng, UniformDtypeRandom):
        return rng.dtype
    return rng.choice((torch.int32, torch.int64))


def ints(rng, values):
    return torch.tensor(values, dtype=int_dtype(rng))


def out_buffer(rng, length, dtype=None):
    """A poisoned out buffer with 0-3 spare entries past ``length``."""
    size = length + pick(rng, range(4), 2)
    if dtype is torch.bool:
        return torch.tensor([rng.random() < 0.5 for _ in range(size)], dtype=torch.bool)
    return torch.full((size,), POISON, dtype=dtype or int_dtype(rng))


def out_matrix(rng, rows, cols):
    """A poisoned 2-D out buffer with spare rows/columns and sometimes a padded row stride."""
    spare_cols = pick(rng, (0, 1, 2, 3), 3)
    full = torch.full((rows + pick(rng, range(3), 1), cols + spare_cols), POISON,
                      dtype=int_dtype(rng))
    return full[:, : cols + pick(rng, range(spare_cols + 1), 1)]


def strided_matrix(rng, rows, cols, low, high):
    """A [rows, cols] int tensor, often a view of a wider one (row stride > cols)."""
    pad = pick(rng, (0, 0, 1, 5), 5)
    full = ints(rng, [[rng.randint(low, high) for _ in range(cols + pad)] for _ in range(rows)])
    return full.reshape(rows, cols + pad)[:, :cols]


def block_table(rng, num_reqs, max_position, block_size):
    """Block table with enough columns for max_position, sometimes one short (clamp path)."""
    cols = max(1, max_position // block_size + 1 - pick(rng, (0, 0, 0, 1), 1))
    return strided_matrix(rng, num_reqs + pick(rng, range(3), 1), cols, 0, 1000)


def query_start_loc(rng, lengths, first=0):
    starts = [first]
    for length in lengths:
        starts.append(starts[-1] + length)
    return ints(rng, starts)


def rejection_sampler_output(rng, num_reqs, num_cols, vocab_size):
    """[R, K + 1]: accepted tokens then -1s; some rows carry ids out of range or -5."""
    rows = []
    for _ in range(num_reqs):
        accepted = rng.randint(0, num_cols)
        row = [rng.randrange(vocab_size) for _ in range(accepted)] + [-1] * (num_cols - accepted)
        if rng.random() < 0.3:
            row[rng.randrange(num_cols)] = rng.choice((-5, vocab_size, vocab_size + 7,
                                                       rng.randrange(vocab_size)))
        rows.append(row)
    if not rows:
        return torch.empty((0, num_cols), dtype=int_dtype(rng))
    pad = pick(rng, (0, 0, 2), 2)
    return ints(rng, [row + [-1] * pad for row in rows])[:, :num_cols]


def sample_next_token(rng, num_reqs):
    vocab_size = scalars(rng).choice((50, 100, 32000))
    num_cols = num_drafts(rng, 1, 6)
    return (rejection_sampler_output(rng, num_reqs, num_cols, vocab_size),
            torch.tensor([rng.random() < 0.2 for _ in range(num_reqs)], dtype=torch.bool),
            ints(rng, [rng.randrange(vocab_size) for _ in range(num_reqs)]),
            out_buffer(rng, num_reqs), out_buffer(rng, num_reqs), vocab_size)


def _padded_batch(rng, num_reqs):
    """(cu_num_draft_tokens, valid counts, query_start_loc) of a padded drafter batch."""
    drafts = [rng.randint(0, 4) for _ in range(num_reqs)]
    valid = [rng.randint(0, d + 1) if d else rng.randint(0, 1) for d in drafts]
    cumulative, total = [], 0
    for d in drafts:
        total += d
        cumulative.append(total)
    lengths = [d + 1 + rng.choice((0, 0, 2)) for d in drafts]
    return ints(rng, cumulative), ints(rng, valid), query_start_loc(rng, lengths)


def sample_prepare_inputs(rng, num_reqs):
    cu, valid, qsl = _padded_batch(rng, num_reqs)
    if pick(rng, (False, False, True), True):
        valid = torch.cat([valid, ints(rng, [9, 9])]).to(valid.dtype)   # longer counts buffer
    return cu, valid, qsl, out_buffer(rng, num_reqs), out_buffer(rng, num_reqs)


def sample_fused_padded(rng, num_reqs):
    sampled, discard, backup, next_ids, counts, vocab_size = sample_next_token(rng, num_reqs)
    cu, _, qsl = _padded_batch(rng, num_reqs)
    return (sampled, discard, backup, cu, qsl, next_ids, counts, out_buffer(rng, num_reqs),
            out_buffer(rng, num_reqs), vocab_size)


def sample_copy_and_expand(rng, num_reqs):
    shift = scalars(rng).random() < 0.5
    slots = scalars(rng).randint(1, 4)
    padding_id, parallel_id = scalars(rng).randint(0, 5), scalars(rng).randint(1000, 1005)
    lengths = [0 if empty_request(rng, r, num_reqs) else request_length(rng, 1, 6)
               for r in range(num_reqs)]
    qsl = query_start_loc(rng, lengths)
    # An empty request's last accepted token is the one before it (what 1.2 gives it).
    query_end = [int(qsl[r]) + (rng.randrange(lengths[r]) if lengths[r] else -1)
                 for r in range(num_reqs)]
    num_input = int(qsl[-1]) + pick(rng, (0, 0, 0, 2), 2)    # sometimes trailing pad tokens
    positions = []
    for length in lengths:
        start = rng.randint(0, 200)
        positions += range(start, start + length)
    positions += [rng.randint(0, 200) for _ in range(num_input - len(positions))]
    num_outputs = num_input + num_reqs * (slots - 1 if shift else slots)
    return (ints(rng, [rng.randrange(1000) for _ in range(num_input)]), ints(rng, positions),
            ints(rng, [rng.randrange(1000) for _ in range(num_reqs)]),
            out_buffer(rng, num_outputs), out_buffer(rng, num_outputs),
            out_buffer(rng, num_outputs, torch.bool), out_buffer(rng, num_outputs, torch.bool),
            out_buffer(rng, num_reqs * slots), out_buffer(rng, num_input), qsl,
            ints(rng, query_end), padding_id, parallel_id, slots, shift)


def num_drafts(rng, low, high):
    """K (1.4: Q) drawn from [low, high], or from [65, 150] with many_drafts: past the tiles
    and unrolled loops the kernels size by it (a loop of tiles of queries, the sampled
    columns read in a loop)."""
    return scalars(rng).randint(*((65, 150) if getattr(rng, "many_drafts", False)
                                  else (low, high)))


def sample_dflash(rng, num_reqs):
    num_query = num_drafts(rng, 1, 5)
    num_spec = num_query - 1 + scalars(rng).choice((0, 0, 1))
    block_size = scalars(rng).choice((1, 4, 16))
    parallel_id = scalars(rng).randint(1000, 1005)
    with_rejected = scalars(rng).random() < 0.5
    lengths = [0 if empty_request(rng, r, num_reqs) else request_length(rng, 1, 6)
               for r in range(num_reqs)]
    positions = []
    for length in lengths:
        start = rng.randint(0, 100)
        positions += range(start, start + length)
    rejected = None
    if with_rejected:
        rejected = ints(rng, [rng.randrange(length) if length else 0 for length in lengths])
    num_context = len(positions)
    return (ints(rng, [rng.randrange(1000) for _ in range(num_reqs)]), ints(rng, positions),
            out_buffer(rng, num_reqs * num_query), out_buffer(rng, num_context),
            out_buffer(rng, num_reqs * num_query), out_buffer(rng, num_context),
            out_buffer(rng, num_reqs * num_query), out_buffer(rng, num_reqs * num_spec),
            block_table(rng, num_reqs, 110 + num_query, block_size), query_start_loc(rng, lengths),
            rejected, parallel_id, block_size, num_query, num_spec)


def _step_state(rng, num_reqs):
    block_size = scalars(rng).choice((1, 4, 16))
    max_model_len = scalars(rng).choice((8, 64, 200))
    num_padding_rows = scalars(rng).choice((None, 0, 1, 4))
    positions = ints(rng, [rng.choice((rng.randrange(max_model_len), max_model_len - 1,
                                       max_model_len - 2)) for _ in range(num_reqs)])
    seq_lens = ints(rng, [rng.randint(1, max_model_len) for _ in range(num_reqs)])
    if pick(rng, (False, False, True), True):
        seq_lens = torch.cat([seq_lens, ints(rng, [5])]).to(seq_lens.dtype)   # longer buffer
    input_batch_size = None if num_padding_rows is None else num_reqs + num_padding_rows
    table = block_table(rng, num_reqs, max_model_len, block_size)
    return positions, table, seq_lens, block_size, max_model_len, input_batch_size


def sample_step(rng, num_reqs):
    positions, table, seq_lens, block_size, max_model_len, batch = _step_state(rng, num_reqs)
    padded = num_reqs if batch is None else batch
    return (positions, table, seq_lens, block_size, max_model_len, out_buffer(rng, num_reqs),
            out_buffer(rng, padded, torch.int64), batch)


def sample_multi_step(rng, num_reqs):
    num_steps = scalars(rng).randint(0, 5)
    positions, table, seq_lens, block_size, max_model_len, batch = _step_state(rng, num_reqs)
    padded = num_reqs if batch is None else batch
    return (positions, table, seq_lens, block_size, max_model_len, num_steps,
            out_matrix(rng, num_steps, num_reqs), out_matrix(rng, num_steps, padded),
            out_matrix(rng, num_steps, num_reqs), batch)


def sample_mrope_step(rng, num_reqs):
    """[3, R] M-RoPE positions (a row-strided int64 view) that trail seq_lens - 1 as after an
    image, or equal it (text only); some rows at or past max_model_len."""
    block_size = scalars(rng).choice((1, 4, 16))
    max_model_len = scalars(rng).choice((8, 64, 200))
    num_padding_rows = scalars(rng).choice((None, 0, 1, 4))
    seq_lens = [rng.choice((rng.randint(1, max_model_len), max_model_len - 1, max_model_len,
                            max_model_len + 2)) for _ in range(num_reqs)]
    columns = []
    for seq_len in seq_lens:
        lag = rng.choice((0, rng.randrange(seq_len)))   # how far an image set positions back
        temporal = seq_len - 1 - lag
        columns.append([temporal, temporal + rng.randint(0, lag), temporal + rng.randint(0, lag)])
    pad = pick(rng, (0, 0, 1, 5), 5)
    positions = torch.tensor([[column[d] for column in columns] + [POISON] * pad
                              for d in range(3)], dtype=torch.int64)[:, :num_reqs]
    seq_lens = ints(rng, seq_lens)
    if pick(rng, (False, False, True), True):
        seq_lens = torch.cat([seq_lens, ints(rng, [5])]).to(seq_lens.dtype)   # longer buffer
    spare = pick(rng, (0, 1, 2, 3), 3)
    out_positions = torch.full((3, num_reqs + spare), POISON, dtype=torch.int64)
    out_positions = out_positions[:, :num_reqs + pick(rng, range(spare + 1), 1)]
    batch = None if num_padding_rows is None else num_reqs + num_padding_rows
    return (positions, block_table(rng, num_reqs, max_model_len, block_size), seq_lens,
            block_size, max_model_len, out_positions,
            out_buffer(rng, num_reqs if batch is None else batch, torch.int64), batch)


def sample_update_num_computed(rng, num_reqs):
    num_prev = pick(rng, range(num_reqs + 4), num_reqs + 1)
    prev_positions = []
    for _ in range(num_reqs):
        choice = rng.random()
        if choice < 0.2 or num_prev == 0:
            prev_positions.append(-1)
        elif choice < 0.25:
            prev_positions.append(num_prev + rng.randint(0, 5))   # out of range: a new request
        else:
            prev_positions.append(rng.randrange(num_prev))
    num_computed = max(num_reqs, num_prev) + pick(rng, range(3), 1)
    return (ints(rng, [rng.randint(0, 5000) for _ in range(num_computed)]),
            ints(rng, [rng.randint(0, 4) for _ in range(num_reqs + pick(rng, range(3), 1))]),
            ints(rng, prev_positions),
            ints(rng, [rng.randint(0, 4) for _ in range(num_prev + pick(rng, (0, 0, -1), 0))]
                 if num_prev else []),
            ints(rng, [rng.randint(0, 3) for _ in range(num_prev)]),
            ints(rng, [rng.randint(0, 5000) for _ in range(num_reqs)]))


def sample_new_slot_mapping(rng, num_reqs):
    num_new = scalars(rng).randint(0, 4)
    block_size = scalars(rng).choice((1, 4, 16))
    max_model_len = scalars(rng).choice((16, 64, 256))
    lengths = [0 if empty_request(rng, r, num_reqs) else request_length(rng, 1, 6)
               for r in range(num_reqs)]
    positions = []
    for length in lengths:
        start = rng.randint(0, max_model_len + 2)
        positions += range(start, start + length + num_new)
    first = pick(rng, (0, 0, 5), 0)                 # 1.7 counts entries from qsl[0]
    return (block_table(rng, num_reqs, max_model_len, block_size),
            query_start_loc(rng, lengths, first), ints(rng, positions).reshape(-1),
            torch.tensor([rng.random() < 0.3 for _ in positions], dtype=torch.bool),
            block_size, num_new, max_model_len)


def _padded(rng, size):
    """A CUDA-graph padded count (num_input_tokens, input_batch_size), or None for the real one."""
    extra = scalars(rng).choice((None, 0, 1, 5))
    return None if extra is None else size + extra


def _verified_batch(rng, num_reqs, num_spec):
    """docs/round_ops.md 6.0's inputs from verification, engine-shaped.

    W = K + 1 sampled columns (1 when nothing was drafted): accepted drafts and the sampled
    token, then -1s, sometimes an id out of range (vocab_size or -5) among the accepted ones.
    Rows without drafts (prefill chunks, several tokens), discarded rows with and without
    drafts. Each request's positions are consecutive and end below max_model_len, some just
    below it, and its seq_len counts every verified token; one request in ten has a seq_len
    ahead of its positions, up to past max_model_len (not an engine's batch: the draft steps'
    cap on a length reaching max_model_len at a position below it). Returns (sampled_token_ids,
    discard_request_mask, backup_next_token_ids, cu_num_draft_tokens, query_start_loc,
    positions, seq_lens, vocab_size, max_model_len).
    """
    vocab_size = scalars(rng).choice((50, 100, 32000))
    long_requests = getattr(rng, "long_requests", False)
    max_model_len = (1024 if long_requests or getattr(rng, "many_drafts", False)
                     else scalars(rng).choice((24, 64, 200)))
    if scalars(rng).random() < 0.15:
        num_spec = 0                                    # nobody drafted: W = 1, cu all zero
    rows, drafts, lengths = [], [], []
    for r in range(num_reqs):
        empty = empty_request(rng, r, num_reqs)
        num_drafts = 0 if empty else pick(rng, (num_spec, num_spec, rng.randint(0, num_spec),
                                                0), num_spec)
        if long_requests and rng.random() < 0.7:
            num_drafts = 0
        accepted = rng.randint(0, num_drafts)
        row = [rng.randrange(vocab_size) for _ in range(accepted + 1)]
        if accepted and rng.random() < 0.2:
            column = rng.randint(1, accepted)
            row[column] = (vocab_size, -5)[column % 2]      # no draw: other samples stay
        rows.append(row + [-1] * (num_spec - accepted))
        drafts.append(num_drafts)
        lengths.append(num_drafts + 1 + pick(rng, (0, 0, 0, 2), 0) if num_drafts
                       else 0 if empty else request_length(rng, 1, 6))
    if rows:
        pad = pick(rng, (0, 0, 2), 2)
        sampled = ints(rng, [row + [-1] * pad for row in rows])[:, :num_spec + 1]
    else:
        sampled = torch.empty((0, num_spec + 1), dtype=int_dtype(rng))
    cumulative = [sum(drafts[:r + 1]) for r in range(num_reqs)]
    positions, seq_lens = [], []
    for length in lengths:
        start = rng.choice((rng.randint(0, max_model_len - length),
                            max(max_model_len - length - rng.randint(0, 2), 0)))
        positions += range(start, start + length)
        ahead = rng.randint(1, max_model_len) if rng.random() < 0.1 else 0
        seq_lens.append(start + length + ahead)
    seq_lens = ints(rng, seq_lens)
    if pick(rng, (False, False, True), True):
        seq_lens = torch.cat([seq_lens, ints(rng, [5])]).to(seq_lens.dtype)   # longer buffer
    return (sampled, torch.tensor([rng.random() < 0.2 for _ in range(num_reqs)], dtype=torch.bool),
            ints(rng, [rng.randrange(vocab_size) for _ in range(num_reqs)]), ints(rng, cumulative),
            query_start_loc(rng, lengths), positions, seq_lens, vocab_size, max_model_len)


def _step_outs(rng, num_steps, num_reqs, input_batch_size):
    padded = num_reqs if input_batch_size is None else input_batch_size
    return (out_matrix(rng, num_steps, num_reqs), out_matrix(rng, num_steps, padded),
            out_matrix(rng, num_steps, num_reqs))


def _num_steps(rng, usual):
    """Draft steps: ``usual`` or, one time in ten, 17 or 18: more than the round kernels' one
    vector of 16 step lanes, and past max_model_len from the positions near it."""
    return scalars(rng).randint(17, 18) if scalars(rng).random() < 0.1 else usual


def sample_eagle_round(rng, num_reqs):
    num_spec = num_drafts(rng, 1, 4)
    num_steps = _num_steps(rng, num_spec - 1)
    block_size = scalars(rng).choice((1, 4, 16))
    (sampled, discard, backup, cu, qsl, positions, seq_lens, vocab_size,
     max_model_len) = _verified_batch(rng, num_reqs, num_spec)
    num_tokens = len(positions)
    num_input_tokens, input_batch_size = _padded(rng, num_tokens), _padded(rng, num_reqs)
    return (sampled, discard, backup, cu, qsl,
            ints(rng, [rng.randrange(vocab_size) for _ in range(num_tokens)]), ints(rng, positions),
            ints(rng, [rng.randint(-1, 5000) for _ in range(num_tokens)]),
            block_table(rng, num_reqs, max_model_len, block_size), seq_lens,
            out_buffer(rng, num_reqs), out_buffer(rng, num_reqs), out_buffer(rng, num_reqs),
            out_buffer(rng, num_tokens), out_buffer(rng, num_tokens),
            out_buffer(rng, num_input_tokens or num_tokens),
            *_step_outs(rng, num_steps, num_reqs, input_batch_size), vocab_size, block_size,
            max_model_len, num_steps, num_input_tokens, input_batch_size)


def sample_parallel_round(rng, num_reqs):
    """The draft-model method (S = 1, draft steps), PARD (S = K) or P-EAGLE (S = K, shift)."""
    method = scalars(rng).choice(("draft model", "pard", "parallel drafting"))
    num_spec = num_drafts(rng, 1, 4)
    slots = 1 if method == "draft model" else num_spec
    shift = method == "parallel drafting"
    num_steps = _num_steps(rng, num_spec - 1) if method == "draft model" else 0
    block_size = scalars(rng).choice((1, 4, 16))
    padding_id, parallel_id = scalars(rng).randint(0, 5), scalars(rng).randint(1000, 1005)
    (sampled, discard, backup, cu, qsl, positions, seq_lens, vocab_size,
     max_model_len) = _verified_batch(rng, num_reqs, num_spec)
    num_tokens = len(positions)
    num_first_pass = num_tokens + num_reqs * (slots - 1 if shift else slots)
    num_input_tokens, input_batch_size = _padded(rng, num_first_pass), _padded(rng, num_reqs)
    return (sampled, discard, backup, cu, qsl,
            ints(rng, [rng.randrange(vocab_size) for _ in range(num_tokens)]), ints(rng, positions),
            block_table(rng, num_reqs, max_model_len + slots, block_size), seq_lens,
            out_buffer(rng, num_reqs), out_buffer(rng, num_reqs), out_buffer(rng, num_first_pass),
            out_buffer(rng, num_first_pass), out_buffer(rng, num_first_pass, torch.bool),
            out_buffer(rng, num_reqs * slots), out_buffer(rng, num_tokens),
            out_buffer(rng, num_input_tokens or num_first_pass), out_buffer(rng, num_reqs + 1),
            out_buffer(rng, num_reqs), *_step_outs(rng, num_steps, num_reqs, input_batch_size),
            vocab_size, padding_id, parallel_id, slots, shift, block_size, max_model_len,
            num_steps, num_input_tokens, input_batch_size)


def sample_dflash_round(rng, num_reqs):
    num_spec = num_drafts(rng, 1, 4)
    num_query = num_spec + 1
    block_size = scalars(rng).choice((1, 4, 16))
    parallel_id = scalars(rng).randint(1000, 1005)
    (sampled, discard, backup, cu, qsl, positions, seq_lens, vocab_size,
     max_model_len) = _verified_batch(rng, num_reqs, num_spec)
    num_context, num_queries = len(positions), num_reqs * num_query
    num_input_tokens = _padded(rng, num_queries)
    return (sampled, discard, backup, cu, qsl, ints(rng, positions),
            block_table(rng, num_reqs, max_model_len + num_query, block_size), seq_lens,
            out_buffer(rng, num_reqs), out_buffer(rng, num_reqs), out_buffer(rng, num_queries),
            out_buffer(rng, num_context), out_buffer(rng, num_queries),
            out_buffer(rng, num_context), out_buffer(rng, num_input_tokens or num_queries),
            out_buffer(rng, num_reqs * num_spec), out_buffer(rng, num_reqs + 1),
            out_buffer(rng, num_reqs), vocab_size, parallel_id, block_size, num_spec,
            num_input_tokens)


SAMPLERS = {
    "eagle_prepare_next_token_padded": sample_next_token,
    "eagle_prepare_inputs_padded": sample_prepare_inputs,
    "copy_and_expand_eagle_inputs": sample_copy_and_expand,
    "copy_and_expand_dflash_inputs": sample_dflash,
    "eagle_step_update_slot_mapping_and_metadata": sample_step,
    "update_num_computed_tokens_for_batch_change": sample_update_num_computed,
    "compute_new_slot_mapping": sample_new_slot_mapping,
    "prepare_padded_draft_inputs": sample_fused_padded,
    "eagle_multi_step_slot_mapping": sample_multi_step,
    "eagle_mrope_step_update_slot_mapping_and_metadata": sample_mrope_step,
    "prepare_eagle_round": sample_eagle_round,
    "prepare_parallel_round": sample_parallel_round,
    "prepare_dflash_round": sample_dflash_round,
}
OPS = sorted(SAMPLERS)
# The ops of one launch per draft round (docs/round_ops.md).
ROUND_OPS = [op for op in OPS if op.endswith("_round")]
# The ops whose samplers take empty_requests: 1.3, 1.4, 1.7 and the round ops.
EMPTY_REQUEST_OPS = ("copy_and_expand_eagle_inputs", "copy_and_expand_dflash_inputs",
                     "compute_new_slot_mapping", "prepare_eagle_round",
                     "prepare_parallel_round", "prepare_dflash_round")


def sample(op, seed, num_reqs, fixed_dtype=None, uniform_dtype=False, long_requests=False,
           empty_requests=False, many_drafts=False):
    """The op's arguments; ``fixed_dtype`` selects FixedLayoutRandom, ``uniform_dtype`` one
    dtype (drawn from the seed) for every integer tensor, ``long_requests`` 100-300 tokens per
    request (several chunks per program), or "some": a few such requests among short ones, or
    "prefill": 300-900-token requests among short ones (round ops: chunked prefills).
    ``empty_requests`` (EMPTY_REQUEST_OPS): requests without tokens among the others, often
    the last one (query_start_loc repeats its final entry, as CUDA-graph padding of the
    request count makes it)."""
    if fixed_dtype is not None:
        rng = FixedLayoutRandom(seed, fixed_dtype)
    elif uniform_dtype:
        rng = UniformDtypeRandom(seed, (torch.int32, torch.int64)[seed % 2])
    else:
        rng = random.Random(seed)
    rng.long_requests = long_requests
    rng.empty_requests = empty_requests
    rng.many_drafts = many_drafts
    return SAMPLERS[op](rng, num_reqs)


def dflash_with_rejected(seed, num_reqs):
    """1.4's arguments (FixedLayoutRandom, int32) with num_rejected_tokens given, which that
    layout leaves out: request r's count drawn from ``seed`` below its context length."""
    args = list(sample("copy_and_expand_dflash_inputs", seed, num_reqs, fixed_dtype=torch.int32))
    lengths = args[9].diff()                # query_start_loc
    draw = torch.rand(lengths.shape, generator=torch.Generator().manual_seed(seed))
    args[10] = (draw * lengths).to(torch.int32)
    return args


def parallel_round_past_int32(seed):
    """6.2's arguments, int32 tensors, 6 requests (an engine batch: round_sequences.engine_batch
    applied), every request's first position at 2^31 - 1: 6.2 reads only that one, so the first
    pass's later entries of each request lie past int32's range and wrap in out_positions."""
    from round_sequences import engine_batch
    args = list(engine_batch(sample("prepare_parallel_round", seed, 6, uniform_dtype=True)))
    positions, starts = args[6].clone(), args[4][:-1].long()
    assert positions.dtype == torch.int32 and args[12].dtype == torch.int32, seed
    positions[starts[starts < positions.numel()]] = 2**31 - 1
    args[6] = positions
    return args


def op_overload(op):
    return getattr(torch.ops.spec_ops, op).default


def arg_names(op):
    """The names of the op's schema arguments, in order."""
    return [arg.name for arg in op_overload(op)._schema.arguments]


def written_arg_indices(op):
    """Indices of the arguments the op's schema marks as written (Tensor(a!))."""
    return [i for i, arg in enumerate(op_overload(op)._schema.arguments)
            if arg.alias_info is not None and arg.alias_info.is_write]


def clone_args(args, device="cpu"):
    """Deep copy; strided views keep their strides (the base is cloned and re-viewed)."""
    def copy(x):
        if not isinstance(x, torch.Tensor):
            return x
        base = x if x._base is None else x._base
        fresh = base.clone().to(device)
        return fresh.as_strided(x.shape, x.stride(), x.storage_offset() - base.storage_offset())
    return tuple(copy(x) for x in args)
