#!/usr/bin/env bash
# The label checks and failure paths that need a GPU, one device call per part:
#
#   bash scripts/device_truth.sh untraced  # eager FP16 ResNet50 bs 8: the untraced call against
#                                          # the profiled steps
#   bash scripts/device_truth.sh ncu_eager # ncu over every kernel of a step (coverage, both
#                                          # Tensor Core readings, its cost)
#   bash scripts/device_truth.sh tools     # ncu killed half-way, ncu missing, nsys as it is there
#   bash scripts/device_truth.sh ncu_trt   # the same ncu join for ttrt_fp16
#   bash scripts/device_truth.sh engine    # a TensorRT engine build killed half-way, then the
#                                          # same run; a damaged cache entry
#   bash scripts/device_truth.sh oom       # a TensorRT build and an ONNX Runtime session out of
#                                          # GPU memory (another process holds the rest)
#   bash scripts/device_truth.sh ray_paths # sweeps through a local Ray cluster: a task's worker
#                                          # killed, Ctrl-C then --resume, the raylet killed
#
# From the repository root on the GPU machine; logs land in $OUT (default ./device_out), runs in
# $WORK (default a fresh /tmp folder). ncu_trt, engine and oom need Torch-TensorRT staged first, oom onnxruntime-gpu too.
source "$(dirname "$0")/device_common.sh"
listing() {  # what a folder holds, hidden entries included
    say "files under $1"; (cd "$1" 2>/dev/null && find . -maxdepth 3 | sort | head -n 60)
}

untraced() {
    say "run: untraced call vs profiled steps"
    timed p run --backend pytorch_fp16 --bs 8 "${DIRS[@]}" 2>&1 | grep -vE "^(┃|┏|┡|└|│)"
    "$PY" - "$WORK/runs/pytorch_fp16_bs8/result.json" <<'EOF'
import json, sys
trace = json.load(open(sys.argv[1]))["trace"]
kernels = trace.get("untraced_kernels") or {}
print(f"result.json trace.untraced_kernels: {sum(kernels.values())} launches, {len(kernels)} names")
EOF
    p summarize "$WORK/runs/pytorch_fp16_bs8" --view overview 2>&1 | grep -iE "warning|untraced"
}

ncu_eager() {
    say "ncu: every kernel of step 2 (the default), joined to the trace of a fresh ordinary run"
    timed timeout 300 "$PY" profile.py ncu --backend pytorch_fp16 --bs 8 "${DIRS[@]}" > "$OUT/ncu_pytorch_fp16.log" 2>&1
    grep -vE "==PROF== Profiling|^(┃|┏|┡|└|│)" "$OUT/ncu_pytorch_fp16.log" | tail -n 14
    "$PY" - "$WORK/runs/pytorch_fp16_bs8/ncu.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print("ncu.json:", {k: d[k] for k in ("launches_profiled", "coverage_of_kernel_time",
                                       "agreement_share", "profiled_kernels")})
EOF
}

tools() {
    say "ncu killed with SIGKILL half-way through its profiled run"
    p run --backend pytorch_fp16 --bs 8 "${DIRS[@]}" > /dev/null 2>&1
    ls "$WORK/runs/pytorch_fp16_bs8"
    (timeout 180 "$PY" profile.py ncu --backend pytorch_fp16 --bs 8 --reuse "${DIRS[@]}" > "$OUT/ncu_killed.log" 2>&1;
     echo "exit $?" >> "$OUT/ncu_killed.log") &
    for _ in $(seq 60); do grep -q "==PROF== Profiling" "$OUT/ncu_killed.log" && break; sleep 1; done
    sleep 3; pkill -9 -x ncu; local began=$(date +%s); wait
    echo "the ncu command returned $(( $(date +%s) - began )) s after ncu was killed"
    grep -vE "==PROF==|^(┃|┏|┡|└|│)" "$OUT/ncu_killed.log" | tail -n 4
    pgrep -af "profile.py run" || echo "no profiled run left behind"
    listing "$WORK/runs"
    say "ncu missing (NCU names no file)"
    NCU=/nonexistent/ncu p ncu --backend pytorch_fp16 --bs 8 --reuse "${DIRS[@]}"; echo "exit $?"
    say "nsys as this machine has it"
    command -v nsys || echo "no nsys on PATH"
    timed timeout 300 "$PY" profile.py nsys --backend pytorch_fp16 --bs 8 "${DIRS[@]}" 2>&1 | tail -n 3
    listing "$WORK/runs"
}

ncu_trt() {
    say "ncu: ttrt_fp16, every kernel of step 2"
    timed timeout 300 "$PY" profile.py ncu --backend ttrt_fp16 --bs 8 "${DIRS[@]}" > "$OUT/ncu_ttrt_fp16.log" 2>&1
    grep -vE "==PROF== Profiling|^(┃|┏|┡|└|│)" "$OUT/ncu_ttrt_fp16.log" | tail -n 12
}

