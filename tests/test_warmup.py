"""spec_ops.warmup: it calls every op with valid inputs for the configuration, covers the
kernel variants the configuration selects, and reports what it did; on a GPU, a serving loop
after it compiles nothing."""

import itertools
import logging
import sys

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import spec_ops
from backends import HAS_CUDA
from spec_ops._library import KERNELS
from spec_ops._triton._launch import ROW_COLS, Launcher, compiled_variants, next_power_of_2
from spec_ops._triton.rounds import (
    CONFIG_CONSTEXPRS,
    LANES_MIN_REQS,
    round_lanes,
)

warmup_module = sys.modules["spec_ops.warmup"]
CONFIG = dict(vocab_size=100, block_size=16, num_speculative_tokens=3, max_model_len=128,
              max_num_reqs=300)


class RecordOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "spec_ops":
            self.ops.append(func._opname)
        return func(*args, **(kwargs or {}))


def test_warmup_calls_every_op_and_reports(caplog):
    with caplog.at_level(logging.INFO, logger="spec_ops.warmup"), RecordOps() as recorded:
        report = spec_ops.warmup("cpu", **CONFIG)
    assert set(recorded.ops) == set(KERNELS)
    assert [warmed.op for warmed in report] == list(dict.fromkeys(recorded.ops))
    for warmed in report:
        assert warmed.calls == recorded.ops.count(warmed.op) and warmed.seconds >= 0
        assert warmed.compiled == ()        # CPU kernels compile nothing
    assert len(caplog.records) == len(report) + 1
    assert "prepare_eagle_round" in caplog.text


def test_warmup_selects_ops_and_dtypes():
    with RecordOps() as recorded:
        report = spec_ops.warmup("cpu", **CONFIG, ops=["eagle_prepare_next_token_padded"],
                                 dtypes={"token_ids": torch.int64})
    assert recorded.ops == ["eagle_prepare_next_token_padded"] * 2 and len(report) == 1
    with pytest.raises(ValueError, match="unknown ops"):
        spec_ops.warmup("cpu", **CONFIG, ops=["no_such_op"])
    # A misspelt kind would warm the production dtype instead, and the engine's compile at
    # serve time.
    with pytest.raises(ValueError, match=r"unknown dtype kinds \['count'\]"):
        spec_ops.warmup("cpu", **CONFIG, dtypes={"count": torch.int64})


def test_warmup_with_every_dtype_kind_int32_or_int64():
    """Any dtypes= an engine may pass: every op takes the warm-up inputs (M-RoPE positions stay
    int64 whatever "positions" is, as 7.1 requires)."""
    for dtype in (torch.int32, torch.int64):
        kinds = dict.fromkeys(warmup_module.PRODUCTION_DTYPES, dtype)
        report = spec_ops.warmup("cpu", **dict(CONFIG, max_num_reqs=4), dtypes=kinds)
        assert {warmed.op for warmed in report} == set(KERNELS)


def recorded_launches(monkeypatch, run, what):
    """{(kernel name, what(launcher, args, num_warps))} of the launches ``run()`` makes."""
    launched = set()
    original = Launcher.__call__

    def record(self, grid, args, num_warps=None, grid_y=1):
        launched.add((self.kernel.fn.__name__, what(self, args, num_warps or self.num_warps)))
        return original(self, grid, args, num_warps, grid_y)

    with monkeypatch.context() as patch:
        patch.setattr(Launcher, "__call__", record)
        run()
    return launched


def warmup_on_the_triton_path(monkeypatch, **config):
    """spec_ops.warmup(**config) through the ops' CUDA route: compiled on a GPU, its kernels
    interpreted on CPU tensors without one."""
    if not HAS_CUDA:
        monkeypatch.setattr(warmup_module, "_call",
                            lambda op, *args: KERNELS[op].triton(*args))
    spec_ops.warmup("cuda" if HAS_CUDA else "cpu", **config)


def named_constexprs(launcher, args):
    """((name, value), ...) of a launch's constexprs, in the kernel's parameter order."""
    return tuple(zip(launcher.constexpr_names, launcher.constexprs(args)))


def layout_constexprs(named):
    """The values of named_constexprs' pairs but the configuration constants
    (rounds.CONFIG_CONSTEXPRS)."""
    return tuple(value for name, value in named if name not in CONFIG_CONSTEXPRS)


