#!/usr/bin/env bash
# The reproducibility benchmarks on the GPU machine (issue 21), one part per device call:
#
#   bash scripts/device_reproduce.sh eager    # noise floor, where the spread comes from, 10
#                                              # identical eager FP32 pairs
#   bash scripts/device_reproduce.sh difference  # a ~5 % difference on a GPU-bound config
#   bash scripts/device_reproduce.sh ttrt     # 10 identical ttrt_fp16 pairs (TensorRT staged)
#   bash scripts/device_reproduce.sh matrix N # the 20-cell matrix, sweep number N (1, 2), then
#                                              # (after 2) the two sweeps against each other
#   bash scripts/device_reproduce.sh features # run: GPU compute time, --cuda-graphs, GPU state
#   bash scripts/device_reproduce.sh advise   # advise --try on four runs (ADVISE_BUDGET each)
#
# Logs go to $OUT (default ./device_out); runs to $WORK (default /tmp/reproduce, kept between
# calls of one warm machine so the second sweep finds the first).
WORK=${WORK:-/tmp/reproduce}  # kept between the parts of one warm machine
source "$(dirname "$0")/device_common.sh"
case "${1:-}" in
eager)
    say "versions"; nvidia-smi --query-gpu=name,driver_version,persistence_mode,clocks.sm,clocks.max.sm --format=csv,noheader
    timed "$PY" profile.py noise --processes 5 2>&1 | tee "$OUT/noise.log"
    timed "$PY" scripts/bench_reproduce.py sources --k 8 2>&1 | tee "$OUT/sources.log"
    timed "$PY" scripts/bench_reproduce.py identical --backend pytorch_fp32 --bs 8 --pairs 10 2>&1 | tee "$OUT/identical_eager.log"
    ;;
difference)  # a GPU-bound config: eager FP32 bs 8 was launch-bound (224 vs 232 px: +0.0 %)
    timed "$PY" scripts/bench_reproduce.py difference --a "pytorch_fp32 32 224" --b "pytorch_fp32 32 230" 2>&1 | tee "$OUT/difference_bs32.log"
    ;;
ttrt)
    timed "$PY" scripts/bench_reproduce.py identical --backend ttrt_fp16 --bs 8 --pairs 10 2>&1 | tee "$OUT/identical_ttrt.log"
    ;;
matrix)
    n=${2:-1}
    timed "$PY" profile.py sweep --backends pytorch_fp32,pytorch_fp16,inductor_fp16,ttrt_fp32,ttrt_fp16 \
        --bs 1,8,16,32 --name "matrix$n" "${DIRS[@]}" 2>&1 | tee "$OUT/matrix$n.log"
    cp "$WORK/runs/matrix$n/benchmark.csv" "$OUT/matrix$n.csv" 2>/dev/null
    if [ "$n" = 2 ]; then
        "$PY" scripts/bench_reproduce.py matrix "$WORK/runs/matrix1" "$WORK/runs/matrix2" 2>&1 | tee "$OUT/matrix_agreement.log"
    fi
    ;;
features)  # GPU compute beside latency, --cuda-graphs per backend, the GPU state, compare
    for args in "pytorch_fp32" "pytorch_fp32 --cuda-graphs" "inductor_fp16 --cuda-graphs" \
                "ttrt_fp16" "ttrt_fp16 --cuda-graphs" "pytorch_fp32 --name again"; do
        set -- $args
        timed "$PY" profile.py run --backend "$@" --bs 8 "${DIRS[@]}" 2>&1 | grep -v "^\s*$" | tail -22 | tee -a "$OUT/features.log"
    done
    timed "$PY" profile.py compare "$WORK/runs/pytorch_fp32_bs8" "$WORK/runs/pytorch_fp32_bs8_again" --top 3 2>&1 | head -40 | tee -a "$OUT/features.log"
    ;;
advise)  # issue 25: advice that measures itself, four runs
    B=${ADVISE_BUDGET:-100s}
    for args in "pytorch_fp32 --bs 8" "pytorch_fp16 --bs 1" "pytorch_fp32 --bs 12 --model distilbert" \
                "pytorch_fp16 --bs 1 --model gpt2 --workload generate --max-new-tokens 32"; do
        set -- $args
        log="$OUT/advise_$(echo "$args" | tr -c 'A-Za-z0-9' _).log"
        "$PY" profile.py run --backend "$@" "${DIRS[@]}" > "$log.run" 2>&1
        dir=$(grep -o "results: .*/result.json" "$log.run" | sed 's/results: //; s#/result.json##')
        timed "$PY" profile.py advise "$dir" --try --budget "$B" "${DIRS[@]}" 2>&1 | tee "$log"
    done
    ;;
*) sed -n 2,12p "$0"; exit 2 ;;
esac
