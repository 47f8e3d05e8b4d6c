"""Nsight Compute measurements beside the kernel table: hardware ground truth for the name rules.

``ncu --csv --page raw`` prints one row per profiled kernel launch: identification columns
(``ID``, ``Kernel Name``, ``Block Size``, ...) and one column per collected metric, named as the
metric is (``sm__warps_active.avg.pct_of_peak_sustained_active``); the second row holds the
units (empty for the identification columns). ``parse_ncu_csv`` reads that layout,
``hardware_table`` maps the metrics to our columns, ``hardware_join`` adds them to a kernel table,
and ``agreement_share`` says how much kernel time the Tensor Core name rules got right.

Why tensor-pipe *activity* and not instruction counts: on an H200,
``sm__inst_executed_pipe_tensor_op_hmma`` is non-zero for FP16 elementwise kernels (HFMA2.MMA)
and FP32 CUDA-core convolutions show a few thousand; tensor-pipe cycles active as a share of the
peak separates real Tensor Core GEMM/convolution kernels (>= 5 %) from the rest (<= 2 %).
"""

from __future__ import annotations

import csv
import gzip
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from profiler.errors import UserError
from profiler.trace.rules import NO, UNKNOWN, YES

#: Tensor Core verdict from tensor-pipe activity (% of peak sustained, while the SM is active)
TENSOR_YES_PCT = 5.0
TENSOR_NO_PCT = 2.0
UNCLEAR = "unclear"


@dataclass(frozen=True)
class HardwareColumn:
    """One of our columns, filled from the first of ``metrics`` that ncu collected (or, with
    ``combine="max"``, the largest of those collected)."""

    column: str
    metrics: tuple[str, ...]
    why: str
    combine: str = "first"


#: Our columns <- ncu metrics, in order of preference. Names checked against
#: ``ncu --query-metrics --chip gh100`` (ncu 2025.3.1): a metric missing on a chip is skipped.
HARDWARE_COLUMNS: tuple[HardwareColumn, ...] = (
    HardwareColumn(
        "hw_tensor_pipe_pct",
        (
            "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_cycles_active_realtime.avg.pct_of_peak_sustained_active",
        ),
        "tensor pipe (all MMA flavours) cycles active, % of peak, while the SM is active",
    ),
    HardwareColumn(
        "hw_tensor_pipe_subunit_pct",
        (
            "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_op_imma_cycles_active.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_op_hmma_cycles_active_realtime.avg.pct_of_peak_sustained_active",
            "sm__pipe_tensor_op_imma_cycles_active_realtime.avg.pct_of_peak_sustained_active",
        ),
        "largest of the HMMA/GMMA/IMMA sub-pipes: stands in when the total is not available",
        combine="max",
    ),
    HardwareColumn(
        "hw_achieved_occupancy_pct",
        ("sm__warps_active.avg.pct_of_peak_sustained_active",),
        "achieved occupancy: active warps / maximum warps per SM, while active",
    ),
    HardwareColumn(
        "hw_theoretical_occupancy_pct",
        ("sm__maximum_warps_per_active_cycle_pct",),
        "theoretical occupancy of the launch configuration",
    ),
    HardwareColumn(
        "hw_tensor_inst",
        ("sm__inst_executed_pipe_tensor.sum",),
        "tensor-pipe instructions (information only: not proof of Tensor Core work)",
    ),
    HardwareColumn(
        "hw_duration_ns",
        ("gpu__time_duration.sum",),
        "kernel duration under ncu (weights the per-kernel means)",
    ),
)


def wanted_metrics() -> list[str]:
    return [m for col in HARDWARE_COLUMNS for m in col.metrics]


_METRIC = re.compile(r"^[a-z0-9]+__[A-Za-z0-9_.]+$")
_NUMBER = re.compile(r"^-?[\d,]*\.?\d+(?:[eE][-+]?\d+)?$")


def _number(text: str) -> float:
    text = text.strip()
    if _NUMBER.match(text):
        return float(text.replace(",", ""))
    return np.nan


def _split_record(line: str, width: int) -> list[str] | None:
    """One record of ncu's raw CSV. ncu does not double the quotes inside NVTX payloads
    (TensorRT names its layer ranges with JSON, seen on an H200 with ncu 2025.3.1), which breaks
    a strict CSV reader; every field is quoted, so the separators are the '","' between them.
    A strict parse is tried first; the split is the fallback."""
    strict = next(csv.reader([line]), [])
    if len(strict) == width:
        return strict
    if line.startswith('"') and line.endswith('"'):
        fields = line[1:-1].split('","')
        if len(fields) == width:
            return [f.replace('""', '"') for f in fields]
    return None


