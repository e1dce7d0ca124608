"""The launcher's cache of compiled kernels, on any machine: the key it files a launch under
holds what selects a compiled kernel (device, warps, every tensor argument's dtype, the
constexprs), and a later call with the same key finds that launch on the fast path, without
Triton. (Interpreted, the launcher keeps no cache; on a GPU, test_gpu.py runs the cache.)"""

import inspect

import pytest
import torch

from backends import HAS_CUDA
from samples import OPS, sample
from spec_ops._library import KERNELS
from spec_ops._triton import _launch
from spec_ops._triton._launch import Launcher

# The launches run interpreted on CPU tensors; on a GPU machine test_gpu.py runs the cache.
pytestmark = pytest.mark.skipif(HAS_CUDA, reason="interpreted launches on CPU tensors")


def launches(op, args):
    """(launcher, grid, args, num_warps, grid_y) of each launch of the op's Triton kernels."""
    calls = []
    original = Launcher.__call__

    def record(self, grid, args, num_warps=None, grid_y=1):
        calls.append((self, grid, args, num_warps, grid_y))
        return original(self, grid, args, num_warps, grid_y)

    Launcher.__call__ = record
    try:
        KERNELS[op].triton(*args)
    finally:
        Launcher.__call__ = original
    return calls


@pytest.mark.parametrize("op", OPS)
def test_a_cached_launch_is_found_under_its_key(op, monkeypatch):
    calls = launches(op, sample(op, 5, 9))
    assert calls
    monkeypatch.setattr(_launch, "INTERPRET", False)
    monkeypatch.setattr(_launch, "_current_device", lambda: -1)     # CPU tensors' device

    def slow_path(device):
        raise AssertionError("the call missed its cached launch")
    monkeypatch.setattr(_launch.torch.cuda, "device", slow_path)
    for launcher, grid, args, num_warps, grid_y in calls:
        warps = num_warps or launcher.num_warps
        key = launcher.key(args, warps)
        tensors = args[:launcher.num_tensors]
        assert key[:2] == (-1, warps)
        assert key[2:2 + len(tensors)] == tuple(t.dtype for t in tensors)
        assert key[2 + len(tensors):] == launcher.constexprs(args)
        taken = []
        monkeypatch.setitem(launcher.launches, key, lambda *launch: taken.append(launch))
        launcher(grid, args, num_warps, grid_y)
        assert taken == [(grid, grid_y, args)]
        monkeypatch.delitem(launcher.launches, key)


def test_other_dtypes_other_constexprs_or_warps_are_other_keys():
    calls = launches("eagle_prepare_next_token_padded",
                     sample("eagle_prepare_next_token_padded", 5, 9, fixed_dtype=torch.int32))
    launcher, _, args, num_warps, _ = calls[0]
    key = launcher.key(args, num_warps or launcher.num_warps)
    switched = (args[0].long(), *args[1:])
    assert launcher.key(switched, num_warps or launcher.num_warps) != key
    assert launcher.key(args, 2 * (num_warps or launcher.num_warps)) != key
    parameters = list(inspect.signature(launcher.kernel.fn).parameters.values())
    constexpr = next(i for i, parameter in enumerate(parameters)
                     if "constexpr" in str(parameter.annotation))
    assert launcher.key((*args[:constexpr], args[constexpr] + 1, *args[constexpr + 1:]),
                        num_warps or launcher.num_warps) != key


def test_pdl_from_sm_90_on_unless_turned_off(monkeypatch):
    """The one PDL rule, which the launcher and scripts/compile_kernels.py both read: compute
    capability 9.0 on, with a Triton that has grid dependency control (every Triton setup.py
    accepts, 3.6 on); SPEC_OPS_PDL=0 (the constant it sets at import) turns it off
    everywhere."""
    majors = (7, 8, 9, 10, 12)
    assert [_launch.pdl_for_capability(major) for major in majors] == [
        False, False, True, True, True]
    monkeypatch.setattr(_launch, "PDL_ALLOWED", False)
    assert not any(_launch.pdl_for_capability(major) for major in majors)
