"""Bad input: a TypeError / ValueError that names the argument and what was expected, raised
before any kernel runs (out buffers stay as they were), on the CPU kernel, the Triton kernel
and the fake (meta tensors). One test per kind of mistake, over every op and argument."""

import functools

import pytest
import torch

from backends import (BACKENDS, ENTRY, HAS_CUDA, TRITON, call, interpreted_launches_take_turns,
                      place, run, shortcut_on_cpu_tensors)
from samples import OPS, arg_names, clone_args, op_overload, sample, written_arg_indices
from spec_ops import validation

NUM_REQS = 5
WARM_CALLS = 3     # valid calls first: nothing they leave behind may let a bad call through


def tensor_args(op, optional=True):
    """(index, name) of every Tensor argument of the op's schema (Tensor? ones too unless
    ``optional`` is false)."""
    return [(i, arg.name) for i, arg in enumerate(op_overload(op)._schema.arguments)
            if validation.is_tensor_type(arg.type)
            and (optional or not isinstance(arg.type, torch.OptionalType))]


@functools.cache
def _seed(op):
    """11, or the first seed after it whose sample passes every optional tensor as a tensor
    and every matrix with two rows and two columns or more, so that the checks of those (a
    matrix's strides among them) are tested too."""
    required = {i for i, _ in tensor_args(op, optional=False)}
    optional = [i for i, _ in tensor_args(op) if i not in required]
    for seed in range(11, 111):
        args = sample(op, seed=seed, num_reqs=NUM_REQS)
        if all(args[i] is not None for i in optional) and all(
                min(t.shape) > 1 for t in args if isinstance(t, torch.Tensor) and t.dim() == 2):
            return seed
    raise AssertionError(f"no sample of {op} passes all its optional tensors and wide matrices")


def valid(op):
    """Valid arguments of the op, every optional tensor a tensor (a fresh sample each call)."""
    return sample(op, seed=_seed(op), num_reqs=NUM_REQS)


def cases(op, select, optional=True):
    args = valid(op)
    return [(op, i, name) for i, name in tensor_args(op, optional)
            if isinstance(args[i], torch.Tensor) and select(args[i])]


def all_cases(select, optional=True):
    return [case for op in OPS for case in cases(op, select, optional)]


def assert_rejected(op, args, error, name, backend, fragment="", warm=True, place_args=True):
    """The op raises ``error`` mentioning ``name`` and leaves every out buffer untouched, also
    right after valid calls with the same layout (compiled kernels are cached by then)."""
    for _ in range(WARM_CALLS if warm else 0):
        call(op, place(valid(op), backend), backend)
    placed = place(args, backend) if place_args else args
    written = [i for i in written_arg_indices(op) if placed[i] is not None]
    before = [placed[i].clone() for i in written]
    with pytest.raises(error, match=rf"spec_ops\.{op}: .*{name}.*{fragment}"):
        call(op, placed, backend)
    for i, original in zip(written, before):
        assert torch.equal(placed[i], original), f"{op} wrote {i} before failing"


def replaced(args, index, value):
    return args[:index] + (value,) + args[index + 1:]


def layout_known(op, monkeypatch):
    """The public function's shortcut on (shortcut_on_cpu_tensors) and the op's layout known
    from a valid call on the Triton backend, so that a later call may take the shortcut."""
    shortcut_on_cpu_tensors(monkeypatch)
    call(op, place(valid(op), TRITON), TRITON)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,index,name", all_cases(lambda t: True))
def test_float_tensor_is_a_type_error(op, index, name, backend):
    args = valid(op)
    assert_rejected(op, replaced(args, index, args[index].float()), TypeError, name, backend,
                    "must be")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,index,name", all_cases(lambda t: t.dim() == 1))
def test_wrong_rank(op, index, name, backend):
    args = valid(op)
    assert_rejected(op, replaced(args, index, args[index][None]), ValueError, name, backend,
                    "must be 1-D")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,index,name", all_cases(lambda t: t.dim() == 1 and len(t) >= 2))
def test_non_unit_stride(op, index, name, backend):
    args = valid(op)
    spread = args[index].repeat_interleave(2)[::2]             # same values, stride 2
    assert_rejected(op, replaced(args, index, spread), ValueError, name, backend, "unit stride")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,index,name", all_cases(lambda t: t.dim() == 2))
