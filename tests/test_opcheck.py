"""torch.library.opcheck with all five utils on several samples per op, on every device."""

import pytest
import torch

from backends import HAS_CUDA
from samples import OPS, clone_args, op_overload, sample

UTILS = ("test_schema", "test_autograd_registration", "test_faketensor",
         "test_aot_dispatch_static", "test_aot_dispatch_dynamic")
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("num_reqs", [0, 1, 5, 17])
@pytest.mark.parametrize("op", OPS)
def test_opcheck(op, num_reqs, device):
    args = clone_args(sample(op, seed=1000 + num_reqs, num_reqs=num_reqs,
                             uniform_dtype=device == "cuda"), device)
    torch.library.opcheck(op_overload(op), args, test_utils=UTILS)
