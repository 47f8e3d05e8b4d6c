"""nsys / ncu / TensorBoard launchers and the hardware join, on the CPU.

No ncu or nsys runs here. The CSV snippets below are CONSTRUCTED, not captured: they follow the
documented layouts (``ncu --csv --page raw``: header row, units row, one row per launch;
``nsys stats --format csv``: one header row) so the parsers and the join can be exercised; the
real check is the CSVs captured on the GPU (scripts/device_ncu_check.sh). Kernel names are real
ones from the H200 fixture trace.
"""

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from profiler.errors import UserError
from profiler.tools import ncu, nsys, tensorboard as tb
from profiler.trace.hardware import (
    agreement_share,
    function_name,
    hardware_join,
    parse_ncu_csv,
    tensor_core_from_pipe,
)
from profiler.trace.summary import summarize

from .conftest import FIXTURES, ROOT

H200_TB = FIXTURES / "h200" / "tb_logs"
FP16_TRACE = next((H200_TB / "pytorch_fp16_bs8").glob("*.pt.trace.json.gz"))


@pytest.fixture(scope="module")
def fp16_table():
    return summarize(FP16_TRACE).kernels.table


# ---- argument lists -------------------------------------------------------------------------


def test_tensorboard_command_binds_loopback_unless_bind_all(tmp_path):
    command = tb.command(tmp_path, 6123)
    assert command[:3] == [sys.executable, "-m", "tensorboard.main"]
    assert command[command.index("--host") + 1] == "127.0.0.1"
    assert "--bind_all" not in command and command[command.index("--port") + 1] == "6123"
    everywhere = tb.command(tmp_path, 6123, bind_all=True)
    assert "--bind_all" in everywhere and "--host" not in everywhere


def test_ncu_profile_command_is_a_list_with_clock_control_none_and_nvtx_filter(fp16_table):
    regex = ncu.kernel_regex(list(fp16_table.head(10)["name"]))
    run_args = ["python", "profile.py", "run", "--capture", "cuda-profiler-api"]
    command = ncu.profile_command(
        "/opt/ncu",
        ["sm__warps_active.avg.pct_of_peak_sustained_active"],
        Path("runs/x/ncu"),
        2,
        regex,
        200,
        run_args,
    )
    assert all(isinstance(a, str) for a in command)
    assert command[command.index("--clock-control") + 1] == "none"
    assert command[command.index("--nvtx-include") + 1] == "infer-profiler@step 2/"
    assert "--nvtx" in command and command[command.index("--profile-from-start") + 1] == "off"
    assert command[command.index("--kernel-name") + 1] == regex
    assert command[-len(run_args) :] == run_args
    # the regex lists bare function names only: no characters that need escaping
    assert regex.startswith("regex:")
    for name in regex[len("regex:") :].split("|"):
        assert name.isidentifier()
    assert "vectorized_elementwise_kernel" in regex.split("|")
    imported = ncu.import_command("/opt/ncu", Path("r.ncu-rep"))
    assert imported[imported.index("--print-kernel-base") + 1] == "demangled"
    assert imported[imported.index("--page") + 1] == "raw" and "--csv" in imported


def test_ncu_kernel_regex_gives_up_on_names_that_are_not_identifiers():
    assert ncu.kernel_regex(["void foo<1>(int)", "weird name-with-dash"]) is None


def test_ncu_env_keeps_inductor_compilation_in_one_process():
    assert ncu.ncu_env()["TORCHINDUCTOR_COMPILE_THREADS"] == "1"


def test_nsys_commands_are_lists_with_the_capture_range(tmp_path):
    command = nsys.profile_command("/opt/nsys", tmp_path / "nsys", ["python", "profile.py"])
    assert command[1:3] == ["profile", "-t"] and command[3] == "cuda,nvtx,cudnn,cublas"
    assert "--capture-range=cudaProfilerApi" in command
    assert "--capture-range-end=stop" in command
    stats = nsys.stats_command("/opt/nsys", tmp_path / "r.nsys-rep", tmp_path / "s")
    assert stats[stats.index("--report") + 1] == "cuda_gpu_kern_sum,nvtx_sum"
    assert stats[stats.index("--format") + 1] == "csv"


# ---- metric choice ----------------------------------------------------------------------------


