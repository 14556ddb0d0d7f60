"""`[agents.X.context]` errors name the file and the dotted key."""

from __future__ import annotations

import pytest

from orchestrator.checks import load_config
from orchestrator.errors import ConfigError
from tests.conftest import WriteConfig

BASE = '[providers.local]\nbase_url = "http://127.0.0.1:1/v1"\n[agents.ops]\nprovider = "local"\nmodel = "m"\n'


def problems(write_config: WriteConfig, context: str) -> list[str]:
    path = write_config(BASE + "[agents.ops.context]\n" + context)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return [line.replace(str(path), "config.toml") for line in str(caught.value).splitlines()]


def test_an_unknown_summary_provider_is_named_with_a_suggestion(write_config: WriteConfig) -> None:
    assert problems(write_config, 'summary_provider = "locl"\n') == [
        "config.toml: agents.ops.context.summary_provider: unknown provider 'locl' (did you mean 'local'?)"
    ]


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ('max_context_tokens = "8000"', "agents.ops.context.max_context_tokens"),
        ("max_context_tokens = 10", "agents.ops.context.max_context_tokens"),
        ('strategy = "trim"', "agents.ops.context.strategy"),
        ("keep_recent = -1", "agents.ops.context.keep_recent"),
        ("summary_timeout_s = 0", "agents.ops.context.summary_timeout_s"),
        ("max_history = 3", "agents.ops.context.max_history"),
    ],
)
def test_a_malformed_context_value_names_its_key(write_config: WriteConfig, line: str, key: str) -> None:
    [problem] = problems(write_config, line + "\n")
    assert problem.startswith(f"config.toml: {key}: "), problem