def test_matrix_last_dim_must_be_contiguous_and_rows_disjoint(op, index, name, backend):
    args = valid(op)
    matrix = args[index]
    assert min(matrix.shape) > 1      # _seed's choice: with one row or column no stride shows
    column_major = matrix.t().contiguous().t()
    assert_rejected(op, replaced(args, index, column_major), ValueError, name, backend,
                    "unit stride along its last dim")
    overlapping = matrix[:1].expand(matrix.shape[0], matrix.shape[1])   # row stride 0
    assert_rejected(op, replaced(args, index, overlapping), ValueError, name, backend,
                    "rows overlap")


# The arguments whose lengths define the op's sizes (any length is valid for them).
DEFINES_SIZES = {
    "eagle_prepare_next_token_padded": (),
    "eagle_prepare_inputs_padded": ("cu_num_draft_tokens",),
    "prepare_padded_draft_inputs": (),
    "copy_and_expand_eagle_inputs": ("target_token_ids", "next_token_ids"),
    "copy_and_expand_dflash_inputs": ("query_start_loc", "target_positions"),
    "eagle_step_update_slot_mapping_and_metadata": ("positions",),
    "eagle_multi_step_slot_mapping": ("positions",),
    "eagle_mrope_step_update_slot_mapping_and_metadata": ("positions",),
    "prepare_eagle_round": ("target_token_ids",),
    "prepare_parallel_round": ("target_token_ids",),
    "prepare_dflash_round": ("target_positions",),
    "update_num_computed_tokens_for_batch_change": ("prev_positions",
                                                    "valid_sampled_token_count",
                                                    "prev_num_draft_tokens"),
    "compute_new_slot_mapping": ("query_start_loc", "new_positions"),
}


def _required_length_cases():
    """Every 1-D argument whose length another argument fixes (out buffers included)."""
    found = []
    for op in OPS:
        args = valid(op)
        for i, name in tensor_args(op):
            unused = (name == "out_hidden_state_mapping"       # only written with shift
                      and not args[arg_names(op).index("shift_input_ids")])
            if (isinstance(args[i], torch.Tensor) and args[i].dim() == 1 and not unused
                    and name not in DEFINES_SIZES[op]):
                found.append((op, i, name))
    return found


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,index,name", _required_length_cases())
def test_too_short(op, index, name, backend):
    args = valid(op)
    assert_rejected(op, replaced(args, index, args[index][:1]), ValueError, name, backend,
                    "entries")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", [op for op in OPS
                                if "query_start_loc" in [name for _, name in tensor_args(op)]
                                and "query_start_loc" not in DEFINES_SIZES[op]])
def test_query_start_loc_must_have_num_reqs_plus_one_entries(op, backend):
    args = valid(op)
    index = [i for i, name in tensor_args(op) if name == "query_start_loc"][0]
    longer = torch.cat([args[index], args[index][-1:]])
    assert_rejected(op, replaced(args, index, longer), ValueError, "query_start_loc", backend,
                    "num_reqs \\+ 1")


@pytest.mark.parametrize("op,index,name", [c for c in all_cases(lambda t: True) if c[1] > 0])
def test_tensors_on_different_devices(op, index, name):
    """Meta stands in for a second device on a CPU-only machine (the fake runs the check)."""
    args = valid(op)
    first = tensor_args(op)[0][0]
    if index == first:
        return
    moved = replaced(args, index, args[index].to("meta"))
    with pytest.raises(ValueError, match=rf"spec_ops\.{op}: all tensors must be on one device; "
                                         rf"expected {name} on cpu"):
        op_overload(op)(*moved)


