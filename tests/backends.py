"""Where tests run an op: the CPU kernel, and the Triton kernel (interpreted on CPU tensors
when there is no GPU, compiled on CUDA tensors when there is one)."""

import torch

from samples import clone_args, op_overload, written_arg_indices
from spec_ops._library import KERNELS

HAS_CUDA = torch.cuda.is_available()
TRITON = "cuda" if HAS_CUDA else "interpret"
BACKENDS = ["cpu", TRITON]


# "entry": the public function (spec_ops.<op>), on the Triton backend's device; with
# EagerEntry.cpu_tensors_run_triton set it takes its shortcut to the interpreted kernel too.
ENTRY = "entry"


def place(args, backend):
    """Fresh copies of ``args`` on the backend's device."""
    return clone_args(args, "cuda" if HAS_CUDA and backend in ("cuda", ENTRY) else "cpu")


def call(op, args, backend):
    """Run ``op`` in place on ``args`` (already placed) with the backend's kernel."""
    if backend == "interpret":
        return KERNELS[op].triton(*args)
    if backend == ENTRY:
        return KERNELS[op].entry(*args)
    return op_overload(op)(*args)


def run(op, args, backend):
    """Run ``op`` on fresh copies of ``args``; return the written tensors (and the result), on
    the CPU."""
    args = place(args, backend)
    result = call(op, args, backend)
    outputs = [args[i] for i in written_arg_indices(op)]
    if result is not None:
        outputs.append(result)
    return [t.cpu() for t in outputs]


def shortcut_on_cpu_tensors(monkeypatch):
    """Without a GPU, the public functions (``entry``) take their shortcut to the interpreted
    Triton kernel on CPU tensors, as they take it to the CUDA kernel on CUDA tensors."""
    if not HAS_CUDA:
        from spec_ops._library import EagerEntry
        monkeypatch.setattr(EagerEntry, "cpu_tensors_run_triton", True)


def interpreted_launches_take_turns(monkeypatch):
    """Without a GPU, one interpreted launch at a time: Triton's interpreter keeps global state
    while it runs a kernel. The checks, remembered layouts and plans around them stay
    concurrent."""
    if HAS_CUDA:
        return
    import threading

    from spec_ops._triton._launch import Launcher
    one_at_a_time = threading.Lock()
    for name in ("__call__", "again"):
        method = getattr(Launcher, name)

        def taking_turns(*args, method=method, **kwargs):
            with one_at_a_time:
                return method(*args, **kwargs)
        monkeypatch.setattr(Launcher, name, taking_turns)
