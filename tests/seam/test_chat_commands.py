"""Chat commands are resolved in the seam: omission grants nothing, and only the seam reads the grant."""

from __future__ import annotations

import ast
import tomllib

from orchestrator.config import Config
from orchestrator.seam import resolve_chat_commands
from tests.seam.test_architecture import POLICY_OWNERS, modules

TOML = """
[providers.p]
base_url = "http://127.0.0.1:9/v1"
[agents.public]
provider = "p"
model = "m"
[agents.ops]
provider = "p"
model = "m"
[sops.maint]
agent = "ops"
[[sops.maint.steps]]
prompt = "fix"
[channels.term]
kind = "terminal"
[[routes]]
channel = "term"
agent = "public"
senders = ["*"]
[[routes]]
channel = "term"
agent = "public"
senders = ["*"]
sops = ["maint", "ghost"]
"""
# What a route grants from the chat; read only by the seam (and validated by config/).
ROUTE_GRANTS = {"sops", "approvers"}


def test_a_route_without_sops_grants_no_sop_and_an_unknown_one_is_never_granted() -> None:
    # built in code, past `orchestrator check` (which refuses 'ghost')
    config = Config.model_validate(tomllib.loads(TOML))
    silent, listing = (resolve_chat_commands(config, route) for route in config.routes)
    assert (silent.sops, silent.may_start("maint"), "/sop" in silent.commands) == ((), False, False)
    assert (listing.sops, listing.may_start("maint"), listing.may_start("ghost")) == (("maint",), True, False)
    assert dict(listing.sop_agents) == {"maint": ("ops",)}
    # ops is not the routed agent and the route has no approvers: nobody may approve its steps
    assert listing.answerers("ops", "stranger") == frozenset()
    assert listing.answerers("public", "stranger") == frozenset({"stranger"})


def test_route_grants_are_read_only_in_the_seam() -> None:
    """Outside seam/ and config/, nobody reads a route's `sops` or `approvers` to decide for itself."""
    bad = []
    for rel, tree in modules("orchestrator", "channels"):
        if rel.startswith(POLICY_OWNERS):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or node.attr not in ROUTE_GRANTS:
                continue
            owner = node.value
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            if name == "route" or name.endswith("_route"):
                bad.append(f"{rel}:{node.lineno}: reads {name}.{node.attr} (ask resolve_chat_commands)")
    assert bad == []
