"""The spec_ops operator library: one ``define`` per op, registered the low-level way.

``torch.library.Library`` define/impl is the cheapest registration route in eager mode (no
``custom_op`` wrapper layers between the dispatcher and the kernel) and still gives full
torch.compile / opcheck behaviour with the explicit fakes in ``meta.py``.

``define`` returns the op's eager entry, what the public ``spec_ops.<op>`` functions call. In
plain eager code on CUDA it runs the op's CUDA kernel (the same check, overlap check and
launch) without the dispatcher's round trip; wherever the dispatcher would do more than call
that kernel it calls the op (``EagerEntry``). Either way the CUDA kernel replays the launch of
a call whose sizes repeat a recent call's (``KnownCalls``).
"""

import itertools
import os
import re
from typing import Callable, NamedTuple

import torch

from ._triton._launch import Launch
from .validation import (
    KnownLayouts,
    OverlapCheck,
    TensorGuards,
    argument_getter,
    fits_int64,
    guardable,
    is_tensor_type,
    writable_outside_inference_mode,
)

LIBRARY = torch.library.Library("spec_ops", "DEF")


class OpKernels(NamedTuple):
    """An op's two real kernels, each validating first. ``triton`` is what the CUDA dispatch
    key runs; under TRITON_INTERPRET=1 tests call it on CPU tensors to run the Triton kernel.
    ``check(*args, fake=False)`` is the whole argument check (the fake runs it too).
    ``entry`` is the op's ``EagerEntry``, what ``spec_ops.<op>`` calls."""

    triton: Callable
    cpu: Callable
    check: Callable
    entry: Callable


KERNELS: dict = {}


def _probe(owner, name):
    """``owner.name`` if this torch has it, else None (the eager entry then always dispatches)."""
    for part in name.split("."):
        owner = getattr(owner, part, None)
    return owner


# What would make the dispatcher do more than call the CUDA kernel (C entry points, tens of
# nanoseconds each): a profiler recording op ranges, torch function or dispatch modes (fake
# tensors, functionalization, logging modes), TorchScript tracing.
_PROBES = tuple(_probe(torch._C, name) for name in (
    "_autograd._profiler_enabled", "_is_torch_function_mode_enabled",
    "_len_torch_dispatch_stack", "_get_tracing_state"))
# SPEC_OPS_EAGER_ENTRY=0 (read at import) turns the shortcut off: every call dispatches.
_SHORTCUT = (None not in _PROBES and TensorGuards is not None
             and os.environ.get("SPEC_OPS_EAGER_ENTRY", "1") != "0")
_profiling, _function_modes, _dispatch_modes, _tracing = _PROBES if _SHORTCUT else (None,) * 4
# SPEC_OPS_LAUNCH_PLANS=0 (read at import) turns launch plans off: every call takes the
# checked path (the measurement scripts that force a layout choice set it).
_PLANS = os.environ.get("SPEC_OPS_LAUNCH_PLANS", "1") != "0"
_is_compiling = torch.compiler.is_compiling
# The dispatcher's refusal of an argument of a type the schema does not take (an int past
# int64 is refused as of type int); raised while converting the arguments, before any kernel.
_REFUSED = re.compile(r"Expected a value of type '([^']+)' for argument '(\w+)' but instead "
                      r"found type '(\w+)'")
_Tensor = torch.Tensor
_STRIDED = torch.strided


def _scalar_arguments(schema):
    """[(position, argument)] of the schema's arguments that are not tensors."""
    return [(i, argument) for i, argument in enumerate(schema.arguments)
            if not is_tensor_type(argument.type)]


def _scalar_types(schema_type):
    """The Python types a scalar schema argument passes through unconverted."""
    optional = isinstance(schema_type, torch.OptionalType)
    base = schema_type.getElementType() if optional else schema_type
    types = (bool,) if isinstance(base, torch.BoolType) else (int,)
    return types + ((type(None),) if optional else ())


