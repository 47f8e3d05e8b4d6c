#!/usr/bin/env bash
# The GPU runs of the ONNX Runtime / INT8 / FP8 backends (docs/engines.md), from the repository
# root on the GPU machine, in parts that each fit one device call (10 minutes):
#
#   bash scripts/device_engines.sh check        # which backends can run here, and why not
#   bash scripts/device_engines.sh resnet50     # sweep: ResNet50 bs 8 through the seven backends
#   bash scripts/device_engines.sh distilbert   # sweep: DistilBERT bs 12 seq 64, same backends,
#                                               #   then inductor_int8 with 32 calibration batches
#   bash scripts/device_engines.sh ncu          # Nsight Compute: ort_fp16, inductor_int8, ttrt_fp8
#   bash scripts/device_engines.sh table        # the final tables again, from runs/
#   bash scripts/device_engines.sh all          # all of the above, in order
#
# Needs onnxruntime-gpu, onnx, onnxscript, torchao, nvidia-modelopt and torch_tensorrt installed
# (stage them with ../shared/device/stage-wheels.sh). A cell that fails is recorded by the sweep
# with its reason and the script goes on. Logs, result.json files, the sweep tables and the ncu
# summaries are copied under $OUT (default ./device_out). Exit status 0 when every part that ran
# finished at least one cell.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-device_out}
mkdir -p "$OUT/logs"
export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-8}
BACKENDS=pytorch_fp32,torchscript_fp32,ort_fp32,ort_fp16,ttrt_fp16,inductor_int8,ttrt_fp8
CELL_TIMEOUT=${CELL_TIMEOUT:-240}
status=0

note() { echo "=== $*" | tee -a "$OUT/logs/steps.log"; }

keep() {  # copy a run or sweep folder's small files under $OUT
    local from=$1
    [ -d "$from" ] || return 0
    mkdir -p "$OUT/$from"
    find "$from" -maxdepth 2 -type f \( -name '*.json' -o -name '*.md' -o -name '*.csv' -o -name '*.log' \) \
        -size -5M -exec cp --parents {} "$OUT/" \; 2>/dev/null
}

check() {
    note "versions and backends"
    "$PY" - <<'PYEOF' 2>&1 | tee "$OUT/logs/check.log"
import importlib.metadata as m
for d in ("torch", "onnxruntime-gpu", "onnxruntime", "onnx", "onnxscript", "torchao",
          "nvidia-modelopt", "torch-tensorrt", "torch-tensorrt-rtx"):
    try:
        print(f"{d} {m.version(d)}")
    except m.PackageNotFoundError:
        print(f"{d} not installed")
try:
    import onnxruntime
    print("onnxruntime providers:", onnxruntime.get_available_providers())
except Exception as error:
    print("onnxruntime import failed:", error)
PYEOF
    "$PY" profile.py backends 2>&1 | tee -a "$OUT/logs/check.log"
}

sweep() {  # sweep NAME MODEL BS [extra options]
    local name=$1 model=$2 bs=$3; shift 3
    note "sweep $name: $model bs $bs ($BACKENDS)"
    local start=$(date +%s)
    "$PY" profile.py sweep --backends "$BACKENDS" --bs "$bs" --model "$model" --name "$name" \
        --resume --cell-timeout "$CELL_TIMEOUT" --iters 100 --timed-warmup 20 "$@" \
        > "$OUT/logs/$name.log" 2>&1
    local rc=$?
    note "sweep $name exit $rc after $(( $(date +%s) - start )) s"
    [ $rc -eq 0 ] || status=1
    keep "runs/$name"
    tail -n 40 "$OUT/logs/$name.log"
}

calibrated_int8() {
    note "inductor_int8 DistilBERT bs 12 seq 64, static scales on 32 calibration batches"
    "$PY" profile.py run --backend inductor_int8 --model distilbert --bs 12 --seq-len 64 \
        --calib-batches 32 --name calib32 > "$OUT/logs/inductor_int8_calib32.log" 2>&1
    note "exit $?"
    keep runs/inductor_int8_bs12_calib32
    tail -n 25 "$OUT/logs/inductor_int8_calib32.log"
}

