#!/usr/bin/env bash
# Where a first and a warm eager run's seconds go on the GPU machine (first run <= 10 s, warm
# <= 5 s). Run it first thing on a fresh machine: the first `run` is the one a new user meets
# (no bytecode, no FLOP cache, a cold disk). Logs under $OUT:
#   first.log        the first run, whole, and its `=== wall:` line
#   warm.log         four warm runs: their `seconds:` and `=== wall:` lines; each run's GPU
#                    time window: its sleep and redone iterations
#   importtime.txt   python -X importtime of a warm run
#   compile.log      a fresh bytecode folder with and without the background precompile (disk
#                    warm), `import torch` alone without kept bytecode, the cores
source "$(dirname "$0")/device_common.sh"
RUN=(run --backend pytorch_fp32 --bs 8 "${DIRS[@]}")
{ timed p "${RUN[@]}" --name first; } 2>&1 | tee "$OUT/first.log"
for i in 1 2 3 4; do
    { timed p "${RUN[@]}" --name "warm$i"; } 2>&1 | grep -E "seconds:|=== wall"
done | tee "$OUT/warm.log"
"$PY" - "$WORK"/runs/*/result.json <<'PYEOF' | tee -a "$OUT/warm.log"
import json, sys
for path in sys.argv[1:]:  # the GPU-time window of each run: its sleep and redone iterations
    r = json.load(open(path))
    g = r["timing"].get("gpu_compute") or {}
    print(f"{r['run_name']}: GPU compute {r['timing']['phases_s'].get('gpu_compute')} s, sleep "
          f"{g.get('sleep_ms')} ms, {g.get('invalid_iterations')} redone")
PYEOF
{ timed "$PY" -X importtime profile.py "${RUN[@]}" --name imp >/dev/null; } 2> "$OUT/importtime.txt"
{
    say "fresh bytecode folder, precompile on (disk warm)"
    INFER_PROFILER_CACHE=$WORK/cacheA timed p "${RUN[@]}" --name pre 2>&1 | grep -E "seconds|wall"
    say "fresh bytecode folder, no precompile (a prefix of the user's: left alone)"
    INFER_PROFILER_CACHE=$WORK/cacheB PYTHONPYCACHEPREFIX=$WORK/cacheB/pyc \
        timed p "${RUN[@]}" --name nopre 2>&1 | grep -E "seconds|wall"
    say "import torch alone, no bytecode kept"; timed "$PY" -c "import torch"
    say "cores $(nproc)"
} 2>&1 | tee "$OUT/compile.log"
