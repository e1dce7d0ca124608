"""Every kernel variant warm-up reaches compiles for sm_80 (no programmatic dependent launch)
and sm_90 (with it), on this machine: the interpreted Triton tests run the kernels as NumPy
code, which checks less than the compiler (scripts/compile_kernels.py)."""

import ast
import os
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def run_script(name, *args):
    """stdout of scripts/<name> run with ``args`` to compile (TRITON_INTERPRET unset), which
    must exit 0."""
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, str(SCRIPTS / name), *args], env=env,
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return result.stdout


def test_every_warmed_kernel_variant_compiles_for_sm_80_and_sm_90():
    stdout = run_script("compile_kernels.py", "--arch", "80,90")
    counts = [line.split(": ")[1].split()[:3] for line in stdout.splitlines()
              if "kernel variants compiled" in line]
    assert len(counts) == 2 and all(done == total != "0" for done, _, total in counts), stdout


def test_load_trips_counts_the_dependent_round_trips():
    """scripts/load_trips.py on two kernels whose trips the source fixes: 1.2 loads once then
    stores; 1.5 loads the positions, then the block-table entry at the new position."""
    stdout = run_script("load_trips.py", "_prepare_inputs_padded_kernel", "_step_kernel")
    summaries = [line for line in stdout.splitlines() if "before the first branch" in line]
    names = [line.split()[0] for line in stdout.splitlines() if "num_warps=" in line]
    assert len(names) == len(summaries) >= 2
    for name, summary in zip(names, summaries):
        expected = 1 if name == "_prepare_inputs_padded_kernel" else 2
        assert f"before the first branch: {expected} trips" in summary, stdout


def test_round_lanes_tile_paths_wait_for_at_most_four_round_trips():
    """scripts/load_trips.py --tile on the round ops' lanes kernels, whose tile path is the
    first pass's (a round's draft steps run in programs of their own): 6.1 waits for the two
    round trips its data needs (the request's values; the target tokens, positions and slots
    it copies), 6.3 for two before its first branch (the block table read at the positions an
    engine's batch has, with the positions), then one for each of its two reads again behind
    a branch taken where a guess missed (_indexing.checked_block). 6.2 for three or four: ptxas
    issues one of its loads after a use of an earlier group's on some variants. Without the
    barriers that hold its load groups it had four to seven, six or seven with the production
    dtypes."""
    kernels = ["_prepare_eagle_round_lanes_kernel", "_prepare_parallel_round_lanes_kernel",
               "_prepare_dflash_round_lanes_kernel"]
    stdout = run_script("load_trips.py", "--tile", *kernels)
    lines = stdout.splitlines()
    found = [(line.split()[0], int(summary.split()[2]), int(summary.split(";")[1].split()[0]))
             for line, summary in zip(lines, lines[1:]) if summary.strip().startswith("tile path:")]
    assert {name for name, _, _ in found} == set(kernels), stdout
    for name, trips, before_branch in found:
        allowed, allowed_before_branch = {
            "_prepare_eagle_round_lanes_kernel": ((2,), (2,)),
            "_prepare_parallel_round_lanes_kernel": ((3, 4), (3, 4)),
            "_prepare_dflash_round_lanes_kernel": ((4,), (2,))}[name]
        assert trips in allowed and before_branch in allowed_before_branch, stdout


def test_load_trips_finds_the_parameter_lines_a_kernel_reads():
    """scripts/load_trips.py --parameters on 1.5's kernel, which reads every one of its
    parameters: the lines it reports, before the wait and after it, are each line of the
    parameter bank from the first, none twice."""
    stdout = run_script("load_trips.py", "--parameters", "_step_kernel")
    summaries = [line for line in stdout.splitlines() if "read before the wait" in line]
    assert summaries, stdout
    for summary in summaries:
        before, after = (ast.literal_eval(part.split(":")[1].strip().rstrip(";"))
                         for part in summary.split("; "))
        assert sorted(before + after) == list(range(len(before) + len(after))) != [], summary
