#!/usr/bin/env bash
# Everything that needs the GPU, in one go: the gpu-marked tests and the full suite on CUDA,
# the op benchmarks, the example on CUDA. Logs and results go to $OUT (a temporary directory
# when unset; at most 8 files, flat), the benchmark's JSON and plot also to benchmarks/results/.
# A failing step does not stop the others; the exit status is non-zero if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"

declare -a STEPS STATUS
# step NAME LOG COMMAND...: run COMMAND, its output teed into $OUT/LOG, and record its status.
step() {
    local name=$1 log=$OUT/$2
    shift 2
    echo "=== $name: $*" | tee "$log"
    "$@" 2>&1 | tee -a "$log"
    local rc=$?
    STEPS+=("$name") STATUS+=("$rc")
    echo "=== $name: exit $rc" | tee -a "$log"
}

MACHINE=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
    python -c "import sys, torch, triton; print('python', sys.version.split()[0], '| torch',
        torch.__version__, '(CUDA', torch.version.cuda, ') | triton', triton.__version__,
        '| cuda available:', torch.cuda.is_available())" 2>&1)
echo "$MACHINE"

step "pytest -m gpu" pytest_gpu.log python -m pytest -q -m gpu tests
step "pytest (rest)" pytest_all.log python -m pytest -q -m "not gpu" tests
step "registration" bench_registration.log python benchmarks/bench_registration.py
step "benchmark" bench_ops.log python benchmarks/bench_ops.py
step "example" example.log python examples/spec_decode.py --device cuda

# pytest's closing line, e.g. "12 passed, 1 failed in 3.4s" (exit 5: no test collected).
pytest_counts() {
    grep -E '^(=+ )?[0-9]+ (passed|failed|error|skipped|deselected)|no tests ran' "$OUT/$1" \
        | tail -n 1
}

echo
echo "================ gpu_check summary ================"
echo "$MACHINE"
for i in "${!STEPS[@]}"; do
    case ${STATUS[$i]} in
        0) verdict=ok ;;
        5) verdict="FAILED (pytest: no test ran)" ;;
        *) verdict=FAILED ;;
    esac
    printf '%-16s %s, exit %s\n' "${STEPS[$i]}" "$verdict" "${STATUS[$i]}"
done
echo "--- pytest -m gpu: $(pytest_counts pytest_gpu.log)"
echo "--- pytest (rest): $(pytest_counts pytest_all.log)"
echo "--- registration route (host µs per eager call):"
cat "$OUT/bench_registration.log"
echo "--- benchmark:"
sed -n '/^== summary ==/,$p' "$OUT/bench_ops.log"
echo "--- example (last lines):"
tail -n 8 "$OUT/example.log"
echo "--- files in $OUT:"
ls "$OUT"

failed=0
for rc in "${STATUS[@]}"; do
    [ "$rc" = 0 ] || failed=1
done
exit "$failed"
