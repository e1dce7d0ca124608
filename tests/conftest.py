"""Test setup: without a GPU, Triton kernels run interpreted on CPU tensors.

TRITON_INTERPRET must be set before triton (and so spec_ops) is imported.
"""

import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

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
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
