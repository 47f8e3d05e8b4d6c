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
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                 if shutil.which(n)), None)
#: no proxy that answers and no name that resolves: the page cannot reach any network
OFFLINE = ["--headless", "--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9",
           "--host-resolver-rules=MAP * ~NOTFOUND", "--disable-background-networking"]


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    from profiler.commands.report import run

    out = tmp_path_factory.mktemp("report") / "compare.html"
    run(str(H200 / "runs" / "pytorch_fp16_bs8"), str(H200 / "runs" / "ttrt_fp16_bs8"), out,
        peaks_dir=out.parent / "no-peaks", flops=FLOPS)
    return out


def test_report_is_self_contained(comparison):
    text = comparison.read_text()
    assert not re.search(r"""(src|href)\s*=\s*['"]?(https?:)?//""", text)
    assert "<script" not in text and "@import" not in text
    assert text.count("data:image/png;base64,") >= 4  # categories x3, roofline


def test_report_holds_the_key_numbers(comparison):
    text = comparison.read_text()
    for figure in ("p50 5.791 ms", "p50 0.799 ms", "1,494 samples/s", "9,943 samples/s",
                   "65.43 GFLOP", "datasheet (H200), not measured",
                   "GPU idle between kernels (launch-bound)", "tensorrt::execute_engine",
                   "noise (std / mean)", "TensorRT layers (engine_layer_times)"):
        assert figure in text, figure


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary on PATH (Debian: apt-get "
                    "install chromium)")
def test_report_renders_in_a_browser_without_network(comparison, tmp_path):
    done = subprocess.run([CHROMIUM, *OFFLINE, "--dump-dom", comparison.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    for figure in ("p50 5.791 ms", "p50 0.799 ms", "Roofline chart", "launch-bound",
                   "11.30 TFLOP/s"):
        assert figure in dom, figure
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, *OFFLINE, f"--screenshot={shot}", "--window-size=1200,2000",
                    comparison.as_uri()], capture_output=True, timeout=120, check=True)
    assert shot.read_bytes()[:4] == b"\x89PNG" and shot.stat().st_size > 50_000


def test_report_of_a_run_and_of_a_sweep(tmp_path, monkeypatch):
    """A run without FLOPs says so; the fixture runs laid out as a sweep with the warm sweep's
    benchmark.csv give the table, the per-cell advice and the roofline chart."""
    from profiler.commands.report import run

    single = run(str(H200 / "runs" / "pytorch_fp32_bs8"), None, tmp_path / "run.html",
                 peaks_dir=tmp_path / "none")
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
    write_manifest(sweep, SweepManifest(
        options={}, name="warm", model="resnet50", backends=["pytorch_fp16", "ttrt_fp16"],
        batch_sizes=[8], baseline="pytorch_fp16",
        cells={n: SweepCell(backend=n.rsplit("_bs", 1)[0], batch_size=8, status="ok")
               for n in names}))
    shutil.copy(ROOT / "docs" / "sweep" / "warm" / "benchmark.csv", sweep / "benchmark.csv")
    monkeypatch.chdir(tmp_path)
    page = run("warm", None, None, peaks_dir=tmp_path / "none", flops=FLOPS)
    assert page == sweep / "report.html"
    text = page.read_text()
    assert "Roofline and advice per cell" in text and "Roofline chart" in text
    assert re.search(r"pytorch_fp16 bs8</td><td>11\.\d{3}</td>", text)
    assert "launch-bound; batch-headroom" in text


def test_report_errors_are_one_line(cli):
    result = cli("report", "no_such_run")
    assert result.code == 2 and result.stderr.startswith("error: no such file")
    result = cli("report", str(H200 / "runs" / "ttrt_fp16_bs8"), "--flops", "/nonexistent.json")
    assert result.code == 2 and result.stderr.count("\n") == 1 and "--flops" in result.stderr


# ---- peaks ----------------------------------------------------------------------------------

def test_peaks_measures_the_cpu_once_and_caches(tmp_path):
    from profiler.collect import peaks

    tiny = {"matmul_n": 32, "copy_bytes": 1 << 16, "int8_n": 32}
    data, path, measured = peaks.peaks(tmp_path, sizes=tiny)
    assert measured and path.parent == tmp_path and json.loads(path.read_text()) == data
    assert data["matmul_tflops"]["fp32"] > 0 and data["copy"]["gb_per_s"] > 0
    assert data["method"]["statistic"] == "median" and data["method"]["sizes"] == tiny
    for name in ("tf32", "fp8", "int8"):  # CUDA-only modes: n/a with the reason
        assert data["matmul_tflops"][name] is None and data["matmul_detail"][name]["why_not"]
    again, _, measured_again = peaks.peaks(tmp_path, sizes=tiny)
    assert not measured_again and again == data
    _, _, refreshed = peaks.peaks(tmp_path, refresh=True, sizes=tiny)
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
    conv = 2 * 2 * 8 * 3 * 3 * 3 * 16 * 16   # 2 x N x Cout x Cin x kh x kw x H x W
    linear = 2 * 2 * 8 * 4
    assert counted["flops_per_batch"] == conv + linear
    weights = sum(p.numel() for p in model.parameters())
    assert counted["weight_bytes"] >= 2 * weights
    assert counted["input_bytes"] == 2 * 2 * 3 * 16 * 16 and counted["output_bytes"] == 2 * 2 * 4
    assert "meta device" in counted["method"]


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
    done = cli("run", "--model", "tests.tiny_models:conv_net", "--bs", "2", "--iters", "3",
               "--timed-warmup", "0", "--active", "1", "--record-shapes")
    assert done.code == 0, done.stderr
    from profiler.runs.result import read_result

    run = "pytorch_fp32_bs2_conv_net"
    on_disk = json.loads((tmp_path / "runs" / run / "result.json").read_text())
    assert on_disk["roofline_inputs"]["flops_per_batch"] > 0 and "from" not in \
        on_disk["roofline_inputs"]
    inputs = read_result(tmp_path / "runs" / run).roofline_inputs
    # conv_net gets the run's --image-size, 224 by default
    assert inputs.flops_per_batch == 2 * 2 * 8 * 3 * 3 * 3 * 224 * 224 + 2 * 2 * 8 * 4
    assert inputs.precision == "fp32" and inputs.bytes_per_element == 4
    assert inputs.flops_by_operator and inputs.error is None
    done = cli("report", run, "--peaks-dir", str(tmp_path / "none"))
    assert done.code == 0, done.stderr
    text = (tmp_path / f"report_{run}.html").read_text()
    assert "GEMMs by recorded shape" in text and "aten::addmm" in text
    assert "FLOPs per batch (FlopCounterMode)" in text and "no ceilings" in text
