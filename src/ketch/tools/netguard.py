"""Which network addresses outgoing fetches may reach, and a connector that enforces it.

``check_address`` says why an address is refused (or ``None`` when it is public).
``parse_host_address`` reads the numeric host spellings resolvers accept (``2130706433``,
``0177.0.0.1``, ``0x7f000001``, ``127.1``, ``[::1]``, trailing dots).
``GuardedBackend`` is an httpcore network backend that resolves a host, checks every
address it got, and dials the checked address itself, so DNS cannot change the answer
between the check and the connect; ``GuardedTransport`` puts it under an httpx client.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpcore
import httpx

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_V4_BLOCKS: list[tuple[str, str]] = [
    ("169.254.169.254/32", "a cloud metadata address"),
    ("100.100.100.200/32", "a cloud metadata address"),
    ("0.0.0.0/32", "the unspecified address"),
    ("255.255.255.255/32", "the broadcast address"),
    ("0.0.0.0/8", "a 'this network' address"),
    ("127.0.0.0/8", "a loopback address"),
    ("10.0.0.0/8", "a private address"),
    ("172.16.0.0/12", "a private address"),
    ("192.168.0.0/16", "a private address"),
    ("100.64.0.0/10", "a carrier-grade NAT address"),
    ("169.254.0.0/16", "a link-local address"),
    ("192.0.0.0/24", "a reserved address"),
    ("192.0.2.0/24", "a documentation address"),
    ("198.51.100.0/24", "a documentation address"),
    ("203.0.113.0/24", "a documentation address"),
    ("198.18.0.0/15", "a benchmarking address"),
    ("224.0.0.0/4", "a multicast address"),
    ("240.0.0.0/4", "a reserved address"),
]
_V6_BLOCKS: list[tuple[str, str]] = [
    ("fd00:ec2::254/128", "a cloud metadata address"),
    ("::/128", "the unspecified address"),
    ("::1/128", "a loopback address"),
    ("64:ff9b:1::/48", "a local NAT64 address"),
    ("fc00::/7", "a unique-local address"),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a site-local address"),
    ("ff00::/8", "a multicast address"),
    ("100::/64", "a discard-only address"),
    ("2001:db8::/32", "a documentation address"),
]
_BLOCKS = [(ipaddress.ip_network(net), reason) for net, reason in _V4_BLOCKS + _V6_BLOCKS]
_LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_V4_COMPATIBLE = ipaddress.ip_network("::/96")


class AddressRefused(Exception):
    """A fetch target resolved to an address that outgoing fetches may not reach."""


def _embedded_v4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, str] | None:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, NAT64, v4-compatible)."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped, "IPv4-mapped"
    if address.sixtofour is not None:
        return address.sixtofour, "6to4"
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF), "NAT64"
    if address in _V4_COMPATIBLE:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF), "IPv4-compatible"
    return None


def check_address(ip: str | IPAddress, *, allow_loopback: bool = False) -> str | None:
    """Why ``ip`` may not be fetched from, or ``None`` when it is a public address.

    ``allow_loopback`` (tests only) admits 127.0.0.0/8 and ::1 exactly: never an IPv6
    form that embeds a loopback IPv4 address, never 0.0.0.0.
    """
    try:
        address = ipaddress.ip_address(ip) if isinstance(ip, str) else ip
    except ValueError:
        return f"{ip!r} is not an IP address"
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id:
        address = ipaddress.IPv6Address(str(address).split("%", 1)[0])
    if allow_loopback and any(address in net for net in _LOOPBACK if net.version == address.version):
        return None
    for net, reason in _BLOCKS:
        if net.version == address.version and address in net:
            return f"{address} is {reason}"
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_v4(address)
        if embedded is not None:
            inner_reason = check_address(embedded[0])
            if inner_reason is not None:
                return f"{address} is {embedded[1]} and {inner_reason}"
            return None
    if not address.is_global:
        return f"{address} is not a public address"
    return None


_NUMBER = re.compile(r"^(0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*)$")
_NUMERIC_LOOKING = re.compile(r"^(0[xX][0-9a-fA-F]*|[0-9]+)$")


def _parse_number(part: str) -> int:
    if part[:2].lower() == "0x":
        return int(part[2:] or "0", 16)
    if len(part) > 1 and part.startswith("0"):
        return int(part, 8)
    return int(part)


def parse_host_address(host: str) -> IPAddress | None:
    """The IP address a URL host spells, or ``None`` when the host is a name.

    Accepts bracketed IPv6, trailing dots, and the numeric IPv4 forms of ``inet_aton``:
    one to four parts, each decimal, octal (leading 0) or hex (0x), the last part
    filling the remaining bytes. Raises ``ValueError`` for a numeric host that is no
    valid address (``1.2.3.4.5``, ``256.1.1.1``), which must not be looked up as a name.
    """
    text = host.strip()
    if text.startswith("[") and text.endswith("]"):
        return ipaddress.IPv6Address(text[1:-1])
    text = text.rstrip(".")
    if ":" in text:
        return ipaddress.IPv6Address(text)
    parts = text.split(".")
    if not parts or not _NUMERIC_LOOKING.match(parts[-1]):
        return None
    if len(parts) > 4 or not all(_NUMBER.match(p) for p in parts):
        raise ValueError(f"{host!r} is not a valid IP address")
    numbers = [_parse_number(p) for p in parts]
    last_bits = 8 * (5 - len(numbers))
    if any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 1 << last_bits:
        raise ValueError(f"{host!r} is not a valid IP address")
    value = numbers[-1]
    for index, number in enumerate(numbers[:-1]):
        value |= number << (24 - 8 * index)
    return ipaddress.IPv4Address(value)


async def resolve_checked(host: str, port: int, *, allow_loopback: bool = False) -> list[IPAddress]:
    """Resolve ``host`` and return its addresses, refusing if ANY of them is refused.

    Raises ``AddressRefused`` with a one-line reason.
    """
    try:
        literal = parse_host_address(host)
    except ValueError as exc:
        raise AddressRefused(str(exc)) from exc
    if literal is not None:
        addresses: list[IPAddress] = [literal]
    else:
        name = host.rstrip(".")
        try:
            infos = await asyncio.to_thread(socket.getaddrinfo, name, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise AddressRefused(f"could not resolve {host!r}: {exc}") from exc
        addresses = []
        for info in infos:
            address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
            if address not in addresses:
                addresses.append(address)
        if not addresses:
            raise AddressRefused(f"{host!r} resolved to no address")
    for address in addresses:
        reason = check_address(address, allow_loopback=allow_loopback)
        if reason is not None:
            origin = "" if literal is not None else f" (resolved from {host})"
            raise AddressRefused(f"{reason}{origin}; fetching from it is not allowed")
    return addresses


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """An httpcore backend that only dials addresses ``resolve_checked`` approved.

    The host httpcore asks for is resolved and checked here, and the connection is made to
    the checked IP literal. TLS still verifies the original host name (httpcore passes it
    as ``server_hostname`` to ``start_tls``) and the Host header is untouched.
    """

    def __init__(self, *, allow_loopback: bool = False) -> None:
        self._allow_loopback = allow_loopback
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await resolve_checked(host, port, allow_loopback=self._allow_loopback)
        last_error: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    str(address),
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last_error = exc
        assert last_error is not None
        raise last_error

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise AddressRefused("unix sockets are not fetch targets")

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class GuardedTransport(httpx.AsyncBaseTransport):
    """An httpx transport whose only way out is ``GuardedBackend``.

    Use it with ``httpx.AsyncClient(transport=..., trust_env=False)`` (an environment proxy
    would otherwise be dialled instead) and check redirects hop by hop yourself.
    """

    def __init__(self, *, allow_loopback: bool) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=None,  # httpcore builds the default (certifi) context per https connection
            network_backend=GuardedBackend(allow_loopback=allow_loopback),
            max_connections=4,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,  # type: ignore[arg-type]
            extensions=request.extensions,
        )
        core_response = await self._pool.handle_async_request(core_request)
        return httpx.Response(
            status_code=core_response.status,
            headers=core_response.headers,
            stream=_CoreStream(core_response),
            extensions=core_response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


class _CoreStream(httpx.AsyncByteStream):
    def __init__(self, response: httpcore.Response) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._response.aiter_stream():
            yield chunk

    async def aclose(self) -> None:
        await self._response.aclose()