BAD_SCALARS = [
    ("eagle_prepare_next_token_padded", 5, 0, "vocab_size"),
    ("copy_and_expand_eagle_inputs", 13, 0, "num_padding_slots_per_request"),
    ("copy_and_expand_dflash_inputs", 12, 0, "block_size"),
    ("copy_and_expand_dflash_inputs", 13, 0, "num_query_per_req"),
    ("eagle_step_update_slot_mapping_and_metadata", 3, 0, "block_size"),
    ("eagle_step_update_slot_mapping_and_metadata", 4, 0, "max_model_len"),
    ("eagle_step_update_slot_mapping_and_metadata", 7, NUM_REQS - 1, "input_batch_size"),
    ("compute_new_slot_mapping", 5, -1, "num_new_tokens"),
    ("eagle_multi_step_slot_mapping", 5, -1, "num_steps"),
    ("eagle_mrope_step_update_slot_mapping_and_metadata", 3, 0, "block_size"),
    ("eagle_mrope_step_update_slot_mapping_and_metadata", 4, 0, "max_model_len"),
    ("eagle_mrope_step_update_slot_mapping_and_metadata", 7, NUM_REQS - 1, "input_batch_size"),
    ("prepare_eagle_round", 19, 0, "vocab_size"),
    ("prepare_eagle_round", 20, 0, "block_size"),
    ("prepare_eagle_round", 21, 0, "max_model_len"),
    ("prepare_eagle_round", 22, -1, "num_steps"),
    ("prepare_eagle_round", 23, 0, "num_input_tokens"),
    ("prepare_eagle_round", 24, NUM_REQS - 1, "input_batch_size"),
    ("prepare_parallel_round", 22, 0, "vocab_size"),
    ("prepare_parallel_round", 25, 0, "num_padding_slots_per_request"),
    ("prepare_parallel_round", 27, 0, "block_size"),
    ("prepare_parallel_round", 28, 0, "max_model_len"),
    ("prepare_parallel_round", 29, -1, "num_steps"),
    ("prepare_parallel_round", 30, 0, "num_input_tokens"),
    ("prepare_parallel_round", 31, NUM_REQS - 1, "input_batch_size"),
    ("prepare_dflash_round", 18, 0, "vocab_size"),
    ("prepare_dflash_round", 20, 0, "block_size"),
    ("prepare_dflash_round", 21, -1, "num_speculative_tokens"),
    ("prepare_dflash_round", 22, 0, "num_input_tokens"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,index,value,name", BAD_SCALARS)
def test_bad_scalar(op, index, value, name, backend):
    args = valid(op)
    assert_rejected(op, replaced(args, index, value), ValueError, name, backend, "must be >=")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("excess", [1, 2**62, 2**63 - 1])
def test_more_new_tokens_than_new_positions_holds(excess, backend):
    """1.7: request r owns qsl[r + 1] - qsl[r] + num_new_tokens entries of new_positions, so
    num_new_tokens past new_positions.shape[0] / R is a ValueError naming it (before, a value
    near 2^63 left entries of the result unwritten on the Triton kernel); at the bound the call
    is valid."""
    op = "compute_new_slot_mapping"
    args = valid(op)
    num_reqs, num_entries = args[1].shape[0] - 1, args[2].shape[0]
    bound = num_entries // num_reqs
    call(op, place(replaced(args, 5, bound), backend), backend)
    value = bound + excess if excess == 1 else excess
    assert_rejected(op, replaced(args, 5, value), ValueError, "num_new_tokens", backend,
                    "must be <= new_positions.shape")


def scalar_cases():
    """(op, index, name, schema type) of every scalar argument of every op."""
    return [(op, i, arg.name, arg.type) for op in OPS
            for i, arg in enumerate(op_overload(op)._schema.arguments)
            if not validation.is_tensor_type(arg.type)]


def wrong_types(schema_type):
    """(value, error, message fragment) the public function refuses for an argument of the
    schema type: a string; for an int, also a float, None where it is not optional and Python
    ints past int64 on either side (below it, an argument with a lower bound may name that
    bound), 2**63 included: it fits in uint64, which the interpreter binds to an int64
    parameter without complaint (a bool takes what the dispatcher converts to one: numbers,
    None)."""
    wrong = [("7", TypeError, "must be of type .*, got str")]
    if "int" in str(schema_type).lower():
        wrong += [(1.5, TypeError, "must be of type .*, got float"),
                  (2**63, ValueError, "must fit in int64"),
                  (2**64, ValueError, "must fit in int64"),
                  (-2**63 - 1, ValueError, "must (fit in int64|be >= )")]
        if not isinstance(schema_type, torch.OptionalType):
            wrong.append((None, TypeError, "must be of type .*, got NoneType"))
    return wrong


@pytest.mark.parametrize("op,index,name,schema_type", scalar_cases())
def test_a_scalar_of_a_type_the_schema_does_not_take(op, index, name, schema_type, monkeypatch):
    """spec_ops.<op> raises TypeError (ValueError for an int past int64) naming the argument,
    with nothing written, also once its layout is known (an int is then checked on the
    shortcut, not by the dispatcher); torch.ops.spec_ops.<op> leaves it to torch's dispatcher,
    whose RuntimeError names the argument too. Both refuse before any kernel runs."""
    layout_known(op, monkeypatch)
    for value, error, fragment in wrong_types(schema_type):
        bad = replaced(valid(op), index, value)
        assert_rejected(op, bad, error, name, ENTRY, fragment, warm=False)
        with pytest.raises(RuntimeError, match=f"for argument '{name}'"):
            op_overload(op)(*place(bad, ENTRY))


@pytest.mark.parametrize("op,index,name,schema_type", [
    case for case in scalar_cases() if "int" in str(case[3]).lower()])
def test_a_bool_or_a_tensor_for_an_int(op, index, name, schema_type, monkeypatch):
    """A bool or a one-element tensor where the schema takes an int: spec_ops.<op> raises a
    TypeError naming the argument, nothing written, also once its layout is known;
    torch.ops.spec_ops.<op> takes what torch's dispatcher converts them to (True is 1, a
    tensor its value truncated), as torch's own ops do."""
    layout_known(op, monkeypatch)
    for value in (True, torch.tensor(valid(op)[index] or 1)):
        bad = replaced(valid(op), index, value)
        assert_rejected(op, bad, TypeError, name, ENTRY, f"must be an int, got "
                        f"{type(value).__name__}", warm=False)


def test_dflash_speculative_tokens_must_cover_the_queries():
    args = valid("copy_and_expand_dflash_inputs")
    args = args[:13] + (3, 1)                                   # Q = 3 needs K >= 2
    with pytest.raises(ValueError, match="num_speculative_tokens must be >= num_query_per_req"):
        op_overload("copy_and_expand_dflash_inputs")(*args)


@pytest.mark.parametrize("slots,shift", [(2, False), (1, True)])
def test_parallel_round_steps_need_one_slot_without_shift(slots, shift):
    """docs/round_ops.md 6.2: draft steps are for the draft-model method only."""
    args = valid("prepare_parallel_round")
    args = args[:25] + (slots, shift) + args[27:29] + (1,) + args[30:]
    with pytest.raises(ValueError, match="spec_ops.prepare_parallel_round: num_steps > 0"):
        op_overload("prepare_parallel_round")(*args)



def written_names(op):
    return {op_overload(op)._schema.arguments[i].name for i in written_arg_indices(op)}


@pytest.mark.parametrize("op,index,name", all_cases(lambda t: True))
def test_a_sparse_tensor_is_a_type_error(op, index, name, monkeypatch):
    """spec_ops.<op> turns the dispatcher's NotImplementedError for a tensor it has no kernel
    for (sparse here) into a TypeError naming the argument; nothing has run. With the layout
    known, so that a call could take the shortcut to the Triton kernel, which must not take a
    sparse optional tensor."""
    layout_known(op, monkeypatch)
    args = place(valid(op), ENTRY)
    args = replaced(args, index, args[index].to_sparse())
    dense = [t.to_dense() if isinstance(t, torch.Tensor) else t for t in args]
    before = [dense[i].clone() for i in written_arg_indices(op) if dense[i] is not None]
    with pytest.raises(TypeError, match=rf"spec_ops\.{op}: {name} must be a dense \(strided\) "
                                        "tensor, got layout torch.sparse_coo"):
        call(op, args, ENTRY)
    after = [args[i].to_dense() for i in written_arg_indices(op) if args[i] is not None]
    assert all(map(torch.equal, after, before))


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype")
@pytest.mark.parametrize("op,index,name", all_cases(lambda t: True))
def test_a_nested_tensor_is_a_type_error(op, index, name, monkeypatch, launch_plans):
    """A nested tensor of torch.nested's strided layout is a plain torch.Tensor whose strides
    torch's C++ guard check cannot read (the process would abort). With the op's layout known
    and a repeated call's launch planned, spec_ops.<op> leaves such a call to the dispatcher,
    which has no kernel for it: a TypeError naming the argument, nothing written."""
    layout_known(op, monkeypatch)
    args = place(valid(op), ENTRY)
    for _ in range(2):
        call(op, clone_args(args, args[0].device), ENTRY)
    args = replaced(args, index, torch.nested.nested_tensor([args[index]]))
    before = [args[i].clone() for i in written_arg_indices(op) if i != index]
    with pytest.raises(TypeError, match=rf"spec_ops\.{op}: {name} must be a dense \(strided\) "
                                        "tensor, got a nested tensor"):
        call(op, args, ENTRY)
    after = [args[i] for i in written_arg_indices(op) if i != index]
    assert all(map(torch.equal, after, before))


def negative_view(t):
    return (-t)._neg_view()


def zero_tensor(t):
    return torch._efficientzerotensor(t.shape, dtype=t.dtype, device=t.device)


# A tensor whose memory does not hold its values: (make it from a plain tensor, the plain
# tensor of its values, what the refusal of a written one says).
MEMORYLESS = {
    "negative view": (negative_view, lambda t: t, "must not be a negative view"),
    "zero tensor": (zero_tensor, torch.zeros_like, "must not be a zero tensor"),
}


@pytest.mark.parametrize("backend", ["cpu", ENTRY])
@pytest.mark.parametrize("kind,op,index,name", [
    (kind, *case) for kind in MEMORYLESS
    for case in all_cases(lambda t, kind=kind: kind != "negative view" or t.dtype != torch.bool)])
def test_tensors_whose_memory_does_not_hold_their_values(kind, op, index, name, backend,
                                                         monkeypatch):
    """A tensor with torch's negative bit (``torch._neg_view``: its memory holds its values
    negated) or a zero tensor (``torch._efficientzerotensor``: no memory at all), through
    torch.ops on the CPU and through spec_ops.<op> on the Triton backend's device once the
    layout is known: as an input it is read by its values, the call equal to the one with a
    plain tensor of those values (the shortcut to the Triton kernel, which reads memory, must
    not take it); as a written tensor it is a TypeError naming it, nothing written."""
    make, values, refusal = MEMORYLESS[kind]
    if backend == ENTRY:
        layout_known(op, monkeypatch)
    if index in written_arg_indices(op):
        args = place(valid(op), backend)
        args = replaced(args, index, make(args[index]))
        assert_rejected(op, args, TypeError, name, backend, refusal, place_args=False)
        return
    plain = valid(op)
    args = place(valid(op), backend)
    # The call dispatches, which on CPU tensors runs the CPU kernel; zeros in place of a
    # query_start_loc make a batch whose outputs only the kernel itself defines.
    dispatched = "cpu" if args[0].device.type == "cpu" else backend
    expected = run(op, replaced(plain, index, values(plain[index])), dispatched)
    args = replaced(args, index, make(args[index]))
    result = call(op, args, backend)
    outputs = [args[i] for i in written_arg_indices(op)] + ([] if result is None else [result])
    assert all(torch.equal(a.cpu(), b) for a, b in zip(outputs, expected, strict=True))


def _written_cases():
    return [(op, i, name) for op, i, name in all_cases(lambda t: True)
            if i in written_arg_indices(op)]


@pytest.mark.parametrize("backend", [*BACKENDS, ENTRY])
@pytest.mark.parametrize("op,index,name", _written_cases())
def test_an_inference_tensor_written_outside_inference_mode(op, index, name, backend,
                                                             monkeypatch):
    """An out made under torch.inference_mode, the call outside it: a TypeError naming it,
    nothing written (torch refuses in-place updates of inference tensors there; the CPU kernel
    would fail part way, the Triton kernel write it), also once valid calls made the layout
    known. Inside inference mode the call equals the plain one."""
    if backend == ENTRY:
        shortcut_on_cpu_tensors(monkeypatch)
    args = place(valid(op), backend)
    with torch.inference_mode():     # the same layout (a row-strided view stays one)
        args = replaced(args, index, *clone_args((args[index],), args[index].device))
    assert args[index].is_inference()
    assert_rejected(op, args, TypeError, name, backend, "inference tensor", place_args=False)
    plain = valid(op)
    expected = run(op, plain, backend)
    with torch.inference_mode():
        args = place(plain, backend)
        result = call(op, args, backend)
    outputs = [args[i] for i in written_arg_indices(op)] + ([] if result is None else [result])
    assert all(torch.equal(a.cpu(), b) for a, b in zip(outputs, expected, strict=True))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,index,name", all_cases(lambda t: True, optional=False))
def test_none_for_a_required_tensor_is_a_type_error(op, index, name, backend):
    args = valid(op)
    assert_rejected(op, replaced(args, index, None), TypeError, name, backend,
                    "must be a tensor, got None", warm=False)


def byte_span(t):
    count = (t.shape[0] - 1) * t.stride(0) + t.shape[1] if t.dim() == 2 else t.numel()
    return count * t.element_size()


def laid(memory, start, t):
    """A copy of ``t`` (same shape, strides, dtype) in the uint8 buffer ``memory`` from byte
    ``start`` on."""
    span = byte_span(t) if t.numel() else 0
    view = memory[start:start + span].view(t.dtype).as_strided(t.shape, t.stride())
    view.copy_(t.to(memory.device))
    return view


def sharing_memory(first, second, offset, device):
    """Copies of ``first`` and ``second`` (same shapes, strides, dtypes) in one buffer on
    ``device``, the second starting ``offset`` bytes after the first."""
    memory = torch.zeros(byte_span(first) + byte_span(second) + offset, dtype=torch.uint8,
                         device=device)
    return laid(memory, 0, first), laid(memory, offset, second)


def overlap_cases():
    found = []
    for op in OPS:
        args = valid(op)
        tensors = [(i, name) for i, name in tensor_args(op)
                   if isinstance(args[i], torch.Tensor) and args[i].numel()]
        for i, name in tensors:
            if name in written_names(op):
                found += [(op, i, name, j, other) for j, other in tensors if j != i]
    return found


ALLOWED_ALIASES = {("eagle_step_update_slot_mapping_and_metadata", "out_clamped_positions",
                    "positions"),
                   ("eagle_mrope_step_update_slot_mapping_and_metadata", "out_positions",
                    "positions")}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,written,name,other,other_name", overlap_cases())
def test_a_written_tensor_sharing_memory_is_a_value_error(op, written, name, other, other_name,
                                                          backend):
    """Written tensors that overlap any other argument are rejected naming both, before any
    launch; overlap is decided from memory ranges, so the very same tensor, a view into the
    same buffer, and a shifted overlap all count (except the contract's allowed aliases)."""
    assert_overlap_rejected(op, written, name, other, other_name, backend)


def assert_overlap_rejected(op, written, name, other, other_name, backend):
    args = valid(op)
    first, second = args[written], args[other]
    allowed = (op, name, other_name) in ALLOWED_ALIASES
    # Same first element: the very same memory; allowed pairs get a shifted overlap instead.
    offset = first.element_size() if allowed else 0
    if allowed and byte_span(first) <= offset:
        return
    first, second = sharing_memory(first, second, offset, "cuda" if backend == "cuda" else "cpu")
    placed = replaced(replaced(place(args, backend), written, first), other, second)
    assert_rejected(op, placed, ValueError, "", backend,
                    rf"({name} overlaps {other_name}|{other_name} overlaps {name})",
                    warm=False, place_args=False)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,written,name,other,other_name",
                         list({case[0]: case for case in overlap_cases()}.values()))
def test_byte_ranges_alone_reject_overlap(op, written, name, other, other_name, backend,
                                          monkeypatch):
    """Where torch has no C storage look, the byte ranges alone find the overlap (one case
    per op)."""
    monkeypatch.setattr(validation, "_shares_storage", None)
    assert_overlap_rejected(op, written, name, other, other_name, backend)


def one_buffer(args):
    """``args`` with every tensor copied into one buffer (one storage), laid end to end at
    8-byte boundaries, none overlapping another; shapes, strides and dtypes kept."""
    tensors = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    starts, size = {}, 0
    for i in tensors:
        starts[i] = size
        size += -(-(byte_span(args[i]) if args[i].numel() else 0) // 8) * 8
    memory = torch.zeros(size, dtype=torch.uint8, device=args[tensors[0]].device)
    packed = list(args)
    for i in tensors:
        packed[i] = laid(memory, starts[i], args[i])
    return tuple(packed)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("storage_look", [True, False], ids=["storage first", "ranges only"])
@pytest.mark.parametrize("op", OPS)
def test_disjoint_views_of_one_buffer_are_accepted(op, storage_look, backend, monkeypatch):
    """Every tensor argument a view into one buffer, no two overlapping: the storage look
    sees them share a storage, the byte ranges accept them, and the op writes what it writes
    with a buffer per tensor."""
    if not storage_look:
        monkeypatch.setattr(validation, "_shares_storage", None)
    args = valid(op)
    expected = run(op, args, backend)
    packed = one_buffer(place(args, backend))
    result = call(op, packed, backend)
    outputs = [packed[i].cpu() for i in written_arg_indices(op)]
    if result is not None:
        outputs.append(result.cpu())
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected):
        assert torch.equal(got, want)


@pytest.mark.parametrize("name", sorted(n for n in OPS if n in
                                        ("eagle_step_update_slot_mapping_and_metadata",
                                         "eagle_mrope_step_update_slot_mapping_and_metadata")))
def test_the_allowed_alias_is_the_same_tensor(name):
    args = valid(name)
    positions = args[0]
    same = replaced(args, 5, positions)
    call(name, same, "cpu")          # no error: an allowed alias


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_the_allowed_alias_must_share_its_dtype(device):
    """1.5's positions as an int32 view of out_clamped_positions' int64 buffer start at the same
    byte but are not the same elements: rejected on real and on meta tensors."""
    name = "eagle_step_update_slot_mapping_and_metadata"
    args = valid(name)
    buffer = torch.zeros(2 * NUM_REQS, dtype=torch.int64, device=device)
    args = tuple(a.to(device) if isinstance(a, torch.Tensor) else a for a in args)
    args = replaced(replaced(args, 0, buffer.view(torch.int32)[:NUM_REQS]), 5, buffer)
    with pytest.raises(ValueError, match="out_clamped_positions overlaps positions"):
        call(name, args, "cpu") if device == "cpu" else op_overload(name)(*args)


def test_overlap_is_decided_on_fake_and_meta_tensors_too():
    op = "eagle_prepare_inputs_padded"
    buffer = torch.zeros(10, dtype=torch.int32, device="meta")
    args = (buffer[:3], buffer[3:6], torch.zeros(4, dtype=torch.int32, device="meta"),
            buffer[5:8], torch.zeros(3, dtype=torch.int32, device="meta"))
    with pytest.raises(ValueError, match="token_indices_to_sample overlaps "
                                         "valid_sampled_tokens_count"):
        op_overload(op)(*args)
    op_overload(op)(*replaced(args, 3, buffer[6:9]))       # adjacent, not overlapping


def assert_batch_change_matches_reference(backend, rng, num_prev, prev):
    """1.6 on len(prev) rows of int32 counts, a previous batch of num_prev rows, every value
    drawn from ``rng``: the backend writes what the reference does."""
    from reference import REFERENCES
    num_rows = len(prev)

    def ints(values):
        return torch.tensor(values, dtype=torch.int32)
    args = (ints([rng.randrange(5000) for _ in range(num_prev)]), ints([0] * num_rows),
            ints(prev), ints([rng.randrange(4) for _ in range(num_prev)]),
            ints([rng.randrange(3) for _ in range(num_prev)]),
            ints([rng.randrange(5000) for _ in range(num_rows)]))
    op = "update_num_computed_tokens_for_batch_change"
    assert [t.tolist() for t in run(op, args, backend)] == REFERENCES[op](*args)


@pytest.mark.parametrize("backend", BACKENDS)
def test_update_num_computed_tokens_has_no_row_limit(backend):
    """More rows than one program reads (the CUDA path snapshots the rows it reads), with rows
    reading entries that other rows write."""
    import random
    rng = random.Random(5)
    num_rows = 20000 if backend != "interpret" else 17000
    prev = [rng.randrange(num_rows) if rng.random() < 0.9 else -1 for _ in range(num_rows)]
    assert_batch_change_matches_reference(backend, rng, num_rows, prev)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("num_rows, num_prev", [(1000, 1024), (1024, 1025), (100, 128),
                                                (100, 129), (10, 6000)])
def test_update_num_computed_tokens_with_a_large_previous_batch(backend, num_rows, num_prev):
    """A previous batch larger than the current one, up to and past the rows of the one program
    (which loads it whole when it fits): rows point all over it, some read entries others
    write."""
    import random
    rng = random.Random(num_prev)
    prev = [rng.choice((rng.randrange(num_rows), rng.randrange(num_prev), num_prev - 1, -1))
            for _ in range(num_rows)]
    assert_batch_change_matches_reference(backend, rng, num_prev, prev)


def _threads_test_setup(backend, monkeypatch):
    """What a test of threads calling ops needs first: the public functions' shortcut taken on
    CPU tensors without a GPU, and interpreted launches one at a time."""
    if backend == ENTRY:
        shortcut_on_cpu_tensors(monkeypatch)
    if backend != "cpu":
        interpreted_launches_take_turns(monkeypatch)


def _work(op, seed, num_reqs, fixed_dtype=None):
    """(op, valid arguments, their expected outputs, the same with a float index tensor)."""
    from reference import REFERENCES
    args = sample(op, seed, num_reqs, fixed_dtype=fixed_dtype)
    index, _ = tensor_args(op, optional=False)[1]
    return op, args, REFERENCES[op](*args), replaced(args, index, args[index].float())


def _call_and_check(work, backend, failures):
    """One valid call, its outputs compared with the reference, then one invalid call, which
    must raise its TypeError and write nothing; what goes wrong is appended to ``failures``."""
    op, args, expected, bad = work
    try:
        placed = place(args, backend)
        result = call(op, placed, backend)
        got = [placed[i].cpu().tolist() for i in written_arg_indices(op)]
        if result is not None:
            got.append(result.cpu().tolist())
        if got != [list(e) if not isinstance(e, list) else e for e in expected]:
            failures.append(f"{op}: wrong result")
        placed = place(bad, backend)
        before = [placed[i].clone() for i in written_arg_indices(op)]
        try:
            call(op, placed, backend)
            failures.append(f"{op}: bad call accepted")
        except TypeError:
            if not all(torch.equal(placed[i], b)
                       for i, b in zip(written_arg_indices(op), before)):
                failures.append(f"{op}: bad call wrote")
    except Exception as error:      # noqa: BLE001 - any exception is a failure
        failures.append(f"{op}: {type(error).__name__}: {error}")


def _in_threads(target, count):
    """``target(worker)`` in ``count`` threads at once, the interpreter switching threads as
    often as it can."""
    import sys
    import threading

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=target, args=(w,)) for w in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)


