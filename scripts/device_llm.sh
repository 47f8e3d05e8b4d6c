#!/usr/bin/env bash
# LLM decode on the GPU machine: the default-size Llama (llama: Llama 3.2 1B's shape, 1.24 B
# parameters, random weights) generating 65 new tokens (the prefill's token, then 64 decode
# steps) after a 128-token prompt, one generation profiled, at bs 1 and 8, under
#   pytorch_fp16 (eager), pytorch_fp16 --cuda-graphs (the decode step replayed from a CUDA
#   graph) and inductor_fp16 --compile-mode reduce-overhead (torch.compile's CUDA graph trees);
# then compare eager vs reduce-overhead at bs 1 in fresh processes (TTFT and TPOT judged apart).
#   PLAN=runs     the six runs; each run's log, result, processes.csv, graph_captures.json and
#                 trace packed under $OUT (runs_<bs>.tar: one per batch size)
#   PLAN=compare  compare --processes $PROCESSES of the bs-1 eager and reduce-overhead runs
#                 (made by PLAN=runs on the same warm machine), its --json, summarize of each
#   PLAN=sweep    a sweep of generations: pytorch_fp16 vs pytorch_bf16 at bs 1 and 8 and
#                 --max-new-tokens 17 and 65, 3 processes a cell (TTFT and TPOT judged apart);
#                 then the bs-1 reduce-overhead run again (the decode window's GPU time)
#   PLAN=recheck  the bs-1 reduce-overhead run alone (its seconds: the decode window's GPU time
#                 without a recompile), then the bs-1 --cuda-graphs run (its capture profiled)
#   PLAN=all      runs and compare
# Wheels: msgspec and nvtx carried in .whl (the device has no registry):
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
source "$(dirname "$0")/device_common.sh"
WORK=${LLM_WORK:-/tmp/device_llm}  # kept between calls on a warm machine
DIRS=(--runs-dir "$WORK/runs" --tb-dir "$WORK/tb_logs")
mkdir -p "$WORK"
PLAN=${PLAN:-all}
PROCESSES=${PROCESSES:-3}
NEW=${NEW:-65}
COMMON=(--model llama --workload generate --prompt-len 128 --max-new-tokens "$NEW" --iters 10
    --timed-warmup 2 --wait 1 --warmup 1 --active 1 "${DIRS[@]}")
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
"$PY" -c "import torch, transformers; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"

one() {  # one <name> <run arguments...>
    local name=$1
    shift
    say "run $name: profile.py run $*"
    timed p run "$@" "${COMMON[@]}" --name "$name" > "$OUT/$name.log" 2>&1
    tail -n 25 "$OUT/$name.log"
}

if [ "$PLAN" = runs ] || [ "$PLAN" = all ]; then
    for bs in 1 8; do
        one "eager_bs$bs" --backend pytorch_fp16 --bs "$bs"
        one "cg_bs$bs" --backend pytorch_fp16 --bs "$bs" --cuda-graphs
        one "ro_bs$bs" --backend inductor_fp16 --bs "$bs" --compile-mode reduce-overhead
        for name in "eager_bs$bs" "cg_bs$bs" "ro_bs$bs"; do
            p summarize "$WORK/runs/pytorch_fp16_bs${bs}_$name" --view phases 2>/dev/null \
                || p summarize "$WORK/runs/inductor_fp16_bs${bs}_$name" --view phases
        done > "$OUT/phases_bs$bs.log" 2>&1
        tail -n 40 "$OUT/phases_bs$bs.log"
        (cd "$WORK" && tar -cf "$OUT/runs_bs$bs.tar" runs/*_bs${bs}_* tb_logs/*_bs${bs}_*)
        cp "$OUT"/*_bs$bs.log "$WORK/" 2>/dev/null
        tar -cf "$OUT/logs_bs$bs.tar" -C "$OUT" $(cd "$OUT" && ls *_bs$bs.log) && rm -f "$OUT"/*_bs$bs.log
    done
fi

if [ "$PLAN" = compare ] || [ "$PLAN" = all ]; then
    A=$WORK/runs/pytorch_fp16_bs1_eager_bs1
    B=$WORK/runs/inductor_fp16_bs1_ro_bs1
    { timed p compare "$A" "$B" --processes "$PROCESSES"; } 2>&1 | tee "$OUT/compare.log" | head -n 80
    p compare "$A" "$B" --json > "$OUT/compare.json" 2>> "$OUT/compare.log"
fi
if [ "$PLAN" = sweep ]; then
    { timed p sweep --model llama --workload generate --backends pytorch_fp16,pytorch_bf16 \
        --bs 1,8 --max-new-tokens 17,65 --prompt-len 128 --iters 10 --timed-warmup 2 \
        --wait 1 --warmup 1 --active 1 --processes 3 --name gen "${DIRS[@]}"
      cat "$WORK/runs/gen/benchmark.md"; } 2>&1 | tee "$OUT/sweep.log" | tail -n 60
    one "ro_bs1" --backend inductor_fp16 --bs 1 --compile-mode reduce-overhead
    grep -h "seconds:\|TPOT (one\|TTFT (prefill" "$OUT/ro_bs1.log"
fi
if [ "$PLAN" = recheck ]; then
    one "ro_bs1" --backend inductor_fp16 --bs 1 --compile-mode reduce-overhead
    one "cg_bs1" --backend pytorch_fp16 --bs 1 --cuda-graphs
    grep -h "^\$ \|seconds:\|TPOT\|TTFT\|graph capture\|attributed" "$OUT/ro_bs1.log" "$OUT/cg_bs1.log"
fi
ls -la "$OUT"