engine() {
    local cache="$WORK/cache"
    say "TensorRT engine build killed with SIGKILL half-way"
    (p run --backend ttrt_fp16 --bs 8 --cache-dir "$cache" "${DIRS[@]}" > "$OUT/build_killed.log" 2>&1;
     echo "exit $?" >> "$OUT/build_killed.log") &
    # the engine is built in the run's prepare phase, which begins after this first line
    for _ in $(seq 120); do grep -q " on NVIDIA" "$OUT/build_killed.log" && break; sleep 0.5; done
    sleep 6
    pkill -9 -f "profile.py run --backend ttrt_fp16"; wait
    tail -n 3 "$OUT/build_killed.log"
    listing "$cache"; listing "$WORK/runs"
    say "the same run again"
    timed p run --backend ttrt_fp16 --bs 8 --cache-dir "$cache" "${DIRS[@]}" 2>&1 | grep -iE "cache|engine|wall|error" | head -n 6
    listing "$cache"
    say "a damaged cache entry (its engine file cut to half)"
    for f in "$cache"/*.ep; do truncate -s $(($(stat -c %s "$f") / 2)) "$f"; done
    timed p run --backend ttrt_fp16 --bs 8 --cache-dir "$cache" "${DIRS[@]}" 2>&1 | grep -iE "cache|damaged|engine|wall|error" | head -n 6
    listing "$WORK/runs"
}

hog() {  # another process holds all but $1 MiB of the GPU's memory until killed
    rm -f /tmp/hog.ready
    "$PY" - "$1" <<'EOF' &
import sys, time, torch
free, _ = torch.cuda.mem_get_info()
hog = torch.empty(free - int(sys.argv[1]) * (1 << 20), dtype=torch.uint8, device="cuda")
open("/tmp/hog.ready", "w").close()
time.sleep(300)
EOF
    HOG=$!
    for _ in $(seq 60); do [ -e /tmp/hog.ready ] && break; sleep 1; done
}

oom() {
    say "a TensorRT engine build out of GPU memory (another process holds all but 1 GiB)"
    hog 1024
    timed p run --backend ttrt_fp16 --bs 32 --no-cache "${DIRS[@]}" 2>&1 | tail -n 3
    kill $HOG; wait $HOG 2>/dev/null
    say "an ONNX Runtime session out of GPU memory: ort_fp16 bs 8 first, then bs 512 with all but 2.5 GiB held"
    timed p run --backend ort_fp16 --bs 8 "${DIRS[@]}" 2>&1 | grep -E "p50|error|wall" | head -n 3
    hog 2560
    timed p run --backend ort_fp16 --bs 512 --iters 5 "${DIRS[@]}" 2>&1 | tail -n 3
    kill $HOG; wait $HOG 2>/dev/null
    listing "$WORK/runs"
}

wait_running() {  # until sweep $1 has a running cell (60 s at most)
    for _ in $(seq 600); do
        "$PY" - "$WORK/runs/$1/sweep.json" <<'EOF' 2>/dev/null && return 0
import json, sys
cells = json.load(open(sys.argv[1]))["cells"].values()
sys.exit(0 if any(c["status"] == "running" for c in cells) else 1)
EOF
        sleep 0.1
    done
    return 1
}

statuses() {  # each cell of sweep $1: status and reason
    "$PY" - "$WORK/runs/$1/sweep.json" <<'EOF'
import json, sys
for name, c in json.load(open(sys.argv[1]))["cells"].items():
    print(f"  {name}: {c['status']} {c.get('reason') or ''}")
EOF
}

ray_paths() {  # the Ray executor on this machine: a task's worker killed, Ctrl-C, the node lost
    local grid=(--backends pytorch_fp32 --bs 1,2 --model tests.tiny_models:slow --iters 30
                --timed-warmup 0 --active 1 --processes 1 --executor ray --ray-address auto)
    PYTHONPATH="$PWD" ray start --head --num-cpus 4 --disable-usage-stats > "$OUT/ray_start.log" 2>&1 || tail -n 5 "$OUT/ray_start.log"
    say "a Ray task's worker killed with SIGKILL while its cell runs"
    (p sweep "${grid[@]}" --name raykill "${DIRS[@]}" > "$OUT/ray_kill.log" 2>&1; echo "exit $?" >> "$OUT/ray_kill.log") &
    wait_running raykill && sleep 2 && pkill -9 -f "ray::" ; wait
    grep -vE "^(┃|┏|┡|└|│)" "$OUT/ray_kill.log" | tail -n 6; statuses raykill
    say "Ctrl-C (SIGINT) to a Ray sweep, then --resume"
    p sweep "${grid[@]}" --name rayint "${DIRS[@]}" > "$OUT/ray_int.log" 2>&1 &
    local sweep=$!
    wait_running rayint && sleep 2 && kill -INT $sweep; wait $sweep; echo "exit $?"
    tail -n 2 "$OUT/ray_int.log"; statuses rayint
    timed p sweep "${grid[@]}" --name rayint --resume "${DIRS[@]}" 2>&1 | tail -n 3; statuses rayint
    say "the node lost: Ray's raylet killed with SIGKILL while a cell runs"
    (p sweep "${grid[@]}" --name raynode "${DIRS[@]}" > "$OUT/ray_node.log" 2>&1; echo "exit $?" >> "$OUT/ray_node.log") &
    wait_running raynode && sleep 2 && pkill -9 -x raylet; wait
    grep -vE "^(┃|┏|┡|└|│)" "$OUT/ray_node.log" | tail -n 6; statuses raynode
    ray stop --force > /dev/null 2>&1
    listing "$WORK/runs"
}

for part in "${@:-untraced}"; do
    "$part"
done