class EagerEntry:
    """An op's eager entry: ``entry(*args)`` is ``op(*args)``, minus the dispatcher where that
    changes nothing.

    The dispatcher adds 3-6 µs per call on the way to the Python CUDA kernel (its arguments
    converted to C++ values and back). When nothing but that kernel would run, the entry calls
    it directly: not tracing (torch.compile, torch.fx, TorchScript), no profiler, no torch
    function or dispatch mode, every scalar argument a plain int or bool (or None where the
    schema allows it) as the dispatcher would check, every required tensor matching the layout
    of an earlier valid CUDA call (``KnownLayouts``: plain CUDA tensors with the same dispatch
    keys, inference-mode state, dtypes and unit strides; none nested, which the layout guards
    cannot look at, ``guardable``) and every optional one a plain dense tensor with memory of
    its own and without the negative bit (the kernels read memory; the op's Negative kernel
    resolves such an input first, its ZeroTensor kernel materializes a zero tensor, the
    dispatcher refuses a sparse or nested one). (The dispatched op bumps no version counter
    either: its kernel writes through Triton, not through torch ops.) Anything else, and every
    call the first time a layout is seen, goes through the dispatcher. Its only state is
    immutable tuples replaced whole (the layouts, the launch plans), so threads need no lock.
    RecordFunction observers that run without the profiler being enabled (a standalone
    ExecutionTraceObserver) do not see shortcut calls; ``SPEC_OPS_EAGER_ENTRY=0`` makes every
    call dispatch.

    An op that returns nothing also remembers the launch of a call that repeats a recent one
    (``KnownCalls``, shared with the dispatched CUDA kernel): a later call with exactly those
    sizes, strides and scalars runs the overlap check and makes that launch again, without the
    size checks, the layout choice and the launcher's key (about half of a round op's eager
    call).
    """

    # The CUDA kernel is what a call on CUDA tensors dispatches to. Tests that run the Triton
    # kernels interpreted on CPU tensors set this to take the shortcut there too.
    cpu_tensors_run_triton = False

    def __init__(self, op, known, run, no_overlap, calls):
        self.op = op
        self.name = op._schema.name.split("::")[-1]
        self.known = known
        self.first = no_overlap.arguments[0][0]     # the first tensor argument's position
        self.run = run          # the CUDA kernel after the layout match (define's matched)
        self.no_overlap = no_overlap
        self.optional = no_overlap.optional
        # The scalar arguments' positions and the Python types the schema accepts as they are.
        scalars = _scalar_arguments(op._schema)
        self.scalar_names = [(i, argument.name) for i, argument in scalars]
        self.scalars = argument_getter([i for i, _ in scalars])
        self.scalar_types = frozenset(itertools.product(*(_scalar_types(a.type)
                                                         for _, a in scalars)))
        self.int_arguments = {i: bool not in _scalar_types(a.type) for i, a in scalars}
        # Ops that return nothing replay remembered launches (KnownCalls); an op that returns
        # a tensor allocates it per call (None, as with SPEC_OPS_LAUNCH_PLANS=0).
        self.calls = calls

    def __call__(self, *args):
        if (_SHORTCUT and not _is_compiling() and not _profiling() and not _function_modes()
                and not _dispatch_modes() and _tracing() is None):
            scalars = self.scalars(args)
            first = args[self.first]
            if (tuple(map(type, scalars)) in self.scalar_types and type(first) is _Tensor
                    and (first.is_cuda or self.cpu_tensors_run_triton)):
                tensors = self.known.tensors(args)
                if guardable(tensors) and (not self.optional or all(
                        args[i] is None or (type(args[i]) is _Tensor and not args[i].is_neg()
                                            and not args[i]._is_zerotensor()
                                            and not args[i].is_nested
                                            and args[i].layout is _STRIDED)
                        for i in self.optional)):
                    key = None if self.calls is None else self.calls.key(args, scalars)
                    if key is not None and self.calls.replayed(args, key, tensors,
                                                               self.no_overlap):
                        return None
                    matrices = self.known.match(tensors)
                    if matrices is not None:
                        try:
                            return self.run(args, matrices, key)
                        except OverflowError as error:    # Triton's, binding the kernel's ints
                            raise self._beyond_int64(args, error) from None
        if _is_compiling():     # a tracer reports wrong arguments its own way
            return self.op(*args)
        if tuple(map(type, self.scalars(args))) not in self.scalar_types:
            refused = self._not_an_int(args)
            if refused is not None:
                raise refused
        try:
            return self.op(*args)
        except NotImplementedError:     # no kernel for a backend: a sparse or other tensor
            refused = self._not_strided(args)
            if refused is None:
                raise
        except RuntimeError as error:
            refused = self._refused(args, error)
            if refused is None:
                raise
        raise refused

    def _not_an_int(self, args):
        """The TypeError for a bool or a tensor given for an ``int`` argument, which the
        dispatcher would convert (True to 1, a one-element tensor to its value, truncated);
        None if there is none."""
        for i, name in self.scalar_names:
            value = args[i] if i < len(args) else None
            if (self.int_arguments[i] and (type(value) is bool
                                           or isinstance(value, torch.Tensor))):
                return TypeError(f"spec_ops.{self.name}: {name} must be an int, got "
                                 f"{type(value).__name__}")
        return None

    def _not_strided(self, args):
        """The TypeError for the first tensor argument that is not a dense strided tensor
        (sparse, mkldnn, nested; the dispatcher found no kernel for it), None if every one
        is."""
        for i, name, _ in self.no_overlap.arguments:
            t = args[i] if i < len(args) else None
            if isinstance(t, torch.Tensor) and (t.layout != torch.strided or t.is_quantized
                                                or t.is_nested):
                got = ("a nested tensor" if t.is_nested else f"layout {t.layout}"
                       f"{' (quantized)' if t.is_quantized else ''}")
                return TypeError(f"spec_ops.{self.name}: {name} must be a dense (strided) "
                                 f"tensor, got {got}")
        return None

    def _refused(self, args, error):
        """The TypeError (ValueError for an int past int64) for an argument the dispatcher
        refused while converting the call's arguments, before any kernel ran; None for any
        other error."""
        message = str(error)
        refused = _REFUSED.search(message)
        if refused is None or not message.startswith(f"spec_ops::{self.name}("):
            return None
        expected, name, found = refused.groups()
        beyond = (self._beyond_int64(args, None) if found == "int" and "int" in expected.lower()
                  else None)
        return beyond or TypeError(f"spec_ops.{self.name}: {name} must be of type {expected}, "
                                   f"got {found}")

    def _beyond_int64(self, args, error):
        """The ValueError for a scalar argument past int64's range, which the dispatcher's
        conversion would have refused and the launch could not pass (``error`` otherwise).
        Raised before anything launches."""
        for i, name in self.scalar_names:
            if type(args[i]) is int:
                try:
                    fits_int64(self.name, name, args[i])
                except ValueError as beyond:
                    return beyond
        return error