def launches_of_warmup(monkeypatch, **config):
    """{(kernel name, constexprs)} of the launches warm-up makes on the Triton path, the
    configuration constants left out (layout_constexprs)."""
    return recorded_launches(
        monkeypatch, lambda: warmup_on_the_triton_path(monkeypatch, **config),
        lambda launcher, args, num_warps: layout_constexprs(named_constexprs(launcher, args)))


def test_warmup_reaches_every_variant_of_the_triton_path(monkeypatch):
    """The Triton kernels (compiled on a GPU, interpreted on CPU tensors without one) get the
    constexprs the configuration selects: both widths of sampled_token_ids, both shifts, with
    and without rejected counts, short and long requests of 1.3, 1.4, 1.7 and the round ops,
    and every 1.6 block a batch of up to max_num_reqs rows takes."""
    config = dict(CONFIG, max_num_reqs=20)
    launched = launches_of_warmup(monkeypatch, **config)
    kernels = {name for name, _ in launched}
    k, block_size = config["num_speculative_tokens"], config["block_size"]
    # One kernel per op, and 1.3, 1.4 and 1.7 have a second layout for short requests, reached
    # at both tile widths.
    rows_kernels = {f"_{name}_rows_kernel" for name in (
        "compute_new_slot_mapping", "copy_and_expand_eagle_inputs",
        "copy_and_expand_dflash_inputs")}
    # The lanes layouts of 6.1 and 6.3 (a request a little longer than its lanes) and 6.2's for
    # the draft model (a decode with draft steps); P-EAGLE's and PARD's only from
    # LANES_MIN_REQS requests (with K + 1 < LANES_MIN_COLS), which max_num_reqs = 20 never
    # reaches (the next test).
    lanes_kernel = "_prepare_eagle_round_lanes_kernel"
    lanes_kernels = {lanes_kernel, "_prepare_dflash_round_lanes_kernel",
                     "_prepare_parallel_round_lanes_kernel"}
    assert len(kernels) == len(KERNELS) + len(rows_kernels) + len(lanes_kernels)
    assert rows_kernels | lanes_kernels <= kernels
    for name in rows_kernels:
        assert {c[-1] for n, c in launched if n == name} == set(ROW_COLS), name
    for name in ("_prepare_eagle_round_kernel", "_prepare_parallel_round_kernel",
                 "_prepare_dflash_round_kernel"):
        assert {c[0] for n, c in launched if n == name} == {1, k + 1}, name     # NUM_COLS
    # (NUM_COLS, LANES) of 6.1's lanes layout: both widths, a lane per draft step.
    assert {(c[0], c[-1]) for n, c in launched if n == lanes_kernel} == {
        (width, round_lanes(width, k - 1)) for width in (1, k + 1)}
    assert {(c[0], c[-1]) for n, c in launched if n == "_prepare_dflash_round_lanes_kernel"} == {
        (width, round_lanes(width, k + 1)) for width in (1, k + 1)}
    # (NUM_COLS, SHIFT, LANES, STEP_TILE_LANES) of 6.2's: the draft model's (no shift, S = 1,
    # K - 1 steps), at K = 3 the tile's lanes and, with its 4 columns, step programs of 4 lanes.
    assert k == 3
    assert {(c[0], c[1], c[-3], c[-1]) for n, c in launched
            if n == "_prepare_parallel_round_lanes_kernel"} == {(1, False, 4, 4), (4, False, 8, 4)}
    assert {c[0] for n, c in launched if n == "_next_token_kernel"} == {1, k + 1}
    for name in ("_copy_and_expand_eagle_inputs_kernel",
                 "_copy_and_expand_eagle_inputs_rows_kernel"):
        assert {c[0] for n, c in launched if n == name} == {False, True}
    assert {c[-1] for n, c in launched
            if n == "_copy_and_expand_eagle_inputs_rows_kernel"} == set(ROW_COLS)
    dflash = {c for n, c in launched if n == "_copy_and_expand_dflash_inputs_kernel"}
    # (HAS_REJECTED, QUERY_PROGRAM): with and without rejected counts, short and long requests.
    assert {c[:2] for c in dflash} == set(itertools.product((False, True), repeat=2))
    assert {c[2:4] for c in dflash} == {(block_size, next_power_of_2(k + 1))}
    # (HAS_REJECTED, BLOCK_SIZE, BLOCK_Q, ROWS, COLS) of the row layout: both tile widths.
    rows = {c for n, c in launched if n == "_copy_and_expand_dflash_inputs_rows_kernel"}
    assert {(c[0], c[-1]) for c in rows} == set(itertools.product((False, True), ROW_COLS))
    # (BLOCK, ON_CHIP): a previous batch that fits the program's rows and one that does not.
    assert {c for n, c in launched if n == "_update_num_computed_tokens_kernel"} == {
        (128, True), (128, False)}


