"""The public functions' eager entry: in plain eager code it runs the CUDA kernel without the
dispatcher, with the same results, errors and version counters as the dispatched op;
wherever the dispatcher does more (tracing, profiling, modes, tensor subclasses, a layout not
seen in a valid call) it dispatches. Without a GPU the CUDA kernel is the interpreted Triton
kernel on CPU tensors (``cpu_tensors_run_triton``)."""

import contextlib
import random
import threading
import warnings

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import spec_ops
from backends import (HAS_CUDA, TRITON, interpreted_launches_take_turns, place,
                      shortcut_on_cpu_tensors)
from reference import REFERENCES
from samples import OPS, dflash_with_rejected, op_overload, sample, written_arg_indices
from test_validation import sharing_memory
from spec_ops._library import KERNELS, Plan

pytestmark = pytest.mark.parametrize("backend", [TRITON])
NUM_REQS = 4


@pytest.fixture(autouse=True)
def triton_on_cpu_tensors(monkeypatch, launch_plans):
    """The shortcut on CPU tensors without a GPU, launch plans on, and every test starting
    with no remembered layouts or plans (earlier tests in the process, e.g. the example in
    inference mode, leave some)."""
    shortcut_on_cpu_tensors(monkeypatch)
    for kernels in KERNELS.values():
        monkeypatch.setattr(kernels.entry.known, "guards", ())
        if kernels.entry.calls is not None:
            monkeypatch.setattr(kernels.entry.calls, "plans", ())
            monkeypatch.setattr(kernels.entry.calls, "recent", ())


class Calls:
    """Counts the entry's calls of its ``attribute`` (which still runs): "op" the dispatched
    op, "run" the checked path (the check and the layout choice, not a plan)."""

    def __init__(self, monkeypatch, op, attribute):
        entry = KERNELS[op].entry
        self.count, called = 0, getattr(entry, attribute)

        def counted(*args):
            self.count += 1
            return called(*args)
        monkeypatch.setattr(entry, attribute, counted)


class Replays:
    """Counts the launches plans make again (which still run)."""

    def __init__(self, monkeypatch):
        self.count, replay = 0, Plan.replay

        def counted(plan, args):
            self.count += 1
            return replay(plan, args)
        monkeypatch.setattr(Plan, "replay", counted)


def remembered(op, backend, seed=3):
    """Placed arguments with the layout of a valid call the CUDA kernel has seen, another
    batch size."""
    KERNELS[op].triton(*place(sample(op, seed, NUM_REQS + 2, fixed_dtype=torch.int32), backend))
    return place(sample(op, seed + 1, NUM_REQS, fixed_dtype=torch.int32), backend)


def planned(op, backend):
    """Arguments (optional tensors None) of a call whose launch the entry remembers: the second
    of two calls with these sizes and scalars made it a plan (KnownCalls)."""
    args = list(remembered(op, backend))
    for i in KERNELS[op].entry.optional:
        args[i] = None
    for _ in range(2):
        getattr(spec_ops, op)(*place(tuple(args), backend))
    return tuple(args)


def outputs(op, args, result):
    got = [args[i].cpu().tolist() for i in written_arg_indices(op)]
    return got + ([result.cpu().tolist()] if result is not None else [])


def expected(op, args):
    return [list(e) for e in REFERENCES[op](*[a.cpu() if isinstance(a, torch.Tensor) else a
                                              for a in args])]


def replaced(args, index, value):
    return tuple(args[:index]) + (value,) + tuple(args[index + 1:])


@contextlib.contextmanager
def dispatching_to_triton(op):
    """The op's dispatch to its Triton kernel: on CUDA the CUDA key's; without a GPU, the CPU
    key's kernel replaced with the interpreted Triton one for the duration (so the call still
    goes through the dispatcher, which the shortcut must match)."""
    if HAS_CUDA:
        yield
        return
    library = torch.library.Library("spec_ops", "IMPL")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # "overriding a previously registered kernel"
            library.impl(op, KERNELS[op].triton, "CPU", allow_override=True)
        yield
    finally:
        library._destroy()      # the CPU kernel is the CPU key's kernel again


