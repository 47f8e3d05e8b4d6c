#!/usr/bin/env bash
# `run --nproc 2` on the GPU machine: tensor-parallel Llama decode over two ranks started by
# torch.distributed's elastic launcher. With two GPUs or more: NCCL, one rank per GPU (llama-tiny,
# then the 1.24 B llama beside a one-GPU run of it), and --nproc 3 refused on a 2-GPU machine
# only when there are exactly 2. With one GPU: the gloo path on this machine's CPU (said so),
# and --nproc 2 refused on the one GPU (NCCL would see "Duplicate GPU detected").
# Logs in $OUT (ranks_*.log), every run folder in one tar ($OUT/ranks_runs.tar), and for each
# run its ranks' traces: rank and world size from distributedInfo, the collectives they hold.
source "$(dirname "$0")/device_common.sh"
GPUS=$(nvidia-smi -L | wc -l)
nvidia-smi -L | tee "$OUT/ranks_gpus.log"
say "GPUs here: $GPUS"

one() {  # one <name> <run arguments...>: a run, its log in $OUT/ranks_<name>.log
    local name=$1
    shift
    say "run $name: profile.py run $*"
    timed p run "$@" --name "$name" "${DIRS[@]}" 2>&1 | tee "$OUT/ranks_$name.log" | tail -n 12
}
refused() {  # refused <name> <run arguments...>: a run that must stop with one error line
    local name=$1
    shift
    say "refused $name: profile.py run $*"
    p run "$@" --name "$name" "${DIRS[@]}" > "$OUT/ranks_$name.log" 2>&1
    echo "exit $? (2 expected): $(grep '^error:' "$OUT/ranks_$name.log")" | tee -a "$OUT/ranks_$name.log"
}
TINY=(--model llama-tiny --workload generate --bs 1 --prompt-len 32 --max-new-tokens 16
    --iters 20 --wait 1 --warmup 1 --active 2)
LLAMA=(--model llama --workload generate --backend pytorch_fp16 --bs 1 --prompt-len 128
    --max-new-tokens 32 --iters 20 --wait 1 --warmup 1 --active 2)

if [ "$GPUS" -ge 2 ]; then
    say "NCCL over 2 of the $GPUS GPUs (one rank per GPU)"
    one tp2_tiny "${TINY[@]}" --backend pytorch_fp16 --nproc 2
    one tp2_llama "${LLAMA[@]}" --nproc 2
    one tp1_llama "${LLAMA[@]}"
    if [ "$GPUS" -eq 2 ]; then
        refused tp3_on_2_gpus "${TINY[@]}" --backend pytorch_fp16 --nproc 3
    fi
else
    say "one GPU: NCCL needs a GPU per rank, so the ranks run with gloo on this machine's CPU" \
        "(CUDA_VISIBLE_DEVICES= hides the GPU)"
    refused tp2_on_1_gpu "${TINY[@]}" --nproc 2
    CUDA_VISIBLE_DEVICES= one tp2_tiny_gloo_cpu "${TINY[@]}" --nproc 2
fi

say "the ranks' traces"
"$PY" - "$WORK" <<'EOF' 2>&1 | tee "$OUT/ranks_traces.log"
import collections, gzip, json, sys
from pathlib import Path

for result_json in sorted(Path(sys.argv[1], "runs").glob("*/result.json")):
    result = json.loads(result_json.read_text())
    ranks = result.get("ranks")
    print(f"{result_json.parent.name}: device {result['device']}, "
          + (f"{ranks['world_size']} ranks, {ranks['backend']}" if ranks else "one process"))
    for figures in (ranks or {}).get("ranks", []):
        print(f"  rank {figures['rank']} on {figures['device']}: p50 {figures['p50_ms']:.3f} ms, "
              f"TTFT p50 {figures['ttft_p50_ms']:.3f} ms, TPOT p50 {figures['tpot_p50_ms']:.3f} ms")
        for trace in figures["trace_files"]:
            with gzip.open(trace) as stream:
                data = json.load(stream)
            info = data.get("distributedInfo", {})
            names = collections.Counter(
                e.get("name", "") for e in data["traceEvents"] if e.get("ph") == "X")
            comm = {n: c for n, c in names.items()
                    if any(w in n.lower() for w in ("all_reduce", "allreduce", "nccl"))}
            print(f"    {Path(trace).name}: distributedInfo rank {info.get('rank')} of "
                  f"{info.get('world_size')} ({info.get('backend')})")
            for name, count in sorted(comm.items(), key=lambda kv: -kv[1])[:6]:
                print(f"      {count:6d}  {name[:110]}")
EOF
(cd "$WORK" && tar -cf "$OUT/ranks_runs.tar" runs tb_logs)
ls -la "$WORK"/tb_logs/*/ | tee "$OUT/ranks_files.log"
