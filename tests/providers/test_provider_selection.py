"""Provider kinds: the config key, the binding the seam fills in, and the client the pool builds."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.checks import load_config
from orchestrator.errors import ConfigError
from orchestrator.providers import ProviderPool, warm_provider_sdk
from orchestrator.providers.anthropic import AnthropicProvider
from orchestrator.providers.openai_compat import OpenAICompatProvider
from orchestrator.seam import Services, build_cli_run
from tests.conftest import WriteConfig
from tests.fakes.anthropic_api import FakeAnthropic, text

pytestmark = pytest.mark.slow

TWO_KINDS = """
[providers.local]
base_url = "http://127.0.0.1:9/v1"

[providers.claude]
kind = "anthropic"
base_url = "{anthropic}"
api_key_env = "ORCHESTRATOR_SELECTION_TEST_KEY"
max_retries = 0

[agents.local_agent]
provider = "local"
model = "qwen"

[agents.claude_agent]
provider = "claude"
model = "claude-x"
system_prompt = "Be brief."
"""


def test_a_misspelt_kind_names_the_file_and_the_dotted_key(write_config: WriteConfig) -> None:
    path = write_config('[providers.claude]\nkind = "anthropc"\nbase_url = "https://api.anthropic.com"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    [line] = str(caught.value).splitlines()
    assert line.startswith(f"{path}: providers.claude.kind: ")
    assert "'openai'" in line and "'anthropic'" in line


async def test_the_seam_binds_the_kind_and_the_pool_builds_its_client(
    write_config: WriteConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCHESTRATOR_SELECTION_TEST_KEY", "sk-ant-selection")
    async with FakeAnthropic(api_key="sk-ant-selection", default=None) as fake:
        config = load_config(write_config(TWO_KINDS.format(anthropic=fake.base_url)))
        services = Services(providers=ProviderPool())
        try:
            claude = build_cli_run(config, "claude_agent", services)
            local = build_cli_run(config, "local_agent", services)
            assert (claude.model.kind, local.model.kind) == ("anthropic", "openai")
            fake.script(text("hello from claude"))
            completion = await claude.provider.complete(
                model=claude.model.model, messages=[{"role": "user", "content": "hi"}], tools=(), temperature=None
            )
        finally:
            await services.providers.aclose()
    assert completion.text == "hello from claude"
    assert fake.keys == ["sk-ant-selection"]  # the key came from api_key_env, through the factory


async def test_the_factory_picks_the_client_class_by_kind(write_config: WriteConfig) -> None:
    from orchestrator.providers import provider_factory

    config = load_config(write_config(TWO_KINDS.format(anthropic="http://127.0.0.1:9")))
    build = provider_factory()
    services = Services()
    kinds = {}
    for agent in ("claude_agent", "local_agent"):
        client = build(build_cli_run(config, agent, services).model)
        kinds[agent] = type(client)
        await client.aclose()
    assert kinds == {"claude_agent": AnthropicProvider, "local_agent": OpenAICompatProvider}


def test_importing_the_package_and_warming_one_kind_leaves_the_other_sdk_alone() -> None:
    code = (
        "import sys\n"
        "import orchestrator.providers, orchestrator.seam\n"
        "assert 'anthropic' not in sys.modules and 'openai' not in sys.modules\n"
        "orchestrator.providers.warm_provider_sdk(['anthropic'])\n"
        "assert 'anthropic' in sys.modules and 'openai' not in sys.modules\n"
        "orchestrator.providers.warm_provider_sdk()\n"
        "assert 'openai' in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[2], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    warm_provider_sdk(["openai", "anthropic"])  # in-process too: both already imported, a no-op
    assert "anthropic" in sys.modules and "openai" in sys.modules
