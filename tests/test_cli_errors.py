"""Bad input: one line on stderr, a non-zero exit, and nothing written."""

from pathlib import Path

import pytest
import torch

TINY = [
    "--model",
    "tests.tiny_models:conv_net",
    "--iters",
    "2",
    "--timed-warmup",
    "0",
    "--active",
    "1",
]


def assert_one_line_error(done, *fragments, progress_before=False):
    """Exit 2 and exactly one "error:" line, the last one; before it at most progress lines."""
    assert done.code == 2, done
    lines = done.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], done.stderr
    if not progress_before:
        assert len(lines) == 1, done.stderr
    for fragment in fragments:
        assert fragment in errors[0]
    assert "Traceback" not in done.stderr


def assert_nothing_written():
    for folder in ("runs", "tb_logs"):
        assert not Path(folder).exists() or not any(Path(folder).iterdir()), list(
            Path(folder).iterdir()
        )


def test_unknown_backend_lists_the_valid_ones(cli):
    done = cli("run", "--backend", "tensorflow", *TINY)
    assert_one_line_error(done, "unknown backend 'tensorflow'", "pytorch_fp32", "inductor_fp16")
    assert_nothing_written()


def test_unknown_model_lists_the_valid_ones(cli):
    done = cli("run", "--model", "vgg99")
    assert_one_line_error(done, "unknown model 'vgg99'", "resnet50", "distilbert", "transformer")
    assert_nothing_written()


@pytest.mark.parametrize(
    "flag, value",
    [("--bs", "0"), ("--active", "0"), ("--iters", "0"), ("--repeat", "0"), ("--wait", "-1")],
)
def test_out_of_range_numbers(cli, flag, value):
    done = cli("run", *TINY, flag, value)
    assert_one_line_error(done, flag)
    assert_nothing_written()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("backend", ["pytorch_fp16", "inductor_fp16"])
def test_cuda_backend_without_cuda(cli, backend):
    done = cli("run", "--backend", backend, *TINY)
    assert_one_line_error(done, backend, "needs a CUDA GPU")
    assert_nothing_written()


def test_missing_optional_package_names_the_extra(cli, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "transformers", None)  # makes `import transformers` fail
    done = cli("run", "--model", "distilbert", "--bs", "1", "--seq-len", "8")
    assert_one_line_error(done, "transformers", ".[nlp]")
    assert_nothing_written()


def test_availability_check_names_the_extra():
    from profiler.collect.backends import module_missing

    assert module_missing("json")() is None
    reason = module_missing("no_such_module_anywhere", extra="tensorrt")()
    assert "no_such_module_anywhere" in reason and ".[tensorrt]" in reason


def test_model_function_that_does_not_import(cli):
    done = cli("run", "--model", "no_such_package.models:build")
    assert_one_line_error(done, "cannot import 'no_such_package.models'")


def test_model_function_that_is_missing_or_wrong(cli):
    assert_one_line_error(
        cli("run", "--model", "tests.tiny_models:nothing_here"), "has no function 'nothing_here'"
    )
    assert_one_line_error(
        cli("run", "--model", "tests.tiny_models:not_a_pair"), "must return (model, example_inputs)"
    )


def test_weights_that_are_not_a_state_dict(cli, tmp_path):
    not_torch = tmp_path / "notes.txt"
    not_torch.write_text("hello")
    assert_one_line_error(
        cli("run", *TINY, "--weights", str(not_torch)), "not a loadable state dict"
    )
    a_list = tmp_path / "list.pt"
    torch.save([torch.ones(2)], a_list)
    assert_one_line_error(cli("run", *TINY, "--weights", str(a_list)), "is not a state dict")
    wrong = tmp_path / "wrong.pt"
    torch.save({"other.weight": torch.ones(2)}, wrong)
    assert_one_line_error(cli("run", *TINY, "--weights", str(wrong)), "does not fit the model")
    assert_one_line_error(
        cli("run", *TINY, "--weights", str(tmp_path / "absent.pt")), "no such file"
    )
    assert_nothing_written()


def test_weights_that_fit_are_loaded(cli, tmp_path):
    import json

    from tests.tiny_models import conv_net

    model, _ = conv_net()
    state = {
        k: torch.full_like(v, 0.5) if v.is_floating_point() else v
        for k, v in model.state_dict().items()
    }
    path = tmp_path / "half.pt"
    torch.save(state, path)
    done = cli("run", *TINY, "--weights", str(path), "--json")
    assert done.code == 0, done.stderr
    with_weights = json.loads(done.stdout)["output"]["checksum"]
    # other weights are another run: the same name needs --replace
    without = json.loads(cli("run", *TINY, "--json", "--replace").stdout)["output"]["checksum"]
    assert with_weights != pytest.approx(without)


def test_out_of_memory_names_the_batch_size(cli, monkeypatch):
    from profiler.collect.backends import eager

    def no_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    monkeypatch.setattr(eager, "place", no_memory)
    done = cli("run", *TINY, "--bs", "64")
    assert_one_line_error(
        done, "out of memory at batch size 64", "smaller --bs", progress_before=True
    )
    assert_nothing_written()