def parse_ncu_csv(text: str) -> pd.DataFrame:
    """``ncu --csv --page raw`` output -> one row per profiled launch; metric columns numeric.

    Lines before the header (``==PROF==``/``==WARNING==`` messages) are skipped, and so is the
    units row."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise UserError('not an ncu --csv --page raw file: no header row starting with "ID"')
    header = next(csv.reader([lines[start]]))
    records = [_split_record(line, len(header)) for line in lines[start + 1 :] if line.strip()]
    body = [r for r in records if r is not None]
    if "Kernel Name" not in header:
        raise UserError('ncu CSV has no "Kernel Name" column')
    id_col = header.index("ID")
    body = [r for r in body if r[id_col].strip().isdigit()]  # drops the units row
    frame = pd.DataFrame(body, columns=header)
    for name in header:
        if _METRIC.match(name):
            frame[name] = [_number(v) for v in frame[name]]
    return frame


def metrics_in(frame: pd.DataFrame) -> list[str]:
    return [c for c in frame.columns if _METRIC.match(c)]


def hardware_table(raw: pd.DataFrame) -> pd.DataFrame:
    """Per launch: ``kernel_name`` and our hardware columns (NaN where not collected)."""
    out = pd.DataFrame({"kernel_name": raw["Kernel Name"].astype(str)})
    for col in HARDWARE_COLUMNS:
        present = [m for m in col.metrics if m in raw.columns]
        if not present:
            out[col.column] = np.nan
        elif col.combine == "max":
            out[col.column] = raw[present].max(axis=1, skipna=True)
        else:
            out[col.column] = raw[present[0]]
    # the total tensor-pipe figure, or the largest sub-pipe where the total was not collected
    out["hw_tensor_pipe_pct"] = out["hw_tensor_pipe_pct"].fillna(out["hw_tensor_pipe_subunit_pct"])
    return out


def tensor_core_from_pipe(pct: float) -> str | float:
    if pct is None or not np.isfinite(pct):
        return np.nan
    if pct >= TENSOR_YES_PCT:
        return YES
    if pct <= TENSOR_NO_PCT:
        return NO
    return UNCLEAR


# ---- matching ncu's kernel names to Kineto's ----------------------------------------------

_TEMPLATE = re.compile(r"<[^<>]*>")
_PARENS = re.compile(r"\([^()]*\)")


def normalized_name(name: str) -> str:
    """The same demangled name however a demangler spaced it: no whitespace, no leading void."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    return re.sub(r"\s+", "", text)


def function_name(name: str) -> str:
    """The bare function name: no return type, namespaces, template or parameter lists
    (``void at::native::foo<4, X>(int, X)`` -> ``foo``); what ncu calls the function base."""
    text = name.strip().replace("(anonymous namespace)", "anon")
    for _ in range(30):
        stripped = _PARENS.sub("", _TEMPLATE.sub("", text))
        if stripped == text:
            break
        text = stripped
    text = text.strip().split(" ")[-1]
    return text.split("::")[-1]


#: what two demanglers write differently for the same symbol (Kineto's, i.e. the toolchain's
#: __cxa_demangle, against ncu's --print-kernel-base demangled, both seen on H100/H200 traces):
#: ``(anonymous namespace)`` / ``<unnamed>``; ``{lambda(X)#N}`` / ``[lambda(X) (instance N)]``;
#: ``2ul`` / ``2``; ``false, true, (cudnnKernelDataType_t)0`` / ``0, 1, 0`` (ncu writes bool and
#: enum template arguments as their values); and ncu leaves some namespaces out (``at::native::f``
#: / ``at::f``)
_ANONYMOUS = re.compile(r"\(anonymous namespace\)|<unnamed>")
_LAMBDA_CXA = re.compile(r"\{lambda\((?:[^(){}]|\([^()]*\))*\)#(\d+)\}")
_LAMBDA_NCU = re.compile(r"\[lambda\((?:[^()\[\]]|\([^()]*\))*\) \(instance (\d+)\)\]")
_INT_SUFFIX = re.compile(r"\b(\d+)(?:ull|ul|ll|u|l)\b", re.IGNORECASE)
_QUALIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*::")
#: a template argument that is a bool, or a value cast to an enum or integer type
_BOOL_ARGUMENT = re.compile(r"(?<=[<,])(true|false)(?=[,>])")
_CAST_ARGUMENT = re.compile(r"(?<=[<,])\([A-Za-z_][A-Za-z0-9_:]*\)(-?\d+)(?=[,>])")


def _without_parameters(text: str) -> str:
    """The name without its trailing parameter list (``f<A>(int, T2)`` -> ``f<A>``): ncu writes
    parameters by template parameter name (``T1::Params``), Kineto by type."""
    if not text.endswith(")"):
        return text
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(text[i], 0)
        if depth == 0:
            return text[:i] if i else text
    return text


