"""First-call latency of an op, without and with spec_ops.warmup.

The first launch of a kernel variant compiles it, so the first engine step after startup
stalls unless the engine warmed up. For 1.3 (copy_and_expand_eagle_inputs) and 6.1
(prepare_eagle_round), each on an engine-shaped batch of 64 requests with K = 3, this prints
in a table the first call's latency in a fresh process with an empty Triton cache:

  cold      no warm-up: the call compiles its kernel
  warm      after spec_ops.warmup(...) for the same configuration (whose duration is shown)

and the steady-state latency of a later call. Every measurement runs in its own subprocess
with TRITON_CACHE_DIR set to a new empty directory, so neither Triton's disk cache nor an
earlier compile in the same process helps. Needs CUDA; without it, it says so and exits 0.

    python benchmarks/first_call.py
"""

import json
import os
import subprocess
import sys
import tempfile
import time

import torch

NUM_REQS, K, BLOCK_SIZE, MAX_MODEL_LEN, VOCAB_SIZE = 64, 3, 16, 4096, 32000
OPS = ("copy_and_expand_eagle_inputs", "prepare_eagle_round")


def _batch(device):
    """Every request verified K drafts and accepted them all: K + 1 tokens each."""
    int32, int64 = dict(dtype=torch.int32, device=device), dict(dtype=torch.int64, device=device)
    width = K + 1
    num_tokens = NUM_REQS * width
    return dict(
        sampled=torch.ones(NUM_REQS, width, **int32),
        discard=torch.zeros(NUM_REQS, dtype=torch.bool, device=device),
        backup=torch.ones(NUM_REQS, **int32),
        cu_num_draft_tokens=torch.arange(1, NUM_REQS + 1, **int32) * K,
        query_start_loc=torch.arange(NUM_REQS + 1, **int32) * width,
        query_end_loc=torch.arange(1, NUM_REQS + 1, **int32) * width - 1,
        token_ids=torch.ones(num_tokens, **int32),
        positions=torch.arange(num_tokens, **int64) % 100 + 100,
        slot_mapping=torch.arange(num_tokens, **int64),
        block_table=torch.arange(NUM_REQS * 256, **int32).view(NUM_REQS, 256),
        seq_lens=torch.full((NUM_REQS,), 200, **int32),
        out=lambda dtype: torch.zeros(num_tokens + NUM_REQS * K, dtype=dtype, device=device),
    )


def _call(op, b):
    out = b["out"]
    if op == "copy_and_expand_eagle_inputs":
        torch.ops.spec_ops.copy_and_expand_eagle_inputs(
            b["token_ids"], b["positions"], b["backup"], out(torch.int32), out(torch.int64),
            out(torch.bool), out(torch.bool), out(torch.int32), out(torch.int32),
            b["query_start_loc"], b["query_end_loc"], 0, 0, K, True)
    else:
        steps = [torch.zeros(K - 1, NUM_REQS, dtype=dtype, device=b["seq_lens"].device)
                 for dtype in (torch.int64, torch.int64, torch.int32)]
        torch.ops.spec_ops.prepare_eagle_round(
            b["sampled"], b["discard"], b["backup"], b["cu_num_draft_tokens"],
            b["query_start_loc"], b["token_ids"], b["positions"], b["slot_mapping"],
            b["block_table"], b["seq_lens"], out(torch.int32), out(torch.int32),
            out(torch.int32), out(torch.int32), out(torch.int64), out(torch.int64), *steps,
            VOCAB_SIZE, BLOCK_SIZE, MAX_MODEL_LEN, K - 1)


def _timed(op, b):
    torch.cuda.synchronize()
    start = time.perf_counter()
    _call(op, b)
    torch.cuda.synchronize()
    return time.perf_counter() - start


def child(op, warm):
    """One measurement in this (fresh) process; prints a JSON line."""
    import spec_ops
    b = _batch("cuda")
    torch.cuda.synchronize()
    warmup_seconds = None
    if warm:
        start = time.perf_counter()
        spec_ops.warmup("cuda", vocab_size=VOCAB_SIZE, block_size=BLOCK_SIZE,
                        num_speculative_tokens=K, max_model_len=MAX_MODEL_LEN,
                        max_num_reqs=NUM_REQS)
        warmup_seconds = time.perf_counter() - start
    first = _timed(op, b)
    steady = min(_timed(op, b) for _ in range(20))
    print(json.dumps(dict(first=first, steady=steady, warmup=warmup_seconds)))


def measure(op, warm):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TRITON_CACHE_DIR=cache)
        result = subprocess.run(
            [sys.executable, __file__, "--child", op, "warm" if warm else "cold"], env=env,
            check=True, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3] == "warm")
        return
    if not torch.cuda.is_available():
        print("first_call.py measures Triton compilation on a GPU: it needs CUDA (none here).")
        return
    import spec_ops  # noqa: F401 (registers the ops, so that OPS can be checked)
    print(f"R = {NUM_REQS}, K = {K}, block_size = {BLOCK_SIZE}; {torch.cuda.get_device_name()}")
    print(f"{'op':<30} {'cold first':>12} {'warm first':>12} {'steady':>10} {'warmup':>10}")
    for op in OPS:
        if not hasattr(torch.ops.spec_ops, op):
            print(f"{op:<30} (not registered)")
            continue
        cold, warm = measure(op, warm=False), measure(op, warm=True)
        print(f"{op:<30} {cold['first'] * 1e3:>9.2f} ms {warm['first'] * 1e3:>9.2f} ms "
              f"{warm['steady'] * 1e6:>7.1f} us {warm['warmup']:>8.2f} s")


if __name__ == "__main__":
    main()