def test_query_metrics_parsing_and_choice():
    # constructed: ncu --query-metrics prints a device line, a header and "name  description"
    text = (
        "Device NVIDIA H200 (GH100)\n"
        "------------------------------------------  -----------------------------\n"
        "Metric Name                                 Metric Description\n"
        "sm__warps_active                            # of warps in flight\n"
        "sm__maximum_warps_per_active_cycle_pct      theoretical occupancy\n"
        "sm__pipe_tensor_op_hmma_cycles_active       # of cycles the HMMA pipe was active\n"
        "gpu__time_duration                          duration\n"
    )
    available = ncu.parse_query_metrics(text)
    assert "sm__warps_active" in available and "Metric" not in available
    chosen, skipped = ncu.choose_metrics(available)
    assert "sm__warps_active.avg.pct_of_peak_sustained_active" in chosen
    assert "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active" in chosen
    assert "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active" in skipped
    everything, none_skipped = ncu.choose_metrics(None)
    assert none_skipped == [] and len(everything) > len(chosen)
    # constructed error line, as ncu prints it for an unknown metric
    assert ncu.missing_metrics(
        "==ERROR== Failed to find metric sm__pipe_tensor_cycles_active"
        ".avg.pct_of_peak_sustained_active\n"
    ) == ["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"]


# ---- missing tools: one line, exit 2 ----------------------------------------------------------


@pytest.mark.parametrize("command, tool, module", [("ncu", "ncu", ncu), ("nsys", "nsys", nsys)])
def test_missing_tool_is_one_line(cli, monkeypatch, command, tool, module):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv(tool.upper(), raising=False)
    monkeypatch.setattr(module, "KNOWN_LOCATIONS", ("/nonexistent/*/" + tool,))
    result = cli(command, "--backend", "pytorch_fp16", "--bs", "8")
    assert result.code == 2
    assert result.stderr.count("\n") == 1 and f"{tool} not found" in result.stderr
    assert f"set {tool.upper()}" in result.stderr


