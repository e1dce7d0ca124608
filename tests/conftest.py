"""Test setup: without a GPU, Triton kernels run interpreted on CPU tensors.

TRITON_INTERPRET must be set before triton (and so spec_ops) is imported.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402


def interpreter_too_old():
    """Why Triton's interpreter cannot run this project's kernels here, or None. Triton < 3.7's
    interpreter turns a scalar (a 1-element array there) into a Python int with int(array),
    which NumPy >= 2.4 rejects, so every loop over a runtime bound fails interpreted.
    (Compiled Triton never takes that path; `make test-floor` pins numpy < 2.4 with triton
    3.6. A GPU machine may pair the two: tests that start an interpreted process ask this.)"""
    import numpy
    import triton

    def version(text):
        return tuple(int(part) for part in text.split(".")[:2])
    if version(triton.__version__) < (3, 7) and version(numpy.__version__) >= (2, 4):
        return (f"triton {triton.__version__}'s interpreter cannot run with numpy "
                f"{numpy.__version__}: use numpy < 2.4 or triton >= 3.7")
    return None


# Why this process's interpreted tests cannot run, or None.
INTERPRETER_TOO_OLD = (interpreter_too_old() if os.environ.get("TRITON_INTERPRET") == "1"
                       else None)

# Interpreted launches without the interpreter's repeated patching (fast_interpreter.py);
# SPEC_OPS_REPATCH=1 runs the interpreter as it is.
SKIPS_REPATCHING = (os.environ.get("TRITON_INTERPRET") == "1"
                    and os.environ.get("SPEC_OPS_REPATCH") != "1")
if SKIPS_REPATCHING:
    from fast_interpreter import skip_repeated_language_patches
    skip_repeated_language_patches()

import spec_ops  # noqa: E402,F401
from spec_ops._library import KnownCalls  # noqa: E402

# A launch plan makes again the launch an earlier call made, whatever a test patches in between
# (a forced layout, a recording launcher), so tests run without plans; those that use the
# launch_plans fixture (the tests of plans, the example) run with them.
_PLANS = {"match": KnownCalls.match, "learn": KnownCalls.learn}
KnownCalls.match = lambda self, args, key, tensors: None
KnownCalls.learn = lambda self, args, key, made, matrices: None


@pytest.fixture
def launch_plans(monkeypatch):
    """Launch plans on for the test (KnownCalls)."""
    for name, method in _PLANS.items():
        monkeypatch.setattr(KnownCalls, name, method)

# The CPU kernels work on tiny tensors; on a 2-core CI machine, intra-op threads only contend.
torch.set_num_threads(1)

settings.register_profile(
    "default", deadline=None, max_examples=int(os.environ.get("SPEC_OPS_EXAMPLES", "300")),
    suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    too_old = pytest.mark.skip(reason=INTERPRETER_TOO_OLD or "")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
        elif INTERPRETER_TOO_OLD and _runs_interpreted(item):
            item.add_marker(too_old)


def _runs_interpreted(item):
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "interpret" in callspec.params.values()
