"""`history check` and `history confirm` drawn: one line per change point on the terminal with
the kernels behind it, the gate's lines, the Markdown summary (GitHub's step summary) and JUnit
XML (one test case per config series, a failure per change the gate fails on)."""

from __future__ import annotations

from typing import TYPE_CHECKING
from xml.sax.saxutils import escape as xml_escape, quoteattr

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from profiler import units
from profiler.analysis.history_records import ChangePoint, HistoryCheck, KernelShift
from profiler.analysis.records import TimedVerdicts, Verdict
from profiler.report.compare_view import verdict_line
from profiler.report.console import print_prose

if TYPE_CHECKING:
    from profiler.analysis.change_points import Gate

FIGURE_WORDS = {"gpu_time": "GPU time", "latency": "latency"}
MOVED_WORDS = {"gpu_time": "GPU time", "latency": "latency", "both": "GPU time and latency"}
#: kernels and categories named in one change's line (all in its table and the Markdown)
NAMED = 2


def size(v: Verdict | None) -> str:
    """A figure's change after/before with its 95 % interval and verdict: ``+3.1 % [+2.4 %,
    +3.8 %] slower``."""
    if v is None:
        return "not measured"
    return (
        f"{units.percent(100 * (v.ratio - 1), sign=True)} "
        f"[{units.percent(100 * (v.low - 1), sign=True)}, "
        f"{units.percent(100 * (v.high - 1), sign=True)}] {v.verdict}"
    )


def shift_words(s: KernelShift) -> str:
    """``convolution +25.1 µs/step (spread 3.2 µs)``."""
    sign = "+" if s.delta_us >= 0 else "-"
    return (
        f"{s.label} {sign}{units.time(abs(s.delta_us), 'µs', 'auto', 2)}/step "
        f"(spread {units.time(s.spread_us, 'µs', 'auto', 2)})"
    )


def change_line(c: ChangePoint) -> str:
    """One change in one line: where, what moved, both sizes, the gate's view and its cause."""
    status: list[str] = [c.confirmed]
    if c.gated and c.regression and c.confirmed != "refuted":
        status.insert(0, "REGRESSION")
    elif c.regression:
        status.insert(0, "regression (outside the gate's window)")
    causes = [shift_words(s) for s in c.categories[:NAMED]]
    return (
        f"change {c.number}: {c.config}: {c.commit_before} -> {c.commit_after} "
        f"({c.commits_before} commit(s) before, {c.commits_after} after); moved: "
        f"{MOVED_WORDS[c.moved]}; GPU time {size(c.gpu_time)}; latency {size(c.latency)}; "
        f"{', '.join(status)}" + (f"; categories: {'; '.join(causes)}" if causes else "")
    )


def gate_lines(report: HistoryCheck, gate: Gate) -> list[str]:
    """The gate's answer: one line per change it fails on, or one line saying none did."""
    where = (
        f"after commit {gate.since}"
        if gate.since is not None
        else f"among each series' last {gate.recent} commits"
    )
    allowed = f"beyond {units.plain(report.max_slowdown_pct)} % on {FIGURE_WORDS[report.figure]}"
    failing = [c for c in report.changes if c.number in report.failing]
    if not failing:
        return [f"gate: no regression {allowed} {where}"]
    return [
        f"gate: change {c.number} is a regression {allowed} ({c.config}, {c.commit_before} -> "
        f"{c.commit_after}: {size(c.verdict(report.figure))}, {c.confirmed})"
        for c in failing
    ]


