#!/usr/bin/env bash
# Sequential rounds against fixed rounds on the GPU machine (docs/gpu/h200/verdicts):
#   bash scripts/device_sequential.sh 9    # the 9-cell eager matrix, sequential then --fixed-rounds
#   bash scripts/device_sequential.sh 20   # the 20-cell matrix, sequential
# A `run` first warms the machine; logs and benchmark.csv go to $OUT. Wheels: msgspec and nvtx
# carried in .whl (python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl).
source "$(dirname "$0")/device_common.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$PY" profile.py run --backend pytorch_fp32 --bs 4 "${DIRS[@]}" --name warm > /dev/null 2>&1
sweep() {  # sweep <name> <arguments...>
    local name=$1 began
    shift
    began=$(date +%s)
    "$PY" profile.py sweep "$@" --name "$name" "${DIRS[@]}" > "$OUT/$name.log" 2>&1
    echo "=== $name: exit $? wall $(($(date +%s) - began)) s"
    grep -E "^sampling|look after|sampling took|sweep took" "$OUT/$name.log"
    cp "$WORK/runs/$name/benchmark.csv" "$OUT/$name.csv"
}
case "${1:-}" in
9)
    M=(--backends pytorch_fp32,pytorch_fp16,pytorch_bf16 --bs 4,16,64)
    sweep sweep9_sequential "${M[@]}"
    sweep sweep9_fixed "${M[@]}" --fixed-rounds
    ;;
20)
    sweep sweep20_sequential --backends pytorch_fp32,pytorch_fp16,pytorch_bf16,torchscript_fp32 \
        --bs 1,4,16,32,64
    ;;
*) sed -n 2,6p "$0"; exit 2 ;;
esac
