#!/usr/bin/env bash
# Everything that needs the GPU, in one remote command of at most 10 minutes on an H200:
#
#   bash scripts/gpu_check.sh          the gpu-marked tests, the rest of the suite on CUDA, the
#                                      benchmarks, the example on CUDA (~8 min)
#   bash scripts/gpu_check.sh --quick  the gpu-marked tests and the benchmarks' headline
#                                      numbers, for iteration (~5-6 min)
#   STEPS=no-rest / STEPS=rest         everything but the rest of the suite / only that (two
#                                      remote commands when one does not fit)
#   ONLY="example bench_rounds"        only the steps whose log names are listed (pytest_gpu,
#                                      example, example_round_ops, bench_registration, bench_ops,
#                                      bench_rounds, first_call, pytest_rest); others not run
#
# Cut to fit the 10 minutes: the rest of the suite runs 50 hypothesis examples per property
# (SPEC_OPS_EXAMPLES; 300 in CI), its test files in 4 processes (pytest-xdist), the
# benchmarks run as they are (bench_ops ~1 min on the H200, bench_registration under 1;
# --quick passed where a benchmark has it). Every step runs under a time limit and all of them
# under one deadline (DEADLINE_S), so the summary always comes; a step the deadline leaves no
# time for is reported as skipped (and counts as failed).
#
# Output: $OUT (a temporary directory when unset) gets at most 8 files, flat, what a remote run
# brings back: gpu_check.log (every step's output in order, then the summary), the
# benchmarks' JSON files (and plots while there is room) and gpu_check.tar.gz (every file of
# the run). The benchmarks also write benchmarks/results/. A failing step does not stop the
# others; the exit status is non-zero if any failed. The summary table is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."

QUICK=0
case "${1:-}" in
    "") ;;
    --quick) QUICK=1 ;;
    *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
esac

DEADLINE_S=${DEADLINE_S:-560}       # the remote command's 600 s, less time for the summary
FINAL_OUT="${OUT:-$(mktemp -d)}"
WORK=$(mktemp -d)                   # every step's log and result files
mkdir -p "$FINAL_OUT"
export OUT="$WORK" PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

declare -a NAMES VERDICTS SECONDS_TAKEN NOTES
# record NAME VERDICT SECONDS NOTE: a row of the summary table.
record() {
    NAMES+=("$1") VERDICTS+=("$2") SECONDS_TAKEN+=("$3") NOTES+=("$4")
}

# A step's one-line result: the example's lossless count, pytest's closing line, a benchmark's
# "targets:" line, else the step's last line of output.
note() {
    local log=$1 line
    if grep -q 'lossless' "$log"; then
        echo "lossless: $(grep -c 'lossless yes' "$log") yes, $(grep -c 'lossless NO' "$log") NO"
        return
    fi
    line=$(grep -E '^(=+ )?[0-9]+ (passed|failed|errors?|skipped|deselected)|no tests ran|^targets:' \
        "$log" | tail -n 1 | sed -E 's/^=+ | =+$//g')
    [ -n "$line" ] || line=$(grep -v '^=== ' "$log" | grep -v '^\s*$' | tail -n 1)
    echo "${line:0:100}"
}

# step NAME LOG CAP_S COMMAND...: run COMMAND under min(CAP_S, time left before the deadline),
# its output shown and kept in $WORK/LOG, and record its verdict. With ONLY set, a step whose LOG
# (less .log) it does not list is not run (the install always is).
step() {
    local name=$1 log=$WORK/$2 cap=$3 id=${2%.log}
    shift 3
    if [ -n "${ONLY:-}" ] && [ "$id" != install ] && [[ " $ONLY " != *" $id "* ]]; then
        return
    fi
    local left=$(( DEADLINE_S - SECONDS - 10 ))
    if (( left < 30 )); then
        record "$name" "skipped (deadline)" 0 "not run: ${DEADLINE_S} s deadline"
        return
    fi
    local limit=$(( cap < left ? cap : left )) start=$SECONDS
    echo "=== $name: $* (limit ${limit} s)" | tee "$log"
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$log"
    local rc=${PIPESTATUS[0]}
    echo "=== $name: exit $rc" | tee -a "$log"
    local verdict=FAILED
    case $rc in
        0) verdict=ok ;;
        5) verdict="FAILED (no test ran)" ;;
        124|137) verdict="FAILED (timed out after ${limit} s)" ;;
    esac
    record "$name" "$verdict" $(( SECONDS - start )) "$(note "$log")"
}

# optional NAME PATH: whether a file another change adds exists; recorded as skipped if not.
optional() {
    [ -f "$2" ] && return 0
    record "$1" "skipped" 0 "$2 does not exist"
    return 1
}

# quick_flag SCRIPT: --quick in quick mode, if SCRIPT has that option.
quick_flag() {
    (( QUICK )) && grep -q -- '"--quick"' "$1" && echo --quick
}

MACHINE=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1
    python -c "import sys, torch, triton; print('python', sys.version.split()[0], '| torch',
        torch.__version__, '(CUDA', torch.version.cuda, ') | triton', triton.__version__,
        '| GPUs:', torch.cuda.device_count())" 2>&1)
