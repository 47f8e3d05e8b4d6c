"""`history check` on the two GPU series committed under docs/gpu/h200/history
(scripts/device_history.sh on one H200, 12 commits of eager FP16 ResNet50 bs 8, extra elementwise
multiplications from c07): the eight-op change found at c06 -> c07 on GPU time, slower, with
elementwise the category that moved most and its new kernel, confirmed by `history confirm`; the
four-op series with no change; and --until, the check a CI job ran after each commit."""

import json
import shutil

import pytest

from tests.conftest import ROOT

pytest.importorskip(
    "otava", reason='history check needs the history extra (pip install -e ".[dev]")'
)

HISTORY = ROOT / "docs" / "gpu" / "h200" / "history"
CONFIG = "history_model:build pytorch_fp16 bs8 on NVIDIA H200"


def copied(series: str, tmp_path):
    """A copy of a committed database (the commands never write to the fixture)."""
    path = tmp_path / f"{series}.sqlite"
    shutil.copyfile(HISTORY / series / "history.sqlite", path)
    return path


def checked(cli, db, *args):
    done = cli("history", "check", str(db), "--json", *args)
    assert done.code in (0, 1), done.stderr
    return done.code, json.loads(done.stdout)


def test_the_eight_op_change_is_found_sized_tied_to_its_kernels_and_confirmed(cli, tmp_path):
    code, document = checked(cli, copied("ops8", tmp_path))
    (series,) = document["series"]
    assert (series["config"], series["commits"], series["records"]) == (CONFIG, 12, 12)
    (change,) = document["changes"]
    assert (change["commit_before"], change["commit_after"]) == ("c06", "c07")
    assert change["moved"] == "gpu_time"
    assert change["gpu_time"]["verdict"] == "slower" and change["gpu_time"]["low"] > 1
    assert change["latency"]["verdict"] != "slower"
    top = change["categories"][0]
    assert top["name"] == "elementwise" and top["delta_us"] > 10 * top["spread_us"]
    (new,) = [k for k in change["kernels"] if k["before_calls"] == 0 and k["after_calls"] == 8]
    assert "vectorized_elementwise_kernel" in new["name"] and "MulFunctor" in new["name"]
    assert change["confirmed"] == "confirmed"  # history confirm's verdict, kept in the database
    # a regression, but six commits back: outside the gate's window of the last 5
    assert change["regression"] and not change["gated"] and code == 0


def test_until_replays_the_check_a_ci_job_ran_after_each_commit(cli, tmp_path):
    db = copied("ops8", tmp_path)
    code, document = checked(cli, db, "--until", "c08")
    assert code == 0 and document["changes"] == []  # two commits after the change: too few
    for until in ("c09", "c10", "c11"):
        code, document = checked(cli, db, "--until", until)
        (change,) = document["changes"]
        assert document["series"][0]["last_commit"] == until
        assert (change["commit_after"], change["gated"], code) == ("c07", True, 1)
        # the confirmation was added after c12: not there when c09..c11 were checked
        assert change["confirmed"] == "unconfirmed" and document["failing"] == [1]
    code, document = checked(cli, db, "--until", "c12")
    assert code == 0 and document["changes"][0]["confirmed"] == "unconfirmed"


def test_the_four_op_series_reports_no_change(cli, tmp_path):
    code, document = checked(cli, copied("ops4", tmp_path))
    assert code == 0 and document["changes"] == [] and document["failing"] == []
    assert document["series"][0]["commits"] == 12 and document["series"][0]["skipped"] is None
