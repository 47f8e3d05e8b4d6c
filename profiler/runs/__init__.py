"""Vocabulary and records: the run configuration, result.json, the sweep manifest, the folder
layout and target resolution. No torch, no rich: every floor above reads runs through here."""

from profiler.runs.layout import (  # noqa: F401
    COMPAT_SUFFIX, LATENCY_CSV, LOOSE_PATTERNS, MANIFEST, NCU_CSV_NAMES, PROCESSES_CSV,
    NOT_TRACES, RESULT_FILE, RUNS_ROOT, TB_ROOT, TRACE_PATTERNS,
    check_separate_roots, compat_dir_for, engine_layer_files, is_leftover, ncu_csv_of,
    traces_in_folder, traces_named_by_result)
from profiler.runs.result import (  # noqa: F401
    RESULT_SCHEMA, BackendFacts, Comparison, ConfigRecord, EngineMemory, Environment, Generation,
    Memory, NoiseStats, Numerics, OutputInfo, Precision, ProfileInfo, Quantiles, Reference,
    RepeatSpread, RooflineInputs, RunResult, Schedule, TargetNoise, TimingStats, TokenAgreement, TraceInfo,
    latency_csv_of, read_result, result_from_dict, result_text, result_to_dict, try_read_result,
    write_result)
from profiler.runs.manifest import (  # noqa: F401
    MANIFEST_SCHEMA, SweepCell, SweepManifest, find_sweep, is_sweep_dir, read_manifest, write_manifest)
from profiler.runs.targets import (  # noqa: F401
    Target, locate, resolve_target, traces_of)
from profiler.runs.destination import (  # noqa: F401
    IDENTITY, check_destination)
