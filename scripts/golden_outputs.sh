#!/usr/bin/env bash
# Prints what the analysis commands print on the committed fixtures, one block per command, into
# OUTDIR (one file per command). Run it before and after a change that should not change what users
# see, then `diff -r BEFORE AFTER`. Usage: scripts/golden_outputs.sh OUTDIR [REPO]
set -u
out=${1:?usage: golden_outputs.sh OUTDIR [REPO]}; repo=${2:-$(cd "$(dirname "$0")/.." && pwd)}
mkdir -p "$out"; out=$(cd "$out" && pwd)
F=$repo/tests/fixtures
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
export COLUMNS=160 NO_COLOR=1 TERM=dumb
n=0
run() {  # run NAME ARGS...: the command's stdout, stderr and exit status into OUTDIR/NAME.txt
    local name=$1; shift
    n=$((n + 1))
    { python "$repo/profile.py" "$@"; echo "exit=$?"; } >"$out/$name.txt" 2>&1
    # temporary folders and the repository's own path would differ between two checkouts
    sed -i -e "s#$work#WORK#g" -e "s#$repo#REPO#g" "$out/$name.txt"
}
for r in h200/runs/pytorch_fp16_bs8 h200/runs/ttrt_fp16_bs8 h200/runs/inductor_fp16_bs8 \
         h100_session/runs/pytorch_fp32_bs8 h100_generate/runs/inductor_fp16_bs1_fixture \
         h100_generate/runs/ttrt_fp16_bs1_fixture h200_ncu/runs/ttrt_fp16_bs8; do
    run "summarize_$(echo "$r" | tr / _)" summarize "$F/$r"
    run "summarize_json_$(echo "$r" | tr / _)" summarize "$F/$r" --json
done
run summarize_layers summarize "$F/h200/runs/ttrt_fp16_bs8" --view layers --top 5
run summarize_overview summarize "$F/h200/runs/ttrt_fp16_bs8" --view overview
run summarize_v100 summarize "$F/kineto_tb_plugin/worker0.1623143089861.pt.trace.json.gz"
run compare_h200 compare "$F/h200/runs/pytorch_fp16_bs8" "$F/h200/runs/ttrt_fp16_bs8"
run compare_h200_json compare "$F/h200/runs/pytorch_fp16_bs8" "$F/h200/runs/ttrt_fp16_bs8" --json
run compare_h100 compare "$F/h100_session/runs/pytorch_fp32_bs8" "$F/h100_session/runs/pytorch_fp32_bs8_again"
run compare_gen compare "$F/h100_generate/runs/inductor_fp16_bs1_fixture" "$F/h100_generate/runs/ttrt_fp16_bs1_fixture"
run report_run report "$F/h200/runs/ttrt_fp16_bs8" --out "$work/r1.html"
run report_compare report "$F/h200/runs/pytorch_fp16_bs8" "$F/h200/runs/ttrt_fp16_bs8" --out "$work/r2.html"
for f in r1 r2; do [ -f "$work/$f.html" ] && sed -e 's/data:image\/png;base64,[A-Za-z0-9+\/=]*/PNG/g' \
    -e "s#$work#WORK#g" -e "s#$repo#REPO#g" "$work/$f.html" >"$out/report_$f.html"; done
run sweep_h100_engines summarize "$F/h100_engines/runs/engines_resnet50"
run plot_engines plot "$F/h100_engines/runs/engines_resnet50" --out "$work/plots"
ls "$work/plots" >"$out/plot_files.txt" 2>&1
run backends backends
echo "$n commands into $out"
