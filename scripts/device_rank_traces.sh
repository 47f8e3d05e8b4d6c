#!/usr/bin/env bash
# Rank folders on the GPU machine: `run --nproc 2` (NCCL, one rank per GPU; needs two GPUs) of
# llama-tiny and of the 1.24 B llama, then what summarize, compare and report make of them: each
# rank's figures, the TensorBoard plugin's Distributed view beside this tool's
# (scripts/plugin_distributed.py, exit 1 where they differ), the straggler, the two runs compared.
# Logs in $OUT (rank_traces_*.log, summarize --json documents), the runs in one tar
# ($OUT/rank_traces_runs.tar, to commit as fixtures where small enough).
source "$(dirname "$0")/device_common.sh"
GPUS=$(nvidia-smi -L | wc -l)
say "GPUs here: $GPUS"
if [ "$GPUS" -lt 2 ]; then
    say "fewer than two GPUs: NCCL needs one GPU per rank; nothing to do"
    exit 0
fi
export COLUMNS=130
COMMON=(--workload generate --backend pytorch_fp16 --bs 1 --max-new-tokens 32 --iters 20
    --wait 1 --warmup 1 --active 3 --nproc 2)
for model in llama-tiny llama; do
    say "run tp2_$model"
    timed p run --model "$model" --prompt-len 128 "${COMMON[@]}" --name "tp2_$model" "${DIRS[@]}" \
        2>&1 | tee "$OUT/rank_traces_run_$model.log" | tail -n 6
    say "summarize tp2_$model"
    p summarize "$WORK/runs/tp2_$model" 2>&1 | tee "$OUT/rank_traces_summarize_$model.log"
    p summarize "$WORK/runs/tp2_$model" --json > "$OUT/rank_traces_summarize_$model.json"
    p summarize "$WORK/runs/tp2_$model" --out "$OUT/rank_traces_out_$model" > /dev/null
    say "the plugin's Distributed view beside this tool's, tp2_$model"
    "$PY" scripts/plugin_distributed.py "$WORK"/tb_logs/"tp2_$model"/*.pt.trace.json* 2>&1 |
        tee "$OUT/rank_traces_plugin_$model.log"
    echo "exit ${PIPESTATUS[0]} (0: equal on every step)" | tee -a "$OUT/rank_traces_plugin_$model.log"
done
say "compare tp2_llama-tiny tp2_llama"
p compare "$WORK/runs/tp2_llama-tiny" "$WORK/runs/tp2_llama" 2>&1 |
    tee "$OUT/rank_traces_compare.log"
p report "$WORK/runs/tp2_llama" --out "$OUT/rank_traces_report.html" 2>&1 | tail -n 2
(cd "$WORK" && tar -cf "$OUT/rank_traces_runs.tar" runs tb_logs)
ls -la "$WORK"/tb_logs/*/ | tee "$OUT/rank_traces_files.log"
