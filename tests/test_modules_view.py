"""The module view (profiler/trace/modules.py): time per nn.Module as a hierarchy, against the
TensorBoard plugin's Module view of the same traces (tests/fixtures/modules_cpu/
plugin_modules.json, written by scripts/plugin_modules.py; the CPU trace also live, through the
plugin's loader in this process), and its totals against the operators'."""

import json
import math

import numpy as np
import pytest

from profiler.analysis.run_analysis import RunAnalysis
from profiler.report.sections import MODULES, summarize_rows
from profiler.trace.kernels import kernel_rows
from profiler.trace.load import load_trace
from profiler.trace.modules import SELF_PART, module_view
from profiler.trace.operators import operator_table

from .conftest import FIXTURES, ROOT

H100_STACKS = FIXTURES / "h100_stacks" / "h100_pytorch_fp16_bs8_stacks.pt.trace.json.gz"
CPU_RUN = FIXTURES / "modules_cpu" / "runs" / "pytorch_fp32_bs2_modules"
CPU_TRACE = next((FIXTURES / "modules_cpu" / "tb_logs" / CPU_RUN.name).glob("*.pt.trace.json.gz"))
REFERENCE = FIXTURES / "modules_cpu" / "plugin_modules.json"
#: the H200 generations recorded with stacks (scripts/device_modules.sh)
H200 = FIXTURES / "modules_h200"
H200_RUNS = ("pytorch_fp16_bs2_mod_llama_tiny_gen", "pytorch_fp16_bs1_mod_llama_gen")
#: a GPU trace recorded without stacks
NO_STACKS = next((FIXTURES / "memory_h200" / "tb_logs").glob("*resnet18*/*.pt.trace.json.gz"))

#: our column -> the plugin's Stats field
PLUGIN_FIELDS = {
    "calls": "occurences",
    "operators": "operators",
    "host_total_us": "host_duration",
    "host_self_us": "self_host_duration",
    "gpu_total_us": "device_duration",
    "gpu_self_us": "self_device_duration",
}


@pytest.fixture(scope="module")
def h100():
    trace = load_trace(H100_STACKS)
    return trace, module_view(trace)


@pytest.fixture(scope="module")
def cpu():
    trace = load_trace(CPU_TRACE)
    return trace, module_view(trace)


def _reference(path):
    for entry in json.loads(REFERENCE.read_text()):
        if (ROOT / entry["file"]).resolve() == path.resolve():
            return entry
    raise AssertionError(f"no plugin reference for {path}")


def _differences(view, plugin_rows, runtimes_on_modules=()):
    """(path, column, ours, plugin's) where the figures differ. The plugin's first module call
    carries the runtime calls without an External id (``runtimes_on_modules``): their host time
    leaves its host self time, the GPU time they launched joins its GPU total and self."""
    host = {r["module"].removeprefix("nn.Module: "): r["runtime_us"] for r in runtimes_on_modules}
    gpu = {r["module"].removeprefix("nn.Module: "): r["device_us"] for r in runtimes_on_modules}
    tree = view.tree.set_index("path")
    found = []
    for row in plugin_rows:
        ours = tree.loc[row["path"]]
        for column, theirs in PLUGIN_FIELDS.items():
            expected = row[theirs]
            if column == "host_self_us":
                expected += host.get(row["path"], 0.0)
            if column in ("gpu_total_us", "gpu_self_us"):
                expected -= gpu.get(row["path"], 0.0)
            if not math.isclose(float(ours[column]), expected, rel_tol=1e-12, abs_tol=1e-9):
                found.append((row["path"], column, float(ours[column]), row[theirs]))
    return found


def test_resnet50_h100_modules_equal_the_plugins(h100):
    _, view = h100
    reference = _reference(H100_STACKS)
    rows = reference["modules"]
    # every path the plugin shows, and no other (it lists a module called n times in one
    # parent n times: the same figures each time)
    assert set(view.tree["path"]) == {r["path"] for r in rows}
    assert len(view.tree) == 151 and len(rows) == 183
    # the plugin hangs the step's cudaDeviceSynchronize calls (no External id) on the first
    # module call it meets: that call's host self time is theirs less those calls
    attached = reference["runtimes_on_modules"]
    assert [(a["module"], a["runtimes"]) for a in attached] == [("nn.Module: ResNet_0", 11)]
    assert _differences(view, rows, attached) == []
    root = view.tree.iloc[0]
    assert root["path"] == "ResNet_0" and root["calls"] == 10
    assert root["gpu_total_us"] == pytest.approx(11365.3994140625, abs=1e-9)


