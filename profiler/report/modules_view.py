"""The module view's renderers (profiler/trace/modules.py): the tree of nn.Module calls, the
module types, the repeated blocks' parts per phase, and where the kernel time went; for the
terminal, an HTML page and summary.md. Formatting only."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

from profiler.report import html
from profiler.report.console import FitTable
from profiler.report.export import markdown_table, write_tables
from profiler.report.fmt import count, percent, safe, time
from profiler.trace.modules import SELF_PART, ModuleView

#: what the GPU columns count, said under the tables
GPU_NOTE = (
    "GPU: the kernels, copies and memsets launched by the operators inside the module "
    "(total) or directly in it (self), as the TensorBoard plugin's Device Total and Self"
)


def _ms(value: float) -> str:
    return time(value, "µs", "auto", decimals=2)


def shown_depth(view: ModuleView, top: int) -> int:
    """The deepest level of the tree whose rows, with all above it, fit in ``top`` rows (the
    roots at least); every level with ``top`` 0."""
    depths = view.tree["depth"]
    if not top or len(depths) <= top:
        return int(depths.max()) if len(depths) else 0
    deepest = 0
    for level in range(int(depths.max()) + 1):
        if int((depths <= level).sum()) <= top:
            deepest = level
    return deepest


def tree_table(view: ModuleView, top: int = 0) -> Table:
    deepest = shown_depth(view, top)
    rows = view.tree[view.tree["depth"] <= deepest]
    cut = "" if len(rows) == len(view.tree) else f"; down to depth {deepest}, --top 0: all"
    t = FitTable(title=f"Modules (summed over the profiled steps{cut})")
    t.add_column("module")
    for col in ("calls", "operators", "host total", "host self"):
        t.add_column(col, number=True, optional=col == "operators")
    if view.has_gpu:
        for col in ("GPU total", "GPU self", "share of GPU"):
            t.add_column(col, number=True, optional=col == "share of GPU")
    for r in rows.itertuples():
        cells = [
            "  " * int(r.depth) + safe(r.module),
            count(r.calls),
            count(r.operators),
            _ms(r.host_total_us),
            _ms(r.host_self_us),
        ]
        if view.has_gpu:
            share = 100 * r.gpu_total_us / view.gpu_us if view.gpu_us else None
            cells += [_ms(r.gpu_total_us), _ms(r.gpu_self_us), percent(share)]
        t.add_row(*cells)
    return t


def types_table(view: ModuleView, top: int = 0) -> Table:
    by = "GPU self" if view.has_gpu else "host self"
    t = FitTable(title=f"Module types (all instances, by {by})")
    t.add_column("type")
    for col in ("instances", "calls", "host total", "host self"):
        t.add_column(col, number=True)
    if view.has_gpu:
        t.add_column("GPU total", number=True)
        t.add_column("GPU self", number=True)
    for r in (view.types.head(top) if top else view.types).itertuples():
        cells = [
            safe(r.type),
            count(r.instances),
            count(r.calls),
            _ms(r.host_total_us),
            _ms(r.host_self_us),
        ]
        if view.has_gpu:
            cells += [_ms(r.gpu_total_us), _ms(r.gpu_self_us)]
        t.add_row(*cells)
    return t


def block_shares(view: ModuleView, phase: str) -> pd.DataFrame:
    """One row per repeated block of ``phase``: its time (GPU, or host on a CPU trace) and each
    part's share of it, the parts as columns in the order they run."""
    rows = view.blocks[view.blocks["phase"] == phase]
    figure = "gpu" if view.has_gpu else "host"
    if not len(rows):
        return pd.DataFrame()
    parts = list(dict.fromkeys(rows["part"]))
    parts = [p for p in parts if p != SELF_PART] + [SELF_PART]
    wide = rows.pivot_table(
        index="block", columns="part", values=f"{figure}_share_pct", sort=False
    ).reindex(columns=parts)
    totals = rows.groupby("block", sort=False)[f"{figure}_us"].sum()
    wide.insert(0, f"{figure}_us", totals.reindex(wide.index))
    return wide.reindex(list(dict.fromkeys(rows["block"])))