attribution() {
    note "ORT kernels under the onnxruntime::run operator; pytorch_fp32 vs ort_fp32 per category"
    local sweep=runs/engines_resnet50
    if [ -d "$sweep/ort_fp32_bs8" ]; then
        "$PY" profile.py summarize "$sweep/ort_fp32_bs8" --view operators --top 10 \
            > "$OUT/logs/ort_fp32_operators.log" 2>&1
        "$PY" profile.py compare "$sweep/pytorch_fp32_bs8" "$sweep/ort_fp32_bs8" \
            > "$OUT/logs/compare_pytorch_ort_fp32.log" 2>&1
        cat "$OUT/logs/ort_fp32_operators.log" "$OUT/logs/compare_pytorch_ort_fp32.log" | head -80
    else
        echo "no $sweep/ort_fp32_bs8: run the resnet50 part first"
    fi
}

ncu_one() {  # ncu_one BACKEND MODEL BS
    local backend=$1 model=$2 bs=$3
    note "ncu: $backend $model bs $bs"
    local start=$(date +%s)
    if "$PY" profile.py ncu --backend "$backend" --model "$model" --bs "$bs" --top 10 \
            --launch-count 200 --name ncu > "$OUT/logs/ncu_${backend}.log" 2>&1; then
        "$PY" - "runs/${backend}_bs${bs}_ncu/ncu.json" <<'PYEOF' | tee -a "$OUT/logs/ncu_${backend}.log"
import json, sys
d = json.load(open(sys.argv[1]))
share = d["agreement_share"]
print(f"  agreement {100 * share:.1f} % of profiled kernel time" if share == share else "  agreement: nothing profiled",
      f"| coverage {100 * d['coverage_of_kernel_time']:.1f} % of kernel time"
      f" | {d['profiled_kernels']} kernels, {d['launches_profiled']} launches")
for name in d["disagreeing"]:
    print("  disagree:", name[:160])
PYEOF
    else
        echo "--- ncu FAILED for $backend (exit $?)"; tail -n 15 "$OUT/logs/ncu_${backend}.log"
        status=1
    fi
    note "ncu $backend took $(( $(date +%s) - start )) s"
    keep "runs/${backend}_bs${bs}_ncu"
}

table() {
    for name in engines_resnet50 engines_distilbert; do
        [ -f "runs/$name/benchmark.md" ] && { note "table $name"; cat "runs/$name/benchmark.md"; }
    done
    "$PY" - <<'PYEOF' | tee "$OUT/logs/engine_notes.log"
import glob, json
keys = ("providers", "cpu_fallback_nodes", "int8_share", "fp_layers", "calibration",
        "calibration_s", "compile_s", "export_s", "modelopt_import_s", "warnings")
for path in sorted(glob.glob("runs/engines_*/*/result.json") + glob.glob("runs/*calib32/result.json")):
    r = json.load(open(path))
    notes = r["backend"]["notes"]
    shown = {k: notes[k] for k in keys if k in notes and notes[k] not in ([], None)}
    print(path, "|", json.dumps(shown, default=str)[:600])
PYEOF
}

part=${1:-all}
case $part in
    check) check ;;
    resnet50) sweep engines_resnet50 resnet50 8; attribution ;;
    distilbert) sweep engines_distilbert distilbert 12 --seq-len 64; calibrated_int8 ;;
    ncu)  # profile.py ncu has no --seq-len: DistilBERT runs at its default sequence, 128
        ncu_one ort_fp16 resnet50 8; ncu_one inductor_int8 distilbert 12; ncu_one ttrt_fp8 resnet50 8 ;;
    table) ;;
    all) check; sweep engines_resnet50 resnet50 8; attribution
         sweep engines_distilbert distilbert 12 --seq-len 64; calibrated_int8
         ncu_one ort_fp16 resnet50 8; ncu_one inductor_int8 distilbert 12; ncu_one ttrt_fp8 resnet50 8 ;;
    *) sed -n 2,17p "$0"; exit 2 ;;
esac
table
exit $status
