"""The one output sink (profiler/cli/output.py) and the JSON Schemas generated from the types
(profiler/cli/documents.py -> docs/schema/): the committed schemas are those of the types, real
outputs on the fixtures follow them, and no command writes JSON itself."""

import ast
import functools
import json
import shutil
import sys

import jsonschema
import pytest

from profiler.cli.documents import DOCUMENTS, FILES, schema_id

from .conftest import FIXTURES, ROOT

H200 = FIXTURES / "h200"
RUNS = H200 / "runs"
NCU_RUN = FIXTURES / "h200_ncu" / "runs" / "pytorch_fp16_bs8"
SCHEMA_DIR = ROOT / "docs" / "schema"

sys.path.insert(0, str(ROOT / "scripts"))
import gen_schemas  # noqa: E402


@functools.cache
def validator(kind: str) -> jsonschema.Draft202012Validator:
    """The validator of docs/schema/<kind>.json, the schema itself checked first (once: checking
    the result schema took 0.13 s, and the result schema checks 38 fixtures)."""
    schema = json.loads((SCHEMA_DIR / f"{kind}.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validate(kind: str, document: dict) -> dict:
    """``document`` checked against docs/schema/<kind>.json; a --json document also names its
    kind and version first."""
    errors = [
        f"{list(e.absolute_path)}: {e.message[:300]}" for e in validator(kind).iter_errors(document)
    ]
    assert not errors, errors
    if kind in DOCUMENTS:
        assert next(iter(document)) == "$schema" and document["$schema"] == schema_id(kind)
    return document


def json_of(done) -> dict:
    assert done.code == 0, done.stderr
    return json.loads(done.stdout)


# ---- the schemas are the types' -------------------------------------------------------------


def test_docs_schema_is_up_to_date_with_the_types():
    differ = gen_schemas.stale()
    assert differ == [], gen_schemas.stale_message(differ)
    assert {p.stem for p in SCHEMA_DIR.glob("*.json")} == set(DOCUMENTS) | set(FILES)


def test_a_stale_schema_folder_is_found(tmp_path):
    shutil.copytree(SCHEMA_DIR, tmp_path, dirs_exist_ok=True)
    schema = json.loads((tmp_path / "compare.json").read_text())
    del schema["$defs"]["Compare"]["properties"]["notes"]  # a key the type has
    (tmp_path / "compare.json").write_text(json.dumps(schema, indent=2) + "\n")
    (tmp_path / "sweep.json").unlink()
    (tmp_path / "gone.json").write_text("{}\n")
    assert gen_schemas.stale(tmp_path) == ["compare.json", "gone.json", "sweep.json"]


def test_a_stale_schema_names_the_library_version_before_regenerating():
    import msgspec

    message = gen_schemas.stale_message(["compare.json"])
    assert f"msgspec {msgspec.__version__} is installed" in message
    assert "<0.24" in message  # the bounds pyproject.toml allows
    assert message.index(msgspec.__version__) < message.index("gen_schemas.py")


def test_schemas_do_not_depend_on_how_msgspec_indents_docstrings(monkeypatch):
    """msgspec 0.22 kept a docstring's indent in a description, 0.23 drops it: the schemas read
    the same under both (and under any other indent)."""
    import msgspec

    from profiler.cli import documents

    real = msgspec.json.schema

    def indented(value):
        if isinstance(value, dict):
            return {
                k: "\n        ".join(v.split("\n"))
                if k == "description" and isinstance(v, str)
                else indented(v)
                for k, v in value.items()
            }
        return [indented(v) for v in value] if isinstance(value, list) else value

    plain = documents.all_schemas()
    monkeypatch.setattr(msgspec.json, "schema", lambda t: indented(real(t)))
    assert documents.all_schemas() == plain
    assert any("\n" in d for d in _descriptions(plain))  # multi-line ones were indented


def _descriptions(value) -> list[str]:
    if isinstance(value, dict):
        found = [value["description"]] if isinstance(value.get("description"), str) else []
        return found + [d for v in value.values() for d in _descriptions(v)]
    return [d for v in value for d in _descriptions(v)] if isinstance(value, list) else []


def test_a_key_the_type_does_not_name_fails_validation():
    document = json.loads((SCHEMA_DIR / "plot.json").read_text())
    validator = jsonschema.Draft202012Validator(document)
    good = {"$schema": schema_id("plot"), "target": "x", "written": []}
    assert validator.is_valid(good)
    assert not validator.is_valid({**good, "extra": 1})
    assert not validator.is_valid({**good, "$schema": "infer-profiler/plot/0"})


# ---- real outputs follow them ---------------------------------------------------------------


@pytest.mark.parametrize("target", ["pytorch_fp16_bs8", "ttrt_fp16_bs8", "inductor_fp16_bs8"])
def test_summarize_json_of_runs(cli, target):
    data = validate("summarize", json_of(cli("summarize", str(RUNS / target), "--json")))
    assert "headline" in data and "insight" in data and "hardware" not in data
    assert isinstance(data["schema"], str)  # the trace's own schema key stays


def test_summarize_json_of_a_bare_trace_and_with_ncu(cli):
    data = validate(
        "summarize", json_of(cli("summarize", str(H200 / "tb_logs" / "pytorch_fp32_bs8"), "--json"))
    )
    assert "headline" not in data and "insight" not in data
    data = validate(
        "summarize",
        json_of(cli("summarize", str(RUNS / "pytorch_fp16_bs8"), "--json", "--ncu", str(NCU_RUN))),
    )
    assert data["hardware"]["kernels"]


def test_summarize_layers_json(cli):
    data = validate(
        "summarize-layers",
        json_of(cli("summarize", str(RUNS / "ttrt_fp16_bs8"), "--view", "layers", "--json")),
    )
    assert data["engines"][0]["layers"]


def test_compare_json_with_and_without_timed_windows(cli):
    runs = validate(
        "compare",
        json_of(
            cli("compare", str(RUNS / "pytorch_fp16_bs8"), str(RUNS / "ttrt_fp16_bs8"), "--json")
        ),
    )
    assert runs["timed"]["speedup_x"] > 0
    traces = validate(
        "compare",
        json_of(
            cli(
                "compare",
                str(RUNS / "pytorch_fp16_bs8"),
                str(H200 / "tb_logs" / "pytorch_fp32_bs8"),
                "--json",
            )
        ),
    )
    assert traces["timed"] is None  # the key stays, null


def test_backends_json(cli):
    data = validate("backends", json_of(cli("backends", "--json")))
    assert "pytorch_fp32" in {row["name"] for row in data["backends"]}


def test_plot_json(cli, tmp_path):
    pytest.importorskip("matplotlib")
    data = validate(
        "plot",
        json_of(cli("plot", str(RUNS / "ttrt_fp16_bs8"), "--out", str(tmp_path / "png"), "--json")),
    )
    assert [p.endswith(".png") for p in data["written"]] == [True]


def test_result_files_and_run_json(capsys, tmp_path):
    """Every committed result.json (schema 1 and 2) follows the result schema; `run --json`
    prints the run's result.json with "$schema" first (its ending, as the command ends), the
    same keys and values as the file it wrote."""
    from profiler.cli.output import Output
    from profiler.commands.run import show
    from profiler.runs.result import read_result, write_result

    files = sorted(FIXTURES.rglob("result.json"))
    assert len(files) >= 10
    for path in files:
        validate("result", json.loads(path.read_text()))
    result = read_result(files[0])
    show(result, Output(json=True))
    printed = validate("run", json.loads(capsys.readouterr().out))
    assert printed["schema"] == 2 and printed["run_name"]
    written = json.loads(write_result(tmp_path, result).read_text())
    assert list(printed) == ["$schema", *written] and {**printed, "$schema": 0} == {
        **written,
        "$schema": 0,
    }


def test_the_sink_writes_a_number_that_is_not_finite_as_null(capsys):
    """JSON has no NaN: a document's figure that is not finite is printed null."""
    from profiler.cli.output import Output

    Output(json=True).document("plot", {"target": "x", "written": [], "figure": float("nan")})
    text = capsys.readouterr().out
    assert json.loads(text, parse_constant=lambda name: pytest.fail(name))["figure"] is None


def test_sweep_manifest_and_sweep_json(tmp_path, monkeypatch, capsys):
    """A finished sweep of the fixture runs (as scripts/check_output_unchanged.py builds it):
    its sweep.json, and `sweep --resume --json` (no cell to run: the table only)."""
    from check_output_unchanged import SWEEP_ARGS, build_sweep

    from profiler.cli.app import main

    build_sweep(tmp_path)
    validate("sweep", json.loads((tmp_path / "runs" / "fixture_sweep" / "sweep.json").read_text()))
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["sweep", *SWEEP_ARGS, "--json"]) == 0
    data = validate("benchmark", json.loads(capsys.readouterr().out))
    assert len(data["cells"]) == 4 and data["baseline"] == "pytorch_fp32"


# ---- only the sink writes JSON --------------------------------------------------------------


def _calls(package: str):
    for path in sorted((ROOT / "profiler" / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                yield path, node


def _name(func: ast.expr) -> str:
    return ast.unparse(func)


def test_no_command_or_view_writes_json_or_stdout_itself():
    """commands/ and report/ hand their documents to the sink: no json.dump(s) there but a
    file export (report/export.py's summary.json), and no writing to sys.stdout."""
    found = []
    for package in ("commands", "report"):
        for path, call in _calls(package):
            name = _name(call.func)
            if name in (
                "json.dump",
                "print_json",
                "sys.stdout.write",
                "msgspec.json.encode",
            ) or name.endswith("print_json"):
                found.append(f"{path.name}:{call.lineno} {name}")
            if name == "json.dumps" and path.name != "export.py":
                found.append(f"{path.name}:{call.lineno} {name}")
            if name == "print" and any(
                isinstance(a, ast.Call) and "json" in _name(a.func) for a in call.args
            ):
                found.append(f"{path.name}:{call.lineno} print(json)")
    assert not found, found


def test_every_document_kind_is_printed_by_a_command():
    """The kinds the commands hand to the sink are those of documents.DOCUMENTS, no more."""
    printed = {
        call.args[0].value
        for _, call in _calls("commands")
        if _name(call.func).endswith(".document")
        and call.args
        and isinstance(call.args[0], ast.Constant)
    }
    assert printed == set(DOCUMENTS)


def test_the_sink_refuses_an_unknown_kind(capsys):
    from profiler.cli.output import Output

    with pytest.raises(KeyError, match="no --json document kind 'nope'"):
        Output(json=True).document("nope", {})
    assert capsys.readouterr().out == ""


def test_json_lists_cut_at_top_carry_their_totals(cli):
    """--top cuts the kernel and operator lists; "totals" says how many rows each had."""
    data = validate(
        "summarize",
        json_of(cli("summarize", str(RUNS / "pytorch_fp16_bs8"), "--json", "--top", "3")),
    )
    assert len(data["kernels"]) == 3 and data["totals"]["kernels"] > 3
    assert len(data["operators"]) == 3 and data["totals"]["operators"] > 3
    every = json_of(cli("summarize", str(RUNS / "pytorch_fp16_bs8"), "--json", "--top", "0"))
    assert (
        data["totals"]
        == every["totals"]
        == {"kernels": len(every["kernels"]), "operators": len(every["operators"])}
    )
    data = validate(
        "compare",
        json_of(
            cli(
                "compare",
                str(RUNS / "pytorch_fp16_bs8"),
                str(RUNS / "pytorch_fp32_bs8"),
                "--json",
                "--top",
                "2",
            )
        ),
    )
    every = json_of(
        cli(
            "compare",
            str(RUNS / "pytorch_fp16_bs8"),
            str(RUNS / "pytorch_fp32_bs8"),
            "--json",
            "--top",
            "0",
        )
    )
    for key in ("kernels", "operators", "faster_in_b", "slower_in_b"):
        assert len(data[key]) <= 2 and data["totals"][key] == len(every[key]), key
    assert data["totals"]["kernels"] > 2
