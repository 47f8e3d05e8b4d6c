#!/usr/bin/env bash
# What README's set-up costs on a fresh machine: the wall time and disk of `pip install -e
# ".[dev]"` in a new virtual environment, the heaviest packages it brings, and the torch-free
# install (summarize, compare, report) for comparison. Writes nothing in the checkout; prints
# the figures (docs/cpu/install.log is its output).
#
#     bash scripts/measure_install.sh [SCRATCH]    # SCRATCH: where the venvs go (default: mktemp)
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=${1:-$(mktemp -d)}
packages() { "$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
measure() {  # measure NAME PIP-ARGS...: a new venv, the install timed, its size
    local name=$1
    shift
    python -m venv "$scratch/$name"
    local began=$SECONDS
    "$scratch/$name/bin/pip" install -q --no-cache-dir "$@" >"$scratch/$name.pip.log" 2>&1
    echo "$name: pip install $*: $((SECONDS - began)) s"
    echo "$name: environment $(du -sm "$scratch/$name" | cut -f1) MiB"
}
echo "machine: $(nproc) cores, $(python --version 2>&1), $(date -u +%Y-%m-%d)"
measure plain .
measure dev -e ".[dev]"
site=$(packages "$scratch/dev")
echo "dev: the largest packages (MiB):"
du -sm "$site"/* | sort -rn | head -12 | sed "s|$site/||"
cuda=$(du -smc "$site"/nvidia* "$site"/triton* 2>/dev/null | tail -1 | cut -f1)
echo "dev: CUDA libraries (nvidia-*, triton) ${cuda} MiB"
"$scratch/dev/bin/python" -c "import torch; print('dev: torch', torch.__version__)"
rm -rf "$scratch"
