"""The numeric check inside real CPU runs, and --max-rel-error (no fakes, except one small
backend registered here to show that backend artifacts land in the run folder)."""

import json
from pathlib import Path

from profiler.collect.backends import REGISTRY, Backend, Prepared
from tests.test_cli_errors import TINY, assert_nothing_written, assert_one_line_error


def test_reduced_precision_run_records_numerics(cli):
    done = cli("run", "--backend", "pytorch_bf16", *TINY, "--max-rel-error", "0.5", "--json")
    assert done.code == 0, done.stderr
    on_disk = json.loads(Path("runs/pytorch_bf16_bs8_conv_net/result.json").read_text())
    numerics = on_disk["numerics"]
    assert numerics["finite"] is True and 0 < numerics["rel_l2_error"] < 0.5
    assert 0 < numerics["max_abs_error"] and 0.9 < numerics["cosine_similarity"] <= 1.0 + 1e-9
    assert 0 <= numerics["top1_agreement"] <= 1  # conv_net's output is [batch, 4]
    assert numerics["reference"]["backend"] == "pytorch_fp32"
    assert numerics["reference"]["tf32"] is False


def test_tiny_threshold_fails_the_run_and_writes_nothing(cli):
    done = cli("run", "--backend", "pytorch_bf16", *TINY, "--max-rel-error", "1e-9")
    assert_one_line_error(
        done,
        "pytorch_bf16",
        "exceeds --max-rel-error 1e-09",
        "nothing was written",
        progress_before=True,
    )
    assert_nothing_written()


def test_reference_backend_has_no_comparison(cli):
    done = cli("run", *TINY, "--max-rel-error", "0", "--json")
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)["numerics"] == {
        "skipped": "pytorch_fp32 is the FP32 eager reference itself"
    }


def test_compiled_fp32_backend_is_checked_too(cli):
    done = cli("run", "--backend", "torchscript_fp32", *TINY, "--max-rel-error", "1e-4", "--json")
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)["numerics"]["rel_l2_error"] < 1e-4


def test_negative_threshold_is_refused(cli):
    assert_one_line_error(cli("run", *TINY, "--max-rel-error", "-1"), "--max-rel-error")


def test_backend_artifacts_and_after_window_notes_land_in_the_run(cli, monkeypatch):
    from profiler.collect.backends.eager import place

    order = []

    def prepare(model, inputs, config, device):
        model, inputs, notes = place(model, inputs, config, device, "fp32")
        notes["artifacts"] = {"engine_layers_0.json": '{"Layers": []}'}

        def forward(*args):
            order.append("call")
            return model(*args)

        def after_windows():
            order.append("after")
            return {
                "layer_timing": {"files": ["engine_layer_times_0.json"]},
                "artifacts": {"engine_layer_times_0.json": "[]"},
            }

        return Prepared(fn=forward, inputs=inputs, notes=notes, after_windows=after_windows)

    monkeypatch.setitem(
        REGISTRY,
        "artifact_test",
        Backend(
            name="artifact_test",
            family="pytorch",
            precision="fp32",
            description="test",
            needs_cuda=False,
            prepare=prepare,
        ),
    )
    done = cli("run", "--backend", "artifact_test", *TINY, "--json")
    assert done.code == 0, done.stderr
    result = json.loads(done.stdout)
    run = Path("runs/artifact_test_bs8_conv_net")
    assert (run / "engine_layers_0.json").read_text() == '{"Layers": []}'
    assert (run / "engine_layer_times_0.json").read_text() == "[]"
    assert result["artifacts"] == ["engine_layer_times_0.json", "engine_layers_0.json"]
    assert "artifacts" not in result["backend"]["notes"]
    assert result["backend"]["notes"]["layer_timing"] == {"files": ["engine_layer_times_0.json"]}
    # after the timed and profiled windows, and before the numeric check's own call
    assert order[-2:] == ["after", "call"]
