"""One GPU call that exercises the ttrt_* backends end to end and prints what to look at.

    python scripts/trt_device_check.py [--model resnet50] [--bs 8] [--iters 20]

1. What the installed torch_tensorrt offers: flavour, versions, and a hasattr check of every API
   the backend uses (so a missing one shows up here, not as a puzzling run).
2. ttrt_fp32 and ttrt_fp16 twice each, with a fresh cache folder: the first run must build
   (cache miss), the second must load (cache hit).
3. For each run: compile/load time, fallback ops, engine count, layer files present and parsable,
   per-layer timing, numerics against FP32 eager, and the trace files.
Exits 1 when an expectation fails; everything it checks is printed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def api_report() -> None:
    from profiler.collect.backends import tensorrt as ttrt

    print("== installed Torch-TensorRT")
    try:
        flavour = ttrt.detect_flavour()
    except Exception as error:
        print(f"  not usable: {error}")
        return
    print(
        f"  flavour {flavour.name}: {flavour.distribution} {flavour.version}, "
        f"library module {flavour.library_module}"
    )
    import importlib

    import torch
    import torch_tensorrt

    library = importlib.import_module(flavour.library_module)
    print(f"  versions {ttrt.library_versions(flavour, torch, torch_tensorrt, library)}")
    features = getattr(torch_tensorrt, "ENABLED_FEATURES", None)
    print(f"  ENABLED_FEATURES {features}")
    checks = {
        "torch_tensorrt.compile": hasattr(torch_tensorrt, "compile"),
        "torch_tensorrt.save": hasattr(torch_tensorrt, "save"),
        "torch_tensorrt.load": hasattr(torch_tensorrt, "load"),
        "torch_tensorrt.dynamo.Debugger": hasattr(
            getattr(torch_tensorrt, "dynamo", None), "Debugger"
        ),
        "runtime.TorchTensorRTModule.get_layer_info": hasattr(
            getattr(torch_tensorrt.runtime, "TorchTensorRTModule", None), "get_layer_info"
        ),
        "runtime.TorchTensorRTModule.enable_profiling": hasattr(
            getattr(torch_tensorrt.runtime, "TorchTensorRTModule", None), "enable_profiling"
        ),
        "runtime.PythonTorchTensorRTModule.get_layer_info": hasattr(
            getattr(torch_tensorrt.runtime, "PythonTorchTensorRTModule", None), "get_layer_info"
        ),
        f"{flavour.library_module}.ProfilingVerbosity.DETAILED": hasattr(
            getattr(library, "ProfilingVerbosity", None), "DETAILED"
        ),
        f"{flavour.library_module}.BuilderFlag.TF32": hasattr(
            getattr(library, "BuilderFlag", None), "TF32"
        ),
        f"{flavour.library_module}.IProfiler": hasattr(library, "IProfiler"),
        "torch.ops.tensorrt.execute_engine": _has_op("execute_engine"),
    }
    for name, present in checks.items():
        print(f"  {'yes' if present else 'NO '}  {name}")
    import inspect

    for name in ("compile", "save", "load"):
        try:
            print(f"  signature {name}{inspect.signature(getattr(torch_tensorrt, name))}")
        except (TypeError, ValueError, AttributeError) as error:
            print(f"  signature {name}: {error}")
    props = torch.cuda.get_device_properties(0)
    print(f"  GPU {props.name}, compute capability {props.major}.{props.minor}")
    if flavour.name == "tensorrt-rtx" and (props.major, props.minor) not in {
        (7, 5),
        (8, 6),
        (8, 9),
        (12, 0),
        (12, 1),
    }:
        print(
            "  note: TensorRT-RTX's support matrix lists compute capabilities 7.5, 8.6, 8.9 and "
            "12.x; this GPU is not among them, so a build failure here is expected"
        )


def _has_op(name: str) -> bool:
    import torch

    try:
        return hasattr(torch.ops.tensorrt, name)
    except Exception:
        return False


def run(backend: str, args, cache_dir: Path, workdir: Path) -> tuple[int, dict | None, str]:
    command = [
        sys.executable,
        str(ROOT / "profile.py"),
        "run",
        "--backend",
        backend,
        "--model",
        args.model,
        "--bs",
        str(args.bs),
        "--iters",
        str(args.iters),
        "--timed-warmup",
        "5",
        "--runs-dir",
        str(workdir / "runs"),
        "--tb-dir",
        str(workdir / "tb_logs"),
        "--cache-dir",
        str(cache_dir),
        "--json",
    ]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    from profiler.runs.result import result_from_dict

    result = (
        result_from_dict(json.loads(done.stdout), "run --json")
        if done.returncode == 0 and done.stdout.strip()
        else None
    )
    return done.returncode, result, done.stderr


def check_run(label: str, result, expect_hit: bool, run_dir: Path) -> list[str]:
    problems = []
    notes, timing = result.backend.extra, result.timing
    cache = notes.get("cache", {})
    print(f"== {label}")
    print(
        f"  p50 {timing.p50_ms:.3f} ms, prepare {timing.prepare_s:.2f} s, "
        f"first call {timing.first_call_s:.2f} s, compile_s {result.backend.compile_s}, "
        f"load_s {result.backend.cache_load_s}"
    )
    print(f"  cache {cache}")
    print(f"  flavour {notes.get('flavour')} versions {notes.get('versions')}")
    print(
        f"  engines {notes.get('engine_count')}, verbosity {notes.get('profiling_verbosity')}, "
        f"fallback ops {notes.get('fallback_ops')}"
    )
    print(f"  layer timing {notes.get('layer_timing')}")
    print(f"  warnings {result.backend.warnings}")
    print(f"  numerics {result.numerics}")
    print(f"  artifacts {result.backend.artifacts}")
    if cache.get("hit") is not expect_hit:
        problems.append(f"{label}: expected cache hit={expect_hit}, got {cache}")
    if not notes.get("engine_count"):
        problems.append(f"{label}: no TensorRT engine found in the compiled module")
    for name in notes.get("layer_files", []):
        try:
            layers = json.loads((run_dir / name).read_text())
            print(
                f"  {name}: {len(layers.get('Layers', []))} layers, first "
                f"{str(layers.get('Layers', [''])[0])[:160]}"
            )
        except (OSError, ValueError, AttributeError) as error:
            problems.append(f"{label}: {name} unreadable ({error})")
    if not notes.get("layer_files"):
        problems.append(f"{label}: no engine_layers_*.json written")
    if not isinstance(notes.get("layer_timing"), dict):
        problems.append(f"{label}: no per-layer timing ({notes.get('layer_timing')})")
    numerics = result.numerics
    if numerics is None or not numerics.finite:
        problems.append(f"{label}: numerics not finite: {numerics}")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--bs", type=int, default=8)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()
    api_report()
    problems = []
    with tempfile.TemporaryDirectory(prefix="trt-device-check-") as scratch:
        workdir = Path(scratch)
        cache_dir = workdir / "engines"
        for backend in ("ttrt_fp32", "ttrt_fp16"):
            for attempt, expect_hit in ((1, False), (2, True)):
                code, result, stderr = run(backend, args, cache_dir, workdir)
                label = f"{backend} bs{args.bs} run {attempt}"
                if result is None:
                    print(f"== {label}: exit {code}\n{stderr[-4000:]}")
                    failed = sorted((workdir / "runs").glob("*.failed/*"))
                    for log in failed:
                        print(f"--- {log} (tail)\n" + "\n".join(log.read_text().splitlines()[-60:]))
                    problems.append(f"{label}: exit {code}")
                    break
                run_dir = workdir / "runs" / f"{backend}_bs{args.bs}"
                problems += check_run(label, result, expect_hit, run_dir)
        print(
            f"== cache folder: {sorted(p.name for p in cache_dir.glob('*'))}"
            if cache_dir.exists()
            else "== no cache folder"
        )
    print("== problems" if problems else "== all expectations met")
    for problem in problems:
        print(f"  {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
