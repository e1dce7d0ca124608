"""The worked examples of docs/, on the CPU kernel and the Triton kernel, plus the edge cases docs/
calls out: the empty batch, positions aliasing out_clamped_positions, meta tensors."""

import pytest
import torch

import spec_ops
from backends import BACKENDS, call, place, run
from samples import POISON, op_overload, written_arg_indices

I32, I64 = torch.int32, torch.int64


def t(values, dtype=I32):
    return torch.tensor(values, dtype=dtype)


def poison(n, dtype=I32):
    return torch.full((n,), POISON, dtype=dtype)


P = POISON
EXAMPLES = {
    "1.1": ("eagle_prepare_next_token_padded",
            (t([[7, 3, -1, -1], [5, 6, 8, 9], [-1, -1, -1, -1], [4, 200, -1, -1], [1, 2, 3, -1]]),
             t([0, 0, 0, 0, 1], torch.bool), t([70, 71, 72, 73, 74]), poison(6), poison(6), 100),
            [[3, 9, 72, 4, 74, P], [2, 4, 0, 1, 0, P]]),
    "1.2": ("eagle_prepare_inputs_padded",
            (t([3, 3, 5]), t([2, 1, 1]), t([0, 4, 9, 12]), poison(4), poison(4)),
            [[1, 8, 9, P], [2, 0, 2, P]]),
    "1.3 shift": ("copy_and_expand_eagle_inputs",
                  (t([10, 11, 12, 20, 21, 22, 23]), t([4, 5, 6, 8, 9, 10, 11], I64), t([100, 200]),
                   poison(10), poison(10, I64), torch.zeros(10, dtype=torch.bool),
                   torch.zeros(10, dtype=torch.bool), poison(5), poison(8), t([0, 3, 7]),
                   t([1, 6]), 0, 99, 2, True),
                  [[11, 100, 99, 0, 21, 22, 23, 200, 99, P],
                   [4, 5, 6, 0, 8, 9, 10, 11, 12, P],
                   [i == 3 for i in range(10)], [i in (2, 8) for i in range(10)],
                   [1, 2, 7, 8, P], [0, 1, 2, 4, 5, 6, 7, P]]),
    "1.3 no shift": ("copy_and_expand_eagle_inputs",
                     (t([10, 11, 12, 20, 21, 22, 23]), t([4, 5, 6, 8, 9, 10, 11], I64),
                      t([100, 200]), poison(10), poison(10, I64),
                      torch.zeros(10, dtype=torch.bool), torch.ones(10, dtype=torch.bool),
                      poison(3), poison(8), t([0, 3, 7]), t([1, 6]), 0, 99, 1, False),
                     [[10, 11, 100, 0, 20, 21, 22, 23, 200, P],
                      [4, 5, 6, 0, 8, 9, 10, 11, 12, P],
                      [i == 3 for i in range(10)], [False] * 9 + [True],
                      [2, 8, P], [P] * 8]),
    "1.4": ("copy_and_expand_dflash_inputs",
            (t([100, 200]), t([4, 5, 6, 9, 10], I64), poison(7), poison(6, I64), poison(7, I64),
             poison(6, I64), poison(7, I64), poison(5), t([[1, 2, 3, 4], [5, 6, 7, 8]]),
             t([0, 3, 5]), None, 99, 4, 3, 2),
            [[100, 99, 99, 200, 99, 99, P], [4, 5, 6, 9, 10, P], [7, 8, 9, 11, 12, 13, P],
             [8, 9, 10, 29, 30, P], [11, 12, 13, 31, 32, 33, P], [1, 2, 4, 5, P]]),
    "1.4 rejected": ("copy_and_expand_dflash_inputs",
                     (t([100, 200]), t([4, 5, 6, 9, 10], I64), poison(6), poison(5, I64),
                      poison(6, I64), poison(5, I64), poison(6, I64), poison(4),
                      t([[1, 2, 3, 4], [5, 6, 7, 8]]), t([0, 3, 5]), t([1, 0]), 99, 4, 3, 2),
                     [[100, 99, 99, 200, 99, 99], [4, 5, 6, 9, 10], [6, 7, 8, 11, 12, 13],
                      [8, 9, 10, 29, 30], [10, 11, 12, 31, 32, 33], [1, 2, 4, 5]]),
    "1.5": ("eagle_step_update_slot_mapping_and_metadata",
            (t([5, 31, 63], I64), t([[10, 11, 12, 13], [20, 21, 22, 23], [30, 31, 32, 33]]),
             t([6, 32, 64]), 16, 64, poison(4, I64), poison(6, I64), 5),
            [[7, 33, 1], [6, 32, 0, P], [166, 352, -1, -1, -1, P]]),
    "1.6": ("update_num_computed_tokens_for_batch_change",
            (t([100, 200, 300, 400]), t([1, 1, 1]), t([2, 0, -1]), t([3, 1, 2]),
             t([3, 0, 3, 0]), t([1000, 2000, 3000])),
            [[302, 103, 3000, 400], [2, 3, 1]]),
    # Examples for 1.7, 5.1 and 5.2 that follow from their formulas.
    "1.7": ("compute_new_slot_mapping",
            (t([[1, 2, 0], [3, 4, 5]]), t([0, 2, 3]), t([3, 4, 5, 6, 9, 10, 11], I64),
             t([0, 0, 0, 1, 0, 0, 0], torch.bool), 4, 2, 11),
            [[7, 8, 9, -1, 21, 22, -1]]),
    # 1.1 gives next [3, 9, 72], counts [2, 4, 0]; 1.2 with drafts [3, 3, 3] reads those counts.
    "5.1": ("prepare_padded_draft_inputs",
            (t([[7, 3, -1, -1], [5, 6, 8, 9], [-1, -1, -1, -1]]), t([0, 0, 1], torch.bool),
             t([70, 71, 72]), t([3, 6, 9]), t([0, 4, 8, 12]), poison(3), poison(3), poison(3),
             poison(3), 100),
            [[3, 9, 72], [2, 4, 0], [1, 7, 7], [2, 0, 4]]),
    # Row 1 reaches max_model_len at step 2 and restarts from position 0.
    "5.2": ("eagle_multi_step_slot_mapping",
            (t([5, 62], I64), t([[10, 11, 12, 13], [20, 21, 22, 23]]), t([6, 63]), 16, 64, 3,
             torch.full((3, 2), P, dtype=I64), torch.full((3, 3), P, dtype=I64),
             torch.full((4, 2), P), 3),
            [[[6, 63], [7, 0], [8, 1]], [[166, 383, -1], [167, -1, -1], [168, 321, -1]],
             [[7, 64], [8, 1], [9, 2], [P, P]]]),
    "7.1": ("eagle_mrope_step_update_slot_mapping_and_metadata",
            (t([[12, 9, 63]] * 3, I64), t([[10, 11, 12, 13], [20, 21, 22, 23], [30, 31, 32, 33]]),
             t([20, 10, 64]), 16, 64, torch.full((3, 4), P, dtype=I64), poison(5, I64), 4),
            [[21, 11, 1], [[13, 10, 0, P]] * 3, [180, 330, -1, -1, P]]),
    "6.1": ("prepare_eagle_round",
            (t([[7, 8, -1, -1], [5, -1, -1, -1], [1, 2, 3, 4]]), t([0, 1, 0], torch.bool),
             t([70, 71, 72]), t([3, 3, 6]), t([0, 4, 6, 10]),
             t([10, 11, 12, 13, 20, 21, 30, 31, 32, 33]),
             t([8, 9, 10, 11, 0, 1, 26, 27, 28, 29], I64),
             t([16, 17, 18, 19, 40, 41, 98, 99, 100, 101], I64),
             t([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12]]), t([12, 2, 30]), poison(4),
             poison(4), poison(4), poison(11), poison(11, I64), poison(13, I64),
             torch.full((4, 4), P, dtype=I64), torch.full((4, 5), P, dtype=I64),
             torch.full((4, 4), P), 100, 8, 32, 3, 12, 4),
            [[8, 71, 4, P], [2, 0, 4, P], [1, 5, 9, P], [11, 8, 13, 20, 21, 71, 31, 32, 33, 4, P],
             [8, 9, 10, 11, 0, 1, 26, 27, 28, 29, P],
             [16, 17, 18, 19, 40, 41, 98, 99, 100, 101, -1, -1, P],
             [[10, 2, 30, P], [11, 3, 31, P], [12, 4, 0, P], [P] * 4],
             [[18, 42, 102, -1, P], [19, 43, 103, -1, P], [20, 44, -1, -1, P], [P] * 5],
             [[11, 3, 31, P], [12, 4, 32, P], [13, 5, 1, P], [P] * 4]]),
    # Row 0 is discarded after drafting: last = -1, so no next token lands and steps start at 0.
    "6.1 discarded": ("prepare_eagle_round",
                      (t([[7, 8, -1], [5, 6, 9]]), t([1, 0], torch.bool), t([70, 71]), t([2, 4]),
                       t([0, 3, 6]), t([10, 11, 12, 20, 21, 22]), t([8, 9, 10, 3, 4, 5], I64),
                       t([12, 13, 14, 23, 24, 25], I64), t([[1, 2, 3, 4], [5, 6, 7, 8]]),
                       t([11, 6]), poison(2), poison(2), poison(2), poison(6), poison(6, I64),
                       poison(6, I64), torch.full((1, 2), P, dtype=I64),
                       torch.full((1, 2), P, dtype=I64), torch.full((1, 2), P), 100, 4, 16, 1),
                      [[70, 9], [0, 3], [-1, 5], [11, 12, 20, 21, 22, 9], [8, 9, 10, 3, 4, 5],
                       [12, 13, 14, 23, 24, 25], [[1, 6]], [[5, 26]], [[9, 7]]]),
    "6.2 shift": ("prepare_parallel_round",
                  (t([[7, 8, -1], [5, -1, -1]]), t([0, 0], torch.bool), t([70, 71]), t([2, 2]),
                   t([0, 3, 5]), t([10, 11, 12, 20, 21]), t([8, 9, 10, 3, 4], I64),
                   t([[1, 2, 3, 4], [5, 6, 7, 8]]), t([11, 5]), poison(2), poison(2), poison(8),
                   poison(8, I64), torch.ones(8, dtype=torch.bool), poison(5), poison(6),
                   poison(9, I64), poison(4), poison(3), torch.full((1, 3), P, dtype=I64),
                   torch.full((1, 3), P, dtype=I64), torch.full((1, 3), P), 100, 0, 99, 2, True,
                   4, 16, 0, 8),
                  [[8, 5], [2, 1], [11, 8, 99, 0, 21, 5, 99, P], [8, 9, 10, 0, 3, 4, 5, P],
                   [i in (2, 6, 7) for i in range(8)], [1, 2, 5, 6, P], [0, 1, 2, 4, 5, P],
                   [12, 13, 14, -1, 23, 24, 25, -1, P], [0, 4, 7, P], [12, 6, P], [[P] * 3],
                   [[P] * 3], [[P] * 3]]),
    "6.2 no shift": ("prepare_parallel_round",
                     (t([[7, 8, -1], [5, -1, -1]]), t([0, 0], torch.bool), t([70, 71]),
                      t([2, 2]), t([0, 3, 5]), t([10, 11, 12, 20, 21]), t([8, 9, 10, 3, 4], I64),
                      t([[1, 2, 3, 4], [5, 6, 7, 8]]), t([11, 5]), poison(2), poison(2),
                      poison(8), poison(8, I64), torch.ones(8, dtype=torch.bool), poison(3),
                      poison(5), poison(9, I64), poison(4), poison(3),
                      torch.full((3, 3), P, dtype=I64), torch.full((3, 3), P, dtype=I64),
                      torch.full((3, 3), P), 100, 0, 99, 1, False, 4, 16, 2, 8),
                     [[8, 5], [2, 1], [10, 11, 8, 0, 20, 21, 5, P], [8, 9, 10, 0, 3, 4, 5, P],
                      [False] * 7 + [True], [2, 6, P], [P] * 5,
                      [12, 13, 14, -1, 23, 24, 25, -1, P], [0, 4, 7, P], [12, 6, P],
                      [[11, 6, P], [12, 7, P], [P] * 3], [[15, 26, P], [16, 27, P], [P] * 3],
                      [[12, 7, P], [13, 8, P], [P] * 3]]),
    "6.3": ("prepare_dflash_round",
            (t([[7, 8, -1], [5, -1, -1]]), t([0, 0], torch.bool), t([70, 71]), t([2, 2]),
             t([0, 3, 5]), t([8, 9, 10, 3, 4], I64), t([[1, 2, 3, 4], [5, 6, 7, 8]]), t([11, 5]),
             poison(3), poison(3), poison(7), poison(6, I64), poison(7, I64), poison(6, I64),
             poison(9, I64), poison(5), poison(4), poison(3), 100, 99, 4, 2, 8),
            [[8, 5, P], [2, 1, P], [8, 99, 99, 5, 99, 99, P], [8, 9, 10, 3, 4, P],
             [10, 11, 12, 5, 6, 7, P], [12, 13, 14, 23, 24, P],
             [14, 15, 16, 25, 26, 27, -1, -1, P], [1, 2, 4, 5, P], [0, 3, 6, P], [13, 8, P]]),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_worked_example(name, backend):
    op, args, expected = EXAMPLES[name]
    assert [out.tolist() for out in run(op, args, backend)] == expected


