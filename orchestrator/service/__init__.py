"""`orchestrator service install`: the documented systemd install, done (or, `--dry-run`, shown) by the program."""

from orchestrator.service.install import InstallRefused, InstallStep, ServiceLayout, plan_install, run_steps, source_checkout

__all__ = ["InstallRefused", "InstallStep", "ServiceLayout", "plan_install", "run_steps", "source_checkout"]
