"""`report` (one self-contained HTML file, opened in a real headless browser with the network
off), `peaks` on the CPU with tiny sizes, FLOP counting, and the tensorboard warning."""

import json
import re
import shutil
import subprocess

import pytest

from .conftest import FIXTURES, ROOT

H200 = FIXTURES / "h200"
FLOPS = FIXTURES / "roofline" / "resnet50_roofline_inputs.json"
CHROMIUM = next(
    (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
    None,
)
#: no proxy that answers and no name that resolves: the page cannot reach any network
OFFLINE = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--proxy-server=127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--disable-background-networking",
]


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    from profiler.commands.report import run

    out = tmp_path_factory.mktemp("report") / "compare.html"
    run(
        str(H200 / "runs" / "pytorch_fp16_bs8"),
        str(H200 / "runs" / "ttrt_fp16_bs8"),
        out,
        peaks_dir=out.parent / "no-peaks",
        flops=FLOPS,
    )
    return out


def test_report_is_self_contained(comparison):
    text = comparison.read_text()
    assert not re.search(r"""(src|href)\s*=\s*['"]?(https?:)?//""", text)
    assert "<script" not in text and "@import" not in text
    assert text.count("data:image/png;base64,") >= 4  # categories x3, roofline


def test_report_holds_the_key_numbers(comparison):
    text = comparison.read_text()
    # p50 5.791 and 0.799 ms, each to the figures its window's CV allows (16.9 % and 2.4 %)
    for figure in (
        "p50 5.8 ms (! noisy, bimodal)",
        "p50 0.80 ms",
        "1,494 samples/s",
        "9,943 samples/s",
        "65.43 GFLOP",
        "datasheet (H200), not measured",
        "GPU idle between kernels (launch-bound)",
        "tensorrt::execute_engine",
        "noise (std / mean)",
        "TensorRT layers (engine_layer_times)",
    ):
        assert figure in text, figure


@pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary on PATH (Debian: apt-get install chromium)"
)
def test_report_renders_in_a_browser_without_network(comparison, tmp_path):
    done = subprocess.run(
        [CHROMIUM, *OFFLINE, "--dump-dom", comparison.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    for figure in (
        "p50 5.8 ms (! noisy, bimodal)",
        "p50 0.80 ms",
        "Roofline chart",
        "launch-bound",
        "11.30 TFLOP/s",
    ):
        assert figure in dom, figure
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            CHROMIUM,
            *OFFLINE,
            f"--screenshot={shot}",
            "--window-size=1200,2000",
            comparison.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.read_bytes()[:4] == b"\x89PNG" and shot.stat().st_size > 50_000


@pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary on PATH (Debian: apt-get install chromium)"
)
def test_sweep_report_renders_in_a_browser_without_network(tmp_path):
    from profiler.commands.report import run

    page = run(
        str(FIXTURES / "h100_sweep" / "runs" / "gpu_sweep"),
        None,
        tmp_path / "s.html",
        peaks_dir=tmp_path / "none",
    )
    done = subprocess.run(
        [CHROMIUM, *OFFLINE, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for figure in ("latency speedup [95 %", "faster", "<th>CV</th>", "57.8 % noisy"):
        assert figure in done.stdout, figure


def test_report_of_a_run_and_of_a_sweep(tmp_path, monkeypatch):
    """A run without FLOPs says so; the fixture runs laid out as a sweep with the warm sweep's
    benchmark.csv give the table, the per-cell advice and the roofline chart."""
    from profiler.commands.report import run

    single = run(
        str(H200 / "runs" / "pytorch_fp32_bs8"),
        None,
        tmp_path / "run.html",
        peaks_dir=tmp_path / "none",
    )
    text = single.read_text()
    assert "no roofline: the run's result.json has no roofline_inputs" in text
    assert "FP32 GEMM/conv on CUDA cores" in text
    from profiler.runs.manifest import SweepCell, SweepManifest, write_manifest

    sweep = tmp_path / "runs" / "warm"
    names = ("pytorch_fp16_bs8", "ttrt_fp16_bs8")
    for name in names:
        shutil.copytree(H200 / "runs" / name, sweep / name)
        # result.json names tb_logs/<run>/... relative to where `run` was started
        shutil.copytree(H200 / "tb_logs" / name, tmp_path / "tb_logs" / name)
    write_manifest(
        sweep,
        SweepManifest(
            options={},
            name="warm",
            model="resnet50",
            backends=["pytorch_fp16", "ttrt_fp16"],
            batch_sizes=[8],
            baseline="pytorch_fp16",
            cells={
                n: SweepCell(backend=n.rsplit("_bs", 1)[0], batch_size=8, status="ok")
                for n in names
            },
        ),
    )
    shutil.copy(ROOT / "docs" / "sweep" / "warm" / "benchmark.csv", sweep / "benchmark.csv")
    monkeypatch.chdir(tmp_path)
    page = run("warm", None, None, peaks_dir=tmp_path / "none", flops=FLOPS)
    assert page == sweep / "report.html"
    text = page.read_text()
    assert "Roofline and advice per cell" in text and "Roofline chart" in text
    assert re.search(r"pytorch_fp16 bs8</td><td>11\.\d{2}</td>", text)
    # the advice in words: each rule's title and what to try, its id beside it
    assert "GPU idle between kernels (launch-bound): try CUDA graphs" in text
    assert "Throughput still rising with batch size: try a larger --bs" in text


def test_report_of_two_runs_goes_under_runs_made_when_missing(cli, tmp_path):
    a, b = (str(H200 / "runs" / name) for name in ("pytorch_fp16_bs8", "ttrt_fp16_bs8"))
    done = cli("report", a, b, "--peaks-dir", str(tmp_path / "none"))
    assert done.code == 0, done.stderr
    page = "runs/report_pytorch_fp16_bs8_vs_ttrt_fp16_bs8.html"
    assert done.stdout.strip().splitlines()[-1] == f"wrote {page}"
    assert (tmp_path / page).is_file() and not list(tmp_path.glob("*.html"))


def test_report_errors_are_one_line(cli):
    result = cli("report", "no_such_run")
    assert result.code == 2 and result.stderr.startswith("error: no such file")
    result = cli("report", str(H200 / "runs" / "ttrt_fp16_bs8"), "--flops", "/nonexistent.json")
    assert result.code == 2 and result.stderr.count("\n") == 1 and "--flops" in result.stderr


# ---- peaks ----------------------------------------------------------------------------------


def test_peaks_measures_the_cpu_once_and_caches(tmp_path):
    from profiler.collect import measured_peaks

    tiny = {"matmul_n": 32, "copy_bytes": 1 << 16, "int8_n": 32}
    data, path, measured = measured_peaks.peaks(tmp_path, sizes=tiny)
    assert measured and path.parent == tmp_path and json.loads(path.read_text()) == data
    assert data["matmul_tflops"]["fp32"] > 0 and data["copy"]["gb_per_s"] > 0
    assert data["method"]["statistic"] == "median" and data["method"]["sizes"] == tiny
    for name in ("tf32", "fp8", "int8"):  # CUDA-only modes: n/a with the reason
        assert data["matmul_tflops"][name] is None and data["matmul_detail"][name]["why_not"]
    again, _, measured_again = measured_peaks.peaks(tmp_path, sizes=tiny)
    assert not measured_again and again == data
    _, _, refreshed = measured_peaks.peaks(tmp_path, refresh=True, sizes=tiny)
    assert refreshed


def test_peaks_command_prints_method_and_json(cli, tmp_path):
    result = cli("peaks", "--cache-dir", str(tmp_path), "--matmul-n", "16", "--copy-mib", "1")
    assert result.code == 0, result.stderr
    assert "median of 20" in result.stdout and "matmul fp32" in result.stdout
    assert "copy bandwidth" in result.stdout
    result = cli("peaks", "--cache-dir", str(tmp_path), "--json")
    assert result.code == 0 and json.loads(result.stdout)["source"] == "measured"
    assert cli("peaks", "--matmul-n", "0").stderr.startswith("error: --matmul-n")


# ---- FLOPs ----------------------------------------------------------------------------------


def test_roofline_inputs_of_a_small_conv_net():
    from profiler.collect.flops import roofline_inputs
    from tests.tiny_models import conv_net

    model, inputs = conv_net(batch_size=2, image_size=16)
    counted = roofline_inputs(model, inputs, "fp16", 2)
    conv = 2 * 2 * 8 * 3 * 3 * 3 * 16 * 16  # 2 x N x Cout x Cin x kh x kw x H x W
    linear = 2 * 2 * 8 * 4
    assert counted["flops_per_batch"] == conv + linear
    weights = sum(p.numel() for p in model.parameters())
    assert counted["weight_bytes"] >= 2 * weights
    assert counted["input_bytes"] == 2 * 2 * 3 * 16 * 16 and counted["output_bytes"] == 2 * 2 * 4
    assert "FlopCounterMode on the eager model (meta device)" in counted["method"]


def test_a_model_that_fails_leaves_an_error_not_an_exception():
    from profiler.collect.flops import roofline_inputs
    from tests.tiny_models import failing

    model, inputs = failing()
    assert roofline_inputs(model, inputs, "fp32", 2)["error"].startswith("FLOPs not counted")


def test_tensorboard_warns_that_its_page_needs_the_internet(cli, monkeypatch):
    from profiler.tools import tensorboard

    monkeypatch.setattr(tensorboard, "serve", lambda *a, **k: tensorboard.Served(0, None, None))
    result = cli("tensorboard")
    assert result.code == 0 and "needs the internet" in result.stderr
    assert "profile.py report" in result.stderr


def test_a_cpu_run_records_its_flops_and_its_report_shows_them(cli, tmp_path):
    """run stores roofline_inputs; a --record-shapes run's report lists its GEMM by shape."""
    done = cli(
        "run",
        "--model",
        "tests.tiny_models:conv_net",
        "--bs",
        "2",
        "--iters",
        "3",
        "--timed-warmup",
        "0",
        "--active",
        "1",
        "--record-shapes",
    )
    assert done.code == 0, done.stderr
    from profiler.runs.result import read_result

    run = "pytorch_fp32_bs2_conv_net"
    on_disk = json.loads((tmp_path / "runs" / run / "result.json").read_text())
    assert (
        on_disk["roofline_inputs"]["flops_per_batch"] > 0
        and "from" not in on_disk["roofline_inputs"]
    )
    inputs = read_result(tmp_path / "runs" / run).roofline_inputs
    # conv_net gets the run's --image-size, 224 by default
    assert inputs.flops_per_batch == 2 * 2 * 8 * 3 * 3 * 3 * 224 * 224 + 2 * 2 * 8 * 4
    assert inputs.precision == "fp32" and inputs.bytes_per_element == 4
    assert inputs.flops_by_operator and inputs.error is None
    done = cli("report", run, "--peaks-dir", str(tmp_path / "none"))
    assert done.code == 0, done.stderr
    # the page goes under runs/, not into the current folder, and the last line names it
    assert done.stdout.strip().splitlines()[-1] == f"wrote runs/report_{run}.html"
    assert not list(tmp_path.glob("*.html"))
    text = (tmp_path / "runs" / f"report_{run}.html").read_text()
    assert "GEMMs by recorded shape" in text and "aten::addmm" in text
    assert "FLOPs per batch (FlopCounterMode)" in text and "no ceilings" in text


# ---- what the terminal carries, the HTML carries (issue 23 point 3) --------------------------

SWEEP = FIXTURES / "h100_sweep" / "runs" / "gpu_sweep"


class _Tables(__import__("html.parser").parser.HTMLParser):
    """Every <table> of a page: its class, its header cells and its rows of cells."""

    def __init__(self):
        super().__init__()
        self.tables, self._cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append({"class": dict(attrs).get("class"), "head": [], "rows": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th") and self.tables:
            self._cell = [tag, ""]

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            table = self.tables[-1]
            tag, text = self._cell
            (
                table["head"] if tag == "th" and table["class"] == "grid" else table["rows"][-1]
            ).append(text)
            self._cell = None


def tables_of(text: str) -> list[dict]:
    parser = _Tables()
    parser.feed(text)
    for table in parser.tables:
        table["rows"] = [row for row in table["rows"] if row]
    return parser.tables


#: a number as a cell shows it: sign, thousands separators, decimals, an exponent
NUMBER = re.compile(r"^[+-]?\d{1,3}(,\d{3})*(\.(\d+))?(e[+-]\d+)?$")


def number_format(cell: str) -> tuple | None:
    """(decimals, scientific) of a numeric cell; None for text and "-"."""
    found = NUMBER.match(cell.strip())
    return None if not found else (len(found.group(3) or ""), bool(found.group(4)))


#: columns of figures each printed to the significant figures its own cell's noise allows (the
#: sweep's latencies, by each cell's CV; GPU time to four figures) or to two significant figures
#: (a relative error): their decimals vary by row
TRIMMED = ("mean ms", "p50 ms", "p90 ms", "p99 ms", "GPU ms", "rel L2 err")


def sweep_grid_table(text: str) -> dict:
    """A sweep page's table of cells: the one headed by the latency's speedup column."""
    return next(
        t for t in tables_of(text) if t["class"] == "grid" and figure_header(t["head"], "latency")
    )


def figure_header(head: list[str], figure: str) -> str | None:
    """The header of a figure's speedup column ("latency" or "GPU-time"): "latency speedup
    [95 %, 6 proc.] verdict"; None without one."""
    return next((h for h in head if h.startswith(f"{figure} speedup [95 %")), None)


def sweep_grid(text: str) -> dict:
    """A sweep page's cells, each row's cells by header, keyed by (backend, bs)."""
    grid = sweep_grid_table(text)
    rows = [dict(zip(grid["head"], row)) for row in grid["rows"]]
    return {(row["backend"], row["bs"]): row for row in rows}


def assert_readable_tables(text: str) -> None:
    """Headers are words (never a field name like us_a or share_b_pct), and every column of a
    grid table shows its numbers in one format (but the TRIMMED ones)."""
    for table in tables_of(text):
        for head in table["head"]:
            assert not re.fullmatch(r"[a-z0-9]+(_[a-z0-9]+)+", head.strip()), head
        if table["class"] != "grid":
            continue
        for index, name in enumerate(table["head"]):
            if name in TRIMMED:
                continue
            formats = {number_format(row[index]) for row in table["rows"]} - {None}
            assert len(formats) <= 1, (name, [row[index] for row in table["rows"]])


def test_compare_report_carries_the_timed_headline_verdict_noise_and_config_diff(comparison):
    text = comparison.read_text()
    for figure in (
        "Timed windows (no profiler attached)",
        "Recorded runs (result.json)",
        "p50 latency",
        "5.8 ms",
        "0.80 ms",
        "7.25x",  # CVs 16.9 and 2.4 %
        "B faster</b>",
        "warning (A, recorded run): noisy: CV 16.9 %",
        "warning (A, recorded run): bimodal",
        "Config and environment fields that differ (7)",
        "config.cache_dir",
        "/tmp/engine-cache",
        "Why B differs from A",
        "different kernels",
    ):
        assert figure in text, figure
    # both figures named: latency's verdict over the one process a side, GPU time unmeasured
    assert re.search(
        r"latency \(what a caller waits\): B/A = 0\.138, 95 % interval "
        r"\[0\.\d{3}, 0\.\d{3}\] over 1 vs 1 process, within one window a side "
        r"\(one process on a side",
        text,
    )
    assert "GPU time (the device&#x27;s work): no verdict: GPU time was not measured" in text
    # the verdict comes before the kernel tables, as in the terminal
    assert text.index("B faster") < text.index("Kernel time by category")


def test_compare_report_tables_have_human_headers_and_one_format_per_column(comparison):
    text = comparison.read_text()
    assert "<th>us_a</th>" not in text and "<th>share_b_pct</th>" not in text
    assert "<th>A µs</th>" in text and "<th>delta µs (B - A)</th>" in text
    assert_readable_tables(text)


def test_sweep_report_carries_speedup_interval_verdict_processes_and_noise(tmp_path):
    from profiler.commands.report import run

    page = run(str(SWEEP), None, tmp_path / "sweep.html", peaks_dir=tmp_path / "none")
    text = page.read_text()
    head = sweep_grid_table(text)["head"]
    latency = figure_header(head, "latency")
    assert latency is not None  # one column: the speedup, its 95 % interval and the verdict
    for column in ("p50 ms", "processes", "CV"):
        assert column in head, column
    # no cell of this sweep measured GPU time
    assert figure_header(head, "GPU-time") is None and "GPU ms" not in head
    assert "GPU time: not measured in these cells" in text
    rows = sweep_grid(text)
    from profiler.analysis.sweep_analysis import SweepAnalysis

    cell = SweepAnalysis(SWEEP).benchmark.set_index(["backend", "bs"]).loc[("ttrt_fp16", 1)]
    assert (
        rows[("ttrt_fp16", "1")][latency]
        == f"{cell['speedup']:.2f}x [{cell['speedup_low']:.2f}-{cell['speedup_high']:.2f}] faster"
    )
    assert rows[("ttrt_fp16", "8")][latency].startswith("4.57x [")
    assert rows[("pytorch_fp16", "8")][latency] == "1.00x baseline"
    assert rows[("pytorch_fp16", "8")]["CV"] == "57.8 % noisy"  # the window's noise warnings
    assert "warning: pytorch_fp16 bs 8: noisy (CV 57.8 %)" in text
    assert "speedup = pytorch_fp16 p50 / p50" in text and "50 iterations" in text
    assert_readable_tables(text)


def test_one_format_per_column_whatever_the_values():
    import pandas as pd

    from profiler.report import html

    frame = pd.DataFrame(
        {
            "thing": ["a", "b", "c"],
            "wide": [100.0, 100.123, 0.00144],
            "value": [100.0, 100.123, 0.5],
            "tiny": [0.001, 0.002, None],
            "count": [1.0, 27.0, 3.0],
        }
    )
    text = html.table(frame)
    assert_readable_tables(text)
    cells = dict(zip(["thing", "wide", "value", "tiny", "count"], zip(*tables_of(text)[0]["rows"])))
    assert cells["wide"] == ("1.00e+02", "1.00e+02", "1.44e-03")  # 0.00144 is not 0.0
    assert cells["value"] == ("100.00", "100.12", "0.50")  # never 100 beside 100.123
    assert cells["tiny"] == ("1.00e-03", "2.00e-03", "-")
    assert cells["count"] == ("1", "27", "3")


NO_MATPLOTLIB = (
    "import sys; sys.modules['matplotlib'] = None; sys.argv = ['profile.py']; "
    "from profiler.cli.app import main; sys.exit(main(sys.argv[1:] or {args!r}))"
)


@pytest.mark.parametrize(
    "args",
    [
        [str(H200 / "runs" / "ttrt_fp16_bs8")],
        [str(H200 / "runs" / "pytorch_fp16_bs8"), str(H200 / "runs" / "ttrt_fp16_bs8")],
        [str(SWEEP)],
    ],
    ids=["run", "compare", "sweep"],
)
def test_report_without_matplotlib_writes_its_tables_and_says_why_no_figures(tmp_path, args):
    from .conftest import run_python

    out = tmp_path / "report.html"
    done = run_python(
        "-c",
        f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
        + NO_MATPLOTLIB.format(
            args=["report", *args, "--out", str(out), "--peaks-dir", str(tmp_path / "none")]
        ),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "matplotlib" in warnings[0] and "[plots]" in warnings[0]
    text = out.read_text()
    assert "data:image/png" not in text and "figures left out" in text
    assert "<table class='grid'>" in text
