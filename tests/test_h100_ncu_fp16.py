"""The H100 eager FP16 ncu fixture (tests/fixtures/h100_ncu_fp16, see its README): `summarize`
joins the ncu CSV to the trace (10 kernels, about 81 % of kernel time) and prints both Tensor
Core readings over the profiled kernels."""

from .conftest import ROOT

RUN = ROOT / "tests" / "fixtures" / "h100_ncu_fp16" / "runs" / "pytorch_fp16_bs8"


def flat(text: str) -> str:
    return " ".join(text.replace("│", " ").split())


def test_summarize_joins_the_h100_fp16_capture(cli, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    done = cli("summarize", str(RUN))
    assert done.code == 0, done.stderr
    out = flat(done.stdout)
    assert (
        "name rules agree with Nsight Compute on 100.0 % of the profiled kernel time "
        "(10 kernels, 81.3 % of all kernel time)"
    ) in out
    assert "time in Tensor Core kernels 37.1 %" in out
    assert (
        "tensor pipe busy (ncu) 6.6 % kernel-time weighted, over the 10 profiled kernels "
        "(81.3 % of kernel time; time in Tensor Core kernels there: 24.4 %)"
    ) in out
    assert "not seen under ncu" not in out


def test_the_join_agrees_with_what_the_capture_printed():
    """The command's own join on the GPU machine printed the same readings."""
    log = flat((ROOT / "tests" / "fixtures" / "h100_ncu_fp16" / "ncu_stdout.log").read_text())
    assert "(10 kernels, 81.3 % of all kernel time)" in log
    assert "time in Tensor Core kernels (name rules): 24.4 % of that kernel time" in log
    assert "tensor pipe busy (ncu, kernel-time weighted): 6.6 % of that kernel time" in log
