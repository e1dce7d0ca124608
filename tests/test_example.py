"""The README's example, examples/spec_decode.py: speculative decoding through spec_ops is
lossless in every drafting mode, fused or not, and its runs take the paths that matter
(rejections, acceptances, a shrinking batch)."""

import importlib.util
import pathlib
import sys
import types

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "spec_decode.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("spec_decode", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


spec_decode = _load_example()
NUM_REQUESTS = 6


def first_difference(result):
    for index, (output, reference) in enumerate(zip(result.outputs, result.reference)):
        if output != reference:
            return f"request {index}: {output} != greedy {reference}"
    return None


@pytest.fixture(scope="module")
def results():
    """One run per (mode, fused), shared by the tests below."""
    return {(mode, fused): spec_decode.run(mode, fused=fused, num_requests=NUM_REQUESTS)
            for mode in spec_decode.MODES for fused in (False, True)}


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
@pytest.mark.parametrize("mode", spec_decode.MODES)
def test_lossless(results, mode, fused):
    result = results[mode, fused]
    assert result.lossless, first_difference(result)


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
@pytest.mark.parametrize("mode", spec_decode.MODES)
def test_drafts_are_sometimes_accepted_sometimes_rejected(results, mode, fused):
    result = results[mode, fused]
    assert 0 < result.acceptance_rate < 1
    assert 1 < result.mean_accepted_length < 1 + spec_decode.Config().num_speculative_tokens


@pytest.mark.parametrize("mode", spec_decode.MODES)
def test_batch_shrinks_as_requests_finish_at_different_steps(results, mode):
    batch_sizes = results[mode, False].batch_sizes
    assert batch_sizes[0] == NUM_REQUESTS
    assert batch_sizes == sorted(batch_sizes, reverse=True)
    assert len(set(batch_sizes)) > 2                  # at least two different finishing steps


@pytest.mark.parametrize("mode", spec_decode.MODES)
def test_fused_ops_draft_the_same_tokens(results, mode):
    unfused, fused = results[mode, False], results[mode, True]
    assert fused.acceptance_rate == unfused.acceptance_rate
    assert fused.batch_sizes == unfused.batch_sizes


@pytest.fixture(scope="module")
def round_results():
    """One run per mode with the round ops (6.1 - 6.3)."""
    return {mode: spec_decode.run(mode, round_ops=True, num_requests=NUM_REQUESTS)
            for mode in spec_decode.MODES}


@pytest.mark.parametrize("mode", spec_decode.MODES)
def test_round_ops_are_lossless_and_draft_the_same_tokens(results, round_results, mode):
    result = round_results[mode]
    assert result.lossless, first_difference(result)
    assert result.acceptance_rate == results[mode, False].acceptance_rate
    assert result.batch_sizes == results[mode, False].batch_sizes


class ReplayFirstCall(spec_decode.CudaGraphs):
    """CUDA-graph semantics on CPU: a key's later calls rerun its first call's function, with
    the arguments it was first given, as a graph replays its captured kernels."""

    def __init__(self, device):
        super().__init__(device)
        self.enabled = True

    @staticmethod
    def capture(fn):
        return types.SimpleNamespace(replay=fn)


@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
def test_draft_steps_replay_like_cuda_graphs(results, monkeypatch, fused):
    """Everything a captured draft step reads lives in persistent buffers: replaying the first
    call of each batch size drafts exactly what running every step afresh drafts."""
    monkeypatch.setattr(spec_decode, "CudaGraphs", ReplayFirstCall)
    result = spec_decode.run("eagle", fused=fused, num_requests=NUM_REQUESTS)
    assert result.lossless, first_difference(result)
    assert result.acceptance_rate == results["eagle", fused].acceptance_rate
    assert result.batch_sizes == results["eagle", fused].batch_sizes


def test_round_op_draft_steps_replay_like_cuda_graphs(results, monkeypatch):
    """With 6.1 too, each captured step reads its positions, slots and seq_lens from
    persistent buffers."""
    monkeypatch.setattr(spec_decode, "CudaGraphs", ReplayFirstCall)
    result = spec_decode.run("eagle", round_ops=True, num_requests=NUM_REQUESTS)
    assert result.lossless, first_difference(result)
    assert result.acceptance_rate == results["eagle", False].acceptance_rate
    assert result.batch_sizes == results["eagle", False].batch_sizes


@pytest.mark.gpu
@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
@pytest.mark.parametrize("mode", spec_decode.MODES)
def test_lossless_on_cuda_with_graphs(mode, fused, launch_plans):
    result = spec_decode.run(mode, device="cuda", fused=fused, num_requests=NUM_REQUESTS)
    assert result.lossless, first_difference(result)
    assert 0 < result.acceptance_rate < 1


@pytest.mark.gpu
@pytest.mark.parametrize("mode", spec_decode.MODES)
def test_round_ops_lossless_on_cuda_with_graphs(mode, launch_plans):
    result = spec_decode.run(mode, device="cuda", round_ops=True, num_requests=NUM_REQUESTS)
    assert result.lossless, first_difference(result)
    assert 0 < result.acceptance_rate < 1


@pytest.fixture(scope="module")
def mrope_result():
    return spec_decode.run(spec_decode.MROPE_MODE, num_requests=NUM_REQUESTS)


def test_mrope_mode_is_lossless(mrope_result):
    """Prompts with images: the target, the drafter and the reference all rotate by M-RoPE
    positions, and the draft steps use 7.1."""
    assert mrope_result.lossless, first_difference(mrope_result)
    assert 0 < mrope_result.acceptance_rate < 1


def test_mrope_engines_way_would_overwrite_earlier_tokens(mrope_result):
    """Slots from the temporal position (1.5 on positions[0]) land on earlier tokens' K/V."""
    differ, collide = mrope_result.engines_way
    assert differ >= collide > 0


def test_mrope_draft_steps_replay_like_cuda_graphs(mrope_result, monkeypatch):
    monkeypatch.setattr(spec_decode, "CudaGraphs", ReplayFirstCall)
    result = spec_decode.run(spec_decode.MROPE_MODE, num_requests=NUM_REQUESTS)
    assert result.lossless, first_difference(result)
    assert result.acceptance_rate == mrope_result.acceptance_rate
    assert result.engines_way == mrope_result.engines_way


@pytest.mark.gpu
def test_mrope_mode_lossless_on_cuda_with_graphs():
    result = spec_decode.run(spec_decode.MROPE_MODE, device="cuda", num_requests=NUM_REQUESTS)
    assert result.lossless, first_difference(result)
    assert result.engines_way[1] > 0
