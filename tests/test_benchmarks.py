"""The benchmark scripts' smoke modes: every code path of each script (launch recording, the
op against the composition it replaces, the timing and reporting code) on small CPU inputs
with the Triton kernels interpreted, so a change of the library's internals that breaks a
benchmark shows here and not first on the GPU. Timings in smoke mode judge nothing."""

import json
import os
import pathlib
import subprocess
import sys

import pytest
from conftest import interpreter_too_old

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize("script,report", [
    ("bench_ops", "bench_ops_smoke.json"),
    ("bench_registration", "bench_registration_smoke.json"),
    ("bench_rounds", "bench_rounds_smoke.json"),
])
def test_benchmark_smoke_run(script, report, tmp_path):
    too_old = interpreter_too_old()     # the smoke run is interpreted, also on a GPU machine
    if too_old:
        pytest.skip(too_old)
    env = {name: value for name, value in os.environ.items() if name != "OUT"}
    env["TRITON_INTERPRET"] = "1"
    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / f"{script}.py"), "--smoke", "--results-dir",
         str(tmp_path)], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    written = json.loads((tmp_path / report).read_text())
    assert written, f"{script} wrote an empty report"