@pytest.mark.parametrize("backend", [*BACKENDS, ENTRY])
def test_valid_calls_never_raise_under_threads(backend, monkeypatch, launch_plans):
    """Eight threads calling ops with valid and invalid arguments, the interpreter switching
    threads as often as it can: every valid call returns the right result, every invalid one
    raises its error and writes nothing (the CUDA route also remembers layouts meanwhile; the
    public functions' entry takes its shortcut once a layout is known, and replays launch
    plans). Triton's interpreter keeps global state, so interpreted launches take turns; the
    checks, the remembered layouts, the launch plans and the launch cache around them do
    not."""
    _threads_test_setup(backend, monkeypatch)
    ops = ("eagle_prepare_inputs_padded", "copy_and_expand_eagle_inputs",
           "eagle_step_update_slot_mapping_and_metadata", "compute_new_slot_mapping")
    work = [_work(op, seed, num_reqs) for op in ops for seed, num_reqs in ((1, 3), (2, 7))]
    failures = []

    def hammer(worker):
        for n in range(150 if backend == "cpu" or HAS_CUDA else 12):
            _call_and_check(work[(worker + n) % len(work)], backend, failures)

    if backend == ENTRY:
        # Half the layouts known up front (the entry's shortcut), half left to the threads
        # (dispatched until some thread's CUDA-route call remembers them).
        from spec_ops._library import KERNELS
        for op, args, _, _ in work[::2]:
            KERNELS[op].triton(*place(args, backend))
    _in_threads(hammer, 8)
    assert not failures, failures[:5]


