"""The suite's interpreter speed-up (fast_interpreter.py) changes no result and does skip the
repeated patching: a launch patches the language once per module set instead of once per
helper call."""

import pytest
import torch

from backends import HAS_CUDA, run
from conftest import INTERPRETER_TOO_OLD, SKIPS_REPATCHING
from samples import ROUND_OPS, sample

pytestmark = pytest.mark.skipif(HAS_CUDA or not SKIPS_REPATCHING or INTERPRETER_TOO_OLD is not None,
                                reason="the interpreter's speed-up, where the suite installs it")
assert ROUND_OPS


def counted(original, calls):
    def patch_builtin(*args):
        calls.append(args[0])
        return original(*args)
    return patch_builtin


@pytest.mark.parametrize("op", ROUND_OPS)
def test_skipping_the_repeated_patching_changes_no_result(op, monkeypatch):
    from triton.runtime import interpreter
    patch_once = interpreter._patch_lang
    assert getattr(patch_once, "skips_repeats", False), "the suite runs the interpreter as is"
    args = sample(op, 7, 9)
    patch_builtin = interpreter._patch_builtin

    with_skip = []
    monkeypatch.setattr(interpreter, "_patch_builtin", counted(patch_builtin, with_skip))
    fast = run(op, args, "interpret")

    without_skip = []
    monkeypatch.setattr(interpreter, "_patch_builtin", counted(patch_builtin, without_skip))
    monkeypatch.setattr(interpreter, "_patch_lang", patch_once.original)
    monkeypatch.setattr(interpreter.GridExecutor, "__call__",
                        interpreter.GridExecutor.__call__.original)
    plain = run(op, args, "interpret")

    assert all(a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(fast, plain, strict=True))
    # A launch patches the kernel's modules, then triton.language.core for the standard
    # library's helpers (3-4 _patch_builtin calls each); without the skip, again at every
    # helper call.
    assert with_skip and len(without_skip) > 10 * len(with_skip), (len(without_skip),
                                                                   len(with_skip))
