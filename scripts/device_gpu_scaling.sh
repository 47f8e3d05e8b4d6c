#!/usr/bin/env bash
# A sweep on 1, 2 and 4 GPUs of one host, on a GPU machine, in the background (it outlasts one
# device call):
#
#   bash scripts/device_gpu_scaling.sh start LOG     # starts the driver (setsid), returns
#   bash scripts/device_gpu_scaling.sh wait LOG S    # waits up to S seconds, prints progress
#
# The driver, in order: a first and a second `run` of eager FP32 bs 8 (wall time by the clock,
# the first on a fresh machine); `ncu` of eager FP16 bs 8 (kept for the fixtures); a cold sweep
# of the matrix on all GPUs with --processes 1 (fills the Inductor caches: the sweeps after it
# are warm); then the matrix with default sampling on GPUs 0-3, 0-1 and 0, one after another;
# then scripts/bench_gpu_scaling.py on the three. Everything is logged under LOG; LOG/done
# holds the exit status when it ends. MATRIX_BACKENDS and MATRIX_BS override the matrix.
# PLAN=again: only the cold sweep, then the 1-GPU sweep (GPU 0) and the 2-GPU one (GPUs 1,2) at
# the same time (the host's CPUs shared; each on its own GPUs), then the 4-GPU one alone.
# PLAN=ray: the first and second `run`, the cold sweep, the 4-GPU sweep, the same matrix with
# --executor ray (a local Ray instance on this host's GPUs; Ray must be installed), then the
# 1-GPU and 2-GPU sweeps at the same time; bench_gpu_scaling.py on g1, g2, g4 and ray4.
set -u
cd "$(dirname "$0")/.."
mode=${1:?start or wait}; log=${2:?log folder}
PY=${PYTHON:-python3}
backends=${MATRIX_BACKENDS:-pytorch_fp32,pytorch_fp16,inductor_fp16}
sizes=${MATRIX_BS:-1,8,16,32}

stamp() { date +%s.%N; }
timed() {  # timed NAME COMMAND...: stdout+stderr to LOG/NAME.log, wall seconds to LOG/times
    local name=$1; shift
    local began; began=$(stamp)
    echo "=== $name: $*" >> "$log/progress"
    "$@" > "$log/$name.log" 2>&1
    local code=$?
    echo "$name exit $code wall $(awk "BEGIN {printf \"%.1f\", $(stamp) - $began}") s" \
        | tee -a "$log/times" >> "$log/progress"
}

driver() {
    export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-8}
    nvidia-smi --query-gpu=index,name,clocks.sm,temperature.gpu --format=csv > "$log/gpus.csv"
    if [ "${PLAN:-all}" = ray ]; then
        timed run_first "$PY" profile.py run --backend pytorch_fp32 --bs 8 --name first
        timed run_warm "$PY" profile.py run --backend pytorch_fp32 --bs 8 --name warm
        local matrix=(--backends "$backends" --bs "$sizes")
        timed cold "$PY" profile.py sweep --name cold "${matrix[@]}" --gpus 0,1,2,3 --processes 1
        timed g4 "$PY" profile.py sweep --name g4 "${matrix[@]}" --gpus 0,1,2,3
        timed ray4 "$PY" profile.py sweep --name ray4 "${matrix[@]}" --executor ray
        "$PY" scripts/bench_gpu_scaling.py g4=runs/g4 ray4=runs/ray4 > "$log/ray.log" 2>&1
        timed g1 "$PY" profile.py sweep --name g1 "${matrix[@]}" --gpus 0 &
        timed g2 "$PY" profile.py sweep --name g2 "${matrix[@]}" --gpus 1,2
        wait
        "$PY" scripts/bench_gpu_scaling.py g1=runs/g1 g2=runs/g2 g4=runs/g4 ray4=runs/ray4 \
            > "$log/scaling.log" 2>&1
        echo $? > "$log/done"
        return
    fi
    if [ "${PLAN:-all}" != again ]; then
        timed run_first "$PY" profile.py run --backend pytorch_fp32 --bs 8 --name first
        timed run_warm "$PY" profile.py run --backend pytorch_fp32 --bs 8 --name warm
        timed ncu_fp16 "$PY" profile.py ncu --backend pytorch_fp16 --bs 8 --top 10 \
            --launch-count 200
    fi
    local matrix=(--backends "$backends" --bs "$sizes")
    timed cold "$PY" profile.py sweep --name cold "${matrix[@]}" --gpus 0,1,2,3 --processes 1
    if [ "${PLAN:-all}" = again ]; then
        timed g1 "$PY" profile.py sweep --name g1 "${matrix[@]}" --gpus 0 &
        timed g2 "$PY" profile.py sweep --name g2 "${matrix[@]}" --gpus 1,2
        wait
        timed g4 "$PY" profile.py sweep --name g4 "${matrix[@]}" --gpus 0,1,2,3
    else
        timed g4 "$PY" profile.py sweep --name g4 "${matrix[@]}" --gpus 0,1,2,3
        timed g2 "$PY" profile.py sweep --name g2 "${matrix[@]}" --gpus 0,1
        timed g1 "$PY" profile.py sweep --name g1 "${matrix[@]}" --gpus 0
    fi
    "$PY" scripts/bench_gpu_scaling.py g1=runs/g1 g2=runs/g2 g4=runs/g4 > "$log/scaling.log" 2>&1
    echo $? > "$log/done"
}

case $mode in
    start)
        mkdir -p "$log"
        setsid bash "$0" driver "$log" > "$log/driver.log" 2>&1 < /dev/null &
        echo "driver started (pid $!), logs in $log" ;;
    driver) driver ;;
    wait)
        limit=${3:-540}; began=$(date +%s)
        while [ ! -f "$log/done" ] && [ $(( $(date +%s) - began )) -lt "$limit" ]; do
            sleep 5
        done
        cat "$log/progress" 2>/dev/null
        [ -f "$log/done" ] && echo "driver done: exit $(cat "$log/done")" \
            || echo "driver still running after ${limit} s" ;;
    *) echo "usage: $0 start|wait LOG [SECONDS]" >&2; exit 2 ;;
esac
