"""The failover chain is part of the model binding: every path gets the whole chain, in order."""

from __future__ import annotations

import json

import pytest

from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.providers import FailoverProvider, ProviderPool
from orchestrator.seam import Services, build_channel, build_cli_run
from orchestrator.seam.matrix import COLUMNS, SETTINGS, MatrixColumn, matrix_columns, parity_matrix, settings_of
from tests.conftest import WriteConfig
from tests.parity.conftest import parity_toml

BACKUP = "http://127.0.0.1:8"
FAKE = "http://127.0.0.1:9/v1"
LINKS = '[{ provider = "backup", model = "backup-model" }, { provider = "fake", model = "second-model" }]'


def chained_toml() -> str:
    """The parity config plus agents that differ only in their chain: as written, one link dropped, reordered."""
    agent = 'provider = "fake"\nmodel = "primary-model"\nworkspace = "shared-ws"\ntools = ["file_read"]\n'
    return parity_toml(FAKE) + f"""
[providers.backup]
kind = "anthropic"
base_url = "{BACKUP}"
max_retries = 0

[agents.chained]
{agent}fallback = {LINKS}

[agents.dropped]
{agent}fallback = [{{ provider = "backup", model = "backup-model" }}]

[agents.reordered]
{agent}fallback = [{{ provider = "fake", model = "second-model" }}, {{ provider = "backup", model = "backup-model" }}]
"""


WHOLE_CHAIN = [
    f"fake {FAKE} primary-model (max_output_tokens 4096 as max_tokens)",
    f"backup {BACKUP} backup-model (max_output_tokens 4096)",  # anthropic: always max_tokens
    f"fake {FAKE} second-model (max_output_tokens 4096 as max_tokens)",
]


def test_the_matrix_checks_the_whole_chain_on_every_path(
    write_config: WriteConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(chained_toml())
    assert cli.main(["policy", "matrix", "--agent", "chained", "--json", "--config", str(path)]) == 0
    grid = json.loads(capsys.readouterr().out)
    assert grid["gaps"] == []
    assert grid["agents"]["chained"]["provider_binding"] == dict.fromkeys(COLUMNS, "enforced")


async def test_every_path_binds_and_builds_the_chain_in_order(write_config: WriteConfig) -> None:
    config = load_config(write_config(chained_toml()))
    pool = ProviderPool()
    services = Services(providers=pool)
    try:
        baseline = build_cli_run(config, "chained", services)
        _, columns = matrix_columns(
            config, "chained", dict.fromkeys(COLUMNS, services),
            parent="chained", ceiling=baseline.knobs, schedule_tools=None,
        )
        assert [c.label for c in columns] == list(COLUMNS)
        for column in columns:
            execution = column.execution
            assert settings_of(execution, ())["provider_binding"] == WHOLE_CHAIN, column.label
            # the client the engine calls is the chain the binding names, not only its primary
            assert isinstance(execution.provider, FailoverProvider), column.label
            assert execution.provider.links == (
                ("fake", "primary-model"), ("backup", "backup-model"), ("fake", "second-model")
            ), column.label
    finally:
        await pool.aclose()


@pytest.mark.parametrize("wrong", ["dropped", "reordered"])
def test_a_path_that_dropped_or_reordered_the_chain_is_a_gap(wrong: str, write_config: WriteConfig) -> None:
    """A fabricated column resolved with another chain (real executions): only provider_binding differs, a gap."""
    config = load_config(write_config(chained_toml()))
    services = Services()
    baseline = build_cli_run(config, "chained", services)
    every_knob = frozenset().union(*SETTINGS.values())  # no declared knob may excuse a chain change
    column = MatrixColumn(label="channel", execution=build_channel(config, wrong, services), declared=every_knob)
    grid = parity_matrix(baseline, [column], ())
    gaps = {setting for setting, row in grid.items() if row["channel"] == "gap"}
    assert gaps == {"provider_binding"}