class Plan(NamedTuple):
    """A launch an op's CUDA kernel (or its eager entry) makes again for a call whose tensors
    have the very layout (sizes and strides included) and whose scalars are the values of the
    call it was made for: everything the check and the launch derived from them is the
    same."""

    guard: object           # TensorGuards of the required tensors and the optional ones given
    key: tuple              # the scalars, and which optional tensors were given (KnownCalls.key)
    matrices: tuple         # for OverlapCheck
    tensors: Callable       # args -> the kernel's tensor arguments, in its order
    ints: tuple             # the kernel's other arguments
    launch: Launch

    def replay(self, args):
        self.launch.launcher.again(self.launch, self.tensors(args) + self.ints)


class KnownCalls:
    """The launches of an op's recent calls, made again without the check's size reads, the
    layout choice and the launcher's key (KnownLayouts still covers calls of other sizes).

    A call is remembered when it launches what one of the last ``MAX_REMEMBERED`` calls
    launched (same kernel key, grid and ints, same scalars): a serving loop's batch sizes
    repeat from round to round, or alternate between a few (micro-batches of a pipeline
    taking turns), and a caller whose sizes change every call pays those comparisons and a
    failed guard check per remembered plan (0.2-1.0 µs in all, benchmarks/results/history.md).
    Its plan matches a later call in one C++ guard check (dtype, device, dispatch keys, sizes
    and strides of every required tensor and every optional tensor given) and a comparison of
    the scalars and of which optional tensors are given. The overlap check still runs on every
    call (it reads storages, which no guard covers), and the launch reads the tensors'
    addresses afresh. Only plain launches are remembered: every tensor the kernel takes is one
    of the call's arguments. A launch has at most one plan: a repeated launch whose tensors
    match no plan (a buffer reallocated larger, whose size the kernel does not take) replaces
    its launch's plan, so it never pushes the others out. Thread-safe by construction, like
    KnownLayouts: ``plans`` and ``recent`` are immutable tuples replaced whole; a lost update
    costs a later plan.
    """

    # Launches are per device (the key holds it): e.g. two micro-batch sizes on each of four
    # GPUs, or one on each of eight, as KnownLayouts.
    MAX_REMEMBERED = 8

    def __init__(self, tensors, scalars, optional):
        self.tensors = tensors      # args -> the required tensors (KnownLayouts' getter)
        self.scalars = scalars      # args -> the scalar arguments
        self.optional = optional    # the optional tensors' positions
        self.plans = ()
        self.recent = ()            # the signatures of the last calls' launches, newest first

    def key(self, args, scalars):
        """What a plan's call must equal besides its tensors' layouts: the scalars and, for an
        op with optional tensors, which of them the call gives. None where no plan may cover
        the call: an optional tensor that is neither None nor a plain tensor."""
        if not self.optional:
            return scalars
        given = tuple(args[i] is not None for i in self.optional)
        if not all(type(args[i]) is _Tensor for i, on in zip(self.optional, given) if on):
            return None
        return scalars + given

    def guarded(self, args, tensors):
        """The tensors a plan's guard covers: the required ones (``tensors``, as
        ``self.tensors(args)`` gives them), then the optional ones given."""
        if self.optional:
            tensors += tuple(args[i] for i in self.optional if args[i] is not None)
        return tensors

    def match(self, args, key, tensors):
        """The plan covering the call, None if none does (``key`` as ``key`` gives it,
        ``tensors`` as ``guarded`` takes them; ``guardable``)."""
        plans = self.plans
        if not plans:
            return None
        guarded = self.guarded(args, tensors)
        for plan in plans:
            if plan.key == key and plan.guard.check(*guarded):
                return plan
        return None

    def replayed(self, args, key, tensors, no_overlap):
        """Whether a plan covers the call (``match``'s arguments): if so its overlap check has
        run and the plan's launch has been made again with the call's tensors."""
        plan = self.match(args, key, tensors)
        if plan is None:
            return False
        no_overlap(args, matrices=plan.matrices)
        plan.replay(args)
        return True

    def learn(self, args, key, made, matrices):
        """After a call that took the checked path and launched ``made`` (a Launcher's
        returned tuple): remember its plan when it repeats the launch of a recent call."""
        if TensorGuards is None or made is None:
            return
        launcher, _, _, _, _, kernel_args = made
        num_tensors = launcher.num_tensors
        ints = kernel_args[num_tensors:]
        # What differs between batch sizes first: a comparison stops at the first difference.
        signature = (ints, *made[2:5], key, *made[:2])
        recent = self.recent
        if signature not in recent:
            self.recent = (signature, *recent[:self.MAX_REMEMBERED - 1])
            return
        places = {id(arg): i for i, arg in enumerate(args) if type(arg) is _Tensor}
        if len(places) != sum(type(arg) is _Tensor for arg in args):
            return      # one tensor in two places: which place the kernel reads is unknown
        positions = [places.get(id(t)) for t in kernel_args[:num_tensors]]
        if None in positions:
            return      # the kernel takes a tensor the launch made (a view, a copy)
        tensors = self.guarded(args, self.tensors(args))
        try:
            guard = TensorGuards(*tensors, dynamic_dims_sizes=None, dynamic_dims_strides=None)
        except (TypeError, RuntimeError):
            return
        if not guard.check(*tensors):
            return
        getter = argument_getter(positions)
        # The launch without the call's tensors, which the plan must not keep alive.
        launch = Launch(*made[:5], args=())
        plan = Plan(guard, key, matrices, getter, ints, launch)
        others = tuple(other for other in self.plans if not (
            other.ints == ints and other.key == key and other.launch == launch))
        self.plans = (plan, *others[:self.MAX_REMEMBERED - 1])


