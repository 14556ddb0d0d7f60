"""Built-in `http_fetch`: GET one URL, guarded against private addresses and DNS rebinding."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, Protocol
from urllib.parse import SplitResult, urljoin, urlsplit

from pydantic import Field

from orchestrator.errors import ToolFailure
from orchestrator.tools.base import BuiltinTool, ToolSpec
from orchestrator.tools.contract import ToolArguments

if TYPE_CHECKING:
    from aiohttp.abc import AbstractResolver

    from orchestrator.policy import SecurityPolicy

__all__ = ["HTTP_FETCH", "HTTP_FETCH_SPEC", "HttpFetch", "HttpFetchArguments", "fetch_url"]

_TOOL: Final = "http_fetch"
_SCHEMES: Final = frozenset({"http", "https"})
_CHUNK: Final = 16 * 1024


class HttpFetchArguments(ToolArguments):
    """The `http_fetch` tool's arguments."""

    url: str = Field(description="Absolute http:// or https:// URL.")
    method: Literal["GET"] = Field(default="GET", description="Only GET.")

    refusals: ClassVar[Mapping[tuple[str, str], Callable[[Any], str]]] = MappingProxyType({
        ("method", "literal_error"): lambda method: f"method {method!r} is not supported; only GET",
    })


HTTP_FETCH_SPEC: Final = ToolSpec(
    name=_TOOL,
    description=(
        "Fetch a public http(s) URL with GET; returns the status, content type and body "
        "text. Redirects are not followed."
    ),
    contract=HttpFetchArguments,
    read_only=True,
    untrusted_output=True,
)

_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True, kw_only=True)
class _Target:
    """A checked URL and the addresses it may connect to."""

    url: str
    host: str
    port: int
    addresses: tuple[tuple[socket.AddressFamily, str], ...]


@dataclass(frozen=True, slots=True)
class HttpFetch:
    """`http_fetch` bound to one agent's network limits."""

    policy: SecurityPolicy

    @property
    def spec(self) -> ToolSpec:
        """Return the `http_fetch` spec."""
        return HTTP_FETCH_SPEC

    async def invoke(self, arguments: Mapping[str, Any]) -> str:
        """Return "HTTP <status>\\n<content-type>\\n\\n<text>"; raises `ToolFailure` if refused."""
        url = HttpFetchArguments.parse(_TOOL, arguments).url
        return await fetch_url(url.strip(), self.policy, tool=_TOOL)


async def fetch_url(url: str, policy: SecurityPolicy, *, tool: str, method: str = "GET") -> str:
    """Send one bodiless request under `policy`'s network limits and report the response.

    The one guarded fetch for every tool that reaches the network (`http_fetch`, skill
    http tools): scheme, allowed hosts, then DNS resolution with every address checked
    against the private-address guard, and the connection pinned to the checked
    addresses. Returns "HTTP <status>\\n<content-type>\\n\\n<text>"; raises
    `ToolFailure` (naming `tool`) when refused or when the request fails.
    """
    target = await _check(url, policy, tool)
    return await _fetch(target, policy.http_max_bytes, tool=tool, method=method)


async def _check(url: str, policy: SecurityPolicy, tool: str) -> _Target:
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # a bracket left open: "http://[::1/"
        raise ToolFailure(tool, f"refused {url!r}: {exc}") from None
    if parts.scheme.lower() not in _SCHEMES:
        raise ToolFailure(tool, f"refused {url!r}: only http and https URLs are fetched")
    host = parts.hostname
    if not host:
        raise ToolFailure(tool, f"refused {url!r}: the URL names no host")
    port = _port(url, parts, tool)
    if not policy.http_allowed_hosts:
        raise ToolFailure(
            tool,
            f"refused {url!r}: no host is allowed "
            f"([agents.{policy.agent}.http_fetch] allowed_hosts is empty)",
        )
    if not policy.allows_host(host):
        hosts = ", ".join(policy.http_allowed_hosts)
        raise ToolFailure(
            tool, f"refused {url!r}: host {host!r} is not in the allowed hosts ({hosts})"
        )
    addresses = await _resolve(host, port, tool)
    if not policy.http_allow_private_addresses:
        for _, address in addresses:
            if not _is_public(ipaddress.ip_address(address)):
                raise ToolFailure(
                    tool, f"refused {url!r}: {host} resolves to non-public address {address}"
                )
    return _Target(url=url, host=host, port=port, addresses=addresses)


