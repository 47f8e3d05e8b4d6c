#!/usr/bin/env bash
# The typed records, the sentences and the section registry on the GPU machine: a sweep whose
# worker runs eager and Inductor cells back to back (the reset between cells imports Dynamo only
# where a cell did), its table and verdict notes, one compare, summarize --json and the three
# HTML report pages. Logs under $OUT:
#   sweep.log       the sweep's table as printed, benchmark.md, each cell's run seconds
#   compare.log     compare of two cells: both verdicts, the notes, why they differ
#   json.log        the $schema and the typed fields of sweep/compare/summarize --json
#   *.html          the run, compare and sweep pages
source "$(dirname "$0")/device_common.sh"
S=(sweep --backends pytorch_fp16,inductor_fp16,pytorch_fp32 --bs 1,8 --name s "${DIRS[@]}")
{ timed p "${S[@]}"; cat "$WORK/runs/s/benchmark.md"; } 2>&1 | tee "$OUT/sweep.log"
A=$WORK/runs/s/pytorch_fp16_bs8
B=$WORK/runs/s/inductor_fp16_bs8
{ timed p compare "$A" "$B"; } 2>&1 | tee "$OUT/compare.log"
{
    p "${S[@]}" --resume --json | "$PY" -c "import json,sys; d=json.load(sys.stdin); \
c=d['cells'][0]; print(d['\$schema'], sorted(c)[:8], c.get('verdicts') and sorted(c['verdicts']))"
    p compare "$A" "$B" --json | "$PY" -c "import json,sys; d=json.load(sys.stdin); \
t=(d.get('timed') or {}).get('verdicts') or {}; print(d['\$schema'], t.get('lead'), \
t.get('bound_a'), (t.get('latency') or {}).get('verdict'), (t.get('gpu_time') or {}).get('verdict'))"
    p summarize "$B" --json | "$PY" -c "import json,sys; d=json.load(sys.stdin); \
print(d['\$schema'], d['headline']['gpu_state'])"
} 2>&1 | tee "$OUT/json.log"
p report "$A" --out "$OUT/run.html"
p report "$A" "$B" --out "$OUT/compare.html"
p report "$WORK/runs/s" --out "$OUT/sweep.html"
ls -la "$OUT"
