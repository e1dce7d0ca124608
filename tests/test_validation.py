"""Bad input: a TypeError / ValueError that names the argument and what was expected, raised
before any kernel runs (out buffers stay as they were), on the CPU kernel, the Triton kernel
and the fake (meta tensors). One test per kind of mistake, over every op and argument."""

import pytest
import torch

from backends import BACKENDS, call, place
from samples import OPS, op_overload, sample, written_arg_indices
from spec_ops.validation import VerifiedMetadata

NUM_REQS = 5
# A full check, then size-only ones until the metadata is remembered exactly, then one exact.
WARM_CALLS = VerifiedMetadata.PROMOTE_AFTER + 2


def tensor_args(op):
    """(index, name) of every Tensor argument of the op's schema."""
    return [(i, arg.name) for i, arg in enumerate(op_overload(op)._schema.arguments)
            if isinstance(arg.type, torch.TensorType)
            or str(arg.type) == "Tensor?"]


def cases(op, select):
    args = sample(op, seed=11, num_reqs=NUM_REQS)
    return [(op, i, name) for i, name in tensor_args(op)
            if isinstance(args[i], torch.Tensor) and select(args[i])]


def all_cases(select):
    return [case for op in OPS for case in cases(op, select)]


def assert_rejected(op, args, error, name, backend, fragment=""):
    """The op raises ``error`` mentioning ``name`` and leaves every out buffer untouched, also
    right after valid calls (whose metadata the op then remembers, with sizes free and, the
    same call coming again and again, exactly: VerifiedMetadata)."""
    for _ in range(WARM_CALLS):
        call(op, place(sample(op, seed=11, num_reqs=NUM_REQS), backend), backend)
    placed = place(args, backend)
    before = [placed[i].clone() for i in written_arg_indices(op)]
    with pytest.raises(error, match=rf"spec_ops\.{op}: .*{name}.*{fragment}"):
        call(op, placed, backend)
    for i, original in zip(written_arg_indices(op), before):
        assert torch.equal(placed[i], original), f"{op} wrote {i} before failing"


def replaced(args, index, value):
    return args[:index] + (value,) + args[index + 1:]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,index,name", all_cases(lambda t: True))
def test_float_tensor_is_a_type_error(op, index, name, backend):
    args = sample(op, seed=11, num_reqs=NUM_REQS)
    assert_rejected(op, replaced(args, index, args[index].float()), TypeError, name, backend,
                    "must be")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,index,name", all_cases(lambda t: t.dim() == 1))
def test_wrong_rank(op, index, name, backend):
    args = sample(op, seed=11, num_reqs=NUM_REQS)
    assert_rejected(op, replaced(args, index, args[index][None]), ValueError, name, backend,
                    "must be 1-D")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,index,name", all_cases(lambda t: t.dim() == 1 and len(t) >= 2))
def test_non_unit_stride(op, index, name, backend):
    args = sample(op, seed=11, num_reqs=NUM_REQS)
    spread = args[index].repeat_interleave(2)[::2]             # same values, stride 2
    assert_rejected(op, replaced(args, index, spread), ValueError, name, backend, "unit stride")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,index,name", all_cases(lambda t: t.dim() == 2))
def test_matrix_last_dim_must_be_contiguous_and_rows_disjoint(op, index, name, backend):
    args = sample(op, seed=11, num_reqs=NUM_REQS)
    matrix = args[index]
    column_major = matrix.t().contiguous().t()
    if matrix.shape[1] > 1:
        assert_rejected(op, replaced(args, index, column_major), ValueError, name, backend,
                        "unit stride along its last dim")
    overlapping = matrix[:1].expand(matrix.shape[0], matrix.shape[1])   # row stride 0
    if matrix.shape[0] > 1:
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
    "update_num_computed_tokens_for_batch_change": ("prev_positions",
                                                    "valid_sampled_token_count",
                                                    "prev_num_draft_tokens"),
    "compute_new_slot_mapping": ("query_start_loc", "new_positions"),
}


def _required_length_cases():
    """Every 1-D argument whose length another argument fixes (out buffers included)."""
    found = []
    for op in OPS:
        args = sample(op, seed=11, num_reqs=NUM_REQS)
        for i, name in tensor_args(op):
            unused = (op == "copy_and_expand_eagle_inputs" and name == "out_hidden_state_mapping"
                      and not args[-1])                          # only written with shift
            if (isinstance(args[i], torch.Tensor) and args[i].dim() == 1 and not unused
                    and name not in DEFINES_SIZES[op]):
                found.append((op, i, name))
    return found


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,index,name", _required_length_cases())
def test_too_short(op, index, name, backend):
    args = sample(op, seed=11, num_reqs=NUM_REQS)
    assert_rejected(op, replaced(args, index, args[index][:1]), ValueError, name, backend,
                    "entries")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", [op for op in OPS
                                if "query_start_loc" in [name for _, name in tensor_args(op)]
                                and "query_start_loc" not in DEFINES_SIZES[op]])
