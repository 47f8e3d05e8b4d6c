#!/usr/bin/env bash
# A real results history on the GPU machine (docs/gpu/h200/history): COMMITS "commits" of one
# config, eager FP16 ResNet50 at batch 8 (scripts/history_model.py, from a git repository this
# script makes), each recorded with `run --history DB --commit cNN` and PROCS processes (the
# run's own window and PROCS - 1 fresh ones, --repeat-runs); at commit CHANGE_AT the model's code
# gains OPS (default 4) elementwise ops (EXTRA_OPS 0 -> OPS, committed). Then `history check` (Markdown, JUnit
# XML), the check as it stood after each commit from CHANGE_AT on (`--until`, replay.log),
# `history confirm` of the change it found with the two commits checked out as working trees,
# and `history check` again. The database and the logs go to $OUT.
#   bash scripts/device_history.sh
#   COMMITS=5 CHANGE_AT=4 PROCS=2 BACKEND=pytorch_fp32 EXTRA_ARGS="--image-size 64 --iters 5" \
#       CONFIRM=2 bash scripts/device_history.sh        # the same path on a CPU, in a few minutes
# `history check` and `confirm` need apache-otava and scipy: wheels carried in .whl/ are
# installed (pip download --no-deps -d .whl apache-otava==0.8.0 scipy, beside this checkout);
# without them the commits are still recorded and the database kept, to check elsewhere.
source "$(dirname "$0")/device_common.sh"
if ls .whl/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --target "$WORK/site" .whl/*.whl
    export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
fi
COMMITS=${COMMITS:-12} CHANGE_AT=${CHANGE_AT:-7} PROCS=${PROCS:-4} CONFIRM=${CONFIRM:-3} OPS=${OPS:-4}
BACKEND=${BACKEND:-pytorch_fp16} EXTRA_ARGS=${EXTRA_ARGS:-}
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
REPO=$WORK/model_repo DB=$WORK/history.sqlite
mkdir -p "$REPO" && cp scripts/history_model.py "$REPO/"
g() { git -C "$REPO" -c user.name=history -c user.email=history@localhost "$@"; }
g init -q && g add history_model.py && g commit -qm "the model" || exit 1
declare -A SHA
began=$(date +%s)
for n in $(seq 1 "$COMMITS"); do
    c=$(printf "c%02d" "$n")
    if [ "$n" -eq "$CHANGE_AT" ]; then
        sed -i "s/^EXTRA_OPS = 0$/EXTRA_OPS = $OPS/" "$REPO/history_model.py"
        g commit -qam "$OPS extra elementwise ops after layer1" || exit 1
    fi
    SHA[$c]=$(g rev-parse HEAD)
    t0=$(date +%s)
    # shellcheck disable=SC2086  # EXTRA_ARGS: several arguments
    env PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" "$PY" profile.py run --backend "$BACKEND" --bs 8 \
        --model history_model:build --repeat-runs "$PROCS" $EXTRA_ARGS "${DIRS[@]}" --name hist \
        --history "$DB" --commit "$c" > "$OUT/run_$c.log" 2>&1 || { tail -5 "$OUT/run_$c.log"; exit 1; }
    echo "=== $c: $(($(date +%s) - t0)) s"
    grep -E "^added|GPU compute p50" "$OUT/run_$c.log"
done
echo "=== $COMMITS commits recorded in $(($(date +%s) - began)) s"
p history list "$DB" | tee "$OUT/list.log"
cp "$DB" "$OUT/history.sqlite"
"$PY" -c "import otava.analysis" 2>/dev/null || { echo "=== no apache-otava here: check $OUT/history.sqlite elsewhere"; exit 0; }
p history check "$DB" --markdown "$OUT/check.md" --junit "$OUT/check.xml" > "$OUT/check.log" 2>&1
echo "=== history check: exit $?"; cat "$OUT/check.log"
for n in $(seq "$CHANGE_AT" "$COMMITS"); do  # the check a CI job ran after each commit, replayed
    c=$(printf "c%02d" "$n")
    p history check "$DB" --until "$c" 2>&1; echo "=== history check --until $c: exit $?"
done > "$OUT/replay.log"
grep "^=== history check --until" "$OUT/replay.log"
before=$(printf "c%02d" $((CHANGE_AT - 1))) after=$(printf "c%02d" "$CHANGE_AT")
g worktree add -q "$WORK/tree_a" "${SHA[$before]}" && g worktree add -q "$WORK/tree_b" "${SHA[$after]}"
timed p history confirm "$DB" --change 1 --a-tree "$WORK/tree_a" --b-tree "$WORK/tree_b" \
    --processes "$CONFIRM" --reach 0 > "$OUT/confirm.log" 2>&1
cat "$OUT/confirm.log"
p history check "$DB" --markdown "$OUT/check_confirmed.md" > "$OUT/check_confirmed.log" 2>&1
echo "=== history check after confirm: exit $?"; cat "$OUT/check_confirmed.log"
cp "$DB" "$OUT/history.sqlite"
