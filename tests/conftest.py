from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
TB_PLUGIN = FIXTURES / "kineto_tb_plugin"
V100_TRACE = TB_PLUGIN / "worker0.1623143089861.pt.trace.json.gz"
GOLDEN_INPUT = TB_PLUGIN / "gpu_metrics_input.json"
GOLDEN_EXPECTED = TB_PLUGIN / "gpu_metrics_expected.json"
PLUGIN_REFERENCE = TB_PLUGIN / "plugin_reference.json"
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def v100_summary():
    from profiler.trace.summary import summarize

    return summarize(V100_TRACE)