@pytest.fixture(scope="module")
def h200():
    """Each H200 generation: its run's analysis and module view."""
    runs = {name: RunAnalysis(str(H200 / "runs" / name)) for name in H200_RUNS}
    return {name: (run, run.modules) for name, run in runs.items()}


@pytest.mark.parametrize("name, layers, paths", [(H200_RUNS[0], 2, 32), (H200_RUNS[1], 16, 214)])
def test_llama_h200_modules_equal_the_plugins(h200, name, layers, paths):
    run, view = h200[name]
    reference = _reference(run.path)
    rows = reference["modules"]
    assert len(view.tree) == paths == len({r["path"] for r in rows})
    # the runtime calls without an External id the plugin hangs on the first module call:
    # host time only, no GPU time
    attached = reference["runtimes_on_modules"]
    assert [a["module"] for a in attached] == ["nn.Module: LlamaForCausalLM_0"]
    assert attached[0]["device_us"] == 0
    assert _differences(view, rows, attached) == []
    decoder = view.tree[view.tree["type"] == "LlamaDecoderLayer"]
    assert len(decoder) == layers


def test_llama_h200_kernel_time_inside_and_outside_the_modules(h200):
    """A generation launches kernels outside every module too (the sampling of the next
    token): with the root's, they are the operators' kernel total."""
    for run, view in h200.values():
        operators = operator_table(run.trace, kernel_rows(run.trace))
        roots = view.tree[view.tree["depth"] == 0]
        assert view.kernel_outside_us > 0
        assert roots["kernel_total_us"].sum() + view.kernel_outside_us == pytest.approx(
            operators["kernel_us"].sum(), rel=1e-12
        )
        # the GPU time counts the copies and memsets too
        assert view.gpu_in_modules_us > view.kernel_in_modules_us


def test_llama_h200_layers_split_per_phase(h200):
    """The 1B llama's 16 decoder layers, prefill and decode apart: attention, MLP, norms and
    the layer's own GPU time, adding up to the layer's."""
    _, view = h200[H200_RUNS[1]]
    blocks = view.blocks
    for phase, calls in (("prefill", 1), ("decode", 3)):
        rows = blocks[blocks["phase"] == phase]
        assert rows["block"].nunique() == 16
        for _, parts in rows.groupby("block"):
            assert list(parts["part"]) == ["LlamaRMSNorm", "LlamaAttention", "LlamaMLP", SELF_PART]
            assert parts["gpu_share_pct"].sum() == pytest.approx(100.0)
            assert parts.set_index("part").loc["LlamaAttention", "calls"] == calls
    # decode spends a larger share of each layer in attention than prefill does
    share = blocks[blocks["part"] == "LlamaAttention"].groupby("phase")["gpu_share_pct"].mean()
    assert share["decode"] > share["prefill"]


