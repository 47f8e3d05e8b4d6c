"""How long does `profile.py run` take end to end, and where do the seconds go?

Runs `profile.py run` as a user would (a fresh process each time, wall-clocked from start to exit):
the eager backend twice (caches cold, then warm: FLOP count and nothing else to reuse) and the
compiled backend twice (the first builds its engine and stores the FP32 reference, the second is
the cache hit). Each line gives the run's `seconds:` breakdown (result.json timing.phases_s) and
its p50. Everything goes to a scratch folder (runs, traces and a fresh cache) removed at the end,
unless --work-dir or --cache-dir say otherwise.

    python scripts/bench_run.py                          # GPU: pytorch_fp32 and ttrt_fp16, bs 8
    python scripts/bench_run.py --repo ../main           # the same, for another checkout
    python scripts/bench_run.py --compiled-backend torchscript_fp32 --model resnet18 \\
        --image-size 64 --bs 2 -- --min-time 0.5         # a CPU smoke test
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from profiler.runs import phases  # noqa: E402  (imports no torch)
from profiler.runs.config import run_name  # noqa: E402


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="pytorch_fp32", help="the eager backend")
    parser.add_argument(
        "--compiled-backend",
        default="ttrt_fp16",
        help="the backend whose second run is a cache hit ('' to skip)",
    )
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--bs", type=int, default=8)
    parser.add_argument("--image-size", type=int, default=None)
    parser.add_argument("--eager-target", type=float, default=7.0, help="seconds")
    parser.add_argument("--cached-target", type=float, default=12.0, help="seconds")
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=None,
        help="keep runs/, tb_logs/ and cache/ here (default: a scratch folder)",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="the engine cache to use (default: a fresh one in the work folder)",
    )
    parser.add_argument(
        "--repo",
        type=Path,
        default=REPO,
        help="the checkout whose profile.py runs (another branch: before/after)",
    )
    parser.add_argument("extra", nargs="*", help="more `run` options, after --")
    return parser.parse_args()


def run_once(args: argparse.Namespace, work: Path, backend: str) -> tuple[float, dict | None, str]:
    """Wall seconds of one `profile.py run`, its result (None when it failed) and its stderr."""
    command = [
        sys.executable,
        str(args.repo / "profile.py"),
        "run",
        "--backend",
        backend,
        "--model",
        args.model,
        "--bs",
        str(args.bs),
        "--runs-dir",
        str(work / "runs"),
        "--tb-dir",
        str(work / "tb_logs"),
        "--cache-dir",
        str(args.cache_dir or work / "cache"),
        "--replace",
        "--json",
        *args.extra,
    ]
    if args.image_size:
        command += ["--image-size", str(args.image_size)]
    began = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=args.repo)
    wall_s = time.perf_counter() - began
    if done.returncode != 0:
        return wall_s, None, done.stderr
    try:
        return wall_s, json.loads(done.stdout), done.stderr
    except json.JSONDecodeError:  # a library printed on stdout too: read the run's result.json
        name = run_name(backend, args.bs, args.model)
        return wall_s, json.loads((work / "runs" / name / "result.json").read_text()), done.stderr


def report(
    label: str, wall_s: float, result: dict | None, stderr: str, target: float | None
) -> bool:
    """Print one run's lines; False when it failed."""
    if result is None:
        lines = [line for line in stderr.splitlines() if line.strip()]
        print(f"{label}: FAILED after {wall_s:.1f} s: {lines[-1] if lines else '(no output)'}")
        return False
    verdict = (
        ""
        if target is None
        else f" (target <= {target:g} s: {'met' if wall_s <= target else 'MISSED'})"
    )
    print(f"{label}: {wall_s:.1f} s end to end{verdict}")
    timing, notes = result["timing"], result["backend"].get("notes", {})
    seconds = phases.ordered(timing.get("phases_s") or {})
    for name in ("compile_s", "load_s"):
        if isinstance(notes.get(name), (int, float)):
            seconds[f"of which {name[:-2]}"] = round(notes[name], 3)
    print("  seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in seconds.items()))
    facts = [f"p50 {timing['p50_ms']:.3f} ms over {timing['iters']} iterations"]
    memory = result.get("memory") or {}
    if memory.get("peak_allocated_bytes") is not None:
        facts.append(
            f"peak allocated {memory['peak_allocated_bytes'] / 2**20:.1f} MiB, "
            f"reserved {memory['peak_reserved_bytes'] / 2**20:.1f} MiB"
        )
    numerics = result.get("numerics") or {}
    if numerics.get("rel_l2_error") is not None:
        facts.append(f"rel L2 {numerics['rel_l2_error']:.3g}")
    reference = numerics.get("reference") or {}
    if reference.get("source"):
        facts.append(f"FP32 reference {reference['source']}")
    cache = notes.get("cache")
    if isinstance(cache, dict):
        facts.append(
            "engine cache hit" if cache.get("hit") else f"engine cache miss ({cache.get('reason')})"
        )
    print("  " + "; ".join(facts))
    return True


def main() -> int:
    args = parse_args()
    args.repo = args.repo.resolve()  # the runs start in it
    scratch = None if args.work_dir else tempfile.TemporaryDirectory(prefix="bench-run-")
    work = args.work_dir or Path(scratch.name)
    ok = True
    try:
        what = f"{args.model} bs{args.bs}"
        for label in ("caches cold", "caches warm"):
            ok &= report(
                f"eager {args.backend} {what} run ({label})",
                *run_once(args, work, args.backend),
                args.eager_target,
            )
        if args.compiled_backend:
            backend = args.compiled_backend
            ok &= report(f"{backend} {what} first run", *run_once(args, work, backend), None)
            ok &= report(
                f"{backend} {what} cache hit", *run_once(args, work, backend), args.cached_target
            )
    finally:
        if scratch is not None:
            scratch.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
