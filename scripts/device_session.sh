#!/usr/bin/env bash
# One GPU session's checks of the whole tool, in parts that each fit one device call (10 min).
# From the repository root on the GPU machine; small results land in $OUT (default ./device_out),
# runs and traces in $WORK (default a fresh /tmp folder); each part ends with its figures.
#
#   bash scripts/device_session.sh numbers     # peaks; pytorch_fp32 / ttrt_fp16 bs 8 with the
#                                              # headline, noise, layers; two identical runs
#                                              # compared; the compare report (HTML)
#   bash scripts/device_session.sh generate    # translation loop bs 8: eager fp32/fp16, Inductor,
#                                              # TensorRT split engines; per-phase split; compare
#   bash scripts/device_session.sh lm          # gpt2 bs 1 through eager and Inductor
#   bash scripts/device_session.sh sweep       # ResNet50: 5 backends x bs 1,8,32; sweep report
#   bash scripts/device_session.sh baseline    # end-to-end seconds of an eager and a TensorRT run
#                                              # (miss, then hit) with their phases; an eager FP16
#                                              # trace with stacks, memory and shapes (the seed of
#                                              # scripts/bench_summarize.py's 1 GB trace)
#   BS=1 bash scripts/device_session.sh generate   # the translation loop at another batch size
#   bash scripts/device_session.sh fixtures    # one small generation trace per workload (16 new
#                                              # tokens, one profiled generation)
source "$(dirname "$0")/device_common.sh"
keep() {  # the small files of the runs made (no traces, no engines), as one archive in $OUT
    (cd "$WORK" && find runs -type f -size -2M ! -name "*.pt.trace.json*" ! -name "*.ep" \
        -print0 | tar czf "$OUT/$1.tgz" --null -T -)
}

