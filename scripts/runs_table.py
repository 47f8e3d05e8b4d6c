#!/usr/bin/env python3
"""Print a Markdown table of the runs under runs/ (or the folders given): one row per result.json,
and for generation runs (--workload generate) a second table of their per-token figures.

    python scripts/runs_table.py [runs/pytorch_fp32_bs8 ...]
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from profiler.runs.layout import RESULT_FILE, is_leftover
from profiler.runs.result import read_result


def main(argv: list[str]) -> int:
    folders = [Path(a) for a in argv] or sorted(
        p for p in Path("runs").iterdir() if p.is_dir() and not is_leftover(p)
    )
    rows = []
    for folder in folders:
        path = folder / RESULT_FILE
        if not path.is_file():
            continue
        r = read_result(path)
        t = r.timing
        gpu = (r.environment.gpu or {}).get("name", "CPU")
        rows.append(
            (
                r.model,
                r.backend.name,
                r.batch_size,
                t.mean_ms,
                t.p50_ms,
                t.p90_ms,
                t.p99_ms,
                t.throughput_samples_per_s,
                t.prepare_s + t.first_call_s,
                gpu,
            )
        )
    print(
        "| model | backend | bs | mean ms | p50 ms | p90 ms | p99 ms | samples/s | prepare s "
        "| device |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for m, b, bs, mean, p50, p90, p99, thr, prep, gpu in rows:
        print(
            f"| {m} | {b} | {bs} | {mean:.3f} | {p50:.3f} | {p90:.3f} | {p99:.3f} | {thr:.1f} "
            f"| {prep:.2f} | {gpu} |"
        )
    generation = [read_result(f / RESULT_FILE) for f in folders if (f / RESULT_FILE).is_file()]
    generation = [r for r in generation if r.generation is not None]
    if generation:
        print()
        print_generation(generation)
    return 0 if rows else 1


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _error(comparison) -> str:
    return (
        "-"
        if comparison is None or comparison.rel_l2_error is None
        else f"{comparison.rel_l2_error:.1e}"
    )


def print_generation(results: list) -> None:
    """TTFT, per-token quantiles, tokens/s and the numerics of each generation run."""
    print(
        "| model | backend | bs | new tokens | TTFT p50 ms | token mean ms | token p50 | "
        "token p90 | token p99 | tokens/s | sequence p50 ms | encoder rel L2 | "
        "first-step logits rel L2 | tokens equal | sequences identical |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        g, n = r.generation, r.numerics
        tokens = n.tokens if n else None
        print(
            f"| {r.model} | {r.backend.name} | {r.batch_size} | {g.max_new_tokens} "
            f"| {_ms(g.ttft_ms.p50)} | {_ms(g.per_token_ms.mean)} | {_ms(g.per_token_ms.p50)} "
            f"| {_ms(g.per_token_ms.p90)} | {_ms(g.per_token_ms.p99)} | {g.tokens_per_s:.1f} "
            f"| {_ms(g.sequence_ms.p50)} | {_error(n.encoder_output if n else None)} "
            f"| {_error(n.first_step_logits if n else None)} "
            f"| {_ms(tokens.positions_equal) if tokens else '-'} "
            f"| {_ms(tokens.sequences_identical) if tokens else '-'} |"
        )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
