#!/usr/bin/env bash
# The tool's GPU paths in one device call each, after a change to how runs are collected:
#
#   bash scripts/device_check.sh runs     # eager FP32 / TensorRT FP16 ResNet50 bs 8, a gpt2
#                                         # generation, the FP8 engine check; compare
#   bash scripts/device_check.sh sweep    # a small sweep through typed cells (kept as a fixture)
#   bash scripts/device_check.sh ncu      # ncu's coverage of kernel time with its defaults
#
# From the repository root on the GPU machine; logs and small results land in $OUT (default
# ./device_out), runs and traces in $WORK (default a fresh /tmp folder). TensorRT and ModelOpt
# must be installed first (../shared/device/stage-*.sh); a backend that cannot run says why.
source "$(dirname "$0")/device_common.sh"

runs() {
    say "versions"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    "$PY" -c "import torch; print('torch', torch.__version__)"
    timed p run --backend pytorch_fp32 --bs 8 "${DIRS[@]}" | tail -n 22
    timed p run --backend ttrt_fp16 --bs 8 "${DIRS[@]}" | tail -n 22
    timed p run --backend pytorch_fp16 --bs 1 --model gpt2 --workload generate \
        --max-new-tokens 16 "${DIRS[@]}" | tail -n 22
    say "compare pytorch_fp32_bs8 ttrt_fp16_bs8"
    p compare "$WORK/runs/pytorch_fp32_bs8" "$WORK/runs/ttrt_fp16_bs8" --top 3
    for model in resnet50:8 distilbert:12; do
        m=${model%:*}; n=${model#*:}
        timed p run --backend ttrt_fp8 --bs "$n" --model "$m" "${DIRS[@]}" 2>&1 | tail -n 12
        timed p run --backend ttrt_fp16 --bs "$n" --model "$m" "${DIRS[@]}" 2>&1 | tail -n 4
    done
    "$PY" scripts/runs_table.py "$WORK"/runs/*/ | tee "$OUT/runs_table.md"
}

sweep() {
    say "sweep: pytorch_fp16, ttrt_fp16 x bs 1, 8 (one profiled step each)"
    timed p sweep --backends pytorch_fp16,ttrt_fp16 --bs 1,8 --active 1 --iters 50 \
        --name gpu_sweep "${DIRS[@]}"
    p plot "$WORK/runs/gpu_sweep" --out "$WORK/plots" && ls "$WORK/plots"
    # the sweep folder and its traces, small enough to keep as a fixture
    (cd "$WORK" && tar czf "$OUT/gpu_sweep.tgz" runs/gpu_sweep tb_logs/gpu_sweep)
    ls -l "$OUT/gpu_sweep.tgz"
}

ncu() {
    for backend in pytorch_fp16 ttrt_fp16; do
        say "ncu: $backend bs 8, every kernel of step 2"
        timed p ncu --backend "$backend" --bs 8 "${DIRS[@]}" > "$OUT/ncu_$backend.log" 2>&1
        grep -E "agree with Nsight Compute|not seen under ncu" "$OUT/ncu_$backend.log"
    done
}

for part in "${@:-runs}"; do
    "$part"
done