def signature_key(name: str) -> str:
    """The kernel's function and template arguments, written the same way whichever demangler
    wrote the name: no return type, no parameter list, no namespace qualifiers, lambdas as
    ``lambda#N``, no ``const``, no integer-literal suffixes, bool and enum template arguments as
    numbers (``true`` -> ``1``, ``(cudnnKernelDataType_t)2`` -> ``2``), no whitespace."""
    text = name.strip()
    if text.startswith("void "):
        text = text[5:]
    text = _ANONYMOUS.sub("anon", text)
    text = _LAMBDA_CXA.sub(r"lambda#\1", text)
    text = _LAMBDA_NCU.sub(r"lambda#\1", text)
    text = re.sub(r"\bconst\b", "", text)  # east or west const, as each demangler puts it
    text = _without_parameters(re.sub(r"\s+", "", text))
    text = _INT_SUFFIX.sub(r"\1", text)
    text = _BOOL_ARGUMENT.sub(lambda m: "1" if m.group(1) == "true" else "0", text)
    text = _CAST_ARGUMENT.sub(r"\1", text)
    return _QUALIFIER.sub("", text)


def _unique(keys: list[tuple[str, str]]) -> dict[str, str]:
    """key -> name, for the keys that exactly one name has."""
    seen: dict[str, list[str]] = {}
    for key, name in keys:
        seen.setdefault(key, []).append(name)
    return {k: v[0] for k, v in seen.items() if len(set(v)) == 1}


def _match(
    kernel_names: pd.Series, ncu_names: list[str]
) -> tuple[list[str | None], list[str | None]]:
    """For each kernel-table name: the ncu name it matches and how (exact, normalized,
    signature, function), or (None, None). Beyond an exact match, a key must belong to one name
    on each side."""
    exact = set(ncu_names)
    by_norm: dict[str, list[str]] = {}
    by_func: dict[str, list[str]] = {}
    for n in ncu_names:
        by_norm.setdefault(normalized_name(n), []).append(n)
        by_func.setdefault(function_name(n), []).append(n)
    ncu_signatures = _unique([(signature_key(n), n) for n in ncu_names])
    table_signatures = _unique([(signature_key(n), n) for n in kernel_names])
    table_funcs = pd.Series([function_name(n) for n in kernel_names]).value_counts()
    matched: list[str | None] = []
    how: list[str | None] = []
    for name in kernel_names:
        if name in exact:
            matched.append(name)
            how.append("exact")
            continue
        norm = by_norm.get(normalized_name(name), [])
        if len(norm) == 1:
            matched.append(norm[0])
            how.append("normalized")
            continue
        key = signature_key(name)
        if key in ncu_signatures and table_signatures.get(key) == name:
            matched.append(ncu_signatures[key])
            how.append("signature")
            continue
        func = function_name(name)
        candidates = by_func.get(func, [])
        if len(candidates) == 1 and table_funcs.get(func, 0) == 1:
            matched.append(candidates[0])
            how.append("function")
            continue
        matched.append(None)
        how.append(None)
    return matched, how


def _per_kernel(hw: pd.DataFrame) -> pd.DataFrame:
    """Launches -> one row per kernel name: means weighted by duration under ncu."""
    weights = hw["hw_duration_ns"].where(hw["hw_duration_ns"] > 0, 1.0).fillna(1.0)
    columns = [c.column for c in HARDWARE_COLUMNS if c.column != "hw_duration_ns"]
    rows = {}
    for name, group in hw.groupby("kernel_name", sort=False):
        w = weights.loc[group.index]
        row = {"hw_launches": len(group), "hw_duration_ns": group["hw_duration_ns"].mean()}
        for col in columns:
            values = group[col]
            ok = values.notna()
            row[col] = float(np.average(values[ok], weights=w[ok])) if ok.any() else np.nan
        rows[name] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def hardware_join(kernel_table: pd.DataFrame, ncu: pd.DataFrame) -> pd.DataFrame:
    """The kernel table with hardware columns, ``hw_tensor_core`` (yes / no / unclear, NaN when
    ncu did not profile the kernel) and ``rules_vs_hardware`` (agree / disagree / unknown-rule /
    unclear-hardware / not profiled). ``ncu`` is ``hardware_table`` output or raw
    ``parse_ncu_csv`` output."""
    hw = ncu if "kernel_name" in ncu.columns else hardware_table(ncu)
    per_kernel = _per_kernel(hw) if len(hw) else pd.DataFrame()
    joined = kernel_table.copy()
    matched, how = _match(joined["name"], list(per_kernel.index))
    joined["hw_kernel_name"] = matched
    joined["hw_match"] = how
    for col in ("hw_launches", *[c.column for c in HARDWARE_COLUMNS]):
        values = [
            per_kernel.loc[m, col] if m is not None and col in per_kernel.columns else np.nan
            for m in matched
        ]
        joined[col] = pd.Series(values, index=joined.index, dtype=float)
    joined["hw_tensor_core"] = [tensor_core_from_pipe(v) for v in joined["hw_tensor_pipe_pct"]]
    joined["rules_vs_hardware"] = [
        _verdict(rule, hw_) for rule, hw_ in zip(joined["tensor_core"], joined["hw_tensor_core"])
    ]
    return joined


