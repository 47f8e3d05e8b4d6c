#!/usr/bin/env bash
# One device call: Nsight Compute ground truth for the Tensor Core name rules, then nsys.
#
#   bash scripts/device_ncu_check.sh            # from the repository root on the GPU machine
#
# For each backend: an ordinary run (kernel table), then the harness under ncu on the top 10
# kernels of step 2 (NVTX-filtered, --clock-control none, at most 200 launches); ncu.csv,
# ncu.json, ncu.ncu-rep and ncu.log land in runs/<backend>_bs8/. ttrt_fp16 needs torch_tensorrt
# installed first (it is skipped with a note otherwise). Then `profile.py nsys` once, and what
# happened. Exit status: 0 when every ncu run succeeded.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export TORCHINDUCTOR_COMPILE_THREADS=1
status=0
for backend in pytorch_fp16 inductor_fp16 ttrt_fp16; do
    echo "=== ncu: $backend bs 8"
    if [ "$backend" = ttrt_fp16 ] && ! "$PY" -c "import torch_tensorrt" 2>/dev/null; then
        echo "skipped: torch_tensorrt is not importable"
        continue
    fi
    start=$(date +%s)
    if "$PY" profile.py ncu --backend "$backend" --bs 8 --top 10 --launch-count 200; then
        echo "--- $backend took $(( $(date +%s) - start )) s; agreement from runs/${backend}_bs8/ncu.json:"
        "$PY" - "$backend" <<'PYEOF'
import json, sys
d = json.load(open(f"runs/{sys.argv[1]}_bs8/ncu.json"))
share = d["agreement_share"]
print(f"  agreement {100 * share:.1f} % of profiled kernel time" if share == share else "  agreement: nothing profiled",
      f"| coverage {100 * d['coverage_of_kernel_time']:.1f} % of kernel time"
      f" | {d['profiled_kernels']} kernels, {d['launches_profiled']} launches")
print("  metrics collected:", ", ".join(d["metrics_collected"]))
print("  metrics skipped:", ", ".join(d["metrics_skipped"]) or "none")
print("  top kernels not seen under ncu:", len(d["top_kernels_not_profiled"]))
for name in d["disagreeing"]:
    print("  disagree:", name[:160])
PYEOF
    else
        echo "--- ncu FAILED for $backend (see runs/${backend}_bs8/ncu.log if written)"
        status=1
    fi
done
echo "=== nsys: pytorch_fp16 bs 8"
"$PY" profile.py nsys --backend pytorch_fp16 --bs 8
echo "nsys exit status $? ; files:"
ls -la runs/pytorch_fp16_bs8_nsys/ 2>/dev/null
exit $status