def blocks_tables(view: ModuleView) -> list[Table]:
    tables: list[Table] = []
    figure = "GPU" if view.has_gpu else "host"
    for phase in dict.fromkeys(view.blocks["phase"]):
        wide = block_shares(view, phase)
        t = FitTable(title=f"{phase}: each block's {figure} time and its parts' shares")
        t.add_column("block")
        for col in wide.columns:
            t.add_column(f"{figure} time" if col.endswith("_us") else safe(col), number=True)
        for block, r in wide.iterrows():
            t.add_row(
                safe(str(block).rsplit("/", 1)[-1]),
                _ms(r.iloc[0]),
                *(percent(v) for v in r.iloc[1:]),
            )
        tables.append(t)
    return tables


def totals_line(view: ModuleView) -> str:
    """Where the kernel time went: inside the modules, outside them, the trace's whole."""
    if not view.has_gpu:
        return (
            f"{count(view.module_calls)} module calls; a CPU trace: no kernel ran, the "
            "figures are host time"
        )
    return (
        f"kernel time: {_ms(view.kernel_in_modules_us)} launched inside modules + "
        f"{_ms(view.kernel_outside_us)} outside every module = {_ms(view.kernel_us)}, the "
        f"operators' total; {count(view.module_calls)} module calls"
    )


def print_modules(view: ModuleView, top: int, console: Console) -> None:
    console.print(tree_table(view, top))
    console.print(types_table(view, top))
    for table in blocks_tables(view):
        console.print(table)
    console.print(totals_line(view), highlight=False)
    if view.has_gpu:
        console.print(f"[dim]{GPU_NOTE}[/]")
    for note in view.notes:
        console.print(f"[yellow]note:[/yellow] {safe(note)}")


_TREE_HTML = ["path", "calls", "operators", "host_total_us", "host_self_us"]
_GPU_HTML = ["gpu_total_us", "gpu_self_us", "kernel_total_us"]


def _tree_frame(view: ModuleView) -> pd.DataFrame:
    columns = _TREE_HTML + (_GPU_HTML if view.has_gpu else [])
    return view.tree[columns]


def html_sections(view: ModuleView, label: str) -> list[html.Section]:
    found = [
        html.Section(
            f"{label}: modules (nn.Module calls, summed over the profiled steps)",
            html.table(_tree_frame(view)) + html.note(totals_line(view)),
        ),
        html.Section(f"{label}: module types", html.table(view.types)),
    ]
    for phase in dict.fromkeys(view.blocks["phase"]):
        found.append(
            html.Section(
                f"{label}: {phase}, each block's parts (% of the block)",
                html.table(block_shares(view, phase).reset_index()),
            )
        )
    return found


def modules_markdown(view: ModuleView, top: int = 0) -> list[str]:
    """summary.md's module sections."""
    deepest = shown_depth(view, top)
    md = [
        "\n## Modules (nn.Module calls)\n",
        markdown_table(_tree_frame(view)[view.tree["depth"] <= deepest]),
    ]
    md += ["", f"- {totals_line(view)}", "\n## Module types\n", markdown_table(view.types)]
    for phase in dict.fromkeys(view.blocks["phase"]):
        md += [
            f"\n## {phase}: each block's parts (% of the block)\n",
            markdown_table(block_shares(view, phase).reset_index()),
        ]
    return md


def write_modules(view: ModuleView, out_dir: Path, top: int = 0) -> list[Path]:
    """--out: the tree, types, phases and blocks as tables (CSV), and modules.md."""
    from profiler.fsutil import write_text_atomic

    frames = {
        "modules": view.tree,
        "module_types": view.types,
        "module_phases": view.phases,
        "module_blocks": view.blocks,
    }
    written = write_tables(out_dir, {k: v for k, v in frames.items() if len(v)})
    md = out_dir / "modules.md"
    write_text_atomic(md, "\n".join(["# Modules", *modules_markdown(view, top)]) + "\n")
    return [*written, md]
