#!/usr/bin/env bash
# The bound words and the labels on the GPU machine (docs/gpu/h200/bound_words):
#   bash scripts/device_bound_words.sh
# 1. eager ResNet50 FP32 and FP16 at bs 4, 8, 16, 64, five fixed rounds: every cell's
#    processes.csv, classified by scripts/bound_table.py (bound_table.log) and the sweep's
#    bound column and notes (sweep.log);
# 2. eager FP32 and FP16 bs 8 under --cuda-graphs, 5 processes each (--repeat-runs): a replay
#    the host does not pace, classified alike;
# 3. summarize of eager FP16 bs 8 and of its --cuda-graphs run: GPU utilization over the timed
#    window beside the profiled steps', GPU compute beside the kernels' time per call, p90/p99
#    with their intervals (summarize_*.log).
# Logs go to $OUT. Wheels: msgspec and nvtx carried in .whl
# (python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl).
source "$(dirname "$0")/device_common.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
p run --backend pytorch_fp32 --bs 4 "${DIRS[@]}" --name warm > /dev/null 2>&1
timed p sweep --backends pytorch_fp32,pytorch_fp16 --bs 4,8,16,64 --fixed-rounds --name words \
    "${DIRS[@]}" > "$OUT/sweep.log" 2>&1
tail -n 30 "$OUT/sweep.log"
for backend in pytorch_fp32 pytorch_fp16; do
    timed p run --backend "$backend" --bs 8 --cuda-graphs --repeat-runs 5 "${DIRS[@]}" \
        > "$OUT/run_${backend}_cg.log" 2>&1
done
"$PY" scripts/bound_table.py --only "$WORK/runs/words" "$WORK/runs" > "$OUT/bound_table.log" 2>&1
cat "$OUT/bound_table.log"
for run in words/pytorch_fp16_bs8 pytorch_fp16_bs8_cg; do
    COLUMNS=160 p summarize "$WORK/runs/$run" --view overview > "$OUT/summarize_${run//\//_}.log" 2>&1
    head -n 30 "$OUT/summarize_${run//\//_}.log"
done
