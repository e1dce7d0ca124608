"""Test setup: without a GPU, Triton kernels run interpreted on CPU tensors.

TRITON_INTERPRET must be set before triton (and so spec_ops) is imported.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402


def _interpreter_too_old():
    """Why the interpreted Triton tests cannot run here, or None. Triton < 3.7's interpreter
    turns a scalar (a 1-element array there) into a Python int with int(array), which
    NumPy >= 2.4 rejects, so every loop over a runtime bound fails interpreted. (Compiled
    Triton never takes that path; `make test-floor` pins numpy < 2.4 with triton 3.6.)"""
    import numpy
    import triton

    def version(text):
        return tuple(int(part) for part in text.split(".")[:2])
    if (os.environ.get("TRITON_INTERPRET") == "1" and version(triton.__version__) < (3, 7)
            and version(numpy.__version__) >= (2, 4)):
        return (f"triton {triton.__version__}'s interpreter cannot run with numpy "
                f"{numpy.__version__}: use numpy < 2.4 or triton >= 3.7")
    return None


INTERPRETER_TOO_OLD = _interpreter_too_old()

import spec_ops  # noqa: E402,F401

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
