#!/usr/bin/env bash
# What the change-point library of `history check` costs to install: a new virtual environment
# with the torch-free install (`pip install .`), then apache-otava on top (wall time, MiB, what
# it brings and what it changes); and whether MongoDB's signal-processing-algorithms resolves
# beside the dev extra. Writes nothing in the checkout; prints the figures
# (docs/bench/history_install.log is its output).
#
#     bash scripts/measure_history_install.sh [SCRATCH]    # SCRATCH: where the venv goes
set -uo pipefail
cd "$(dirname "$0")/.."
scratch=${1:-$(mktemp -d)}
echo "machine: $(nproc) cores, $(python --version 2>&1), $(date -u +%Y-%m-%d)"
python -m venv "$scratch/venv"
"$scratch/venv/bin/pip" install -q --no-cache-dir . >"$scratch/plain.log" 2>&1
before=$(du -sm "$scratch/venv" | cut -f1)
"$scratch/venv/bin/pip" freeze | sort >"$scratch/before.txt"
echo "plain: environment $before MiB, numpy $("$scratch/venv/bin/python" -c 'import numpy; print(numpy.__version__)')"
began=$SECONDS
"$scratch/venv/bin/pip" install -q --no-cache-dir "apache-otava==0.8.0" >"$scratch/otava.log" 2>&1
echo "otava: pip install apache-otava==0.8.0: exit $?, $((SECONDS - began)) s"
echo "otava: environment $(du -sm "$scratch/venv" | cut -f1) MiB (plain $before MiB)"
"$scratch/venv/bin/pip" freeze | sort >"$scratch/after.txt"
echo "otava: packages added: $(comm -13 "$scratch/before.txt" "$scratch/after.txt" | grep -vcF -f <(sed 's/==.*//' "$scratch/before.txt"))"
echo "otava: packages changed or added:"
comm -13 "$scratch/before.txt" "$scratch/after.txt" | sed 's/^/  /'
"$scratch/venv/bin/python" -c "import time; t=time.perf_counter(); import otava.analysis; print(f'otava: import otava.analysis {time.perf_counter()-t:.2f} s')"
echo "signal-processing-algorithms beside the dev extra (pip install --dry-run):"
pip install --dry-run -e ".[dev]" signal-processing-algorithms >"$scratch/spa.log" 2>&1
echo "  exit $?; $(grep -c '^Collecting signal-processing-algorithms' "$scratch/spa.log") versions tried; last lines:"
grep -E "Requires-Dist|numpy|error:|Cython.Compiler.Errors" "$scratch/spa.log" | tail -4 | sed 's/^/  /'
pip download -q --no-deps -d "$scratch/spa" signal-processing-algorithms >/dev/null 2>&1
tar -xzf "$scratch"/spa/signal_processing_algorithms-*.tar.gz -C "$scratch/spa" 2>/dev/null
grep -E "^(Version|Requires-Python|Requires-Dist: (numpy|gevent|setuptools))" "$scratch"/spa/signal_processing_algorithms-*/PKG-INFO | sed 's/^/  newest: /'
rm -rf "$scratch"