def test_query_start_loc_must_have_num_reqs_plus_one_entries(op, backend):
    args = sample(op, seed=11, num_reqs=NUM_REQS)
    index = [i for i, name in tensor_args(op) if name == "query_start_loc"][0]
    longer = torch.cat([args[index], args[index][-1:]])
    assert_rejected(op, replaced(args, index, longer), ValueError, "query_start_loc", backend,
                    "num_reqs \\+ 1")


@pytest.mark.parametrize("op,index,name", [c for c in all_cases(lambda t: True) if c[1] > 0])
def test_tensors_on_different_devices(op, index, name):
    """Meta stands in for a second device on a CPU-only machine (the fake runs the check)."""
    args = sample(op, seed=11, num_reqs=NUM_REQS)
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
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,index,value,name", BAD_SCALARS)
def test_bad_scalar(op, index, value, name, backend):
    args = sample(op, seed=11, num_reqs=NUM_REQS)
    assert_rejected(op, replaced(args, index, value), ValueError, name, backend, "must be >=")


def test_dflash_speculative_tokens_must_cover_the_queries():
    args = sample("copy_and_expand_dflash_inputs", seed=11, num_reqs=NUM_REQS)
    args = args[:13] + (3, 1)                                   # Q = 3 needs K >= 2
    with pytest.raises(ValueError, match="num_speculative_tokens must be >= num_query_per_req"):
        op_overload("copy_and_expand_dflash_inputs")(*args)


def test_update_num_computed_tokens_row_limit():
    from spec_ops._triton import UPDATE_NUM_COMPUTED_TOKENS_MAX_ROWS as max_rows
    n = max_rows + 1
    rows = torch.zeros(n, dtype=torch.int32)
    with pytest.raises(ValueError, match=f"prev_positions has {n} rows; at most {max_rows}"):
        op_overload("update_num_computed_tokens_for_batch_change")(
            rows.clone(), rows.clone(), rows - 1, rows, rows, rows)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", OPS)
def test_verified_metadata_matches_only_what_the_check_accepted(op, backend):
    """After a valid call, a call with the same tensor metadata (sizes free) is verified in one
    C++ call; a different dtype, rank, stride or device is not, and takes the full check."""
    from spec_ops._library import VERIFIED
    args = sample(op, seed=11, num_reqs=NUM_REQS)
    call(op, place(args, backend), backend)
    assert VERIFIED[op](place(args, backend)) is not None, "a valid call is remembered"
    verified = VerifiedMetadata.for_schema(op_overload(op)._schema)
    variant = verified.remember(place(args, backend))
    assert verified(place(args, backend)) == variant
    index, _ = tensor_args(op)[0]
    placed = place(args, backend)
    first = placed[index]
    assert verified(replaced(placed, index, first[:1])) == variant, "sizes are not remembered"
    other_dtype = torch.int64 if first.dtype == torch.int32 else torch.int32
    strided = (first.repeat_interleave(2)[::2] if first.dim() == 1
               else first.t().contiguous().t())
    for changed in (first.to(other_dtype), first[None], strided, first.to("meta")):
        assert verified(replaced(placed, index, changed)) is None, changed
    # Another dtype is another variant: the CUDA kernels key their compiled code by it.
    assert verified.remember(replaced(placed, index, first.to(other_dtype))) != variant


def test_remembered_metadata_does_not_keep_tensors_alive():
    import gc
    import weakref

    args = (torch.zeros(1 << 16, dtype=torch.int32), torch.zeros(3, dtype=torch.int64), 7)
    alive = weakref.ref(args[0])
    verified = VerifiedMetadata([0, 1], scalars=lambda args: args[2:])
    for _ in range(WARM_CALLS):
        verified.checked(args, lambda *args, verified=False: ())
    assert verified.guards and verified.exact
    assert verified((torch.zeros(5, dtype=torch.int32), args[1])) is not None
    del args
    gc.collect()
    assert alive() is None


def _another_scalar(value):
    return 1 if value is None else (not value) if isinstance(value, bool) else value + 1