numbers() {
    say "peaks"; p peaks; p peaks --json > "$OUT/peaks.json"
    say "run pytorch_fp32 bs 8"; p run --backend pytorch_fp32 --bs 8 "${DIRS[@]}" | tail -n 25
    say "run ttrt_fp16 bs 8, 3 timed windows"
    p run --backend ttrt_fp16 --bs 8 --repeat-runs 3 "${DIRS[@]}" | tail -n 25
    say "summarize pytorch_fp32_bs8"; p summarize "$WORK/runs/pytorch_fp32_bs8" --view overview
    say "summarize ttrt_fp16_bs8"; p summarize "$WORK/runs/ttrt_fp16_bs8" --view overview
    say "layers ttrt_fp16_bs8"; p summarize "$WORK/runs/ttrt_fp16_bs8" --view layers --top 12
    say "the same run again"; p run --backend pytorch_fp32 --bs 8 --name again "${DIRS[@]}" > /dev/null
    say "compare two identical runs"
    p compare "$WORK/runs/pytorch_fp32_bs8" "$WORK/runs/pytorch_fp32_bs8_again" --top 3
    say "report pytorch_fp32_bs8 vs ttrt_fp16_bs8"
    p report "$WORK/runs/pytorch_fp32_bs8" "$WORK/runs/ttrt_fp16_bs8" --out "$OUT/compare.html"
    keep numbers
    cp "$WORK"/tb_logs/ttrt_fp16_bs8/*.pt.trace.json.gz "$OUT/" 2>/dev/null
}

generate() {
    local bs=${BS:-8}
    for backend in pytorch_fp32 pytorch_fp16 inductor_fp16 ttrt_fp16; do
        say "generate: transformer $backend bs $bs, 64 new tokens"
        p run --backend "$backend" --bs "$bs" --model transformer --workload generate --src-len 64 \
            --max-new-tokens 64 --iters 20 --timed-warmup 3 --active 2 "${DIRS[@]}" 2>&1 | tail -n 22
    done
    for backend in pytorch_fp16 ttrt_fp16; do
        say "phases: $backend"; p summarize "$WORK/runs/${backend}_bs${bs}_transformer_gen" --view phases --top 8
    done
    say "compare pytorch_fp16 vs ttrt_fp16 (generation)"
    p compare "$WORK/runs/pytorch_fp16_bs${bs}_transformer_gen" "$WORK/runs/ttrt_fp16_bs${bs}_transformer_gen" --top 5
    keep "generate_bs$bs"
}

fixtures() {
    say "fixture: transformer ttrt_fp16 bs 1, 16 new tokens, one profiled generation"
    p run --backend ttrt_fp16 --bs 1 --model transformer --workload generate --src-len 16 \
        --max-new-tokens 16 --iters 10 --timed-warmup 2 --active 1 --name fixture "${DIRS[@]}" 2>&1 | tail -n 8
    say "fixture: gpt2 inductor_fp16 bs 1, prompt 32, 16 new tokens"
    p run --backend inductor_fp16 --bs 1 --model gpt2 --workload generate --prompt-len 32 \
        --max-new-tokens 16 --iters 10 --timed-warmup 2 --active 1 --name fixture "${DIRS[@]}" 2>&1 | tail -n 8
    for run in ttrt_fp16_bs1_fixture inductor_fp16_bs1_fixture; do
        say "phases: $run"; p summarize "$WORK/runs/$run" --view phases --top 6
    done
    keep fixtures  # the run folders; the two traces in one more archive ($OUT holds few files)
    tar czf "$OUT/fixture_traces.tgz" -C "$WORK" tb_logs/ttrt_fp16_bs1_fixture tb_logs/inductor_fp16_bs1_fixture
}

baseline() {
    say "eager ResNet50 bs 8, end to end"
    timed p run --backend pytorch_fp32 --bs 8 "${DIRS[@]}" 2>&1 | grep -E "seconds:|p50|wall:"
    say "ttrt_fp16 bs 8: engine-cache miss, then hit"
    timed p run --backend ttrt_fp16 --bs 8 --name miss "${DIRS[@]}" 2>&1 | grep -E "seconds:|p50|wall:"
    timed p run --backend ttrt_fp16 --bs 8 --name hit "${DIRS[@]}" 2>&1 | grep -E "seconds:|p50|wall:"
    say "eager FP16 bs 8 with stacks, memory and shapes: 10 profiled steps"
    p run --backend pytorch_fp16 --bs 8 --with-stack --profile-memory --record-shapes \
        --wait 1 --warmup 2 --active 10 --repeat 1 --name stacks "${DIRS[@]}" 2>&1 | grep -E "seconds:|trace"
    mkdir -p "$OUT/stacks" && cp "$WORK"/tb_logs/pytorch_fp16_bs8_stacks/*.gz "$OUT/stacks/"
    ls -la "$OUT/stacks"
    keep baseline
}

lm() {
    for backend in pytorch_fp16 inductor_fp16; do
        say "generate: gpt2 $backend bs 1, prompt 128, 64 new tokens"
        p run --backend "$backend" --bs 1 --model gpt2 --workload generate --prompt-len 128 \
            --max-new-tokens 64 --iters 10 --timed-warmup 2 --active 1 "${DIRS[@]}" 2>&1 | tail -n 22
    done
    say "phases: gpt2 inductor_fp16"; p summarize "$WORK/runs/inductor_fp16_bs1_gpt2_gen" --view phases --top 8
    keep lm
}

sweep() {
    say "sweep ResNet50: 5 backends x bs 1,8,32"
    p sweep --backends pytorch_fp32,pytorch_fp16,inductor_fp16,ttrt_fp32,ttrt_fp16 --bs 1,8,32 \
        --name resnet50 --cell-timeout 120 "${DIRS[@]}" 2>&1 | tail -n 30
    bash scripts/device_report.sh "$WORK/runs/resnet50" pytorch_fp32_bs8 ttrt_fp16_bs8 "$OUT" 2>&1 | tail -n 60
    keep sweep
}

case ${1:-} in
    numbers|generate|lm|sweep|baseline|fixtures) "$1" ;;
    *) sed -n 2,20p "$0"; exit 2 ;;
esac
ls -la "$OUT"