def test_warmup_reaches_the_lanes_layouts_of_the_round_ops(monkeypatch):
    """With max_num_reqs at least LANES_MIN_REQS, the round ops' warm-up reaches 6.2's lanes
    layout too: (NUM_COLS, LANES) at both widths for all three, 6.2's for each method (P-EAGLE:
    shift, K - 1 entries added; PARD: K added; the draft model: 1 added and K - 1 draft
    steps). The configuration constants those kernels take as constexprs
    (rounds.CONFIG_CONSTEXPRS) are the configuration's: vocab_size, max_model_len, the
    method's draft steps (chain EAGLE and the draft model K - 1, P-EAGLE and PARD none) and
    6.2's S (K for P-EAGLE and PARD, 1 for the draft model)."""
    named = recorded_launches(
        monkeypatch, lambda: warmup_on_the_triton_path(
            monkeypatch, **dict(CONFIG, max_num_reqs=LANES_MIN_REQS),
            ops=["prepare_eagle_round", "prepare_parallel_round", "prepare_dflash_round"]),
        lambda launcher, args, num_warps: named_constexprs(launcher, args))
    launched = {(n, layout_constexprs(c)) for n, c in named}
    constants = {(n, tuple((name, v) for name, v in c if name in CONFIG_CONSTEXPRS))
                 for n, c in named}
    k = CONFIG["num_speculative_tokens"]
    vocab, length = ("vocab_size", CONFIG["vocab_size"]), ("max_model_len", CONFIG["max_model_len"])
    assert constants == {
        ("_prepare_eagle_round_lanes_kernel", (vocab, length, ("num_steps", k - 1))),
        *{("_prepare_parallel_round_lanes_kernel",
           (vocab, ("num_padding_slots", slots), length, ("num_steps", steps)))
          for slots, steps in ((k, 0), (1, k - 1))},
        *{(n, ()) for n, _ in named if "lanes" not in n or "dflash" in n}}
    lanes = {(n, c[0], c[-1]) for n, c in launched
             if n in ("_prepare_eagle_round_lanes_kernel", "_prepare_dflash_round_lanes_kernel")}
    assert lanes == {
        *{("_prepare_eagle_round_lanes_kernel", w, round_lanes(w, k - 1)) for w in (1, k + 1)},
        *{("_prepare_dflash_round_lanes_kernel", w, round_lanes(w, k + 1)) for w in (1, k + 1)}}
    # (NUM_COLS, SHIFT, LANES, STEP_TILE_LANES) of 6.2's, K = 3: P-EAGLE (shift), PARD and the
    # draft model at both widths; without draft steps the step lanes are the tile's.
    assert k == 3
    assert {(c[0], c[1], c[-3], c[-1]) for n, c in launched
            if n == "_prepare_parallel_round_lanes_kernel"} == {
        (1, True, 4, 4), (4, True, 8, 8), (1, False, 4, 4), (4, False, 8, 8), (4, False, 8, 4)}


def variants_launched(monkeypatch, run):
    """{(kernel name, Launcher.key)}: the compiled variants the launches of ``run()`` select
    (device, warps, tensor dtypes, constexprs)."""
    return recorded_launches(monkeypatch, run, Launcher.key)