@pytest.mark.parametrize("backend", BACKENDS)
def test_step_positions_may_alias_out_clamped_positions(backend):
    """The engine passes one tensor as positions and out_clamped_positions from step 2 on."""
    args = place((t([5, 31, 63], I64), t([[10, 11, 12, 13], [20, 21, 22, 23], [30, 31, 32, 33]]),
                  t([6, 32, 64]), 16, 64, None, poison(5, I64), 5), backend)
    positions = args[0]
    call("eagle_step_update_slot_mapping_and_metadata", args[:5] + (positions,) + args[6:],
         backend)
    assert positions.tolist() == [6, 32, 0]
    assert args[6].tolist() == [166, 352, -1, -1, -1]
    assert args[2].tolist() == [7, 33, 1]


@pytest.mark.parametrize("backend", BACKENDS)
def test_mrope_step_positions_may_alias_out_positions(backend):
    """7.1's example in place: positions is out_positions, a row-strided view of a wider
    buffer whose spare column stays untouched."""
    args = place((torch.full((3, 5), P, dtype=I64),
                  t([[10, 11, 12, 13], [20, 21, 22, 23], [30, 31, 32, 33]]), t([20, 10, 64]),
                  16, 64, None, poison(5, I64), 4), backend)
    buffer = args[0]
    buffer[:, :3] = t([[12, 9, 63]] * 3, I64).to(buffer.device)
    positions = buffer[:, :3]
    call("eagle_mrope_step_update_slot_mapping_and_metadata",
         (positions,) + args[1:5] + (positions,) + args[6:], backend)
    assert buffer.tolist() == [[13, 10, 0, P, P]] * 3
    assert args[6].tolist() == [180, 330, -1, -1, P]
    assert args[2].tolist() == [21, 11, 1]


