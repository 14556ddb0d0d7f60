"""FakeSlack's files: hosted file objects, the `url_private` download route, the v2 upload flow.

Usage (through `FakeSlack.files`)::

    obj = fake.files.add("photo.png", PNG, mimetype="image/png")    # a file object for an event
    stub = fake.files.add_connect("photo.png", PNG, mimetype="image/png")  # a Slack Connect stub
    await fake.push_message("", files=[obj], subtype="file_share")
    fake.files.downloads                      # downloads that passed the token check
    fake.files.served[-1].completed           # False: the client hung up before the end
    fake.files.fail_next_download(status=500); fake.files.stall_next_download(5.0)
    fake.files.redirect_next_download("https://fake.slack.com/?redir=...")   # as Slack does for a bad token
    fake.files.chunked = True                 # no Content-Length (the cap must hold while reading)
    fake.files.uploads[0].content, .channel, .thread_ts, .initial_comment

Slack Connect stubs (`fake.files.add_connect(...)`): an event's entry is only the id and
`file_access`; `files.info` (a GET, as slack_sdk sends it) returns the whole object for a file the
app may see, `file_not_found` for an unknown or unshared one, `missing_scope` without `files:read`.

Downloads, as Slack: `GET /files-pri/<team>-<file id>/<name>` needs `Authorization: Bearer
<bot token>`; a missing or wrong token gets 401, an unknown file 404, and with `missing_scope`
(a token without `files:read`) the workspace's sign-in page as HTML with status 200, as Slack does. Uploads: `files.getUploadURLExternal`
(`filename`, `length` >= 1, else `invalid_arguments` / `invalid_length`) returns a one-use URL
`/upload/v1/<ticket>`; a POST there stores the bytes (`OK - <n>` as text/plain); then
`files.completeUploadExternal` shares them (`file_not_found` if nothing was uploaded,
`upload_length_mismatch` when the bytes differ from the declared length, `channel_not_found`
for a bad `channel_id`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from aiohttp import web

__all__ = ["FakeSlackFiles", "ServedDownload", "Upload"]

_CHUNK: Final = 64 * 1024
_SIGN_IN_PAGE: Final = "<!DOCTYPE html><html><head><title>Slack</title></head><body>Sign in to Fake</body></html>"
_ids = itertools.count(1)


@dataclass(slots=True, kw_only=True)
class ServedDownload:
    """One download the fake started serving: how much it sent, whether it got to the end, and
    `finished` (set when the handler is done: completed, or the client hung up)."""

    file_id: str
    sent: int = 0
    completed: bool = False
    finished: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass(slots=True, kw_only=True)
class Upload:
    """One file shared by files.completeUploadExternal."""

    file_id: str
    filename: str
    title: str | None
    content: bytes
    channel: str
    thread_ts: str | None
    initial_comment: str | None


@dataclass(slots=True, kw_only=True)
class _Ticket:
    file_id: str
    filename: str
    length: int
    content: bytes | None = None
    mime: str | None = None


@dataclass(slots=True, kw_only=True)
class _Fault:
    status: int = 200
    stall_s: float = 0.0
    location: str | None = None


class FakeSlackFiles:
    """The file half of FakeSlack; `origin()` is its `http://127.0.0.1:PORT`."""

    def __init__(self, *, bot_token: str, origin: Callable[[], str], notify: Callable[[], Awaitable[None]]) -> None:
        self._bot_token = bot_token
        self._origin = origin
        self._notify = notify
        self.chunked = False
        self.missing_scope = False  # the token lacks files:read: downloads get the sign-in page
        self.downloads = 0
        self.served: list[ServedDownload] = []
        self.refused_downloads: list[tuple[int, str | None]] = []  # (status, token) per refused GET
        self.uploads: list[Upload] = []
        self.upload_posts = 0
        self._hosted: dict[str, tuple[bytes, str]] = {}  # file id -> (bytes, mimetype)
        self._objects: dict[str, dict[str, Any]] = {}  # file id -> the full object files.info returns
        self._denied: set[str] = set()  # Slack Connect files not shared with the app
        self._tickets: dict[str, _Ticket] = {}
        self._download_faults: deque[_Fault] = deque()
        self._upload_faults: deque[int] = deque()

    def install(self, app: web.Application) -> None:
        """Add the download and upload routes to the fake's app."""
        app.router.add_get("/files-pri/{team_file}/{name}", self._download)
        app.router.add_post("/upload/v1/{ticket}", self._upload)

    # -- scripting ---------------------------------------------------------------------------

    def add(
        self,
        name: str,
        content: bytes,
        *,
        mimetype: str,
        filetype: str | None = None,
        subtype: str | None = None,
        size: int | None = None,
    ) -> dict[str, Any]:
        """Host `content` and return its file object as Slack puts it in an event's `files`.

        `size` overrides the reported size (a platform that under-reports).
        """
        file_id = f"F{next(_ids):09d}"
        self._hosted[file_id] = (content, mimetype)
        url = f"{self._origin()}/files-pri/T0001-{file_id}/{name}"
        obj: dict[str, Any] = {
            "id": file_id,
            "created": 1_700_000_000,
            "timestamp": 1_700_000_000,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": filetype or name.rsplit(".", 1)[-1].lower(),
            "pretty_type": mimetype,
            "user": "U0001",
            "mode": "hosted",
            "editable": False,
            "is_external": False,
            "external_type": "",
            "is_public": False,
            "public_url_shared": False,
            "display_as_bot": False,
            "username": "",
            "size": len(content) if size is None else size,
            "url_private": url,
            "url_private_download": f"{url}?download=1",
            "permalink": f"https://fake.slack.com/files/U0001/{file_id}/{name}",
            "has_rich_preview": False,
        }
        if subtype is not None:
            obj["subtype"] = subtype
        return obj

    def add_connect(self, name: str, content: bytes, *, mimetype: str, access: str = "check_file_info") -> dict[str, Any]:
        """Host `content` and return the stub a Slack Connect event carries for it: only the id and
        `file_access` (`check_file_info`: `files.info` answers with the whole object;
        `access_denied`: the app may not see it, `files.info` says `file_not_found`)."""
        obj = self.add(name, content, mimetype=mimetype)
        self._objects[obj["id"]] = obj
        if access != "check_file_info":
            self._denied.add(obj["id"])
        return {"id": obj["id"], "mode": "file_access", "file_access": access, "created": 0, "timestamp": 0, "user": ""}

    def fail_next_download(self, *, status: int = 500, times: int = 1) -> None:
        """Answer the next `times` authorised downloads with `status` and no body."""
        self._download_faults.extend(_Fault(status=status) for _ in range(times))

    def stall_next_download(self, seconds: float, *, times: int = 1) -> None:
        """Send the headers of the next `times` downloads, then nothing for `seconds`."""
        self._download_faults.extend(_Fault(stall_s=seconds) for _ in range(times))

    def redirect_next_download(self, location: str, *, status: int = 302) -> None:
        """Answer the next authorised download with a redirect to `location` (Slack sends a
        token it does not take for a file to the workspace's sign-in page this way)."""
        self._download_faults.append(_Fault(status=status, location=location))

    def fail_next_upload(self, *, status: int = 500, times: int = 1) -> None:
        """Answer the next `times` POSTs to an upload URL with `status`."""
        self._upload_faults.extend([status] * times)

    # -- routes ------------------------------------------------------------------------------

    async def _download(self, request: web.Request) -> web.StreamResponse:
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        if token != self._bot_token:
            self.refused_downloads.append((401, token))
            await self._notify()
            return web.json_response({"ok": False, "error": "invalid_auth"}, status=401)
        if self.missing_scope:
            self.refused_downloads.append((200, token))
            await self._notify()
            return web.Response(text=_SIGN_IN_PAGE, content_type="text/html")
        file_id = request.match_info["team_file"].rpartition("-")[2]
        hosted = self._hosted.get(file_id)
        if hosted is None:
            self.refused_downloads.append((404, token))
            await self._notify()
            return web.json_response({"ok": False, "error": "file_not_found"}, status=404)
        self.downloads += 1
        fault = self._download_faults.popleft() if self._download_faults else _Fault()
        if fault.status != 200:
            await self._notify()
            headers = {"Location": fault.location} if fault.location is not None else {}
            return web.Response(status=fault.status, text="fake failure", headers=headers)
        content, mimetype = hosted
        record = ServedDownload(file_id=file_id)
        self.served.append(record)
        await self._notify()
        response = web.StreamResponse(headers={"Content-Type": mimetype})
        if not self.chunked:
            response.content_length = len(content)
        await response.prepare(request)
        try:
            if fault.stall_s:
                await asyncio.sleep(fault.stall_s)
            for start in range(0, len(content), _CHUNK):
                piece = content[start : start + _CHUNK]
                await response.write(piece)
                record.sent += len(piece)
                await asyncio.sleep(0)  # let the client read (and hang up) between chunks
            await response.write_eof()
            record.completed = True
        finally:
            record.finished.set()
            await self._notify()
        return response

    async def _upload(self, request: web.Request) -> web.Response:
        self.upload_posts += 1
        ticket = self._tickets.get(request.match_info["ticket"])
        content = await request.read()
        await self._notify()
        if self._upload_faults:
            return web.Response(status=self._upload_faults.popleft(), text="fake upload failure")
        if ticket is None or ticket.content is not None:
            return web.Response(status=404, text="upload url not found or already used", content_type="text/plain")
        ticket.content, ticket.mime = content, request.content_type
        return web.Response(text=f"OK - {len(content)}", content_type="text/plain")

    # -- Web API methods (called by FakeSlack after the token check) --------------------------

    async def api(self, method: str, args: Mapping[str, Any]) -> dict[str, Any] | None:
        """Answer a files.* Web API method, or None when `method` is not one of them."""
        if method == "files.info":
            return self._info(args)
        if method == "files.getUploadURLExternal":
            return self._get_upload_url(args)
        if method == "files.completeUploadExternal":
            answer = self._complete_upload(args)
            await self._notify()
            return answer
        return None

    def _info(self, args: Mapping[str, Any]) -> dict[str, Any]:
        if self.missing_scope:
            return {"ok": False, "error": "missing_scope", "needed": "files:read", "provided": "chat:write"}
        file_id = args.get("file")
        if not isinstance(file_id, str) or not file_id:
            return {"ok": False, "error": "invalid_arguments"}
        obj = self._objects.get(file_id)
        if obj is None or file_id in self._denied:
            return {"ok": False, "error": "file_not_found"}
        return {"ok": True, "file": obj, "comments": [], "response_metadata": {"next_cursor": ""}}

    def _get_upload_url(self, args: Mapping[str, Any]) -> dict[str, Any]:
        filename, length = args.get("filename"), str(args.get("length", ""))
        if not isinstance(filename, str) or not filename:
            return {"ok": False, "error": "invalid_arguments"}
        if not length.isdigit() or int(length) < 1:
            return {"ok": False, "error": "invalid_length"}
        ticket = _Ticket(file_id=f"F{next(_ids):09d}", filename=filename, length=int(length))
        key = f"t{next(_ids)}"
        self._tickets[key] = ticket
        return {"ok": True, "upload_url": f"{self._origin()}/upload/v1/{key}", "file_id": ticket.file_id}

    def _complete_upload(self, args: Mapping[str, Any]) -> dict[str, Any]:
        files = args.get("files")
        entries = json.loads(files) if isinstance(files, str) else files
        if not isinstance(entries, list) or not entries:
            return {"ok": False, "error": "invalid_arguments"}
        channel = args.get("channel_id")
        if not isinstance(channel, str) or channel[:1] not in ("C", "D", "G"):
            return {"ok": False, "error": "channel_not_found"}
        tickets = {t.file_id: t for t in self._tickets.values()}
        done: list[dict[str, Any]] = []
        for entry in entries:
            ticket = tickets.get(str(entry.get("id")))
            if ticket is None or ticket.content is None:
                return {"ok": False, "error": "file_not_found"}
            if len(ticket.content) != ticket.length:
                return {"ok": False, "error": "upload_length_mismatch"}
            thread = args.get("thread_ts")
            comment = args.get("initial_comment")
            self.uploads.append(
                Upload(
                    file_id=ticket.file_id,
                    filename=ticket.filename,
                    title=entry.get("title"),
                    content=ticket.content,
                    channel=channel,
                    thread_ts=thread if isinstance(thread, str) else None,
                    initial_comment=comment if isinstance(comment, str) else None,
                )
            )
            done.append({"id": ticket.file_id, "title": entry.get("title") or ticket.filename})
        return {"ok": True, "files": done}
