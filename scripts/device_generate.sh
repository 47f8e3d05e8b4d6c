#!/usr/bin/env bash
# GPU runs of --workload generate: the translation loop (transformer, encode once, decode token by
# token, 64 new tokens) through pytorch_fp32, pytorch_fp16, inductor_fp16 and ttrt_fp16 (split
# engines) at bs 1 and 8, the decoder-only LM (gpt2) through pytorch_fp16 and inductor_fp16, and
# ttrt_fp16 on gpt2 (expected: one line saying it is not converted). The runs write to $WORK
# (runs/, tb_logs/; default a fresh /tmp/device_generate.XXXXXX). $OUT stays small (well under 12 MB): each
# run's stdout/stderr as $OUT/logs/<run>.log; of each run folder only result.json, latency.csv,
# generation_steps.csv and its *.log files, as $OUT/runs/<run>/ (a failed build's log as
# $OUT/runs/<run>.failed/); the per-phase split (summarize --view phases) as
# $OUT/phases/<run>.txt; and two traces only, the smallest of a transformer run and of a gpt2
# run, as $OUT/traces/<run>/. A failing run is noted and the script goes on; the last thing
# printed is one table of every run.
#
#   OUT=/tmp/out bash scripts/device_generate.sh      # from the repository root, GPU machine
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-out}
WORK=${WORK:-$(mktemp -d /tmp/device_generate.XXXXXX)}
ITERS=${ITERS:-20}
mkdir -p "$OUT/logs" "$OUT/phases"
export TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-4}
COMMON=(--workload generate --iters "$ITERS" --timed-warmup 3 --wait 1 --warmup 1 --active 2
        --runs-dir "$WORK/runs" --tb-dir "$WORK/tb_logs")
failed=()

run() {  # run <log name> <profile.py run arguments...> (runs keep their default names)
    local name=$1
    shift
    echo "=== $name: profile.py run $*"
    local start=$(date +%s)
    if "$PY" profile.py run "$@" "${COMMON[@]}" > "$OUT/logs/$name.log" 2>&1; then
        echo "--- ok in $(( $(date +%s) - start )) s"
    else
        local why
        why=$(grep '^error:' "$OUT/logs/$name.log" | tail -1)
        [ -n "$why" ] || why=$(tail -1 "$OUT/logs/$name.log")
        echo "--- FAILED in $(( $(date +%s) - start )) s: $why"
        failed+=("$name")
    fi
}

for bs in 1 8; do
    for backend in pytorch_fp32 pytorch_fp16 inductor_fp16 ttrt_fp16; do
        run "${backend}_bs${bs}_transformer_gen" --backend "$backend" --bs "$bs" \
            --model transformer --src-len 64 \
            --max-new-tokens 64
    done
done
for bs in 1 8; do
    for backend in pytorch_fp16 inductor_fp16; do
        run "${backend}_bs${bs}_gpt2_gen" --backend "$backend" --bs "$bs" --model gpt2 \
            --prompt-len 128 \
            --max-new-tokens 64
    done
done
run "ttrt_fp16_bs1_gpt2_gen" --backend ttrt_fp16 --bs 1 --model gpt2 --prompt-len 128 --max-new-tokens 64

echo "=== per-phase kernel split"
for folder in "$WORK"/runs/*_gen; do
    [ -f "$folder/result.json" ] || continue
    name=$(basename "$folder")
    "$PY" profile.py summarize "$folder" --view phases --top 12 > "$OUT/phases/$name.txt" 2>&1 \
        || echo "summarize failed for $name (see $OUT/phases/$name.txt)"
    echo "--- $name"
    cat "$OUT/phases/$name.txt"
done
for bs in 1 8; do
    a="$WORK/runs/pytorch_fp16_bs${bs}_transformer_gen"
    b="$WORK/runs/ttrt_fp16_bs${bs}_transformer_gen"
    if [ -f "$a/result.json" ] && [ -f "$b/result.json" ]; then
        "$PY" profile.py compare "$a" "$b" --top 10 > "$OUT/phases/compare_fp16_vs_ttrt_bs$bs.txt" 2>&1
    fi
done

echo "=== Inductor: dynamic=True (what inductor_* runs) vs bucket-padded static shapes"
"$PY" scripts/bench_generate_inductor.py --device cuda --d-model 512 --layers 6 --bs 8 \
    --src-len 64 --new-tokens 64 > "$OUT/logs/bench_generate_inductor.log" 2>&1 \
    || echo "bench_generate_inductor failed (see $OUT/logs/bench_generate_inductor.log)"
grep -E "^(eager|dynamic|padded) " "$OUT/logs/bench_generate_inductor.log"

echo "=== every run (times in ms; token = decode latency per token after the first)"
"$PY" - "$WORK/runs" <<'PYEOF'
import json, sys
from pathlib import Path

def f(value, fmt=".3f"):
    return "-" if value is None else format(value, fmt)

print("| model | backend | bs | TTFT p50 | token mean | token p50 | token p90 | token p99 "
      "| tokens/s | seq p50 | logits rel L2 | enc rel L2 | tokens equal | seqs identical | compile s |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for path in sorted(Path(sys.argv[1]).glob("*/result.json")):
    r = json.loads(path.read_text())
    g, n = r["generation"], r["numerics"]
    tok, enc = n.get("tokens") or {}, n.get("encoder_output") or {}
    logits = (n.get("first_step_logits") or {}).get("rel_l2_error")
    compile_s = r["backend"]["notes"].get("compile_s")
    print(f"| {r['model']} | {r['backend']['name']} | {r['batch_size']} | {f(g['ttft_ms']['p50'])} "
          f"| {f(g['per_token_ms']['mean'])} | {f(g['per_token_ms']['p50'])} "
          f"| {f(g['per_token_ms']['p90'])} | {f(g['per_token_ms']['p99'])} "
          f"| {f(g['tokens_per_s'], '.1f')} | {f(g['sequence_ms']['p50'])} | {f(logits, '.2e')} "
          f"| {f(enc.get('rel_l2_error'), '.2e')} | {f(tok.get('positions_equal'))} "
          f"| {f(tok.get('sequences_identical'))} | {f(compile_s, '.1f')} |")
PYEOF
echo "=== copying the small files to $OUT"
for folder in "$WORK"/runs/*; do
    [ -d "$folder" ] || continue
    dest="$OUT/runs/$(basename "$folder")"
    mkdir -p "$dest"
    for file in "$folder"/result.json "$folder"/latency.csv "$folder"/generation_steps.csv \
                "$folder"/*.log; do
        [ -f "$file" ] && cp "$file" "$dest/"
    done
done
smallest_trace() {  # smallest_trace <model>: the path of the smallest trace of that model's runs
    find "$WORK"/tb_logs -path "*_$1_gen/*" -type f -printf '%s %p\n' 2>/dev/null \
        | sort -n | head -1 | cut -d' ' -f2-
}
for model in transformer gpt2; do
    trace=$(smallest_trace "$model")
    if [ -n "$trace" ]; then
        run_name=$(basename "$(dirname "$trace")")
        mkdir -p "$OUT/traces/$run_name"
        cp "$trace" "$OUT/traces/$run_name/"
        echo "trace kept: $trace ($(stat -c %s "$trace") bytes)"
    fi
done
echo "$OUT holds $(du -sb "$OUT" | cut -f1) bytes"
if [ ${#failed[@]} -gt 0 ]; then
    echo "failed runs: ${failed[*]} (logs in $OUT/logs)"
fi