EMPTY_BATCH = {
    "eagle_prepare_next_token_padded": (torch.empty(0, 4, dtype=I32), t([], torch.bool), t([]),
                                        poison(2), poison(2), 100),
    "eagle_prepare_inputs_padded": (t([]), t([]), t([0]), poison(2), poison(2)),
    "copy_and_expand_eagle_inputs": (t([]), t([], I64), t([]), poison(2), poison(2, I64),
                                     torch.zeros(2, dtype=torch.bool),
                                     torch.ones(2, dtype=torch.bool), poison(2), poison(2),
                                     t([0]), t([]), 0, 99, 2, True),
    "copy_and_expand_dflash_inputs": (t([]), t([], I64), poison(2), poison(2, I64),
                                      poison(2, I64), poison(2, I64), poison(2, I64), poison(2),
                                      torch.zeros(0, 4, dtype=I32), t([0]), None, 99, 16, 3, 2),
    "eagle_step_update_slot_mapping_and_metadata": (t([], I64), torch.zeros(0, 0, dtype=I32),
                                                    t([]), 16, 64, poison(2, I64),
                                                    poison(4, I64), 3),
    "update_num_computed_tokens_for_batch_change": (poison(2), poison(2), t([]), t([]), t([]),
                                                    t([])),
    "compute_new_slot_mapping": (torch.zeros(0, 4, dtype=I32), t([0]), t([], I64),
                                 t([], torch.bool), 16, 2, 64),
    "prepare_padded_draft_inputs": (torch.empty(0, 4, dtype=I32), t([], torch.bool), t([]),
                                    t([]), t([0]), poison(2), poison(2), poison(2), poison(2),
                                    100),
    "eagle_multi_step_slot_mapping": (t([], I64), torch.zeros(0, 4, dtype=I32), t([]), 16, 64,
                                      2, torch.full((2, 1), P, dtype=I64),
                                      torch.full((2, 3), P, dtype=I64), torch.full((2, 1), P),
                                      2),
    "eagle_mrope_step_update_slot_mapping_and_metadata": (
        torch.zeros(3, 0, dtype=I64), torch.zeros(0, 0, dtype=I32), t([]), 16, 64,
        torch.full((3, 2), P, dtype=I64), poison(4, I64), 3),
    "prepare_eagle_round": (torch.empty(0, 1, dtype=I32), t([], torch.bool), t([]), t([]), t([0]),
                            t([]), t([], I64), t([], I64), torch.zeros(0, 4, dtype=I32), t([]),
                            poison(2), poison(2), poison(2), poison(2), poison(2, I64),
                            poison(4, I64), torch.full((2, 1), P, dtype=I64),
                            torch.full((2, 3), P, dtype=I64), torch.full((2, 1), P), 100, 16,
                            64, 2, 3, 2),
    "prepare_parallel_round": (torch.empty(0, 1, dtype=I32), t([], torch.bool), t([]), t([]),
                               t([0]), t([]), t([], I64), torch.zeros(0, 4, dtype=I32), t([]),
                               poison(2), poison(2), poison(2), poison(2, I64),
                               torch.ones(2, dtype=torch.bool), poison(2), poison(2),
                               poison(4, I64), poison(2), poison(2),
                               torch.full((2, 1), P, dtype=I64),
                               torch.full((2, 3), P, dtype=I64), torch.full((2, 1), P), 100, 0,
                               99, 1, False, 16, 64, 2, 3, 2),
    "prepare_dflash_round": (torch.empty(0, 1, dtype=I32), t([], torch.bool), t([]), t([]),
                             t([0]), t([], I64), torch.zeros(0, 4, dtype=I32), t([]), poison(2),
                             poison(2), poison(2), poison(2, I64), poison(2, I64),
                             poison(2, I64), poison(4, I64), poison(2), poison(2), poison(2),
                             100, 99, 16, 2, 3),
}