def test_onnx_runtime_out_of_gpu_memory_names_the_batch_size(cli, monkeypatch):
    """ONNX Runtime's CUDA arena running out raises its own RuntimeException (module
    onnxruntime.capi.onnxruntime_pybind11_state), not torch's: still one out-of-memory line."""
    from profiler.collect.backends import eager

    RuntimeException = type(
        "RuntimeException",
        (Exception,),
        {"__module__": "onnxruntime.capi.onnxruntime_pybind11_state"},
    )

    def no_memory(*args, **kwargs):
        raise RuntimeException(
            "[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : Non-zero status code returned while "
            "running Conv node. Name:'/conv1/Conv' Status Message: bfc_arena.cc:376 void* "
            "onnxruntime::BFCArena::AllocateRawInternal(size_t, bool, onnxruntime::Stream*, bool, "
            "onnxruntime::WaitNotificationFn) Failed to allocate memory for requested buffer of "
            "size 205520896"
        )

    monkeypatch.setattr(eager, "place", no_memory)
    done = cli("run", *TINY, "--bs", "64")
    assert_one_line_error(
        done,
        "CUDA out of memory at batch size 64",
        "tried to allocate 205520896 bytes",
        "smaller --bs",
        progress_before=True,
    )
    assert_nothing_written()


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", ".hidden", "~root"])
def test_run_name_that_would_escape(cli, name):
    done = cli("run", *TINY, "--name", name)
    assert_one_line_error(done, "not a plain folder name")
    assert_nothing_written()


def test_failure_mid_run_leaves_nothing_half_written(cli):
    done = cli("run", "--model", "tests.tiny_models:failing", "--iters", "2")
    # an error in the user's model is one line naming the function and where it failed
    assert_one_line_error(
        done,
        "--model tests.tiny_models:failing failed: RuntimeError: this "
        "model fails on purpose (at tiny_models.py:",
        "in forward)",
        progress_before=True,
    )
    assert_nothing_written()


def test_backends_command_says_why_not(cli):
    import json

    done = cli("backends", "--json")
    assert done.code == 0
    rows = {row["name"]: row for row in json.loads(done.stdout)["backends"]}
    assert {
        "pytorch_fp32",
        "pytorch_fp16",
        "pytorch_bf16",
        "inductor_fp32",
        "inductor_fp16",
        "torchscript_fp32",
    } <= set(rows)
    assert rows["pytorch_fp32"]["available"] is True and rows["pytorch_fp32"]["why_not"] is None
    if not torch.cuda.is_available():
        assert rows["pytorch_fp16"]["available"] is False
        assert "CUDA" in rows["pytorch_fp16"]["why_not"]


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["summarize", "--bogus", "x"], ["no such option: --bogus", "summarize --help'"]),
        (["backends", "--bogus"], ["no such option: --bogus", "backends --help'"]),
        (["--bogus"], ["no such option: --bogus", "; see '"]),
        (["summarize"], ["missing argument 'target'", "summarize --help'"]),
        (["compare", "a"], ["missing argument 'b'", "compare --help'"]),
        (["frob"], ["no such command 'frob'", "; see '"]),
        (["sumarize", "x"], ["no such command 'sumarize'. Did you mean 'summarize'?"]),
        (["summarize", "x", "y"], ["unexpected extra argument", "(y)"]),
    ],
)
def test_usage_mistakes_are_one_error_line(cli, args, fragments):
    """typer's usage box (unknown option or command, missing or extra argument) is one line."""
    done = cli(*args)
    assert_one_line_error(done, *fragments)
    assert done.stdout == ""
    assert_nothing_written()


def test_usage_mistake_through_the_entry_point():
    """profile.py itself (main(), not the test runner) says it in one line too; no arguments
    at all still print the help."""
    import subprocess
    import sys

    from .conftest import ROOT

    done = subprocess.run(
        [sys.executable, str(ROOT / "profile.py"), "summarize", "--bogus"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: no such option: --bogus (Possible options: --out, --verbose); "
        "see 'profile.py summarize --help'"
    ]
    bare = subprocess.run(
        [sys.executable, str(ROOT / "profile.py")], capture_output=True, text=True, timeout=60
    )
    assert "Usage: profile.py" in bare.stdout + bare.stderr and "summarize" in bare.stdout


@pytest.mark.parametrize(
    "args, words",
    [
        (
            ["run", "--model", "resnet18", "--bs", "1"],
            "error: running a model needs torch; torch is "
            'not installed here: pip install -e ".[run]"',
        ),
        (["backends", "--json"], None),
    ],
)
def test_without_torch_run_and_backends_say_so(tmp_path, args, words):
    """A plain install (no torch): `run` is one line naming the extra; `backends` lists every
    backend as unavailable for that reason."""
    import json
    import subprocess
    import sys

    from tests.conftest import ROOT

    code = (
        "import sys, runpy; sys.modules['torch'] = None; "
        f"sys.argv = ['profile.py', *{args!r}]; "
        f"runpy.run_path({str(ROOT / 'profile.py')!r}, run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    if words is not None:
        assert (
            done.returncode == 2
            and done.stderr.strip()
            == words + " (reading, summarizing and comparing traces does not need it)"
        ), done.stderr
        return
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["backends"]
    assert rows and not any(row["available"] for row in rows)
    assert all('pip install -e ".[run]"' in row["why_not"] for row in rows)
