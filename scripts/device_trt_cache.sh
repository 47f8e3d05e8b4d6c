#!/usr/bin/env bash
# Where a TensorRT engine-cache hit spends its seconds, on the GPU machine (docs/gpu/h200/trt_cache):
#   bash scripts/device_trt_cache.sh
# after the two staging calls of ../shared/device/stage-torch-tensorrt.sh. bench_run.py times the
# eager backend twice and ttrt_fp16 twice (a build, then a cache hit) end to end; then two more
# cache hits run under cProfile (from another folder, so that the standard library's `profile`
# is the one cProfile imports) and the calls that took the most time are printed.
source "$(dirname "$0")/device_common.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$PY" -c "import torch, torch_tensorrt; print('torch', torch.__version__, 'torch_tensorrt', torch_tensorrt.__version__)"
"$PY" scripts/bench_run.py --work-dir "$WORK" --cached-target 8 2>&1 | tee "$OUT/bench_run.log"
here=$(pwd); case "$OUT" in /*) ;; *) OUT="$here/$OUT" ;; esac
for i in 1 2; do
    (cd /tmp && timed "$PY" -m cProfile -o "$OUT/hit$i.prof" "$here/profile.py" run \
        --backend ttrt_fp16 --bs 8 --cache-dir "$WORK/cache" "${DIRS[@]}" --replace -q) \
        2>&1 | tail -3 | tee -a "$OUT/hits.log"
done
"$PY" - "$OUT/hit2.prof" <<'PY' 2>&1 | tee "$OUT/hit2_profile.log"
import pstats, sys
stats = pstats.Stats(sys.argv[1])
stats.sort_stats("cumulative").print_stats(60)
stats.sort_stats("tottime").print_stats(25)
PY