def _port(url: str, parts: SplitResult, tool: str) -> int:
    try:
        explicit = parts.port
    except ValueError:
        raise ToolFailure(tool, f"refused {url!r}: invalid port") from None
    if explicit is not None:
        return explicit
    return 443 if parts.scheme.lower() == "https" else 80


async def _resolve(
    host: str, port: int, tool: str
) -> tuple[tuple[socket.AddressFamily, str], ...]:
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        family = socket.AF_INET6 if literal.version == 6 else socket.AF_INET
        return ((family, str(literal)),)
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP
        )
    except (socket.gaierror, UnicodeError) as exc:
        raise ToolFailure(tool, f"cannot resolve host {host!r}: {exc}") from exc
    found = tuple(
        dict.fromkeys(
            (socket.AddressFamily(family), str(sockaddr[0]))
            for family, _, _, _, sockaddr in infos
            if family in (socket.AF_INET, socket.AF_INET6)
        )
    )
    if not found:
        raise ToolFailure(tool, f"cannot resolve host {host!r}: no IP addresses")
    return found


def _is_public(address: _IPAddress) -> bool:
    # Python 3.11 does not look through IPv4-mapped IPv6 (::ffff:127.0.0.1).
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not (
        address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_reserved
        or address.is_multicast
        or address.is_unspecified
    )


def _pinned_resolver(target: _Target) -> AbstractResolver:
    from aiohttp.abc import AbstractResolver, ResolveResult

    class PinnedResolver(AbstractResolver):
        """Answer only with the addresses `_check` approved, so DNS cannot change them."""

        async def resolve(
            self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
        ) -> list[ResolveResult]:
            # The connector serves one request and follows no redirects, so `host`
            # is the checked host (possibly IDNA-encoded by yarl).
            flags = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
            return [
                ResolveResult(
                    hostname=host, host=address, port=port, family=fam, proto=0, flags=flags
                )
                for fam, address in target.addresses
                if family in (socket.AF_UNSPEC, fam)
            ]

        async def close(self) -> None:
            return None

    return PinnedResolver()


async def _fetch(target: _Target, max_bytes: int, *, tool: str, method: str) -> str:
    import aiohttp

    connector = aiohttp.TCPConnector(resolver=_pinned_resolver(target), use_dns_cache=False)
    try:
        async with (
            aiohttp.ClientSession(connector=connector, trust_env=False) as session,
            session.request(method, target.url, allow_redirects=False) as response,
        ):
            body, truncated = await _read_capped(response.content, max_bytes)
            text = body.decode(response.charset or "utf-8", errors="replace")
            if truncated:
                text += f"\n[body truncated at {max_bytes} bytes]"
            location = response.headers.get("Location")
            if 300 <= response.status < 400 and location:
                note = f"[redirect to {urljoin(target.url, location)} not followed]"
                text = f"{note}\n{text}" if text else note
            content_type = response.headers.get("Content-Type", "")
            return f"HTTP {response.status}\n{content_type}\n\n{text}"
    except LookupError as exc:
        raise ToolFailure(tool, f"{target.url}: unknown charset: {exc}") from exc
    except (aiohttp.ClientError, OSError) as exc:
        raise ToolFailure(tool, f"{target.url}: {type(exc).__name__}: {exc}") from exc


class _Readable(Protocol):
    """The part of aiohttp's StreamReader used here, so aiohttp stays a lazy import."""

    async def read(self, n: int = -1) -> bytes: ...


async def _read_capped(stream: _Readable, max_bytes: int) -> tuple[bytes, bool]:
    body = bytearray()
    while len(body) <= max_bytes:
        chunk = await stream.read(_CHUNK)
        if not chunk:
            return bytes(body), False
        body += chunk
    return bytes(body[:max_bytes]), True


HTTP_FETCH: Final = BuiltinTool(spec=HTTP_FETCH_SPEC, bind=HttpFetch)
