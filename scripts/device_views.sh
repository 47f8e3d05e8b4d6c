#!/usr/bin/env bash
# The memory, module and snapshot views end to end on the GPU machine, from one run: llama-tiny
# generating (eager FP16, bs 2) recorded with --profile-memory, --memory-history and --with-stack,
# then `summarize --view memory|modules|snapshot` of it (terminal and --json) and `report`; then
# scripts/device_memory_snapshot_check.py (a snapshot whose peak torch's own counters state,
# kept as a fixture: tests/fixtures/snapshot_check_h200).
# Into $OUT: all.log (everything said), versions.log, snapshot_check.{pickle,json}, and ONE tar
# ($OUT/views.tar) of the run, its trace, the report and the per-command logs.
# Wheels: msgspec and nvtx in .whl. BACKEND=pytorch_fp32 tries it on a CPU.
source "$(dirname "$0")/device_common.sh"
logged_start
name=views_llama_tiny_gen
say "run $name"
timed p run --model llama-tiny --workload generate --backend "${BACKEND:-pytorch_fp16}" --bs 2 --prompt-len 32 \
    --max-new-tokens 8 --profile-memory --memory-history --with-stack --wait 1 --warmup 1 \
    --active 1 --iters 5 --name "$name" "${DIRS[@]}" 2>&1 | tee "$LOGS/$name.log" | tail -n 14
run=$(ls -d "$WORK"/runs/*_"$name" 2> /dev/null)
[ -n "$run" ] || { say "no run folder: stopping"; exit 1; }
for view in memory modules snapshot; do
    say "summarize --view $view"
    p summarize "$run" --view "$view" --top 8 2>&1 | tee "$LOGS/$view.log" | head -n 45
    p summarize "$run" --view "$view" --top 8 --json > "$LOGS/$view.json" 2> "$LOGS/$view.json.err"
    echo "--json: exit $?, $(wc -c < "$LOGS/$view.json") bytes, $(head -c 120 "$LOGS/$view.json" | tr '\n' ' ')"
done
say "report"
p report "$run" --out "$WORK/reports/$name.html" 2>&1 | tee "$LOGS/report.log"
grep -o "<h2[^>]*>[^<]*</h2>" "$WORK/reports/$name.html" | head -n 40
say "snapshot check (known sizes, torch's own counters)"
OUT="$OUT" "$PY" scripts/device_memory_snapshot_check.py 2>&1 | tee "$LOGS/snapshot_check.log"
(cd "$WORK" && tar -cf "$OUT/views.tar" runs tb_logs logs reports)
ls -la "$OUT"
