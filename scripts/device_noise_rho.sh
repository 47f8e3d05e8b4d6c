#!/usr/bin/env bash
# rho per machine on the GPU machine: `noise` measures the floor and the within-process
# correlation of both figures and keeps them for this GPU; the verdicts of a sweep then choose
# pairing at that rho and their method line names it, against the H100 default without it.
#   bash scripts/device_noise_rho.sh
# Logs go to $OUT: noise.log (the floor and "within one process (rho, 95 % interval)"),
# floor.json (the floor as kept), sweep_measured.log and sweep_default.log (the same 4-cell sweep with the floor
# kept and with none), compare_measured.log and compare_default.log (`compare --view timed` of
# one cell pair, whose "how" lines say "at ρ ... (measured on this machine (...) by `noise`
# at ...)" and "at ρ ... (the H100 default)"). Wheels: msgspec and nvtx carried in .whl
# (python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl).
source "$(dirname "$0")/device_common.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# two caches with parents of their own: a floor is kept in <cache>/../noise/
MEASURED=$WORK/measured/cache DEFAULT=$WORK/default/cache
mkdir -p "$MEASURED" "$DEFAULT"
"$PY" profile.py run --backend pytorch_fp32 --bs 4 "${DIRS[@]}" --name warm > /dev/null 2>&1
say "noise, 10 processes"
INFER_PROFILER_CACHE=$MEASURED timed "$PY" profile.py noise --processes 10 > "$OUT/noise.log" 2>&1
cat "$OUT/noise.log"
cp "$WORK"/measured/noise/*.json "$OUT/floor.json"
M=(--backends pytorch_fp32,pytorch_fp16 --bs 8,32 --fixed-rounds)
for kind in measured default; do
    cache=$MEASURED
    [ "$kind" = default ] && cache=$DEFAULT
    INFER_PROFILER_CACHE=$cache timed "$PY" profile.py sweep "${M[@]}" --name "rho_$kind" \
        "${DIRS[@]}" > "$OUT/sweep_$kind.log" 2>&1
    cp "$WORK/runs/rho_$kind/benchmark.csv" "$OUT/sweep_$kind.csv"
    INFER_PROFILER_CACHE=$cache "$PY" profile.py compare "$WORK/runs/rho_$kind/pytorch_fp32_bs8" \
        "$WORK/runs/rho_$kind/pytorch_fp16_bs8" --view timed > "$OUT/compare_$kind.log" 2>&1
    say "$kind: the method lines"
    grep -E "^how|ρ" "$OUT/compare_$kind.log"
done