@pytest.mark.parametrize("op", OPS)
def test_known_layout_skips_the_dispatcher_with_the_same_results_and_versions(op, backend,
                                                                              monkeypatch):
    args = remembered(op, backend)
    reference = expected(op, args)
    dispatched = place(args, backend)
    with dispatching_to_triton(op):
        assert outputs(op, dispatched, op_overload(op)(*dispatched)) == reference
    dispatches = Calls(monkeypatch, op, "op")
    before = [args[i]._version for i in written_arg_indices(op)]
    result = getattr(spec_ops, op)(*args)
    assert dispatches.count == 0
    assert outputs(op, args, result) == reference
    bumps = [args[i]._version - v for i, v in zip(written_arg_indices(op), before)]
    assert bumps == [dispatched[i]._version for i in written_arg_indices(op)]


@pytest.mark.parametrize("op", [op for op in OPS if written_arg_indices(op)])
def test_bad_input_through_the_entry_is_rejected_before_any_write(op, backend, monkeypatch):
    """A written tensor sharing memory with another argument keeps the remembered layout, so
    the entry takes the shortcut: the overlap check still rejects it, naming both, before any
    launch; ``None`` for a tensor matches no layout and is the dispatcher's TypeError."""
    args = remembered(op, backend)
    written = written_arg_indices(op)[0]
    other = next(i for i, a in enumerate(args)
                 if isinstance(a, torch.Tensor) and a.numel() and i != written)
    first, second = sharing_memory(args[written], args[other], 0, args[0].device)
    bad = replaced(replaced(args, written, first), other, second)
    before = [t.clone() for t in bad if isinstance(t, torch.Tensor)]
    dispatches = Calls(monkeypatch, op, "op")
    with pytest.raises(ValueError, match="overlaps"):
        getattr(spec_ops, op)(*bad)
    assert dispatches.count == 0
    assert all(torch.equal(t, b) for t, b in zip(
        [t for t in bad if isinstance(t, torch.Tensor)], before))
    with pytest.raises(TypeError, match="got None"):
        getattr(spec_ops, op)(*replaced(args, written, None))


PLANNED_OPS = [op for op in OPS if not op_overload(op)._schema.returns]


@pytest.mark.parametrize("op", PLANNED_OPS)
def test_a_repeated_call_replays_its_launch(op, backend, monkeypatch):
    """The third call of one size replays the second's launch: no check, no layout choice,
    the same results and version counters as the dispatched op (which bumps none)."""
    args = planned(op, backend)
    assert KERNELS[op].entry.calls.plans, "the repeated call left no plan"
    reference = expected(op, args)
    runs, dispatches = Calls(monkeypatch, op, "run"), Calls(monkeypatch, op, "op")
    fresh = place(args, backend)
    before = [fresh[i]._version for i in written_arg_indices(op)]
    assert getattr(spec_ops, op)(*fresh) is None
    assert (runs.count, dispatches.count) == (0, 0)
    assert outputs(op, fresh, None) == reference
    assert [fresh[i]._version for i in written_arg_indices(op)] == before


@pytest.mark.parametrize("op", PLANNED_OPS)
def test_the_dispatched_op_makes_and_replays_the_same_plans(op, backend, monkeypatch):
    """torch.ops.spec_ops.<op> (a caller of the op itself, a compiled graph's call) replays
    the plan the public function made, and the plans its own repeated calls make serve the
    public function: the same results as the reference."""
    args, replays = planned(op, backend), Replays(monkeypatch)
    reference = expected(op, args)
    with dispatching_to_triton(op):
        for _ in range(2):
            fresh = place(args, backend)
            assert op_overload(op)(*fresh) is None
            assert outputs(op, fresh, None) == reference
        assert replays.count == 2, "the dispatched op replayed no plan"
        calls = KERNELS[op].entry.calls
        calls.plans, calls.recent = (), ()
        for _ in range(2):
            op_overload(op)(*place(args, backend))
        assert calls.plans, "the dispatched op's repeated call made no plan"
    fresh = place(args, backend)
    getattr(spec_ops, op)(*fresh)
    assert replays.count == 3, "the public function replayed no plan"
    assert outputs(op, fresh, None) == reference


@pytest.mark.parametrize("op", PLANNED_OPS)
def test_replays_equal_the_reference_on_varied_batches(op, backend, monkeypatch):
    """Batches of 1-17 requests with a dtype drawn per tensor, some with long requests, each
    called three times after a first CUDA-key call, through the function, the dispatched op
    and the function again: the first of these makes the plan, the others replay it (unless
    an optional tensor given is part of the plan); every call equals the reference."""
    replays, rng = Replays(monkeypatch), random.Random(op)
    with dispatching_to_triton(op):
        for seed in range(3):
            args = sample(op, 40 + seed, rng.choice([1, 2, 5, 9, 17]),
                          long_requests=rng.choice([False, "some"]))
            reference = expected(op, args)
            KERNELS[op].triton(*place(args, backend))     # the layout: a valid CUDA-key call
            for route in (getattr(spec_ops, op), op_overload(op), getattr(spec_ops, op)):
                call = place(args, backend)
                assert route(*call) is None
                assert outputs(op, call, None) == reference
    assert replays.count, "no call replayed a plan"


