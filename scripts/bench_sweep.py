"""How long does a sweep of the 20-cell matrix take, cold and warm?

Runs `profile.py sweep` twice over the same cells: cold (a fresh TensorRT engine cache through
--cache-dir and a fresh Inductor cache through TORCHINDUCTOR_CACHE_DIR, both in a scratch
folder) and warm (the same caches again, a new sweep name). Prints each sweep's wall seconds
against the issue's targets, then per cell its status, seconds and where it ran (GPU, worker).

    python scripts/bench_sweep.py                        # the matrix, every visible GPU
    python scripts/bench_sweep.py --gpus 0               # on one GPU
    python scripts/bench_sweep.py --isolate              # a fresh process per cell
    python scripts/bench_sweep.py --model tests.tiny_models:conv_net \\
        --backends pytorch_fp32,pytorch_bf16 --bs 1,2 -- --iters 2 --timed-warmup 0 --active 1

Arguments after ``--`` go to both sweeps unchanged (run options such as --iters, --model's
--image-size). The scratch folder (--work, default a new temporary folder) keeps the sweeps'
runs/, tb_logs/ and caches for a look afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MATRIX_BACKENDS = "pytorch_fp32,pytorch_fp16,inductor_fp16,ttrt_fp32,ttrt_fp16"
MATRIX_BS = "1,8,16,32"
TARGETS_S = {"cold": 300, "warm": 120}


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    extra = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1 :]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="--model of the sweeps (default: the run default)")
    parser.add_argument("--backends", default=MATRIX_BACKENDS)
    parser.add_argument("--bs", default=MATRIX_BS)
    parser.add_argument("--gpus", help="passed to sweep --gpus (default: all visible)")
    parser.add_argument("--executor", help="passed to sweep --executor")
    parser.add_argument("--isolate", action="store_true", help="passed to sweep --isolate")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a new temp folder)")
    parser.add_argument(
        "--only",
        choices=("cold", "warm"),
        help="one of the two sweeps (warm: give the --work of a cold one, whose "
        "caches it reuses), e.g. to fit each in a time limit",
    )
    return parser.parse_args(argv), extra


def sweep_command(args, extra: list[str], name: str, work: Path) -> list[str]:
    command = [
        sys.executable,
        str(REPO / "profile.py"),
        "sweep",
        "--backends",
        args.backends,
        "--bs",
        args.bs,
        "--name",
        name,
        "--runs-dir",
        str(work / "runs"),
        "--tb-dir",
        str(work / "tb_logs"),
        "--cache-dir",
        str(work / "engines"),
        "--json",
    ]
    if args.model:
        command += ["--model", args.model]
    if args.gpus:
        command += ["--gpus", args.gpus]
    if args.executor:
        command += ["--executor", args.executor]
    if args.isolate:
        command.append("--isolate")
    return command + extra


def run_sweep(command: list[str], work: Path) -> tuple[float, int]:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(work / "inductor"))
    began = time.perf_counter()
    done = subprocess.run(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    wall = time.perf_counter() - began
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
    return wall, done.returncode


def print_cells(sweep_dir: Path) -> None:
    manifest = json.loads((sweep_dir / "sweep.json").read_text())
    print(f"  {'cell':<40} {'status':<8} {'seconds':>8}  gpu   worker")
    for name, cell in manifest["cells"].items():
        seconds = cell.get("elapsed_s")
        print(
            f"  {name:<40} {cell['status']:<8} "
            f"{'' if seconds is None else f'{seconds:.1f}':>8}  {cell.get('gpu') or '-':<5} "
            f"{cell.get('worker') or '-'}"
        )


def main(argv: list[str]) -> int:
    args, extra = parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    work.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d_%H%M%S")
    print(f"scratch folder: {work}")
    walls, codes = {}, {}
    chosen = (args.only,) if args.only else ("cold", "warm")
    for phase in chosen:
        name = f"bench_{phase}_{stamp}"
        walls[phase], codes[phase] = run_sweep(sweep_command(args, extra, name, work), work)
        print(
            f"{phase}: {walls[phase]:.1f} s (target <= {TARGETS_S[phase]} s), sweep exit "
            f"status {codes[phase]}"
        )
        print_cells(work / "runs" / name)
    for phase in chosen:
        print(f"{phase}: {walls[phase]:.1f} s (target <= {TARGETS_S[phase]} s)")
    return max(codes.values())


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
