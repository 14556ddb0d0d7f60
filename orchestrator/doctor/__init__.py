"""The doctor (`orchestrator check --connect`): what only this environment and the network can tell.

`orchestrator.checks` proves the config is consistent; the doctor resolves every secret
here, connects every MCP server, asks each provider in use for its models and each channel
for its bot, and checks the names that only then can be matched.
"""

from orchestrator.doctor.run import run_doctor

__all__ = ["run_doctor"]