def test_a_launch_has_one_plan_whatever_its_buffers(backend, monkeypatch):
    """1.5's out_clamped_positions longer on every call (its length is no kernel argument):
    the launch repeats with tensors that match no plan, and replaces its one plan; the plans
    of two batch sizes in turn stay and replay. Every call right."""
    calls, replays = KERNELS[OP].entry.calls, Replays(monkeypatch)
    turns = [place(sample(OP, 50 + n, n, fixed_dtype=torch.int32), backend) for n in (2, 3)]
    KERNELS[OP].triton(*place(turns[0], backend))       # the layout: a valid CUDA-key call
    for _ in range(2):
        for args in turns:
            getattr(spec_ops, OP)(*place(args, backend))
    assert len(calls.plans) == 2
    base = remembered(OP, backend)
    reference = expected(OP, base)
    for extra in range(6):
        call = list(place(base, backend))
        call[5] = torch.cat([call[5], call[5].new_zeros(extra)])
        getattr(spec_ops, OP)(*call)
        seq_lens, positions, slots = outputs(OP, call, None)
        assert [seq_lens, slots, positions[:len(reference[1])]] == [
            reference[0], reference[2], reference[1]]
    assert len(calls.plans) == 3, "one plan for the launch of the growing buffer"
    replayed = replays.count
    for args in turns:
        call = place(args, backend)
        getattr(spec_ops, OP)(*call)
        assert outputs(OP, call, None) == expected(OP, args)
    assert replays.count == replayed + 2, "the two sizes' plans were pushed out"


def test_a_plan_needs_the_same_sizes_strides_and_scalars(backend, monkeypatch):
    """Another batch size, a row-strided block table of the same sizes, another scalar: each
    takes the checked path (and is right); the planned call still replays."""
    args = planned(OP, backend)
    runs = Calls(monkeypatch, OP, "run")
    other_size = place(sample(OP, 9, NUM_REQS + 1, fixed_dtype=torch.int32), backend)
    strided = list(place(args, backend))
    table = strided[1]
    wide = torch.zeros(table.shape[0], table.shape[1] + 3, dtype=table.dtype,
                       device=table.device)
    wide[:, :table.shape[1]] = table
    strided[1] = wide[:, :table.shape[1]]
    other_scalar = replaced(place(args, backend), 4, args[4] + 1)       # max_model_len
    for count, call in enumerate((other_size, tuple(strided), other_scalar), 1):
        reference = expected(OP, call)
        getattr(spec_ops, OP)(*call)
        assert runs.count == count
        assert outputs(OP, call, None) == reference
    again = place(args, backend)
    getattr(spec_ops, OP)(*again)
    assert runs.count == 3
    assert outputs(OP, again, None) == expected(OP, args)


def test_sizes_taking_turns_make_plans_unless_more_than_remembered(backend, monkeypatch):
    """Two batch sizes in turn (micro-batches of a pipeline) get a plan each from their
    second turn; a caller cycling through more sizes than the entry remembers makes none and
    pays a few comparisons per call. Every call right either way."""
    calls, replays = KERNELS[OP].entry.calls, Replays(monkeypatch)
    batches = [place(sample(OP, 30 + n, n + 1, fixed_dtype=torch.int32), backend)
               for n in range(calls.MAX_REMEMBERED + 1)]
    wanted = [expected(OP, args) for args in batches]
    KERNELS[OP].triton(*place(batches[0], backend))     # the layout: a valid CUDA-key call
    calls.recent = ()

    def take_turns(batches, turns):
        for _ in range(turns):
            for args, reference in zip(batches, wanted):
                call = place(args, backend)
                getattr(spec_ops, OP)(*call)
                assert outputs(OP, call, None) == reference

    take_turns(batches, 3)
    assert (calls.plans, replays.count) == ((), 0)
    take_turns(batches[:2], 3)
    assert len(calls.plans) == 2, "two sizes in turn make a plan each"
    assert replays.count == 2, "the second turn makes the plans, the third replays them"


