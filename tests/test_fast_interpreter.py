"""The suite's interpreter speed-up (fast_interpreter.py) changes no result and does skip the
repeated patching: a launch patches the language once per module set instead of once per
helper call."""

import os

import pytest

from backends import HAS_CUDA, run
from samples import OPS, sample

pytestmark = pytest.mark.skipif(HAS_CUDA or os.environ.get("TRITON_INTERPRET") != "1"
                                or os.environ.get("SPEC_OPS_REPATCH") == "1",
                                reason="the interpreter's speed-up, where the suite installs it")


def counted(original, calls):
    def patch_builtin(*args):
        calls.append(args[0])
        return original(*args)
    return patch_builtin


@pytest.mark.parametrize("op", [op for op in OPS if op.endswith("_round")])
def test_skipping_the_repeated_patching_changes_no_result(op, monkeypatch):
    from triton.runtime import interpreter
    patch_once = interpreter._patch_lang
    assert getattr(patch_once, "skips_repeats", False), "the suite runs the interpreter as is"
    args = sample(op, 7, 9)
    patch_builtin = interpreter._patch_builtin

    skipped = []
    monkeypatch.setattr(interpreter, "_patch_builtin", counted(patch_builtin, skipped))
    fast = run(op, args, "interpret")

    repeated = []
    monkeypatch.setattr(interpreter, "_patch_builtin", counted(patch_builtin, repeated))
    monkeypatch.setattr(interpreter, "_patch_lang", patch_once.original)
    monkeypatch.setattr(interpreter.GridExecutor, "__call__",
                        interpreter.GridExecutor.__call__.original)
    plain = run(op, args, "interpret")

    assert [t.tolist() for t in fast] == [t.tolist() for t in plain]
    # A launch patches the kernel's module set, then at most triton.language.core for the
    # standard library's helpers (a few modules each); without the skip, again at every
    # helper call.
    assert skipped and len(repeated) > 10 * len(skipped), (len(repeated), len(skipped))
