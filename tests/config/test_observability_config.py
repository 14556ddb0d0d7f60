"""`[gateway] metrics`, `metrics_token` and `[telemetry]`: strict values, errors that name the file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.checks import load_config
from orchestrator.errors import ConfigError
from tests.conftest import WriteConfig

BASE = """
[providers.local]
base_url = "http://127.0.0.1:9/v1"
"""


def problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return str(caught.value).splitlines()


def test_metrics_are_off_and_telemetry_absent_by_default(write_config: WriteConfig) -> None:
    config = load_config(write_config(BASE + "[gateway]\nport = 0\n"))
    assert config.gateway is not None and config.gateway.metrics is False and config.telemetry is None


def test_a_short_scrape_token_is_a_config_error(write_config: WriteConfig) -> None:
    path = write_config(BASE + '[gateway]\nport = 0\nmetrics = true\nmetrics_token = "file:scrape.token"\n')
    (path.parent / "scrape.token").write_text("scrape-token-too-short\n", encoding="utf-8")
    assert problems(path) == [
        f"{path}: gateway.metrics_token: the token is 22 characters; use at least 32 (e.g. `openssl rand -hex 32`)"
    ]


def test_a_scrape_token_without_metrics_is_a_config_error(write_config: WriteConfig) -> None:
    path = write_config(BASE + '[gateway]\nport = 0\nmetrics_token = "env:ORCH_TEST_UNSET_SCRAPE"\n')
    assert problems(path) == [f"{path}: gateway.metrics_token: set gateway.metrics = true to serve /metrics"]


def test_an_unreadable_scrape_token_is_refused_at_start(
    write_config: WriteConfig, capfd: pytest.CaptureFixture[str]
) -> None:
    path = write_config(BASE + '[gateway]\nport = 0\nmetrics = true\nmetrics_token = "env:ORCH_TEST_UNSET_SCRAPE"\n')
    assert load_config(path).gateway is not None  # `check` may run where the daemon's secrets are not
    assert cli.main(["run", "--config", str(path)]) == 1
    err = capfd.readouterr().err
    assert f"{path}: gateway.metrics_token:" in err and "ORCH_TEST_UNSET_SCRAPE" in err
    assert not (path.parent / "state" / "sessions.sqlite3").exists()


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ('[gateway]\nmetrics = "true"\n', "gateway.metrics"),
        ('[telemetry]\nsample_ratio = "1"\n', "telemetry.sample_ratio"),
        ("[telemetry]\nsample_ratio = 1.5\n", "telemetry.sample_ratio"),
        ('[telemetry]\nexporter = "grpc"\n', "telemetry.exporter"),
        ('[telemetry]\nendpoint = ""\n', "telemetry.endpoint"),
        ('[telemetry]\nendpiont = "http://127.0.0.1:4318/v1/traces"\n', "telemetry.endpiont"),
    ],
)
def test_bad_observability_values_name_the_file_and_key(write_config: WriteConfig, table: str, key: str) -> None:
    path = write_config(BASE + table)
    [line] = problems(path)
    assert line.startswith(f"{path}: {key}: "), line