@pytest.mark.parametrize("k", [8, 9])
def test_warmup_covers_a_draft_models_first_pass(monkeypatch, k):
    """A draft model's 1.3 (S = 1, no shift) and 1.7 (1 new entry per request) at K = k on an
    engine batch: four decodes of K + 1 tokens and four requests without tokens (the request
    count padded for a CUDA graph), production dtypes. Every variant they launch is one
    warm-up launched (warm-up with S = K only never reached the 8-column tile without shift)."""
    ops = ["copy_and_expand_eagle_inputs", "compute_new_slot_mapping"]
    config = dict(CONFIG, num_speculative_tokens=k, max_num_reqs=8)
    device = "cuda" if HAS_CUDA else "cpu"
    warmed = variants_launched(
        monkeypatch, lambda: warmup_on_the_triton_path(monkeypatch, **config, ops=ops))

    int32, int64 = dict(dtype=torch.int32, device=device), dict(dtype=torch.int64, device=device)
    lengths = [k + 1] * 4 + [0] * 4
    num_tokens, num_reqs = sum(lengths), len(lengths)
    starts = list(itertools.accumulate(lengths, initial=0))
    qsl = torch.tensor(starts, **int32)
    num_outputs = num_tokens + num_reqs
    expand_args = (
        torch.ones(num_tokens, **int32), torch.arange(num_tokens, **int64),
        torch.ones(num_reqs, **int32), torch.zeros(num_outputs, **int32),
        torch.zeros(num_outputs, **int64), torch.zeros(num_outputs, dtype=torch.bool,
                                                       device=device),
        torch.zeros(num_outputs, dtype=torch.bool, device=device),
        torch.zeros(num_reqs, **int32), torch.zeros(num_tokens, **int32), qsl,
        torch.tensor([start + length - 1 for start, length in zip(starts, lengths)], **int32),
        0, 0, 1, False)
    slot_args = (torch.zeros(num_reqs, 8, **int32), qsl, torch.arange(num_outputs, **int64),
                 torch.zeros(num_outputs, dtype=torch.bool, device=device), 16, 1, 128)
    engine = variants_launched(monkeypatch, lambda: (
        KERNELS[ops[0]].triton(*expand_args), KERNELS[ops[1]].triton(*slot_args)))
    assert engine and engine <= warmed, engine - warmed


def test_update_num_computed_tokens_row_counts(monkeypatch):
    """Two 1.6 calls per power of two of rows up to max_num_reqs, and two at max_num_reqs: a
    previous batch of as many rows, and one of more rows than the program holds."""
    rows = []
    monkeypatch.setattr(warmup_module, "_call",
                        lambda op, *args: rows.append((args[2].shape[0], args[0].shape[0])))
    spec_ops.warmup("cpu", **CONFIG, ops=["update_num_computed_tokens_for_batch_change"])
    blocks = {1: 128, 2: 128, 4: 128, 8: 128, 16: 128, 32: 128, 64: 128, 128: 128, 256: 256,
              300: 512}
    assert rows == [(n, prev) for n, block in blocks.items() for prev in (n, block + 1)]


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
def test_a_serving_loop_compiles_nothing_after_warmup():
    """warmup for the example engine's configuration, then the engine in every mode of the
    example (M-RoPE's too), fused, unfused and with round ops, on CUDA, and 1.6 at every batch
    size: no kernel variant is new."""
    from test_example import spec_decode
    config = spec_decode.Config()
    num_requests = 6
    spec_ops.warmup("cuda", vocab_size=config.vocab_size, block_size=config.block_size,
                    num_speculative_tokens=config.num_speculative_tokens,
                    max_model_len=config.max_model_len, max_num_reqs=num_requests)
    before = compiled_variants()
    assert before
    for mode in spec_decode.MODES + (spec_decode.MROPE_MODE,):
        for fused, round_ops in ((False, False), (True, False), (False, True)):
            spec_decode.run(mode, device="cuda", fused=fused, round_ops=round_ops,
                            num_requests=num_requests)
    int32 = dict(dtype=torch.int32, device="cuda")
    for rows in range(1, num_requests + 1):
        spec_ops.update_num_computed_tokens_for_batch_change(
            torch.zeros(rows, **int32), torch.zeros(rows, **int32),
            torch.full((rows,), -1, dtype=torch.int64, device="cuda"),
            torch.zeros(rows, **int32), torch.zeros(rows, **int32), torch.zeros(rows, **int32))
    torch.cuda.synchronize()
    assert compiled_variants() - before == set()