def shift_table(title: str, shifts: list[KernelShift]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("name", "category", "before/step", "after/step", "delta", "spread", "calls"):
        table.add_column(column, justify="left" if column in ("name", "category") else "right")
    for s in shifts:
        table.add_row(
            escape(s.label),
            escape(s.category or ""),
            units.time(s.before_us, "µs", "auto", decimals=2),
            units.time(s.after_us, "µs", "auto", decimals=2),
            ("+" if s.delta_us >= 0 else "-")
            + units.time(abs(s.delta_us), "µs", "auto", decimals=2),
            units.time(s.spread_us, "µs", "auto", decimals=2),
            f"{units.count(s.before_calls, 1)} -> {units.count(s.after_calls, 1)}",
        )
    return table


def print_check(report: HistoryCheck, gate: Gate, console: Console) -> None:
    """Each series in one line, each change in one line with its categories and kernels."""
    for s in report.series:
        found = [c for c in report.changes if c.config == s.config]
        console.print(
            escape(
                f"{s.config}: {s.commits} commit(s), {s.records} record(s), "
                f"{s.first_commit} .. {s.last_commit}: "
                + (s.skipped or f"{len(found)} change point(s)")
            ),
            soft_wrap=True,
        )
    for c in report.changes:
        print_prose(console, escape(change_line(c)))
        for title, shifts in (("categories", c.categories), ("kernels", c.kernels)):
            if shifts:
                console.print(shift_table(f"change {c.number}: {title} per profiled step", shifts))


def markdown(report: HistoryCheck, gate: Gate) -> str:
    """The Markdown summary: the gate's answer, a table of the changes, each change's kernels."""
    lines = ["## Performance history", ""]
    lines += [f"- {line}" for line in gate_lines(report, gate)]
    lines += [
        f"- {len(report.series)} series, {len(report.changes)} change point(s); method: "
        f"{report.method}",
        "",
    ]
    if report.changes:
        lines += [
            "| # | config | commits | moved | GPU time | latency | status |",
            "|---|---|---|---|---|---|---|",
        ]
        for c in report.changes:
            status: str = c.confirmed
            if c.number in report.failing:
                status = f"**regression**, {status}"
            lines.append(
                f"| {c.number} | {_md(c.config)} | `{_md(c.commit_before)}` -> "
                f"`{_md(c.commit_after)}` | {MOVED_WORDS[c.moved]} | {size(c.gpu_time)} | "
                f"{size(c.latency)} | {status} |"
            )
        for c in report.changes:
            shifts = [*(("category", s) for s in c.categories), *(("kernel", s) for s in c.kernels)]
            if not shifts:
                continue
            lines += [
                "",
                f"### Change {c.number}: what moved per profiled step",
                "",
                "| kind | name | before | after | delta | spread |",
                "|---|---|---|---|---|---|",
            ]
            for kind, s in shifts:
                lines.append(
                    f"| {kind} | {_md(s.label)} | {units.time(s.before_us, 'µs', 'auto', 2)} | "
                    f"{units.time(s.after_us, 'µs', 'auto', 2)} | {'+' if s.delta_us >= 0 else '-'}"
                    f"{units.time(abs(s.delta_us), 'µs', 'auto', 2)} | "
                    f"{units.time(s.spread_us, 'µs', 'auto', 2)} |"
                )
    skipped = [s for s in report.series if s.skipped]
    if skipped:
        lines += ["", *(f"- {_md(s.config)}: {s.skipped}" for s in skipped)]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    """Text for a Markdown table cell: its pipes and newlines escaped."""
    return text.replace("|", "\\|").replace("\n", " ")


def junit(report: HistoryCheck, gate: Gate) -> str:
    """JUnit XML: one test case per series, failed by each change the gate fails on."""
    cases = []
    failures = 0
    for s in report.series:
        bad = [c for c in report.changes if c.config == s.config and c.number in report.failing]
        failures += bool(bad)
        body = "".join(
            f'<failure message={quoteattr(line)} type="regression">'
            f"{xml_escape(change_line(c))}</failure>"
            for c, line in (
                (c, gate_line) for c in bad for gate_line in _gate_line_of(report, gate, c)
            )
        )
        skipped = f"<skipped message={quoteattr(s.skipped)}/>" if s.skipped else ""
        cases.append(
            f'  <testcase classname="history" name={quoteattr(s.config)}>{body}{skipped}</testcase>'
        )
    head = (
        f'<testsuite name="history check" tests="{len(report.series)}" '
        f'failures="{failures}" errors="0">'
    )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        + "\n".join([head, *cases, "</testsuite>"])
        + "\n"
    )


def _gate_line_of(report: HistoryCheck, gate: Gate, change: ChangePoint) -> list[str]:
    return [
        line
        for line in gate_lines(report, gate)
        if line.startswith(f"gate: change {change.number} ")
    ]


def print_confirmation(
    change: ChangePoint, a: str, b: str, verdicts: TimedVerdicts, console: Console
) -> None:
    """Both verdicts of the re-timed commits, and what they make of the change."""
    console.print(escape(f"change {change.number}: {change.config}: B = {b} against A = {a}"))
    for v in (verdicts.gpu_time, verdicts.latency):
        if v is not None:
            print_prose(console, verdict_line(v))