DFLASH = "copy_and_expand_dflash_inputs"


def test_a_given_optional_tensor_is_part_of_the_plan(backend, monkeypatch):
    """1.4 with num_rejected_tokens given: its repeated call replays a plan whose guard covers
    that tensor too. The same call without it, or with it in int64, takes the checked path and
    is right; with it a request short, it is rejected before any write; the plan still
    replays afterwards."""
    args, index = dflash_with_rejected(60, NUM_REQS), KERNELS[DFLASH].entry.optional[0]
    replays, runs = Replays(monkeypatch), Calls(monkeypatch, DFLASH, "run")
    KERNELS[DFLASH].triton(*place(args, backend))       # the layout: a valid CUDA-key call
    for _ in range(3):
        call = place(args, backend)
        spec_ops.copy_and_expand_dflash_inputs(*call)
        assert outputs(DFLASH, call, None) == expected(DFLASH, args)
    assert (runs.count, replays.count) == (2, 1), "the third call replays the second's plan"
    for other in (None, args[index].long()):
        changed = replaced(args, index, other)
        call = place(changed, backend)
        spec_ops.copy_and_expand_dflash_inputs(*call)
        assert outputs(DFLASH, call, None) == expected(DFLASH, changed)
    assert (runs.count, replays.count) == (4, 1)
    short = place(replaced(args, index, args[index][:-1]), backend)
    before = [t.clone() for t in short if isinstance(t, torch.Tensor)]
    with pytest.raises(ValueError, match="num_rejected_tokens"):
        spec_ops.copy_and_expand_dflash_inputs(*short)
    assert all(torch.equal(t, b) for t, b in zip(
        [t for t in short if isinstance(t, torch.Tensor)], before))
    call = place(args, backend)
    spec_ops.copy_and_expand_dflash_inputs(*call)
    assert replays.count == 2
    assert outputs(DFLASH, call, None) == expected(DFLASH, args)


def test_one_tensor_in_two_places_makes_no_plan(backend):
    """1.5 with positions as its own out (the allowed alias): which place a plan would read is
    not known from the tensor, so the call always takes the checked path (and is right)."""
    args = remembered(OP, backend)
    reference = expected(OP, args)      # out_clamped_positions its own tensor: the same values
    for _ in range(3):
        call = place(args, backend)
        call = (*call[:5], call[0], *call[6:])      # out_clamped_positions is positions
        getattr(spec_ops, OP)(*call)
        seq_lens, positions, slots = outputs(OP, call, None)
        assert [seq_lens, slots] == [reference[0], reference[2]]
        assert positions == reference[1][:len(positions)]   # the out's head: the R rows
    assert KERNELS[OP].entry.calls.plans == ()


@pytest.mark.parametrize("op", PLANNED_OPS)
def test_bad_input_on_a_planned_layout_is_rejected_before_any_write(op, backend, monkeypatch):
    """Sizes and scalars of a remembered launch, a written tensor sharing memory with another
    argument: the overlap check runs before the replay and names both; a wrong dtype or
    ``None`` fails the plan's guard and gets the check's error."""
    args = planned(op, backend)
    written = written_arg_indices(op)[0]
    other = next(i for i, a in enumerate(args)
                 if isinstance(a, torch.Tensor) and a.numel() and i != written)
    first, second = sharing_memory(args[written], args[other], 0, args[0].device)
    bad = replaced(replaced(place(args, backend), written, first), other, second)
    before = [t.clone() for t in bad if isinstance(t, torch.Tensor)]
    with pytest.raises(ValueError, match="overlaps"):
        getattr(spec_ops, op)(*bad)
    assert all(torch.equal(t, b) for t, b in zip(
        [t for t in bad if isinstance(t, torch.Tensor)], before))
    floats = replaced(place(args, backend), written, args[written].double())
    with pytest.raises(TypeError, match="must be"):
        getattr(spec_ops, op)(*floats)
    with pytest.raises(TypeError, match="got None"):
        getattr(spec_ops, op)(*replaced(args, written, None))


