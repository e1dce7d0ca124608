"""The spec_ops operator library: one ``define`` per op, registered the low-level way.

``torch.library.Library`` define/impl is the cheapest registration route in eager mode (no
``custom_op`` wrapper layers between the dispatcher and the kernel) and still gives full
torch.compile / opcheck behaviour with the explicit fakes in ``meta.py``.
"""

from typing import Callable, NamedTuple

import torch

from . import validation

LIBRARY = torch.library.Library("spec_ops", "DEF")


class OpKernels(NamedTuple):
    """An op's two real kernels, each validating first. ``triton`` is what the CUDA dispatch
    key runs; under TRITON_INTERPRET=1 tests call it on CPU tensors to run the Triton kernel."""

    triton: Callable
    cpu: Callable


KERNELS: dict = {}
VERIFIED: dict = {}     # op name -> its VerifiedMetadata


def define(schema, check, cuda_kernel, cpu_kernel):
    """Define an op from its SPEC schema and register its CUDA and CPU kernels.

    ``check(*args, verified=...)`` validates the op's arguments and returns the extra sizes it
    derived; each kernel is called as ``kernel(*args, *extras)``, after the check, so nothing
    launches on bad input. ``verified`` says that the required tensor arguments match the
    metadata of an earlier valid call (``VerifiedMetadata``), so only their sizes need
    checking; a call with the exact metadata and scalars of earlier ones is not checked again.
    The CUDA kernel also gets ``variant=``, a small int naming the dtypes of those
    tensors, for its launch key. (The dispatcher leaves out trailing arguments equal to their
    schema default, so such parameters keep their default in the Python signatures too.)
    """
    name = schema[: schema.index("(")]
    # Custom ops default to needs_exact_strides, whose Inductor path fails on mutable ops with a
    # SymInt argument called twice (torch 2.13: decompose_auto_functionalized asserts). The
    # kernels validate strides themselves, so a fixed stride order is all they need.
    LIBRARY.define(schema, tags=(torch.Tag.needs_fixed_stride_order,))
    op = getattr(torch.ops.spec_ops, name).default
    verified = validation.VerifiedMetadata.for_schema(op._schema)
    tensors_of, scalars_of = verified.tensors, verified.scalars

    def cuda(*args):
        # verified.checked(args, check), inlined: the hot path
        tensors, scalars = tensors_of(args), scalars_of(args)
        for guard, known_scalars, extras, variant in verified.exact:
            if known_scalars == scalars and guard.check(*tensors):
                return cuda_kernel(*args, *extras, variant=variant)
        for guard, variant in verified.guards:
            if guard.check(*tensors):
                extras = check(*args, verified=True)
                verified.seen(tensors, scalars, extras, variant)
                return cuda_kernel(*args, *extras, variant=variant)
        extras = check(*args)
        return cuda_kernel(*args, *extras, variant=verified.remember(args))

    def cpu(*args):
        extras, _ = verified.checked(args, check)
        return cpu_kernel(*args, *extras)

    LIBRARY.impl(name, cuda, "CUDA")
    LIBRARY.impl(name, cpu, "CPU")
    KERNELS[name] = OpKernels(cuda, cpu)
    VERIFIED[name] = verified
    return op
