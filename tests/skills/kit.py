"""Skill directories for tests: a small kit written into a tmp dir, plus config snippets."""

from __future__ import annotations

import textwrap
from pathlib import Path

NOTES_MD = """\
---
name: notes
description: Keep and look up short notes.
---
Call notes__say to repeat a note back; notes__lookup finds a note by id.
"""

DOCS_MD = """\
---
name: docs
description: "House style for answers."
---
Answer in one short paragraph.
"""


def notes_manifest(lookup_base: str = "http://127.0.0.1:9") -> str:
    """Return `notes`' skill.toml: two shell tools, a read-only GET and a POST."""
    return f"""
[[tools]]
name = "say"
description = "Repeat a note."
kind = "shell"
argv = ["printf", "[%s]", "{{text}}"]
[tools.arguments.text]
type = "string"
description = "The note."
pattern = "[A-Za-z0-9 ,.:=/-]*"

[[tools]]
name = "nap"
description = "Sleep a little."
kind = "shell"
argv = ["sleep", "{{seconds}}"]
[tools.arguments.seconds]
type = "integer"

[[tools]]
name = "lookup"
description = "Find a note by id."
kind = "http"
method = "GET"
url = "{lookup_base}/notes/{{id}}?q={{query}}"
read_only = true
[tools.arguments.id]
type = "string"
[tools.arguments.query]
type = "string"
required = false
default = "all"

[[tools]]
name = "publish"
description = "Publish a note."
kind = "http"
method = "POST"
url = "{lookup_base}/notes/{{id}}/publish"
[tools.arguments.id]
type = "string"
"""


def write_skill(root: Path, name: str, skill_md: str, manifest: str | None = None) -> Path:
    """Write `<root>/<name>/SKILL.md` (and skill.toml) and return the skill directory."""
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(skill_md, encoding="utf-8")
    if manifest is not None:
        (folder / "skill.toml").write_text(textwrap.dedent(manifest), encoding="utf-8")
    return folder


def write_kit(root: Path, lookup_base: str = "http://127.0.0.1:9") -> Path:
    """Write the `notes` and `docs` skills under `root/skills` and return that folder."""
    skills = root / "skills"
    write_skill(skills, "notes", NOTES_MD, notes_manifest(lookup_base))
    write_skill(skills, "docs", DOCS_MD)
    return skills


def skills_toml(base_url: str, *, ops_extra: str = "", intern_extra: str = "") -> str:
    """Return a config: `ops` uses both skills (full autonomy), `intern` only docs, read-only."""
    return f"""
[providers.fake]
base_url = "{base_url}"
max_retries = 0

[skills]
dirs = ["skills"]

[agents.ops]
provider = "fake"
model = "ops-model"
system_prompt = "You are ops."
autonomy = "full"
tools = ["list_dir"]
skills = ["notes", "docs"]
{ops_extra}
[agents.ops.shell]
allowed_commands = ["printf", "sleep"]

[agents.intern]
provider = "fake"
model = "intern-model"
system_prompt = "You are the intern."
autonomy = "read_only"
skills = ["docs"]
{intern_extra}
"""