@pytest.mark.parametrize("seed", [11, 1])       # 1.4: num_rejected_tokens None, then given
@pytest.mark.parametrize("op", OPS)
def test_exact_metadata_skips_the_check_until_anything_changes(op, seed):
    """After a full check and PROMOTE_AFTER size-only ones, a call with the same metadata and
    scalars finds them remembered exactly and is not checked again; another scalar or other
    sizes are checked (and may fail) as usual."""
    from spec_ops import validation
    checks = []

    def check(*args, verified=False):
        checks.append(verified)
        return getattr(validation, "check_" + op)(*args, verified=verified)

    schema_types = [str(argument.type) for argument in op_overload(op)._schema.arguments]
    verified = VerifiedMetadata.for_schema(op_overload(op)._schema)
    args = sample(op, seed=seed, num_reqs=NUM_REQS)
    results = [verified.checked(place(args, "cpu"), check) for _ in range(WARM_CALLS)]
    exact = verified.scalars(args) is not None
    assert exact == all(args[i] is None for i, kind in enumerate(schema_types)
                        if kind == "Optional[Tensor]")
    size_only = VerifiedMetadata.PROMOTE_AFTER if exact else WARM_CALLS - 1
    assert checks == [False] + [True] * size_only
    assert len(set(results)) == 1, "the remembered extras and variant are the call's own"
    scalar_positions = [i for i, kind in enumerate(schema_types)
                        if kind in ("int", "bool", "Optional[int]")]
    for changed in ([replaced(args, i, _another_scalar(args[i])) for i in scalar_positions]
                    + [sample(op, seed=seed, num_reqs=NUM_REQS + 1)]):
        before = len(checks)
        try:
            verified.checked(place(changed, "cpu"), check)
        except ValueError:
            pass
        assert len(checks) == before + 1, f"{changed} was not checked"


def test_two_dtype_mixes_never_share_a_variant_across_threads():
    """The variant is a CUDA launch key: remembering two dtype mixes at once, with a thread
    switch between reading the table and writing it, still names them apart."""
    import threading
    import time


    class SlowTable(dict):
        def __len__(self):
            size = super().__len__()
            time.sleep(0.01)            # hands the GIL to the other thread
            return size

    verified = VerifiedMetadata([0, 1])
    verified.variants = SlowTable()
    found = {}

    def remember(dtype):
        found[dtype] = verified.remember((torch.zeros(3, dtype=dtype),
                                          torch.zeros(3, dtype=torch.int32)))

    threads = [threading.Thread(target=remember, args=(d,)) for d in (torch.int32, torch.int64)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert found[torch.int32] != found[torch.int64]


def test_unmatchable_metadata_is_not_remembered():
    """A size-1 tensor with a non-unit stride passes the check but can never match a guard
    (which asks for unit stride): it is not remembered, so it evicts nothing."""
    verified = VerifiedMetadata([0, 1])
    plain = (torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32))
    variant = verified.remember(plain)
    odd = (torch.zeros(4, dtype=torch.int32)[::2][:1], torch.zeros(4, dtype=torch.int32))
    assert odd[0].stride() == (2,)
    assert verified.remember(odd) == variant
    assert len(verified.guards) == 1 and verified(plain) == variant


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", ["short", "float"])
def test_a_given_optional_tensor_is_checked_on_every_call(backend, bad):
    """1.4's num_rejected_tokens, when given, is in no remembered metadata: after many valid
    calls with it, a bad one is still rejected."""
    op = "copy_and_expand_dflash_inputs"
    args = sample(op, seed=1, num_reqs=NUM_REQS)
    assert isinstance(args[10], torch.Tensor)
    for _ in range(WARM_CALLS):
        call(op, place(args, backend), backend)
    rejected = args[10][:1] if bad == "short" else args[10].float()
    with pytest.raises((TypeError, ValueError), match=rf"spec_ops\.{op}: num_rejected_tokens"):
        call(op, place(replaced(args, 10, rejected), backend), backend)


def test_more_sizes_taking_turns_than_exact_slots_do_not_rebuild_guards(monkeypatch):
    """Five sets of sizes in turn, four exact slots: once the slots are full, a slot changes
    hands at most once per EVICT_AFTER size-only calls (a guard costs several checks)."""
    from spec_ops import validation
    builds = []

    def counting_guard(tensors, exact):
        builds.append(exact)
        return guard(tensors, exact)

    guard = validation._tensor_guard
    monkeypatch.setattr(validation, "_tensor_guard", counting_guard)
    verified = VerifiedMetadata([0, 1], scalars=lambda args: args[2:])
    turns = [(torch.zeros(n, dtype=torch.int32), torch.zeros(n, dtype=torch.int32), 7)
             for n in range(3, 8)]
    for num_turns in (4, 5):        # four remembered exactly, then a fifth joins them
        for _ in range(60):
            for args in turns[:num_turns]:
                verified.checked(args, lambda *args, verified=False: ())
    exact_builds = builds.count(True)
    assert len(verified.exact) == VerifiedMetadata.MAX_EXACT
    assert exact_builds <= VerifiedMetadata.MAX_EXACT + verified.size_only_calls // (
        VerifiedMetadata.EVICT_AFTER) + 1, exact_builds