# What the round ops write for R = 0 (docs/round_ops.md, 6.0), by index among the written
# tensors: the padding entries and out_query_start_loc[0].
EMPTY_ROUND_WRITES = {
    "prepare_eagle_round": {5: [-1, -1, -1, P], 7: [[-1, -1, P], [-1, -1, P]]},
    "prepare_parallel_round": {7: [-1, -1, -1, P], 8: [0, P], 11: [[-1, -1, P], [-1, -1, P]]},
    "prepare_dflash_round": {6: [-1, -1, -1, P], 8: [0, P]},
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", sorted(EMPTY_BATCH))
def test_empty_batch_writes_nothing_but_padding_rows(op, backend):
    outputs = run(op, EMPTY_BATCH[op], backend)
    if op in ("eagle_step_update_slot_mapping_and_metadata",
              "eagle_mrope_step_update_slot_mapping_and_metadata"):
        assert outputs[2].tolist() == [-1, -1, -1, P]       # the padding rows of 1.5 and 7.1
        assert outputs[1].tolist() == EMPTY_BATCH[op][5].tolist()
    elif op == "eagle_multi_step_slot_mapping":
        assert outputs[1].tolist() == [[-1, -1, P], [-1, -1, P]]
        assert outputs[0].tolist() == [[P], [P]] and outputs[2].tolist() == [[P], [P]]
    elif op == "compute_new_slot_mapping":
        assert outputs[0].shape == (0,)
    else:
        args = EMPTY_BATCH[op]
        expected = [args[i].tolist() for i in written_arg_indices(op)]
        for i, written in EMPTY_ROUND_WRITES.get(op, {}).items():
            expected[i] = written
        assert [out.tolist() for out in outputs] == expected


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_runs_on_meta_tensors(name):
    op, args, _ = EXAMPLES[name]
    meta = tuple(a.to("meta") if isinstance(a, torch.Tensor) else a for a in args)
    result = op_overload(op)(*meta)
    if op == "compute_new_slot_mapping":
        assert result.device.type == "meta" and result.dtype == I64
        assert result.shape == args[2].shape


def test_helpers():
    assert [spec_ops.next_power_of_2(n) for n in (-3, 0, 1, 3, 8, 9)] == [1, 1, 1, 4, 8, 16]
    assert spec_ops.next_power_of_2(2**62 + 1) == 2**63
    assert spec_ops.unconditional_to_conditional_rates([0.8, 0.4, 0.1, 0.0]) == [0.8, 0.5, 0.25,
                                                                                 0.0]
    assert spec_ops.unconditional_to_conditional_rates([]) == []
    assert spec_ops.unconditional_to_conditional_rates([0.0, 0.3]) == [0.0, 0.0]
    assert spec_ops.PADDING_SLOT_ID == -1
