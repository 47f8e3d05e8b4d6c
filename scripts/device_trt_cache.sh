#!/usr/bin/env bash
# Where a TensorRT engine-cache hit spends its seconds, on the GPU machine (docs/gpu/h200/trt_cache):
#   bash scripts/device_trt_cache.sh
# after the staging calls of ../shared/device/stage-torch-tensorrt.sh. bench_run.py times the
# eager backend twice and ttrt_fp16 twice (a build, then a cache hit) end to end, each with its
# phases; then two more cache hits with every output line stamped, to see how long the process
# takes to end after its last line (and to start before its first), and the import of
# torch_tensorrt alone, timed in a fresh process, with the standard library's module-by-module
# import times (-X importtime) summed for the biggest packages.
source "$(dirname "$0")/device_common.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$PY" -c "import torch, torch_tensorrt; print('torch', torch.__version__, 'torch_tensorrt', torch_tensorrt.__version__)" 2>&1 | grep -v "TRT-LLM\|modelopt"
"$PY" scripts/bench_run.py --work-dir "$WORK" --cached-target 8 2>&1 | tee "$OUT/bench_run.log"
stamp() { while IFS= read -r line; do printf '%s %s\n' "$(date +%s.%N | cut -c1-14)" "$line"; done; }
for i in 1 2; do
    echo "start $(date +%s.%N | cut -c1-14)"
    "$PY" profile.py run --backend ttrt_fp16 --bs 8 --cache-dir "$WORK/cache" "${DIRS[@]}" \
        --replace 2>&1 | stamp | grep -v "TRT-LLM\|modelopt" | tail -4
    echo "end $(date +%s.%N | cut -c1-14)"
done 2>&1 | tee "$OUT/hits_stamped.log"
"$PY" -X importtime -c "import torch" 2> "$OUT/importtime_torch.txt"
began=$(date +%s%N)
"$PY" -X importtime -c "import torch, time; t = time.perf_counter(); import torch_tensorrt; print(f'import torch_tensorrt after torch: {time.perf_counter() - t:.2f} s')" 2> "$OUT/importtime_trt.txt" | tee -a "$OUT/imports.log"
"$PY" - "$OUT/importtime_trt.txt" <<'PY' 2>&1 | tee -a "$OUT/imports.log"
import sys
rows = []
for line in open(sys.argv[1]):
    if line.startswith("import time:") and "|" in line:
        parts = line[len("import time:"):].split("|")
        try:
            rows.append((int(parts[1]), parts[2].rstrip()))
        except ValueError:
            pass
top = sorted((r for r in rows if r[1].strip().count(".") == 0), reverse=True)[:12]
print("cumulative import time of top-level packages (s):")
for us, name in top:
    print(f"  {us / 1e6:6.2f}  {name.strip()}")
PY
