"""Every file operation the daemon does in a workspace goes through `orchestrator.workspace_io`.

The modules below handle workspace paths (uploads, extracts, the sweep, gateway staging,
downloads, `send_file`, the file tools, skill files, the images a request shows). In them,
no file is opened, written, made, moved or removed by path: no `open(...)`, no `Path`
method that touches the file system by path (`open`, `read_*`, `write_*`, `mkdir`, `unlink`,
`rename`, `rmdir`, `touch`, links, listings), no `os.open` / `rename` / `replace` / `unlink` /
`remove` / `mkdir` / `makedirs` / `rmdir` / `scandir` / `listdir` / `walk`, no `shutil` call.
`WorkspaceDir.open(root)` (the trusted root, made by the seam) is the one `open` allowed.
`str.replace` cannot be told from `Path.replace` by the source alone, so `.replace(` is not
flagged; `os.replace` is.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parents[1]

SCANNED: Final = (
    "orchestrator/media/intake.py",
    "orchestrator/media/uploads.py",
    "orchestrator/media/content.py",
    "orchestrator/tools/files.py",
    "orchestrator/tools/send_file.py",
    "orchestrator/daemon/media.py",
    "orchestrator/scheduler/outlet.py",
    "orchestrator/gateway/uploads.py",
    "orchestrator/gateway/multipart.py",
    "orchestrator/skills/loader.py",
    "channels/attachments.py",
    "channels/slack_files.py",
    "channels/discord_files.py",
    "channels/telegram_media.py",
    "channels/telegram_http.py",
)

# Path (and os.DirEntry) methods that reach the file system by path.
_PATH_METHODS: Final = frozenset({
    "open", "read_text", "read_bytes", "write_text", "write_bytes", "mkdir", "unlink", "rename", "rmdir",
    "touch", "symlink_to", "hardlink_to", "link_to", "iterdir", "glob", "rglob", "chmod", "lchmod",
})
_OS_CALLS: Final = frozenset({
    "open", "rename", "renames", "replace", "unlink", "remove", "mkdir", "makedirs", "rmdir", "removedirs",
    "scandir", "listdir", "walk", "fwalk", "link", "symlink", "truncate", "chmod", "mkfifo",
})
# Uses that list or look but never open, write, move or remove, each with why it is safe.
EXEMPT: Final = {
    ("orchestrator/skills/loader.py", "os.walk"): "the scripts check lists a skill folder (links reported, never entered)",
    ("orchestrator/skills/loader.py", "root.glob"): "finds skill folders; each file in one is then read beneath its folder",
}

# The one `.open(` allowed: the workspace root itself, by `WorkspaceDir.open`.
_ALLOWED_OPENERS: Final = frozenset({"WorkspaceDir"})


def violations(source: str, where: str) -> list[str]:
    """Return one line per file operation in `source` that does not go through the layer.

    References count as much as calls (`to_thread(dest.write_bytes, data)` opens by path too).
    """
    found: list[str] = []
    tree = ast.parse(source)
    modules = _module_aliases(tree)
    os_calls = {f"os.{name}" for name in _OS_CALLS} | {"io.open"}
    for node in ast.walk(tree):
        line = f"{where}:{getattr(node, 'lineno', 0)}: {ast.unparse(node) if isinstance(node, ast.expr) else ''}"
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id == "open" or modules.get(node.id) in os_calls or modules.get(node.id, "").startswith("shutil."):
                found.append(line)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            receiver = ast.unparse(node.value)
            module = modules.get(receiver, receiver)
            if module == "shutil" or (module == "os" and node.attr in _OS_CALLS) or (module == "io" and node.attr == "open"):
                found.append(line)
            elif node.attr in _PATH_METHODS and module not in ("os", "io") and receiver not in _ALLOWED_OPENERS:
                found.append(line)
    return sorted(set(found), key=lambda text: (text.split(":")[0], int(text.split(":")[1]), text))


def _module_aliases(tree: ast.Module) -> dict[str, str]:
    """Map each imported name to what it is (`import shutil as sh` -> sh: shutil; `from os import unlink` -> os.unlink)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name] = alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def scan(root: Path, files: Iterable[str]) -> list[str]:
    return [v for name in files for v in violations((root / name).read_text(encoding="utf-8"), name)]


