"""The knobs-only-narrow property over the skills surface (extends test_property.py).

Random skill lists, exclusions (skill names and globs), autonomy, knob sets and paths:
a knob never adds a skill tool, every skill tool comes from a skill the agent lists and
survives its exclusions and autonomy, the skill prompt sections are the agent's own on
every path, and a call to any other name never runs.
"""

from __future__ import annotations

import asyncio
import atexit
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.checks import parse_config
from orchestrator.config import Config
from orchestrator.engine import Transcript, run_tool_call_loop
from orchestrator.providers import ModelBinding, Provider, ProviderPool
from orchestrator.seam import ConstructionPath, ScopedAssembly, Services, resolve
from tests.parity.test_property import STATE, _Scripted, matches
from tests.skills.kit import write_kit

ROOT = tempfile.mkdtemp(prefix="orchestrator-skills-prop-")
atexit.register(shutil.rmtree, ROOT, True)
SKILLS_DIR = write_kit(Path(ROOT))
DECLARED = {
    "notes": {"notes__say", "notes__nap", "notes__lookup", "notes__publish"},
    "docs": set(),
}
READ_ONLY = {"notes__lookup"}
SKILL_PATTERNS = ["notes__say", "notes__lookup", "notes__*", "notes__p*", "*__*", "list_dir", "shell"]

skill_lists = st.lists(st.sampled_from(sorted(DECLARED)), unique=True)
skill_patterns = st.lists(st.sampled_from(SKILL_PATTERNS), unique=True, max_size=3)
knob_sets = st.builds(
    ScopedAssembly,
    caller_allowed=st.none() | st.frozensets(st.sampled_from(SKILL_PATTERNS), max_size=3),
    connect_mcp=st.booleans(),
    connect_peripherals=st.booleans(),
    exclude_memory=st.booleans(),
)
autonomies = st.sampled_from(["read_only", "supervised", "full"])


def make_config(skills: list[str], excluded: list[str], autonomy: str) -> Config:
    return parse_config(
        {
            "daemon": {"state_dir": STATE},
            "providers": {"p": {"base_url": "http://127.0.0.1:9/v1"}},
            "skills": {"dirs": [str(SKILLS_DIR)]},
            "agents": {
                "a": {
                    "provider": "p",
                    "model": "m",
                    "autonomy": autonomy,
                    "tools": ["list_dir"],
                    "skills": skills,
                    "excluded_tools": excluded,
                    "shell": {"allowed_commands": ["printf", "sleep"]},
                }
            },
        }
    )


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    skills=skill_lists,
    excluded=skill_patterns,
    autonomy=autonomies,
    knobs=knob_sets,
    path=st.sampled_from(list(ConstructionPath)),
)
def test_knobs_never_widen_the_skill_grant(
    skills: list[str], excluded: list[str], autonomy: str, knobs: ScopedAssembly, path: ConstructionPath
) -> None:
    config = make_config(skills, excluded, autonomy)
    services = Services()
    policy_only = resolve(config, "a", path=ConstructionPath.CLI_RUN, services=services)
    narrowed = resolve(config, "a", path=path, services=services, assembly=knobs)
    granted = set(policy_only.tools.names)
    assert set(narrowed.tools.names) <= granted
    owned = set().union(*(DECLARED[s] for s in skills))
    for name in granted - {"list_dir"}:
        assert name in owned  # only the listed skills' declared tools
        assert not matches(name, excluded)
        if autonomy == "read_only":
            assert name in READ_ONLY
    if autonomy != "read_only":
        assert owned - granted == {n for n in owned if matches(n, excluded)}
    if knobs.caller_allowed is not None:
        assert all(matches(n, sorted(knobs.caller_allowed)) for n in narrowed.tools.names)
    sections = [f"skill:{s}" for s in skills]
    assert [s.name for s in policy_only.prompt_sections] == [s.name for s in narrowed.prompt_sections] == sections


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    skills=skill_lists,
    autonomy=autonomies,
    calls=st.lists(st.sampled_from([*sorted(DECLARED["notes"]), "docs__x", "other__say", "notes__"]), max_size=4),
    knobs=knob_sets,
)
def test_no_skill_tool_outside_the_registry_ever_runs(
    skills: list[str], autonomy: str, calls: list[str], knobs: ScopedAssembly
) -> None:
    config = make_config(skills, [], autonomy)
    scripted = _Scripted(calls)

    def factory(binding: ModelBinding) -> Provider:
        return scripted

    services = Services(providers=ProviderPool(factory=factory))
    execution = resolve(config, "a", path=ConstructionPath.LIBRARY, services=services, assembly=knobs)
    # the calls carry "{}" (a missing argument), so a granted skill tool fails before spawning
    result = asyncio.run(run_tool_call_loop(execution, Transcript(session="p"), "go"))
    assert set(result.executed) <= set(execution.tools.names)
    assert scripted.sent_tools[0] == list(execution.tools.names)