def _verdict(rule: str, hardware: object) -> str:
    if not isinstance(hardware, str):
        return "not profiled"
    if hardware == UNCLEAR:
        return "unclear-hardware"
    if rule == UNKNOWN:
        return "unknown-rule"
    return "agree" if rule == hardware else "disagree"


@dataclass
class Agreement:
    """Kernel time of the profiled kernels, by how the name rule compares with the hardware."""

    profiled_us: float
    agree_us: float
    disagree_us: float
    unknown_rule_us: float
    unclear_hardware_us: float
    kernel_us: float  # all kernels in the table, profiled or not
    profiled_kernels: int
    disagreeing: list[str]
    #: of the profiled kernels' time: in kernels the name rules say use Tensor Cores (whole
    #: kernels counted), and that time weighted by ncu's tensor-pipe activity (the share of the
    #: kernel's SM-active cycles the tensor pipe was busy); pipe_measured_us: profiled kernels
    #: with a tensor-pipe figure
    tensor_core_kernel_us: float = 0.0
    tensor_pipe_busy_us: float = 0.0
    pipe_measured_us: float = 0.0

    @property
    def share(self) -> float:
        """Agreeing time / profiled time (unknown rules and unclear hardware count as not)."""
        return self.agree_us / self.profiled_us if self.profiled_us else float("nan")

    @property
    def coverage(self) -> float:
        return self.profiled_us / self.kernel_us if self.kernel_us else float("nan")

    @property
    def tensor_core_kernels_share(self) -> float:
        """Time in Tensor Core kernels (name rules) / profiled kernel time."""
        return self.tensor_core_kernel_us / self.profiled_us if self.profiled_us else float("nan")

    @property
    def tensor_pipe_busy_share(self) -> float:
        """Tensor pipe busy, kernel-time weighted: sum(kernel time x pipe %) / kernel time, over
        the profiled kernels with a tensor-pipe figure."""
        return (
            self.tensor_pipe_busy_us / self.pipe_measured_us
            if self.pipe_measured_us
            else float("nan")
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "agreement_share": self.share,
            "coverage_of_kernel_time": self.coverage,
            "profiled_us": self.profiled_us,
            "agree_us": self.agree_us,
            "disagree_us": self.disagree_us,
            "unknown_rule_us": self.unknown_rule_us,
            "unclear_hardware_us": self.unclear_hardware_us,
            "kernel_us": self.kernel_us,
            "profiled_kernels": self.profiled_kernels,
            "disagreeing": self.disagreeing,
            "tensor_core_kernels_share": self.tensor_core_kernels_share,
            "tensor_pipe_busy_share": self.tensor_pipe_busy_share,
            "tensor_core_kernel_us": self.tensor_core_kernel_us,
            "tensor_pipe_busy_us": self.tensor_pipe_busy_us,
            "pipe_measured_us": self.pipe_measured_us,
        }


def agreement_share(joined: pd.DataFrame) -> Agreement:
    verdict = joined["rules_vs_hardware"]
    time = joined["total_us"].astype(float)

    def total(kind: str) -> float:
        return float(time[verdict == kind].sum())

    profiled = verdict != "not profiled"
    pipe = joined["hw_tensor_pipe_pct"].astype(float)
    measured = profiled & pipe.notna()
    return Agreement(
        profiled_us=float(time[profiled].sum()),
        agree_us=total("agree"),
        disagree_us=total("disagree"),
        unknown_rule_us=total("unknown-rule"),
        unclear_hardware_us=total("unclear-hardware"),
        kernel_us=float(time.sum()),
        profiled_kernels=int(profiled.sum()),
        disagreeing=list(joined.loc[verdict == "disagree", "name"]),
        tensor_core_kernel_us=float(time[profiled & (joined["tensor_core"] == YES)].sum()),
        tensor_pipe_busy_us=float((time[measured] * pipe[measured] / 100.0).sum()),
        pipe_measured_us=float(time[measured].sum()),
    )


def read_ncu_csv(path: Path) -> pd.DataFrame:
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise UserError(f"cannot read {path}: {error.strerror}") from None
    if data[:2] == b"\x1f\x8b":  # ncu.csv.gz, as the fixtures keep it
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise UserError(f"{path} is a damaged gzip file ({error})") from None
    return parse_ncu_csv(data.decode("utf-8", errors="replace"))