echo "$MACHINE"

# spec_ops._triton is csrc_triton/ (setup.py's package_dir), so the package must be installed;
# an editable install from the tree, with what is already there (the GPU machine has no index).
if (cd /tmp && python -c "import spec_ops._triton") 2>/dev/null; then
    record "install" ok 0 "spec_ops already importable"
else
    step "install" install.log 120 python -m pip install --quiet --no-deps --no-build-isolation \
        --no-index -e .
fi

# Test files in parallel processes where pytest-xdist is there (the GPU image has it); one
# file's tests stay in one process, so its module-scoped fixtures run once.
PARALLEL=()
python -c "import xdist" 2>/dev/null && PARALLEL=(-n 4 --dist loadfile)
if [ "${STEPS:-all}" != rest ]; then
# The gpu-marked tests in one process: with 4 workers they did not finish within 170 s in two
# runs on the H200; in one process they took 186-194 s, and over 240 s on a slower host.
step "pytest -m gpu" pytest_gpu.log 300 python -m pytest -q -m gpu tests
# The example next: short, and what tells whether decoding on CUDA is still lossless.
if (( ! QUICK )); then
    step "example" example.log 90 python examples/spec_decode.py --device cuda --no-progress
    if grep -q -- '"--round-ops"' examples/spec_decode.py; then
        step "example --round-ops" example_round_ops.log 90 \
            python examples/spec_decode.py --device cuda --round-ops --no-progress
    else
        record "example --round-ops" skipped 0 "examples/spec_decode.py has no --round-ops"
    fi
fi
step "bench_registration" bench_registration.log 90 \
    python benchmarks/bench_registration.py $( (( QUICK )) && echo --quick)
step "bench_ops" bench_ops.log 150 python benchmarks/bench_ops.py $(quick_flag benchmarks/bench_ops.py)
if optional "bench_rounds" benchmarks/bench_rounds.py; then
    step "bench_rounds" bench_rounds.log 210 \
        python benchmarks/bench_rounds.py $(quick_flag benchmarks/bench_rounds.py)
fi
if optional "first_call" benchmarks/first_call.py; then
    step "first_call" first_call.log 150 \
        python benchmarks/first_call.py $(quick_flag benchmarks/first_call.py)
fi
fi
# Last: the rest of the suite on CUDA tensors, in whatever time the deadline leaves
# (STEPS=rest runs only this step; STEPS=no-rest everything else).
if (( ! QUICK )) && [ "${STEPS:-all}" != no-rest ]; then
    step "pytest (rest) on CUDA" pytest_rest.log "$([ "${STEPS:-all}" = rest ] && echo 560 || echo 240)" \
        env SPEC_OPS_EXAMPLES=50 python -m pytest -q "${PARALLEL[@]}" -m "not gpu" tests
fi

# The benchmarks' own summaries (each printed last in its log), then the table.
summary() {
    echo
    echo "================ gpu_check$( (( QUICK )) && echo " --quick") summary ================"
    echo "$MACHINE"
    for log in bench_registration bench_ops bench_rounds first_call; do
        [ -f "$WORK/$log.log" ] || continue
        echo "--- $log:"
        if grep -q '^== summary' "$WORK/$log.log"; then
            sed -n '/^== summary/,$p' "$WORK/$log.log" | grep -v '^=== ' | head -n 45
        else
            grep -v '^=== ' "$WORK/$log.log" | tail -n 25
        fi
    done
    for log in example example_round_ops; do
        [ -f "$WORK/$log.log" ] || continue
        echo "--- $log:"
        grep -E 'lossless|Error|error' "$WORK/$log.log" | head -n 8
    done
    echo
    printf '%-24s %-30s %6s  %s\n' step result "s" note
    for i in "${!NAMES[@]}"; do
        printf '%-24s %-30s %6s  %s\n' "${NAMES[$i]}" "${VERDICTS[$i]}" "${SECONDS_TAKEN[$i]}" \
            "${NOTES[$i]}"
    done
    echo "total ${SECONDS} s; files in $FINAL_OUT: $(cd "$FINAL_OUT" && ls | tr '\n' ' ')"
}

# gpu_check.log: every step's log in order, then the summary; the files at most 8, flat.
for log in install pytest_gpu pytest_rest bench_registration bench_ops bench_rounds first_call \
           example example_round_ops; do
    [ -f "$WORK/$log.log" ] && cat "$WORK/$log.log"
done > "$FINAL_OUT/gpu_check.log"
tar -czf "$FINAL_OUT/gpu_check.tar.gz" -C "$WORK" .
kept=2
for file in "$WORK"/*.json "$WORK"/*.png; do
    [ -f "$file" ] && (( kept < 8 )) || continue
    cp "$file" "$FINAL_OUT/" && kept=$(( kept + 1 ))
done
summary | tee -a "$FINAL_OUT/gpu_check.log"

failed=0
for verdict in "${VERDICTS[@]}"; do
    case $verdict in ok|skipped) ;; *) failed=1 ;; esac
done
exit "$failed"
