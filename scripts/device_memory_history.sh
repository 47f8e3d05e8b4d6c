#!/usr/bin/env bash
# Memory snapshots made by `run --memory-history` on the GPU machine (the CUDA caching allocator's
# history over the active steps, torch.cuda.memory._snapshot() pickled in the run folder as
# memory_snapshot.pickle): llama-tiny and the 1.24 B llama generating, eager FP16, and ResNet50
# FP16 bs 8; then `summarize --view snapshot` of each (terminal and --json) and `report`; then
# scripts/device_memory_snapshot_check.py (a snapshot whose peak torch's own counters state).
# Into $OUT: all.log (everything said), versions.log, snapshot_check.{pickle,json}, and ONE tar
# ($OUT/memory_history.tar) of the runs, traces, reports and per-command logs.
# Wheels: msgspec and nvtx in .whl.
source "$(dirname "$0")/device_common.sh"
logged_start
one() {  # one <name> <run arguments...>
    local name=$1
    shift
    say "run $name: profile.py run $*"
    timed p run "$@" --name "$name" "${DIRS[@]}" > "$LOGS/$name.log" 2>&1
    tail -n 12 "$LOGS/$name.log"
}
one mh_llama_tiny_gen --model llama-tiny --workload generate --backend pytorch_fp16 --bs 2 \
    --prompt-len 32 --max-new-tokens 8 --memory-history --profile-memory --wait 1 --warmup 1 \
    --active 1 --iters 5
one mh_llama_gen --model llama --workload generate --backend pytorch_fp16 --bs 1 \
    --prompt-len 32 --max-new-tokens 4 --memory-history --profile-memory --wait 1 --warmup 1 \
    --active 1 --iters 5
one mh_resnet50_fp16_bs8 --backend pytorch_fp16 --bs 8 --memory-history --profile-memory \
    --wait 1 --warmup 1 --active 2 --iters 20
for run in "$WORK"/runs/*_mh_*; do
    name=$(basename "$run")
    ls -la "$run"
    say "snapshot of $name"
    "$PY" - "$run/memory_snapshot.pickle" <<'EOF'
import pickle, sys
with open(sys.argv[1], "rb") as f:
    s = pickle.load(f)
print("keys", sorted(s), "segments", len(s["segments"]), "events per device",
      [len(t) for t in s["device_traces"]])
actions = {}
for t in s["device_traces"]:
    for e in t:
        actions[e["action"]] = actions.get(e["action"], 0) + 1
print("actions", actions)
EOF
    say "summarize $name --view snapshot"
    p summarize "$run" --view snapshot 2>&1 | tee "$LOGS/$name.snapshot.log" | head -n 60
    p summarize "$run" --view snapshot --json > "$LOGS/$name.snapshot.json" 2> "$LOGS/$name.snapshot.json.err"
    head -c 1500 "$LOGS/$name.snapshot.json"; echo
    say "report $name"
    p report "$run" --out "$WORK/reports/report_$name.html" 2>&1 | tee "$LOGS/$name.report.log"
done
say "snapshot check (known sizes, torch's own counters)"
OUT="$OUT" "$PY" scripts/device_memory_snapshot_check.py 2>&1 | tee "$LOGS/snapshot_check.log"
(cd "$WORK" && tar -cf "$OUT/memory_history.tar" runs tb_logs logs reports)
ls -la "$OUT" "$WORK"/tb_logs/*/