@pytest.mark.parametrize("backend", [*BACKENDS, ENTRY])
@pytest.mark.parametrize("op", OPS)
def test_every_op_under_threads(op, backend, monkeypatch, launch_plans):
    """Each op called from four threads at once, each thread with batches of its own sizes
    (two threads sharing one tensor layout, two with layouts of their own) and an invalid call
    after each valid one: every valid call returns the right result, every invalid one raises
    its TypeError and writes nothing. Through the public functions (``entry``) the layouts are
    remembered and, for the ops that return nothing, the sizes' launch plans form and replay
    while the other threads call."""
    _threads_test_setup(backend, monkeypatch)
    batches = {worker: [_work(op, 60 + 10 * worker + n, num_reqs,
                              torch.int32 if worker < 2 else None)
                        for n, num_reqs in enumerate((1 + worker, 5 + worker))]
               for worker in range(4)}
    failures = []

    def hammer(worker):
        for n in range(24 if backend == "cpu" or HAS_CUDA else 8):
            _call_and_check(batches[worker][n % 2], backend, failures)

    if backend == ENTRY:
        # The shared layout and one of the others known up front (the entry's shortcut and its
        # launch plans), the last left to the threads.
        from spec_ops._library import KERNELS
        for worker in (0, 2):
            KERNELS[op].triton(*place(batches[worker][0][1], backend))
    _in_threads(hammer, 4)
    assert not failures, failures[:5]


@pytest.mark.parametrize("op", OPS)
def test_known_layouts_match_only_what_the_check_accepted(op):
    """After a valid call, a call with the same tensor layout (sizes free) is checked for sizes
    only; another dtype, rank, stride or device is not matched, and takes the full check."""
    from spec_ops.validation import KnownLayouts, TensorGuards
    if TensorGuards is None:
        pytest.skip("this torch has no TensorGuards: every call takes the full check")
    known = KnownLayouts.for_schema(op_overload(op)._schema)

    def match(args):
        return known.match(known.tensors(args))

    args = valid(op)
    assert match(args) is None
    known.remember(args)
    assert match(args) is not None
    index, _ = tensor_args(op)[0]
    first = args[index]
    assert match(replaced(args, index, first[:1])) is not None, "sizes are free"
    other_dtype = torch.int64 if first.dtype == torch.int32 else torch.int32
    strided = (first.repeat_interleave(2)[::2] if first.dim() == 1
               else first.t().contiguous().t())
    for changed in (first.to(other_dtype), first[None], strided, first.to("meta"), None):
        assert match(replaced(args, index, changed)) is None, changed