def _exempt(line: str) -> bool:
    where, _, what = line.partition(": ")
    return (where.split(":")[0], what) in EXEMPT


def test_workspace_modules_touch_files_only_through_the_layer() -> None:
    found = scan(ROOT, SCANNED)
    assert [line for line in found if not _exempt(line)] == []
    # an exemption whose use is gone must go too
    assert sorted(EXEMPT.keys() - {(line.split(":")[0], line.partition(": ")[2]) for line in found}) == []


def test_every_scanned_module_exists() -> None:
    assert [name for name in SCANNED if not (ROOT / name).is_file()] == []


PLANTED: Final = {
    "builtin_open.py": "def f(p):\n    return open(p, 'wb')\n",
    "path_open.py": "def f(p):\n    with p.open('rb') as h:\n        return h.read()\n",
    "read_text.py": "def f(p):\n    return p.read_text()\n",
    "read_bytes.py": "def f(p):\n    return p.read_bytes()\n",
    "write_text.py": "def f(p):\n    p.write_text('x')\n",
    "write_bytes.py": "def f(p):\n    p.with_name('y').write_bytes(b'x')\n",
    "path_mkdir.py": "def f(p):\n    p.parent.mkdir(parents=True)\n",
    "path_unlink.py": "def f(p):\n    p.unlink(missing_ok=True)\n",
    "path_rename.py": "def f(p, q):\n    p.rename(q)\n",
    "os_open.py": "import os\ndef f(p):\n    return os.open(p, os.O_RDONLY)\n",
    "os_rename.py": "import os\ndef f(p, q):\n    os.rename(p, q)\n",
    "os_replace.py": "import os\ndef f(p, q):\n    os.replace(p, q)\n",
    "os_unlink.py": "import os\ndef f(p):\n    os.unlink(p)\n",
    "os_remove.py": "import os\ndef f(p):\n    os.remove(p)\n",
    "os_mkdir.py": "import os\ndef f(p):\n    os.makedirs(p, exist_ok=True)\n",
    "os_scandir.py": "import os\ndef f(p):\n    return list(os.scandir(p))\n",
    "from_os.py": "from os import unlink as rm\ndef f(p):\n    rm(p)\n",
    "shutil_move.py": "import shutil\ndef f(p, q):\n    shutil.move(p, q)\n",
    "shutil_rmtree_alias.py": "import shutil as sh\ndef f(p):\n    sh.rmtree(p)\n",
    "from_shutil.py": "from shutil import copyfile\ndef f(p, q):\n    copyfile(p, q)\n",
    "io_open.py": "import io\ndef f(p):\n    return io.open(p)\n",
    "in_a_method.py": "class A:\n    async def go(self, dest):\n        await to_thread(dest.touch)\n        self.dest.open('wb')\n",
}
ALLOWED: Final = textwrap.dedent("""
    from orchestrator.workspace_io import WorkspaceDir
    def f(root, name, text):
        with WorkspaceDir.open(root) as ws, ws.open_read(name) as handle:
            ws.move(name, name + ".1")
            ws.delete(name, missing_ok=True)
            ws.make_dirs("a/b")
            ws.remove_tree("a")
            return handle.read(), text.replace("a", "b")
""")


def test_the_scan_catches_each_planted_violation(tmp_path: Path) -> None:
    for name, source in PLANTED.items():
        (tmp_path / name).write_text(source, encoding="utf-8")
    (tmp_path / "allowed.py").write_text(ALLOWED, encoding="utf-8")
    found = scan(tmp_path, [*PLANTED, "allowed.py"])
    caught = {line.split(":", 1)[0] for line in found}
    assert caught == set(PLANTED), f"missed: {sorted(set(PLANTED) - caught)}"
    assert [line for line in found if line.startswith("in_a_method.py")] == [
        "in_a_method.py:3: dest.touch", "in_a_method.py:4: self.dest.open"
    ]
