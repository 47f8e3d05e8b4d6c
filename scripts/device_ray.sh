#!/usr/bin/env bash
# The ResNet50 5 x 4 matrix (pytorch_fp32, pytorch_fp16, inductor_fp16, ttrt_fp32, ttrt_fp16 at
# bs 1, 8, 16, 32) on a 2-GPU machine, twice: with the local executor (--gpus 0,1 where the
# local executor takes it) and with --executor ray on a Ray head started here on both GPUs
# (`ray start --head --num-gpus 2`, joined with --ray-address auto). Both sweeps use warm
# Inductor and engine caches (a first cold pass fills them, not timed against anything), so
# the two wall times compare the executors, not the compilers. Prints each sweep's wall time
# and, for the Ray sweep, where every cell ran (node, GPU). Sweeps write to $WORK (default a
# fresh /tmp/device_ray.XXXXXX); $OUT gets the sweeps' sweep.json, benchmark.csv/.md and logs.
#
#   OUT=/tmp/out bash scripts/device_ray.sh      # from the repository root, GPU machine
#   N_GPUS=1 BACKENDS=pytorch_fp32,ttrt_fp16 BS=1,8 OUT=/tmp/out bash scripts/device_ray.sh   # one GPU, a smaller matrix
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-out}
WORK=${WORK:-$(mktemp -d /tmp/device_ray.XXXXXX)}
B=${BACKENDS:-pytorch_fp32,pytorch_fp16,inductor_fp16,ttrt_fp32,ttrt_fp16}
BS=${BS:-1,8,16,32}
mkdir -p "$OUT"
export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$WORK/inductor-cache}
export INFER_PROFILER_CACHE=${INFER_PROFILER_CACHE:-$WORK/engines}
# EXTRA: more sweep options (a CPU smoke test: EXTRA="--model tests.tiny_models:conv_net --iters 2")
read -r -a EXTRA_ARGS <<< "${EXTRA:-}"
COMMON=(--backends "$B" --bs "$BS" --cell-timeout 300 --runs-dir "$WORK/runs"
        --tb-dir "$WORK/tb_logs" "${EXTRA_ARGS[@]}")
nvidia-smi --query-gpu=index,name,uuid --format=csv,noheader
"$PY" -c "import ray; print('ray', ray.__version__)" || { echo "no Ray: pip install ray"; exit 1; }

# the local executor takes --gpus once the worker executors are in; before that it runs one
# cell at a time on the first GPU
# N_GPUS (default 2): how many of the machine's GPUs both executors use
N_GPUS=${N_GPUS:-2}
GPUS=()
"$PY" profile.py sweep --help 2>/dev/null | grep -q -- "--gpus" && \
    GPUS=(--gpus "$(seq -s, 0 $((N_GPUS - 1)))")

sweep() {  # sweep <name> <extra options...>
    local name=$1
    shift
    echo "=== sweep $name: $*"
    local start=$(date +%s)
    "$PY" profile.py sweep "${COMMON[@]}" --name "$name" "$@" > "$OUT/$name.log" 2>&1
    local code=$?
    echo "--- $name: exit $code, $(( $(date +%s) - start )) s by the clock; $(grep 'sweep took' "$OUT/$name.log")"
    mkdir -p "$OUT/$name"
    cp "$WORK/runs/$name/sweep.json" "$WORK/runs/$name"/benchmark.* "$OUT/$name/" 2>/dev/null
    cp -r "$WORK/runs/$name/logs" "$OUT/$name/" 2>/dev/null
}

sweep warmup "${GPUS[@]}"                  # fills the Inductor and engine caches
sweep local_executor "${GPUS[@]}"
ray start --head --num-gpus "$N_GPUS" --include-dashboard false > "$OUT/ray_start.log" 2>&1 \
    || { cat "$OUT/ray_start.log"; exit 1; }
sweep ray_executor --executor ray --ray-address auto
ray stop > /dev/null 2>&1

echo "=== placement of the Ray sweep's cells"
"$PY" - "$WORK/runs/ray_executor/sweep.json" <<'PYEOF'
import json, sys
manifest = json.load(open(sys.argv[1]))
print(f"{'cell':34} {'status':8} {'node':16} {'gpu':4} {'seconds':>8}  worker")
for name, cell in manifest["cells"].items():
    print(f"{name:34} {cell['status']:8} {cell.get('node') or '-':16} {cell.get('gpu') or '-':4} "
          f"{cell.get('elapsed_s') or 0:8.1f}  {cell.get('worker') or '-'}")
PYEOF
for name in local_executor ray_executor; do
    "$PY" -c "import json,sys; m=json.load(open(sys.argv[1])); ok=sum(c['status']=='ok' for c in m['cells'].values()); print(f'{sys.argv[2]}: wall {m[\"wall_s\"]:.1f} s, {ok}/{len(m[\"cells\"])} cells ok')" \
        "$WORK/runs/$name/sweep.json" "$name"
done
