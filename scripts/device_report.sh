#!/usr/bin/env bash
# On the GPU machine: measure the GPU's ceilings, then the HTML reports of a sweep and of two of
# its runs, and print their roofline figures and advice lines.
#
#   bash scripts/device_report.sh SWEEP_FOLDER RUN_A RUN_B [OUT_FOLDER]
#   e.g. bash scripts/device_report.sh runs/resnet50_h200 pytorch_fp32_bs8 ttrt_fp16_bs8 $OUT
#
# RUN_A and RUN_B are cell names inside SWEEP_FOLDER. The sweep itself is made beforehand, e.g.
#   python3 profile.py sweep --backends pytorch_fp32,pytorch_fp16,inductor_fp16,ttrt_fp32,ttrt_fp16 \
#       --bs 1,8,16,32 --name resnet50_h200
# (its cells record roofline_inputs from this version on). Exit status: non-zero when a step fails.
set -eu
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
sweep=${1:?sweep folder}; a=${2:?run A}; b=${3:?run B}; out=${4:-.}
mkdir -p "$out"

echo "=== peaks (measured once per GPU, cached)"
"$PY" profile.py peaks
"$PY" profile.py peaks --json > "$out/peaks.json"

echo "=== report: sweep $sweep"
"$PY" profile.py report "$sweep" --out "$out/report_sweep.html"
echo "=== report: $a vs $b"
"$PY" profile.py report "$sweep/$a" "$sweep/$b" --out "$out/report_compare.html"
ls -l "$out"/report_*.html
trap 'rm -f "$out/.summary.json"' EXIT

echo "=== roofline and advice per cell"
for cell in "$sweep"/*/; do
    [ -f "$cell/result.json" ] || continue
    echo "--- $(basename "$cell")"
    "$PY" profile.py summarize "$cell" --json 2>/dev/null > "$out/.summary.json"
    "$PY" - "$out/.summary.json" <<'PYEOF'
import json, sys
insight = json.load(open(sys.argv[1])).get("insight") or {}
r = insight.get("roofline")
pct = lambda v: "n/a" if v is None else f"{v:.1f} %"
if r:
    print(f"  {r['achieved_tflops']:.2f} TFLOP/s = {pct(r['pct_of_compute'])} of "
          f"{r['matmul_key']} peak; {r['achieved_gbs']:.1f} GB/s = "
          f"{pct(r['pct_of_bandwidth'])} of bandwidth; {r['intensity']:.0f} FLOP/B; "
          f"{r['bound']}-bound ({insight['ceilings']})")
else:
    print("  no roofline (result.json has no roofline_inputs)")
for a in insight.get("advice", []):
    facts = ", ".join(f"{k} {v}" for k, v in a["evidence"].items())
    print(f"  advice [{a['rule']}] {facts} -> {a['action']}; gain {a['projected_gain']}")
    if a["measured"]:
        print(f"    measured: {a['measured']}")
PYEOF
done
