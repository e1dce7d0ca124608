"""The spec_ops operator library: one ``define`` per op, registered the low-level way.

``torch.library.Library`` define/impl is the cheapest registration route in eager mode (no
``custom_op`` wrapper layers between the dispatcher and the kernel) and still gives full
torch.compile / opcheck behaviour with the explicit fakes in ``meta.py``.
"""

from typing import Callable, NamedTuple

import torch

from .validation import KnownLayouts, OverlapCheck

LIBRARY = torch.library.Library("spec_ops", "DEF")


class OpKernels(NamedTuple):
    """An op's two real kernels, each validating first. ``triton`` is what the CUDA dispatch
    key runs; under TRITON_INTERPRET=1 tests call it on CPU tensors to run the Triton kernel.
    ``check(*args, fake=False)`` is the whole argument check (the fake runs it too)."""

    triton: Callable
    cpu: Callable
    check: Callable


KERNELS: dict = {}


def define(schema, check, cuda_kernel, cpu_kernel, may_alias=()):
    """Define an op from its schema and register its CUDA and CPU kernels.

    ``check(*args, verified=False)`` validates the op's arguments (metadata and Python
    scalars only) and returns the extra sizes it derived; ``verified=True`` says the call's
    required tensors match the layout of an earlier valid call (``KnownLayouts``), so only
    their sizes need checking. The op's written tensors are then checked for overlap with
    every other tensor argument (``may_alias``: pairs allowed to be the very same tensor).
    Each kernel is called as ``kernel(*args, *extras)`` after both, so nothing launches on
    bad input. (The dispatcher leaves out trailing arguments equal to their schema default,
    so such parameters keep their default in the Python signatures too.)
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
        """The whole check, as the fake runs it."""
        extras = check(*args)
        no_overlap(args, fake)
        return extras

    def cuda(*args):
        matrices = known.match(args)
        if matrices is None:
            extras = check(*args)
            known.remember(args)
        else:
            extras = check(*args, verified=True)
        no_overlap(args, matrices=matrices)
        return cuda_kernel(*args, *extras)

    def cpu(*args):
        return cpu_kernel(*args, *checked(*args))

    LIBRARY.impl(name, cuda, "CUDA")
    LIBRARY.impl(name, cpu, "CPU")
    KERNELS[name] = OpKernels(cuda, cpu, checked)
    return op