def test_an_int_beyond_int64_is_a_value_error_naming_it(backend):
    """The dispatcher refuses an int past int64 while converting it; on the shortcut the check
    passes such a max_model_len and the launch cannot bind it: a ValueError naming it, before
    anything is written."""
    args = remembered(OP, backend)
    before = [t.clone() for t in args if isinstance(t, torch.Tensor)]
    with pytest.raises(ValueError, match=f"max_model_len must fit in int64, got {2**64}"):
        getattr(spec_ops, OP)(*replaced(args, 4, 2**64))
    assert all(torch.equal(t, b) for t, b in zip(
        [t for t in args if isinstance(t, torch.Tensor)], before))


def test_threads_replaying_their_own_plans(backend, monkeypatch):
    """Threads calling one op with their own batch sizes, each size's plan made up front:
    every call right, whether it replayed a plan or took the checked path (interleaved sizes
    also replace the plans meanwhile)."""
    interpreted_launches_take_turns(monkeypatch)
    remembered(OP, backend)
    sizes = [1, 3, NUM_REQS, 6]
    batches = {n: place(sample(OP, 20 + n, n, fixed_dtype=torch.int32), backend) for n in sizes}
    wanted = {n: expected(OP, args) for n, args in batches.items()}
    for args in batches.values():
        for _ in range(2):
            getattr(spec_ops, OP)(*place(args, backend))
    assert len(KERNELS[OP].entry.calls.plans) == len(sizes)
    replays, wrong = Replays(monkeypatch), []

    def loop(n):
        for _ in range(6):
            args = place(batches[n], backend)
            try:
                getattr(spec_ops, OP)(*args)
            except Exception as error:      # noqa: BLE001 - any exception is a failure
                wrong.append(f"{n}: {type(error).__name__}: {error}")
                continue
            if outputs(OP, args, None) != wanted[n]:
                wrong.append(f"{n}: wrong result")

    threads = [threading.Thread(target=loop, args=(n,)) for n in sizes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not wrong, wrong[:3]
    assert replays.count, "no call replayed a plan"


class Logging(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


class FunctionLogging(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


class Subclass(torch.Tensor):
    pass


OP = "eagle_step_update_slot_mapping_and_metadata"


def test_modes_see_the_op(backend, monkeypatch):
    args = remembered(OP, backend)
    for mode in (Logging(), FunctionLogging()):
        with mode:
            getattr(spec_ops, OP)(*place(args, backend))
        assert any(OP in seen for seen in mode.seen), type(mode).__name__


def test_the_profiler_records_the_op(backend, monkeypatch):
    args = remembered(OP, backend)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        getattr(spec_ops, OP)(*args)
    assert any(OP in event.name for event in prof.events())


def test_subclasses_unseen_layouts_and_inference_tensors_dispatch(backend, monkeypatch):
    args = remembered(OP, backend)
    dispatches = Calls(monkeypatch, OP, "op")
    getattr(spec_ops, OP)(*place(args, backend))
    assert dispatches.count == 0
    sub = list(place(args, backend))
    sub[0] = sub[0].as_subclass(Subclass)
    getattr(spec_ops, OP)(*sub)
    assert dispatches.count == 1, "a tensor subclass"
    unseen = list(place(args, backend))
    unseen[1] = unseen[1].long()            # block_table int32 -> int64: a new layout
    if args[1].dtype == torch.int64:
        unseen[1] = unseen[1].int()
    getattr(spec_ops, OP)(*unseen)
    assert dispatches.count == 2, "a layout no valid call had"
    with torch.inference_mode():    # inference tensors: other dispatch keys, a new layout
        getattr(spec_ops, OP)(*place(args, backend))
    assert dispatches.count == 3, "inference tensors"


def test_an_optional_subclass_or_zero_tensor_dispatches(backend, monkeypatch):
    """A tensor subclass as 1.4's optional num_rejected_tokens dispatches, also where the
    plain call's launch has a plan; so does a zero tensor (torch._efficientzerotensor: no
    memory, its data pointer 0), which the op's ZeroTensor kernel reads as zeros."""
    args, index = dflash_with_rejected(70, NUM_REQS), KERNELS[DFLASH].entry.optional[0]
    KERNELS[DFLASH].triton(*place(args, backend))       # the layout: a valid CUDA-key call
    dispatches = Calls(monkeypatch, DFLASH, "op")
    for _ in range(2):
        spec_ops.copy_and_expand_dflash_inputs(*place(args, backend))
    assert dispatches.count == 0
    assert KERNELS[DFLASH].entry.calls.plans, "the repeated plain call left no plan"
    sub = list(place(args, backend))
    sub[index] = sub[index].as_subclass(Subclass)
    spec_ops.copy_and_expand_dflash_inputs(*sub)
    assert dispatches.count == 1
    zero = list(place(args, backend))
    zero[index] = torch._efficientzerotensor(args[index].shape, dtype=args[index].dtype,
                                             device=zero[index].device)
    spec_ops.copy_and_expand_dflash_inputs(*zero)
    assert dispatches.count == 2
    zeros = list(place(args, backend))
    zeros[index] = torch.zeros_like(zeros[index])
    spec_ops.copy_and_expand_dflash_inputs(*zeros)
    written = written_arg_indices(DFLASH)
    assert all(torch.equal(zero[i], zeros[i]) for i in written)


@pytest.mark.parametrize("op", OPS)
def test_the_public_function_compiles_to_the_op(op, backend):
    """Under torch.compile the entry traces to the op itself: one graph, no break."""
    torch._dynamo.reset()
    args = remembered(op, backend)
    graphs = []

    def backend_fn(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    function = getattr(spec_ops, op)
    torch.compile(lambda *a: function(*a), backend=backend_fn, fullgraph=True)(*args)
    assert len(graphs) == 1
    assert any(node.target is op_overload(op) for node in graphs[0].graph.nodes)


def test_fx_symbolic_trace_records_the_op(backend):
    """torch.fx traces proxies, not tensors: the entry dispatches and fx records the op."""
    import torch.fx

    class Step(torch.nn.Module):
        def forward(self, positions, block_table, seq_lens, clamped, slots):
            spec_ops.eagle_step_update_slot_mapping_and_metadata(
                positions, block_table, seq_lens, 16, 64, clamped, slots, None)
            return slots

    graph = torch.fx.symbolic_trace(Step()).graph
    assert any(node.target is op_overload(OP) for node in graph.nodes)


def test_scalars_the_schema_would_convert_or_reject(backend, monkeypatch):
    """A float where the schema has int: the dispatcher decides (its refusal raised as the
    TypeError naming the argument). A 0-dim tensor or a bool there, which the dispatcher would
    convert: refused before it, nothing dispatched; torch.ops.spec_ops takes the conversion."""
    args = remembered(OP, backend)
    dispatches = Calls(monkeypatch, OP, "op")
    with pytest.raises(TypeError, match="block_size must be of type int, got float"):
        getattr(spec_ops, OP)(*replaced(args, 3, float(args[3])))     # block_size
    assert dispatches.count == 1
    for value in (torch.tensor(args[4]), True):                         # max_model_len
        with pytest.raises(TypeError, match="max_model_len must be an int, got"):
            getattr(spec_ops, OP)(*replaced(place(args, backend), 4, value))
    assert dispatches.count == 1
    fresh = place(args, backend)
    op_overload(OP)(*replaced(fresh, 4, torch.tensor(args[4])))
    reference = place(args, backend)
    getattr(spec_ops, OP)(*reference)
    assert outputs(OP, fresh, None) == outputs(OP, reference, None)


def test_the_shortcut_can_be_turned_off(backend):
    """SPEC_OPS_EAGER_ENTRY=0: every call dispatches (read at import)."""
    import os
    import subprocess
    import sys
    code = "import spec_ops._library as l; print(l._SHORTCUT)"
    # The torch versions tested have every C entry point the shortcut needs, so it is on by
    # default there.
    assert None not in spec_ops._library._PROBES and spec_ops._library.TensorGuards is not None
    for value, expected in (("0", "False"), ("1", "True"), (None, "True")):
        env = {name: v for name, v in os.environ.items() if name != "SPEC_OPS_EAGER_ENTRY"}
        if value is not None:
            env["SPEC_OPS_EAGER_ENTRY"] = value
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                env=env, check=True)
        assert result.stdout.strip() == expected


def test_launch_plans_can_be_turned_off(backend):
    """SPEC_OPS_LAUNCH_PLANS=0: no op remembers launches (read at import); on by default."""
    import os
    import subprocess
    import sys
    code = ("import spec_ops._library as l; "
            "print(sum(k.entry.calls is not None for k in l.KERNELS.values()))")
    planned = len(PLANNED_OPS)
    for value, expected in (("0", 0), ("1", planned), (None, planned)):
        env = {name: v for name, v in os.environ.items() if name != "SPEC_OPS_LAUNCH_PLANS"}
        if value is not None:
            env["SPEC_OPS_LAUNCH_PLANS"] = value
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                env=env, check=True)
        assert int(result.stdout.strip()) == expected
