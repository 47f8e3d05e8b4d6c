#!/usr/bin/env bash
# Memory traces made by `run --profile-memory` on the GPU machine (the allocator's [memory] events
# in the profiled steps) for the memory view's checks against tb_plugin, then the module/snapshot
# fixtures of scripts/device_memory_modules_fixtures.py. Wheels: msgspec and nvtx in .whl.
source "$(dirname "$0")/device_common.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
one() {  # one <name> <run arguments...>
    local name=$1
    shift
    say "run $name: profile.py run $*"
    timed p run "$@" --name "$name" "${DIRS[@]}" > "$OUT/$name.log" 2>&1
    tail -n 8 "$OUT/$name.log"
}
one mem_resnet50_fp16_bs8 --backend pytorch_fp16 --bs 8 --profile-memory --wait 1 --warmup 1 --active 2 --iters 20
one mem_resnet18_fp32_bs4 --model resnet18 --backend pytorch_fp32 --bs 4 --profile-memory --wait 1 --warmup 1 --active 2 --iters 20
one mem_llama_tiny_gen --model llama-tiny --workload generate --backend pytorch_fp16 --bs 2 \
    --prompt-len 32 --max-new-tokens 8 --profile-memory --wait 1 --warmup 1 --active 1 --iters 5
one mem_llama_gen --model llama --workload generate --backend pytorch_fp16 --bs 1 \
    --prompt-len 32 --max-new-tokens 4 --profile-memory --wait 1 --warmup 1 --active 1 --iters 5
(cd "$WORK" && tar -cf "$OUT/mem_runs.tar" runs tb_logs)
ls -la "$WORK"/tb_logs/*/
say "module and snapshot fixtures"
"$PY" scripts/device_memory_modules_fixtures.py 2>&1 | tee "$OUT/fixtures.log" | tail -n 30