def define(schema, check, cuda_kernel, cpu_kernel, may_alias=()):
    """Define an op from its schema and register its CUDA and CPU kernels.

    ``check(*args, verified=False)`` validates the op's arguments (metadata and Python
    scalars only) and returns the extra sizes it derived; ``verified=True`` says the call's
    required tensors match the layout of an earlier valid call (``KnownLayouts``), so only
    their sizes need checking. The op's written tensors are then checked for overlap with
    every other tensor argument (``may_alias``: pairs allowed to be the very same tensor).
    Each kernel is called as ``kernel(*args, *extras)`` after both, so nothing launches on
    bad input. (The dispatcher leaves out trailing arguments equal to their schema default,
    so such parameters keep their default in the Python signatures too.) Returns the op's
    ``EagerEntry``.
    """
    name = schema[: schema.index("(")]
    # Custom ops default to needs_exact_strides, whose Inductor path fails on mutable ops with a
    # SymInt argument called twice (torch 2.13: decompose_auto_functionalized asserts). The
    # kernels validate strides themselves, so a fixed stride order is all they need.
    LIBRARY.define(schema, tags=(torch.Tag.needs_fixed_stride_order,))
    op = getattr(torch.ops.spec_ops, name).default
    no_overlap = OverlapCheck(name, op._schema, may_alias)
    known = KnownLayouts.for_schema(op._schema)

    def checked(*args, fake=False):
        """The whole check, as the fake runs it (the fake without the inference-tensor one)."""
        extras = check(*args)
        if not fake:
            writable_outside_inference_mode(name, no_overlap.arguments, args)
        no_overlap(args, fake)
        return extras

    returns = bool(op._schema.returns)
    # Ops that return nothing replay remembered launches, dispatched or not.
    calls = None if returns or not _PLANS else KnownCalls(
        known.tensors, argument_getter([i for i, _ in _scalar_arguments(op._schema)]),
        no_overlap.optional)

    def matched(args, matrices, key=None):
        """The CUDA kernel of a call whose required tensors matched a remembered layout: its
        result (None for an op that returns nothing). ``key``, the call's ``KnownCalls.key``
        where a launch plan may cover it: the launch it made is offered to
        ``KnownCalls.learn``."""
        extras = check(*args, verified=True)
        no_overlap(args, matrices=matrices)
        result = cuda_kernel(*args, *extras)
        if returns:
            return result
        if key is not None:
            calls.learn(args, key, result, matrices)
        return None

    # The dispatcher leaves out trailing arguments equal to their default: put them back, so
    # that a plan sees every argument in its place.
    defaults = tuple(argument.default_value for argument in op._schema.arguments)

    def cuda(*args):
        if len(args) < len(defaults):
            args += defaults[len(args):]
        # No nested tensor gets here for the guards to stumble on (``guardable``): the
        # dispatcher finds no kernel for one.
        tensors = known.tensors(args)
        key = None if calls is None else calls.key(args, calls.scalars(args))
        if key is not None and calls.replayed(args, key, tensors, no_overlap):
            return None
        matrices = known.match(tensors)
        if matrices is not None:
            return matched(args, matrices, key)
        extras = checked(*args)
        # Remembered once the whole check passed: a call that matches the layout takes the
        # verified path, which skips the inference-tensor check (the guard covers the tensors'
        # inference state and the mode's).
        known.remember(args)
        result = cuda_kernel(*args, *extras)
        return result if returns else None

    def cpu(*args):
        return cpu_kernel(*args, *checked(*args))

    def resolving(key, special, resolve, refusal):
        """The kernel for dispatch key ``key``, which a call gets with a tensor that
        ``special(t)`` picks out among its tensors. The kernels read and write memory: such an
        input is replaced by ``resolve(t)``, a plain tensor of its values (as torch's fallback
        for the key would), such a written tensor refused (``refusal``: what it is) before
        anything runs; then the op runs without the key."""
        excluded = torch._C.DispatchKeySet(key)

        def kernel(*args):
            args = list(args)
            for i, arg_name, written in no_overlap.arguments:
                t = args[i] if i < len(args) else None
                if isinstance(t, torch.Tensor) and special(t):
                    if written:
                        raise TypeError(f"spec_ops.{name}: {arg_name} must not be {refusal}")
                    args[i] = resolve(t)
            with torch._C._ExcludeDispatchKeyGuard(excluded):
                return op(*args)

        return kernel

    # A negative view (torch._neg_view): memory holding its values negated.
    negative = resolving(torch._C.DispatchKey.Negative, _Tensor.is_neg, _Tensor.resolve_neg,
                         "a negative view (torch._neg_view), which the op cannot write "
                         "through")
    # A zero tensor (torch._efficientzerotensor): zeros without memory.
    zero = resolving(torch._C.DispatchKey.ZeroTensor, _Tensor._is_zerotensor,
                     lambda t: torch.zeros(t.shape, dtype=t.dtype, device=t.device),
                     "a zero tensor (torch._efficientzerotensor), which has no memory to "
                     "write")

    LIBRARY.impl(name, cuda, "CUDA")
    LIBRARY.impl(name, cpu, "CPU")
    LIBRARY.impl(name, negative, "Negative")
    LIBRARY.impl(name, zero, "ZeroTensor")
    entry = EagerEntry(op, known, matched, no_overlap, calls)
    KERNELS[name] = OpKernels(cuda, cpu, checked, entry)
    return entry
