"""Whom a route admits is resolved in the seam: omission pairs nobody, a pairing admits its route only."""

from __future__ import annotations

import ast
import tomllib

from orchestrator.config import Config
from orchestrator.daemon import match_route
from orchestrator.seam import RateLimit, resolve_admission, route_admissions, route_id
from tests.seam.test_architecture import POLICY_OWNERS, modules

TOML = """
[providers.p]
base_url = "http://127.0.0.1:9/v1"
[agents.a]
provider = "p"
model = "m"
[agents.b]
provider = "p"
model = "m"
[channels.tg]
kind = "terminal"
[[routes]]
channel = "tg"
agent = "a"
chat = "1*"
senders = ["7"]
approvers = ["7"]
strangers = "pair"
rate_limit = { messages = 5, per_s = 60 }
[[routes]]
channel = "tg"
agent = "b"
senders = ["8"]
"""
# Whom a route pairs and how fast it admits; read only by the seam (and validated by config/ and
# checked by checks/). `senders` is not policed here: routing's shadowed-route report reads it.
ADMISSION_FIELDS = {"strangers", "rate_limit"}


def config() -> Config:
    return Config.model_validate(tomllib.loads(TOML))


def test_omission_pairs_nobody_and_limits_nothing() -> None:
    plain = resolve_admission(config().routes[1])
    assert (plain.strangers, plain.rate_limit) == ("ignore", None)
    assert not plain.pairs("99", is_direct=True)
    assert not plain.admits("99", paired={plain.route_id})  # a stored pairing never opens an "ignore" route


def test_a_pairing_admits_through_its_own_route_only_and_only_in_dms_are_codes_given() -> None:
    cfg = config()
    pairing, other = (resolve_admission(r) for r in cfg.routes)
    assert pairing.pairs("99", is_direct=True) and not pairing.pairs("99", is_direct=False)
    assert not pairing.pairs("7", is_direct=True)  # listed: no code
    assert pairing.admits("99", paired={pairing.route_id}) and not pairing.pairs("99", is_direct=True, paired={pairing.route_id})
    assert not other.admits("99", paired={pairing.route_id})
    hit = match_route(cfg, channel="tg", chat="12", sender="99", paired={pairing.route_id})
    assert hit is not None and hit.index == 0
    assert match_route(cfg, channel="tg", chat="22", sender="99", paired={pairing.route_id}) is None


def test_only_an_approver_who_is_not_the_codes_sender_decides() -> None:
    pairing = resolve_admission(config().routes[0])
    assert pairing.may_decide("7", code_sender="99")
    assert not pairing.may_decide("99", code_sender="99") and not pairing.may_decide("8", code_sender="99")
    assert not pairing.may_decide("7", code_sender="7")  # an approver cannot approve a code of their own


def test_the_rate_limit_is_resolved_per_route_and_stop_and_new_are_never_limited() -> None:
    cfg = config()
    pairing = resolve_admission(cfg.routes[0])
    assert pairing.limits("hello") == RateLimit(messages=5, per_s=60) == pairing.limits("/help")
    assert pairing.limits("/stop") is None and pairing.limits("/new") is None
    assert route_admissions(cfg, "b") == {}  # nothing but the defaults: not shown
    assert route_admissions(cfg, "a") == {
        "routes[0]": {"route_id": route_id(cfg.routes[0]), "strangers": "pair", "rate_limit": {"messages": 5, "per_s": 60}}
    }


def test_admission_fields_are_read_only_in_the_seam() -> None:
    """Outside seam/, config/ and checks/, nobody reads a route's `strangers` or `rate_limit`."""
    bad = []
    for rel, tree in modules("orchestrator", "channels"):
        if rel.startswith(POLICY_OWNERS):
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or node.attr not in ADMISSION_FIELDS:
                continue
            owner = node.value
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            if name == "route" or name.endswith("_route") or name == "routes":
                bad.append(f"{rel}:{node.lineno}: reads {name}.{node.attr} (ask resolve_admission)")
    assert bad == []