def test_llama_tiny_cpu_modules_equal_the_plugins_live(cpu):
    """The plugin's loader, in this process, on the CPU generation: the same rows as the stored
    reference and as ours."""
    pytest.importorskip("torch_tb_profiler")
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(
        "plugin_modules", ROOT / "scripts/plugin_modules.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("plugin_modules", script)
    spec.loader.exec_module(script)
    live = script.reference(CPU_TRACE)
    assert live["modules"] == _reference(CPU_TRACE)["modules"]
    _, view = cpu
    assert len(view.tree) == 32 == len(live["modules"])
    assert _differences(view, live["modules"]) == []


def test_module_kernel_time_adds_up_to_the_operators(h100):
    """The root modules' kernel time plus the kernel time launched outside every module is the
    trace's kernel time as the operator table attributes it (all of it, '(no operator)'
    included); each module's total is its self time plus its children's totals."""
    trace, view = h100
    operators = operator_table(trace, kernel_rows(trace))
    roots = view.tree[view.tree["depth"] == 0]
    assert roots["kernel_total_us"].sum() + view.kernel_outside_us == pytest.approx(
        operators["kernel_us"].sum(), rel=1e-12
    )
    assert view.kernel_in_modules_us == pytest.approx(roots["kernel_total_us"].sum())
    # (ResNet50's forward launches every kernel inside ResNet_0)
    assert view.kernel_outside_us == 0 and view.kernel_in_modules_us > 0
    children = view.tree.groupby("parent")[["kernel_total_us", "host_total_us"]].sum()
    for row in view.tree.itertuples():
        inner = children.loc[row.path] if row.path in children.index else None
        below = 0.0 if inner is None else inner["kernel_total_us"]
        assert row.kernel_total_us == pytest.approx(row.kernel_self_us + below, abs=1e-6)
    assert view.has_gpu and view.gpu_us >= view.kernel_us > 0


def test_llama_blocks_split_per_phase(cpu):
    """The decoder layers of a generation: attention, MLP, norms and the layer's own time per
    phase, their shares of the layer adding up to 100 %."""
    _, view = cpu
    assert not view.has_gpu and view.kernel_us == 0
    blocks = view.blocks
    assert set(blocks["phase"]) == {"prefill", "decode"}
    layers = sorted(set(blocks["block"]))
    assert [b.rsplit("/", 1)[1] for b in layers] == ["LlamaDecoderLayer_0", "LlamaDecoderLayer_1"]
    for (phase, _), parts in blocks.groupby(["phase", "block"]):
        assert list(parts["part"]) == ["LlamaRMSNorm", "LlamaAttention", "LlamaMLP", SELF_PART]
        assert parts["host_share_pct"].sum() == pytest.approx(100.0)
        # a prefill is one call per generation, the decode steps the rest (4 new tokens)
        norms = parts[parts["part"] == "LlamaRMSNorm"]["calls"].item()
        assert norms == (2 if phase == "prefill" else 6)
    # the per-phase trees add up to the whole tree
    summed = view.phases.groupby("path")["host_total_us"].sum()
    whole = view.tree.set_index("path")["host_total_us"]
    assert np.allclose(summed.reindex(whole.index).to_numpy(), whole.to_numpy())


def test_a_trace_without_stacks_has_no_module_view():
    run = RunAnalysis(str(NO_STACKS))
    assert run.modules is None


def test_summarize_view_modules_prints_the_tree_and_the_layers(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    done = cli("summarize", str(CPU_RUN), "--view", "modules")
    assert done.code == 0, done.stderr
    out = done.stdout
    assert "Modules (summed over the profiled steps" in out
    assert "LlamaDecoderLayer_1" in out and "Module types" in out
    for phase in ("prefill", "decode"):
        assert f"{phase}: each block's host time and its parts' shares" in out
    assert "128 module calls; a CPU trace" in out
    # only with --view modules
    assert MODULES in summarize_rows("modules") and MODULES not in summarize_rows("all")


def test_summarize_modules_json_is_its_typed_document(cli):
    from .test_cli_output import validate

    done = cli("summarize", str(CPU_RUN), "--view", "modules", "--json")
    assert done.code == 0, done.stderr
    document = validate("summarize-modules", json.loads(done.stdout))
    assert document["module_calls"] == 128 and len(document["tree"]) == 32
    assert {b["part"] for b in document["blocks"]} == {
        "LlamaRMSNorm",
        "LlamaAttention",
        "LlamaMLP",
        SELF_PART,
    }
    assert all(b["gpu_share_pct"] is None for b in document["blocks"])  # a CPU trace


def test_summarize_modules_out_writes_its_tables(cli, tmp_path):
    done = cli("summarize", str(CPU_RUN), "--view", "modules", "--out", str(tmp_path / "o"))
    assert done.code == 0, done.stderr
    names = sorted(p.name for p in (tmp_path / "o").iterdir())
    assert names == [
        "module_blocks.csv",
        "module_phases.csv",
        "module_types.csv",
        "modules.csv",
        "modules.md",
    ]
    assert "## decode: each block's parts" in (tmp_path / "o" / "modules.md").read_text()
    # any view's --out: summary.md carries the module sections
    done = cli("summarize", str(CPU_RUN), "--view", "operators", "--out", str(tmp_path / "s"))
    assert done.code == 0, done.stderr
    summary = (tmp_path / "s" / "summary.md").read_text()
    assert "## Modules (nn.Module calls)" in summary and "## prefill: each block's parts" in summary


def test_a_trace_without_stacks_is_refused_in_one_line(cli):
    done = cli("summarize", str(NO_STACKS), "--view", "modules")
    assert done.code != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "record it with `run --with-stack`" in lines[0]
    assert "Traceback" not in done.stderr


def test_the_run_page_carries_the_module_view(cli, tmp_path):
    page = tmp_path / "page.html"
    done = cli("report", str(CPU_RUN), "--out", str(page))
    assert done.code == 0, done.stderr
    html = page.read_text()
    assert "modules (nn.Module calls, summed over the profiled steps)" in html
    assert "decode, each block&#x27;s parts (% of the block)" in html
    assert "LlamaDecoderLayer_1" in html


def _built_trace(tmp_path, crossing=False):
    """A small trace built here (not a recording) that holds each nesting case: a module with an
    operator, a sub-module, a copy and a kernel under its operators, a module call that crosses
    the end of the one holding it, and an operator with a kernel outside every module."""
    events = []

    def cpu(cat, name, ts, dur, **args):
        events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "dur": dur,
                "args": args,
            }
        )

    def gpu(cat, name, ts, dur, correlation, external):
        events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": 0,
                "tid": 7,
                "ts": ts,
                "dur": dur,
                "args": {
                    "correlation": correlation,
                    "External id": external,
                    "device": 0,
                    "stream": 7,
                },
            }
        )

    def module(name, ts, dur, python_id, parent):
        cpu(
            "python_function",
            f"nn.Module: {name}",
            ts,
            dur,
            **{"Python id": python_id, "Python parent id": parent, "Python module id": 0},
        )

    cpu("user_annotation", "ProfilerStep#1", 0, 200)
    cpu(
        "python_function",
        "run.py(1): <module>",
        1,
        198,
        **{"Python id": 1, "Python parent id": None},
    )
    module("Outer_0", 10, 80, 2, 1)
    cpu("cpu_op", "aten::mm", 20, 10, **{"External id": 11})
    cpu("cuda_runtime", "cudaLaunchKernel", 21, 2, **{"External id": 11, "correlation": 101})
    cpu("cuda_runtime", "cudaMemcpyAsync", 24, 2, **{"External id": 11, "correlation": 102})
    module("Inner_0", 35, 25, 3, 2)
    cpu("cpu_op", "aten::add", 40, 10, **{"External id": 12})
    cpu("cuda_driver", "cuLaunchKernelEx", 41, 2, **{"External id": 12, "correlation": 103})
    if crossing:
        module("Crossing_0", 70, 40, 4, 2)  # ends after Outer_0: left out
    cpu("cpu_op", "aten::relu", 120, 10, **{"External id": 13})
    cpu("cuda_runtime", "cudaLaunchKernel", 121, 2, **{"External id": 13, "correlation": 104})
    gpu("kernel", "gemm", 30, 7.5, 101, 11)
    gpu("gpu_memcpy", "Memcpy HtoD", 40, 1.25, 102, 11)
    gpu("kernel", "add", 50, 3.0, 103, 12)
    gpu("kernel", "relu", 130, 2.0, 104, 13)
    path = tmp_path / "built.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def test_the_nesting_rules_are_the_plugins(tmp_path):
    pytest.importorskip("torch_tb_profiler")
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "plugin_modules", ROOT / "scripts/plugin_modules.py"
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    path = _built_trace(tmp_path)
    view = module_view(load_trace(path))
    plugin = script.reference(path)
    assert sorted(r["path"] for r in plugin["modules"]) == ["Outer_0", "Outer_0/Inner_0"]
    assert list(view.tree["path"]) == ["Outer_0", "Outer_0/Inner_0"]
    assert _differences(view, plugin["modules"]) == []
    outer = view.tree.iloc[0]
    assert (outer.gpu_total_us, outer.gpu_self_us) == (7.5 + 1.25 + 3.0, 7.5 + 1.25)
    assert (outer.kernel_total_us, outer.kernel_self_us) == (10.5, 7.5)
    assert outer.host_self_us == 80 - 10 - 25 and outer.operators == 1
    assert (view.kernel_outside_us, view.kernel_us) == (2.0, 12.5)
    assert view.left_out_calls == 0 and not view.notes


def test_a_module_call_crossing_its_parents_end_is_left_out(tmp_path):
    """As the plugin's operator tree leaves it out (its Module view then fails on the call its
    Python ids still name); the rest is unchanged."""
    whole = module_view(load_trace(_built_trace(tmp_path)))
    view = module_view(load_trace(_built_trace(tmp_path, crossing=True)))
    assert view.left_out_calls == 1 and "1 module calls left out" in view.notes[0]
    assert view.tree.equals(whole.tree)


def test_summarize_modules_walks_its_rows(cli, monkeypatch):
    from profiler.report import sections

    walked = []
    real = sections.print_sections
    monkeypatch.setattr(
        sections, "print_sections", lambda rows, ctx: (walked.append(tuple(rows)), real(rows, ctx))
    )
    done = cli("summarize", str(CPU_RUN), "--view", "modules")
    assert done.code == 0, done.stderr
    assert walked == [summarize_rows("modules")] and MODULES in walked[0]
