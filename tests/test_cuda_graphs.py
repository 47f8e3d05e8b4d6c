"""--cuda-graphs (profiler.collect.cuda_graphs): what is refused before anything is built, in one
line naming the backend; the run's folder name; the replay check on CPU tensors with stand-in
graphs. Capturing itself needs a GPU run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from profiler import runs
from profiler.collect import cuda_graphs
from profiler.collect.backends import get as backend_named
from profiler.errors import UserError
from profiler.runs.config import RunConfig
from tests.conftest import FIXTURES
from tests.test_cli_errors import TINY, assert_nothing_written, assert_one_line_error

# ---- refused before anything is built --------------------------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_run_with_cuda_graphs_on_a_cpu_is_one_line_and_exit_2(cli):
    done = cli("run", *TINY, "--cuda-graphs")
    assert_one_line_error(done, "--cuda-graphs", "pytorch_fp32", "need a CUDA GPU")
    assert_nothing_written()


def test_what_cannot_be_captured_is_known_before_the_build():
    on_gpu = True
    assert cuda_graphs.refusal(RunConfig(cuda_graphs=True), "pytorch", on_gpu) is None
    assert "CUDA GPU" in cuda_graphs.refusal(RunConfig(cuda_graphs=True), "pytorch", False)
    # a generation's decode step is captured by the workload (an encoder-decoder is refused
    # there, test_generate)
    generate = RunConfig(cuda_graphs=True, workload="generate", model="gpt2")
    assert cuda_graphs.refusal(generate, "pytorch", on_gpu) is None
    for mode in ("reduce-overhead", "max-autotune"):
        why = cuda_graphs.refusal(
            RunConfig(cuda_graphs=True, compile_mode=mode), "inductor", on_gpu
        )
        assert f"--compile-mode {mode} already replays CUDA graphs" in why
    for mode in ("default", "max-autotune-no-cudagraphs"):
        config = RunConfig(cuda_graphs=True, compile_mode=mode, backend="inductor_fp16")
        assert cuda_graphs.refusal(config, "inductor", on_gpu) is None
    # the mode only matters to torch.compile
    assert (
        cuda_graphs.refusal(
            RunConfig(cuda_graphs=True, compile_mode="reduce-overhead"), "pytorch", on_gpu
        )
        is None
    )
    # TensorRT replays crashed under torch.profiler on the H100; without it they are tried
    trt = RunConfig(cuda_graphs=True, backend="ttrt_fp16")
    assert "crashed the process under torch.profiler" in cuda_graphs.refusal(
        trt, "tensorrt", on_gpu
    )
    assert (
        cuda_graphs.refusal(
            RunConfig(cuda_graphs=True, backend="ttrt_fp16", capture="cuda-profiler-api"),
            "tensorrt",
            on_gpu,
        )
        is None
    )


def test_the_refusal_names_the_backend_in_one_line():
    config = RunConfig(backend="inductor_fp16", cuda_graphs=True, compile_mode="reduce-overhead")
    with pytest.raises(UserError) as refused:
        cuda_graphs.check(config, backend_named("inductor_fp16"), True)
    message = str(refused.value)
    assert "\n" not in message and message.startswith("--cuda-graphs: inductor_fp16 cannot be")


def test_an_error_is_quoted_by_its_first_line():
    error = RuntimeError(
        "\n  CUDA error: operation not permitted when stream is capturing\n"
        "CUDA kernel errors might be asynchronously reported ...\n"
    )
    assert cuda_graphs.error_line(error) == (
        "RuntimeError: CUDA error: operation not permitted when stream is capturing"
    )
    assert cuda_graphs.error_line(ValueError()) == "ValueError"
    assert len(cuda_graphs.error_line(RuntimeError("x" * 1000))) == 240


# ---- the run's name and folder ---------------------------------------------------------------


def test_a_graph_run_has_a_folder_of_its_own():
    plain, graphs = RunConfig(batch_size=8), RunConfig(batch_size=8, cuda_graphs=True)
    assert (plain.run_name, graphs.run_name) == ("pytorch_fp32_bs8", "pytorch_fp32_bs8_cg")
    assert (
        RunConfig(model="tests.tiny_models:conv_net", cuda_graphs=True).run_name
        == "pytorch_fp32_bs8_conv_net_cg"
    )
    # --name is the whole suffix, as for generation runs; destination tells them apart
    assert RunConfig(name="x", cuda_graphs=True).run_name == "pytorch_fp32_bs8_x"
    assert RunConfig(cuda_graphs=True).to_dict()["cuda_graphs"] is True


def test_with_name_a_graph_run_never_silently_replaces_a_plain_one(tmp_path):
    result = runs.read_result(FIXTURES / "h200" / "runs" / "pytorch_fp32_bs8")
    assert result.config.cuda_graphs is False  # recorded before the option: the default
    runs.write_result(tmp_path / "runs" / "pytorch_fp32_bs8_x", result)
    folders = {"runs_dir": tmp_path / "runs", "tb_dir": tmp_path / "tb_logs", "name": "x"}
    runs.check_destination(RunConfig(**folders))  # the same run again: replaced as before
    with pytest.raises(UserError, match=r"holds another run \(cuda graphs False \(now True\)\)"):
        runs.check_destination(RunConfig(**folders, cuda_graphs=True))
    runs.check_destination(RunConfig(**folders, cuda_graphs=True, replace=True))


def test_sweeps_do_not_take_it_yet(cli):
    from profiler.runs.manifest import SWEEP_SETS

    assert "cuda_graphs" in SWEEP_SETS
    done = cli("sweep", "--backends", "pytorch_fp32", "--bs", "1", "--cuda-graphs")
    assert done.code == 2 and "--cuda-graphs" in done.stderr


# ---- the replay check, with stand-in graphs on the CPU ---------------------------------------

NO_CUDA = SimpleNamespace(
    cuda=SimpleNamespace(synchronize=lambda: None),
    inference_mode=torch.inference_mode,
    isfinite=torch.isfinite,
    Tensor=torch.Tensor,
)


class Graph:
    """A stand-in CUDAGraph whose replay writes ``value()`` into the output, or nothing."""

    def __init__(self, output: torch.Tensor, value=None) -> None:
        self.output, self.value, self.replays = output, value, 0

    def replay(self) -> None:
        self.replays += 1
        if self.value is not None:
            self.output.copy_(self.value())


def test_a_replay_that_rewrites_the_output_passes():
    expected = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    output = expected.clone()
    graph = Graph(output, lambda: expected)
    said = cuda_graphs._check_replay(NO_CUDA, graph, output, expected, (torch.ones(2),))
    assert graph.replays == 1 and said.startswith("a replay rewrote the output")
    assert torch.equal(output, expected)


def test_a_replay_that_writes_nothing_is_refused():
    expected = torch.ones(4)
    output = expected.clone()  # what the capture left there: right, but never written again
    with pytest.raises(cuda_graphs.NotReplayable, match="did not rewrite the output"):
        cuda_graphs._check_replay(NO_CUDA, Graph(output), output, expected, ())


def test_a_replay_that_writes_something_else_is_refused():
    expected = torch.ones(4)
    output = expected.clone()
    with pytest.raises(cuda_graphs.NotReplayable, match="differs from a plain call"):
        cuda_graphs._check_replay(
            NO_CUDA, Graph(output, lambda: 2 * expected), output, expected, ()
        )


@pytest.mark.parametrize("case", ["integer", "input", "no tensor", "not finite"])
def test_an_output_that_cannot_be_checked_is_replayed_and_said_so(case):
    expected = torch.ones(4)
    output = expected.clone()
    inputs: tuple = ()
    if case == "integer":
        expected, output = expected.long(), output.long()
    elif case == "input":
        inputs = (output,)
    elif case == "no tensor":
        output = {"logits": output}
    else:
        expected = torch.full((4,), float("nan"))
    graph = Graph(torch.empty(4))
    said = cuda_graphs._check_replay(NO_CUDA, graph, output, expected, inputs)
    assert graph.replays == 1 and said.startswith("the replay was not checked")
    if case != "no tensor":
        assert not torch.isnan(output.float()).any()  # never filled when not checked