def test_tool_env_var_must_point_to_an_executable(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("NSYS", str(tmp_path / "nope"))
    result = cli("nsys", "--backend", "pytorch_fp16")
    assert result.code == 2 and "NSYS=" in result.stderr


def test_unknown_capture_mode_is_one_line(cli):
    result = cli("run", "--capture", "nvprof")
    assert result.code == 2 and "unknown --capture 'nvprof'" in result.stderr


def test_tensorboard_missing_logdir_is_one_line(cli, tmp_path):
    result = cli("tensorboard", "--logdir", str(tmp_path / "none"))
    assert result.code == 2 and "no such folder" in result.stderr


# ---- ncu CSV, join, agreement -----------------------------------------------------------------

PIPE = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
ACHIEVED = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL = "sm__maximum_warps_per_active_cycle_pct"
DURATION = "gpu__time_duration.sum"


def constructed_ncu_csv(rows: list[tuple[str, float, float, float, float]]) -> str:
    """CONSTRUCTED ncu --csv --page raw text (not captured): (name, pipe %, achieved %,
    theoretical %, duration ns) per launch."""
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    ident = [
        "ID",
        "Process ID",
        "Process Name",
        "Host Name",
        "Kernel Name",
        "Context",
        "Stream",
        "Block Size",
        "Grid Size",
        "Device",
        "CC",
    ]
    writer.writerow(ident + [DURATION, ACHIEVED, PIPE, THEORETICAL])
    writer.writerow([""] * len(ident) + ["ns", "%", "%", "%"])
    for i, (name, pipe, achieved, theoretical, ns) in enumerate(rows):
        writer.writerow(
            [
                str(i),
                "4242",
                "python3",
                "127.0.0.1",
                name,
                "1",
                "7",
                "(128, 1, 1)",
                "(96, 1, 1)",
                "0",
                "9.0",
                f"{ns:,.0f}",
                str(achieved),
                str(pipe),
                str(theoretical),
            ]
        )
    return "==PROF== Connected to process 4242\n" + out.getvalue()


def test_parse_ncu_csv_skips_prefix_and_units_and_reads_numbers():
    text = constructed_ncu_csv([("void k<1>(int)", 0.5, 40.0, 50.0, 12345.0)])
    frame = parse_ncu_csv(text)
    assert len(frame) == 1
    assert frame.loc[0, "Kernel Name"] == "void k<1>(int)"
    assert frame.loc[0, DURATION] == 12345.0  # "12,345" with a thousands separator
    assert frame.loc[0, PIPE] == 0.5
    with pytest.raises(UserError):
        parse_ncu_csv("nothing here\n")


def test_tensor_core_thresholds():
    assert tensor_core_from_pipe(5.0) == "yes" and tensor_core_from_pipe(2.0) == "no"
    assert tensor_core_from_pipe(3.0) == "unclear"
    assert pd.isna(tensor_core_from_pipe(float("nan")))


def test_hardware_join_and_agreement_share(fp16_table):
    by_rule = {
        r: fp16_table[fp16_table["tensor_core"] == r]["name"].tolist() for r in ("yes", "no")
    }
    yes_a, yes_b = by_rule["yes"][:2]
    no_a, no_b = by_rule["no"][:2]
    rows = [
        (yes_a, 42.0, 30.0, 37.5, 9000),
        (yes_a, 40.0, 31.0, 37.5, 11000),  # agree (2 launches)
        (no_a, 0.4, 80.0, 100.0, 5000),  # agree
        (yes_b, 1.0, 20.0, 25.0, 4000),  # rule yes, hardware no: disagree
        (no_b.replace("void ", "", 1), 3.5, 50.0, 50.0, 3000),  # unclear; ncu drops "void "
    ]
    joined = hardware_join(fp16_table, parse_ncu_csv(constructed_ncu_csv(rows)))
    row = joined.set_index("name")
    assert row.loc[yes_a, "hw_launches"] == 2
    assert row.loc[yes_a, "hw_tensor_pipe_pct"] == pytest.approx((42 * 9000 + 40 * 11000) / 20000)
    assert row.loc[yes_a, "hw_achieved_occupancy_pct"] == pytest.approx(
        (30 * 9000 + 31 * 11000) / 20000
    )
    assert row.loc[yes_a, "hw_theoretical_occupancy_pct"] == 37.5
    assert row.loc[yes_a, "rules_vs_hardware"] == "agree" and row.loc[yes_a, "hw_match"] == "exact"
    assert row.loc[no_a, "rules_vs_hardware"] == "agree"
    assert row.loc[yes_b, "rules_vs_hardware"] == "disagree"
    assert row.loc[no_b, "rules_vs_hardware"] == "unclear-hardware"
    assert row.loc[no_b, "hw_match"] == "normalized"
    assert (joined["rules_vs_hardware"] == "not profiled").sum() == len(joined) - 4

    agreement = agreement_share(joined)
    t = row["total_us"]
    assert agreement.profiled_us == pytest.approx(t[[yes_a, no_a, yes_b, no_b]].sum())
    assert agreement.share == pytest.approx((t[yes_a] + t[no_a]) / agreement.profiled_us)
    assert agreement.disagree_us == pytest.approx(t[yes_b])
    assert agreement.unclear_hardware_us == pytest.approx(t[no_b])
    assert agreement.disagreeing == [yes_b]


def test_unknown_rule_counts_as_not_agreeing():
    table = pd.DataFrame(
        {
            "name": ["triton_tem_fused_convolution_0", "x"],
            "total_us": [30.0, 70.0],
            "tensor_core": ["unknown", "no"],
        }
    )
    ncu_text = constructed_ncu_csv(
        [("triton_tem_fused_convolution_0", 45.0, 20, 25, 1000), ("x", 0.0, 90, 100, 1000)]
    )
    agreement = agreement_share(hardware_join(table, parse_ncu_csv(ncu_text)))
    assert agreement.share == pytest.approx(0.7) and agreement.unknown_rule_us == 30.0


def test_function_name():
    assert (
        function_name(
            "void at::native::vectorized_elementwise_kernel<4, at::native::"
            "(anonymous namespace)::f(int)::{lambda()#1}>(int, float)"
        )
        == "vectorized_elementwise_kernel"
    )
    assert function_name("sm90_xmma_fprop_kernel__5x_cudnn") == "sm90_xmma_fprop_kernel__5x_cudnn"


def test_summarize_picks_up_ncu_csv_from_the_run_folder(cli, tmp_path, fp16_table):
    run = tmp_path / "runs" / "pytorch_fp16_bs8"
    run.mkdir(parents=True)
    (run / "result.json").write_text(json.dumps({"trace": {"files": [str(FP16_TRACE)]}}))
    yes = fp16_table[fp16_table["tensor_core"] == "yes"]["name"].iloc[0]
    (run / "ncu.csv").write_text(constructed_ncu_csv([(yes, 1.0, 10, 20, 100)]))
    result = cli("summarize", str(run), "--view", "kernels", "--top", "5")
    assert result.code == 0, result.stderr
    assert "Name rules vs Nsight Compute" in result.stdout
    assert "rule vs hardware disagree" in result.stdout
    as_json = cli("summarize", str(run), "--json", "--top", "5")
    hardware = json.loads(as_json.stdout)["hardware"]
    assert hardware["agreement_share"] == 0.0 and hardware["disagreeing"] == [yes]
    out = tmp_path / "out"
    assert cli("summarize", str(run), "--out", str(out)).code == 0
    assert (out / "hardware.csv").is_file()
    missing = cli("summarize", str(run), "--ncu", str(tmp_path / "none"))
    assert missing.code == 2 and "--ncu" in missing.stderr


# ---- nsys stats CSV ----------------------------------------------------------------------------


def test_nsys_kern_sum_becomes_a_kernel_table(fp16_table):
    name = fp16_table["name"].iloc[3]
    # CONSTRUCTED nsys stats --report cuda_gpu_kern_sum --format csv text (not captured)
    text = (
        "Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),"
        "StdDev (ns),Name\n"
        f'75.0,3000,3,1000.0,1000.0,900,1100,100.0,"{name}"\n'
        '25.0,1000,2,500.0,500.0,400,600,141.4,"void at::native::foo<1>(int)"\n'
    )
    table = nsys.kernel_table_from_kern_sum(text)
    assert list(table.columns[:12]) == [
        "kernel",
        "name",
        "category",
        "calls",
        "total_us",
        "mean_us",
        "median_us",
        "min_us",
        "max_us",
        "share_pct",
        "tensor_core",
        "tensor_core_rule",
    ]
    assert table.loc[0, "name"] == name and table.loc[0, "total_us"] == 3.0
    assert table.loc[0, "tensor_core"] == fp16_table["tensor_core"].iloc[3]
    assert table["share_pct"].tolist() == [75.0, 25.0]


def test_nsys_import_failure_is_one_line():
    output = (
        "Generating '/tmp/nsys-report-1.qdstrm'\n"
        "QdstrmImporter: error while loading shared libraries: libdw.so.1: cannot open "
        "shared object file: No such file or directory\nsome later line\n"
    )
    assert "libdw.so.1" in nsys.import_failure(output)


def test_tools_never_import_torch():
    code = (
        "import sys\n"
        "import profiler.tools.tensorboard, profiler.tools.ncu, profiler.tools.nsys\n"
        "import profiler.trace.hardware, profiler.trace.tb_compat\n"
        "import profiler.report.hardware_view\n"
        "assert 'torch' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, timeout=120)


TINY = [
    "--model",
    "resnet18",
    "--image-size",
    "32",
    "--bs",
    "2",
    "--iters",
    "3",
    "--timed-warmup",
    "1",
    "--active",
    "2",
]


def test_run_with_cuda_profiler_api_capture_writes_no_trace(cli, tmp_path):
    result = cli("run", *TINY, "--capture", "cuda-profiler-api", "--json")
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["profile"]["capture"] == "cuda-profiler-api"
    assert data["trace"]["files"] == [] and "skipped" in data["trace"]
    assert (tmp_path / "runs" / "pytorch_fp32_bs2_resnet18" / "result.json").is_file()
    assert not (tmp_path / "tb_logs" / "pytorch_fp32_bs2_resnet18").exists()


def test_run_with_tb_compat_writes_the_copy_beside_the_trace(cli, tmp_path):
    result = cli("run", *TINY, "--tb-compat", "--json")
    assert result.code == 0, result.stderr
    (trace,) = json.loads(result.stdout)["trace"]["files"]
    copy_path = tmp_path / "tb_logs" / "pytorch_fp32_bs2_resnet18_tbcompat" / Path(trace).name
    assert copy_path.is_file() and "tb-compat copy" in result.stderr
    assert cli("run", *TINY, "--tb-compat", "--capture", "cuda-profiler-api").code == 2


def test_ncu_says_which_top_kernels_it_did_not_see_and_what_ran_instead():
    """The H200 eager FP16 join (tests/fixtures/h200_ncu): the top kernels ncu did not profile
    are named with their share, and so are ncu's kernels the table does not hold."""
    import io
    import json

    from rich.console import Console

    from profiler.commands.tools import _print_ncu
    from tests.test_ncu_fixtures import RUNS, joined

    raw, table, agreement = joined("inductor_fp16_bs8")
    recorded = json.loads((RUNS / "inductor_fp16_bs8" / "ncu.json").read_text())
    profiled = set(table.loc[table["rules_vs_hardware"] != "not profiled", "name"])
    missing = [n for n in recorded["top_kernels"] if n not in profiled]
    extra = sorted(set(raw["Kernel Name"]) - set(table["hw_kernel_name"].dropna()))
    lines = []

    class Sink:
        console = Console(file=io.StringIO(), width=200)
        line = staticmethod(lines.append)

    _print_ncu(
        {
            **recorded,
            "joined": table,
            "agreement": agreement,
            "top_kernels_not_profiled": missing,
            "ncu_kernels_not_in_table": extra,
        },
        10,
        Sink(),
    )
    said = "\n".join(lines)
    assert missing and extra
    assert f"{len(missing)} of the top kernels were not seen under ncu" in said
    share = table.set_index("name")["share_pct"][missing[0]]
    assert f"({share:.1f} %)" in said
    assert f"{len(extra)} kernel(s) ran under ncu that the trace's table does not hold" in said
    assert "Kernel<cutlass_tensorop_f16_s16816fprop_optimized_f16_64x64_64x5_nhwc_align8>" in said
