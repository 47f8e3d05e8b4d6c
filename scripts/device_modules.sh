#!/usr/bin/env bash
# Module view traces made by `run --with-stack` on the GPU machine (the `nn.Module: <Name>_<k>`
# python_function events of the profiled steps, linked to kernels through their CPU operators):
# llama-tiny and the 1.24 B llama generate, eager FP16, prefill and decode. Then
# `summarize --view modules` of each (terminal and --json) teed into $OUT, and the runs in ONE tar
# ($OUT/modules_runs.tar). Wheels: msgspec and nvtx in .whl.
source "$(dirname "$0")/device_common.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
"$PY" -c "import torch, transformers, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'python', sys.version.split()[0])" | tee "$OUT/versions.log"
one() {  # one <name> <run arguments...>
    local name=$1
    shift
    say "run $name: profile.py run $*"
    timed p run "$@" --name "$name" "${DIRS[@]}" > "$OUT/$name.log" 2>&1
    tail -n 8 "$OUT/$name.log"
}
one mod_llama_tiny_gen --model llama-tiny --workload generate --backend pytorch_fp16 --bs 2 \
    --prompt-len 32 --max-new-tokens 8 --with-stack --wait 1 --warmup 1 --active 1 --iters 5
one mod_llama_gen --model llama --workload generate --backend pytorch_fp16 --bs 1 \
    --prompt-len 32 --max-new-tokens 4 --with-stack --wait 1 --warmup 1 --active 1 --iters 5
for run in "$WORK"/runs/*_mod_*; do
    name=$(basename "$run")
    say "summarize $name --view modules"
    p summarize "$run" --view modules 2>&1 | tee "$OUT/$name.modules.log" | head -n 60
    p summarize "$run" --view modules --json > "$OUT/$name.modules.json" 2>&1
    p summarize "$run" --view phases > "$OUT/$name.phases.log" 2>&1
done
(cd "$WORK" && tar -cf "$OUT/modules_runs.tar" runs tb_logs)
ls -la "$WORK"/tb_logs/*/
