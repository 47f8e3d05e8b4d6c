# Sourced by the scripts/device_*.sh (never run alone): the repository root as the working folder,
# the python, where logs ($OUT, default ./device_out) and runs ($WORK, default a fresh /tmp folder
# named after the script) go, and the helpers they share.
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
OUT=${OUT:-device_out}
WORK=${WORK:-$(mktemp -d "/tmp/$(basename "${BASH_SOURCE[1]:-device}" .sh).XXXXXX")}
mkdir -p "$OUT" "$WORK"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=${TORCHINDUCTOR_COMPILE_THREADS:-8}
DIRS=(--runs-dir "$WORK/runs" --tb-dir "$WORK/tb_logs")

say() { echo "=== $*"; }
p() { "$PY" profile.py "$@"; }
timed() {  # wall seconds of one command, end to end
    local began=$(date +%s%N); "$@"; local code=$? ms=$((($(date +%s%N) - began) / 1000000))
    echo "=== wall: $((ms / 1000)).$(printf %03d $((ms % 1000))) s (exit $code) for: ${*:2:6}"
    return $code
}
logged_start() {  # everything said from here into $OUT/all.log; the GPU and versions first
    LOGS="$WORK/logs"
    mkdir -p "$LOGS" "$WORK/reports"
    exec > >(tee -a "$OUT/all.log") 2>&1
    nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
    "$PY" -c "import torch, transformers, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__, 'python', sys.version.split()[0])" | tee "$OUT/versions.log"
}
