"""web_fetch and netguard: refused targets never reach a socket connect; the happy path
against a local server on 127.0.0.1."""

from __future__ import annotations

import ipaddress
import re
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import parse_qs, urlsplit

import pytest
from pydantic_ai.exceptions import ToolFailed

from ketch.tools.netguard import check_address, parse_host_address
from ketch.tools.base import ToolDeps, ToolSettings
from ketch.tools.web import TOOLS, HtmlToMarkdown, web_fetch

# ---------------------------------------------------------------- socket.connect watcher

_CONNECT_LOG: list[list[object]] = []
_HOOK_INSTALLED = False


def _audit(event: str, args: tuple[object, ...]) -> None:
    """Record every connect while a test watches, and block any that leaves loopback."""
    if event != "socket.connect" or not _CONNECT_LOG:
        return
    address = args[1]
    _CONNECT_LOG[-1].append(address)
    host = address[0] if isinstance(address, tuple) else None
    if host is None or not ipaddress.ip_address(str(host).split("%")[0]).is_loopback:
        raise ConnectionRefusedError(f"test guard: blocked a connect to {address!r}")


@pytest.fixture
def connects() -> Iterator[list[object]]:
    """Every address a socket.connect was attempted to during the test (audit hook)."""
    global _HOOK_INSTALLED
    if not _HOOK_INSTALLED:
        sys.addaudithook(_audit)  # cannot be removed; it only records while a list is pushed
        _HOOK_INSTALLED = True
    log: list[object] = []
    _CONNECT_LOG.append(log)
    try:
        yield log
    finally:
        _CONNECT_LOG.remove(log)
    hosts = {ipaddress.ip_address(str(address[0])) for address in log if isinstance(address, tuple)}
    assert all(h.is_loopback for h in hosts), f"a test connected outside loopback: {log}"


# ---------------------------------------------------------------- local server


class Server:
    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                server.requests.append((self.path, dict(self.headers)))
                path = urlsplit(self.path).path
                query = parse_qs(urlsplit(self.path).query)
                if path == "/redirect":
                    self._send(302, b"", location=query["to"][0])
                elif path.startswith("/hop/"):
                    n, last = (int(x) for x in path.split("/")[2:4])
                    self._send(302, b"", location=f"/hop/{n + 1}/{last}" if n < last else "/page")
                elif path == "/page":
                    self._send(200, PAGE.encode(), "text/html; charset=utf-8")
                elif path == "/text":
                    self._send(200, "plain ünïcode\n".encode(), "text/plain; charset=utf-8")
                elif path == "/big":
                    self._send(200, b"x" * 200_000, "text/plain")
                elif path == "/png":
                    self._send(200, b"\x89PNG\r\n\x1a\n" + b"\x00" * 100, "image/png")
                elif path == "/slow":
                    server.release.wait(60)
                    self._send(200, b"late", "text/plain")
                else:
                    self._send(404, b"<p>no such page</p>", "text/html")

            def _send(self, status: int, body: bytes, ctype: str = "", location: str = "") -> None:
                self.send_response(status)
                if ctype:
                    self.send_header("Content-Type", ctype)
                if location:
                    self.send_header("Location", location)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except OSError:
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


PAGE = """<!doctype html><html><head><title>Ignored title</title>
<script>document.write("tracking")</script><style>body { color: red }</style></head>
<body><h1>Fetch &amp; Tell</h1><p>A paragraph with a <a href="/docs/intro">relative link</a>.</p>
<ul><li>first</li><li>second</li></ul><pre><code>x = 1
y = 2</code></pre></body></html>"""


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    yield srv
    srv.close()


def make_ctx(**settings: object) -> SimpleNamespace:
    defaults: dict[str, object] = {"web_timeout_s": 5.0}
    defaults.update(settings)
    deps = ToolDeps(workspace=SimpleNamespace(root=Path(".")), settings=ToolSettings(**defaults))  # type: ignore[arg-type]
    return SimpleNamespace(deps=deps, tool_call_id="call-w")


# ---------------------------------------------------------------- refusals


def refused_targets(port: int) -> list[str]:
    """At least one target per refused address kind, many spelled as resolvers read them."""
    return [
        f"http://127.0.0.1:{port}/page",  # loopback (a server really listens there)
        f"http://localhost:{port}/page",  # a name resolving to loopback
        f"http://2130706433:{port}/page",  # decimal 127.0.0.1
        f"http://0177.0.0.1:{port}/page",  # octal
        f"http://0x7f000001:{port}/page",  # hex
        f"http://127.1:{port}/page",  # short form
        f"http://127.0.0.1.:{port}/page",  # trailing dot
        f"http://[::1]:{port}/page",  # IPv6 loopback
        f"http://[::ffff:127.0.0.1]:{port}/page",  # IPv4-mapped
        f"http://0.0.0.0:{port}/page",  # unspecified
        f"http://[::]:{port}/page",
        "http://10.0.0.1/",
        "http://172.16.5.4/",
        "http://192.168.0.1/",
        "http://100.64.0.1/",  # CGNAT
        "http://169.254.10.10/",  # link-local
        "http://169.254.169.254/latest/meta-data/",  # metadata
        "http://100.100.100.200/",
        "http://[fd00:ec2::254]/",
        "http://[fe80::1]/",
        "http://[fc00::1]/",
        "http://[fec0::1]/",  # site-local
        "http://224.0.0.1/",  # multicast
        "http://255.255.255.255/",  # broadcast
        "http://240.0.0.1/",  # reserved
        "http://[2002:a9fe:a9fe::]/",  # 6to4 of the metadata address
        "http://[64:ff9b::a00:1]/",  # NAT64 of 10.0.0.1
        "http://0xa9.0xfe.0xa9.0xfe/",  # hex metadata
        "file:///etc/passwd",
        "ftp://example.com/file",
        "gopher://example.com/",
    ]


async def test_refused_targets_never_reach_a_connect(server: Server, connects: list[object]):
    targets = refused_targets(server.port)
    assert len(targets) >= 15
    for url in targets:
        with pytest.raises(ToolFailed) as info:
            await web_fetch(make_ctx(), url)
        assert info.value.message.startswith(("Refused", "Only http and https")), (url, info.value.message)
    assert connects == []
    assert server.requests == []


async def test_loopback_exception_covers_only_loopback(server: Server, connects: list[object]):
    for url in [
        f"http://[::ffff:127.0.0.1]:{server.port}/page",
        f"http://0.0.0.0:{server.port}/page",
        "http://10.0.0.1/",
        "http://169.254.169.254/",
    ]:
        with pytest.raises(ToolFailed, match="^Refused"):
            await web_fetch(make_ctx(web_allow_loopback=True), url)
    assert connects == []


@pytest.mark.parametrize(
    "target",
    [
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://0177.0.0.1:{port}/page",
        "http://[::ffff:127.0.0.1]:{port}/page",
        "http://0.0.0.0:{port}/page",
        "http://[fd00:ec2::254]/",
        "http://192.168.1.1/",
        "file:///etc/passwd",
    ],
)
async def test_redirect_to_a_refused_address_is_refused(server: Server, connects: list[object], target: str):
    """The first hop is the local test server (loopback allowed for it); the second hop
    points where the netguard refuses, even with that loopback exception on. (0177.0.0.1
    spells 127.0.0.1, which the exception admits; its odd spelling is refused as invalid.)"""
    target = target.format(port=server.port)
    first = f"{server.base}/redirect?to={target}"
    with pytest.raises(ToolFailed) as info:
        await web_fetch(make_ctx(web_allow_loopback=True), first)
    assert re.match(r"^(Refused|Only http and https|Could not fetch .*Invalid URL)", info.value.message)
    assert connects == [("127.0.0.1", server.port)]
    assert [path for path, _ in server.requests] == [first.removeprefix(server.base)]


# ---------------------------------------------------------------- happy path


async def test_html_becomes_markdown(server: Server, connects: list[object]):
    result = await web_fetch(make_ctx(web_allow_loopback=True), f"{server.base}/page")
    assert result == (
        "# Fetch & Tell\n\n"
        f"A paragraph with a [relative link]({server.base}/docs/intro).\n\n"
        "- first\n- second\n\n"
        "```\nx = 1\ny = 2\n```\n"
    )
    path, headers = server.requests[0]
    assert path == "/page"
    assert headers["Host"] == f"127.0.0.1:{server.port}"
    assert connects == [("127.0.0.1", server.port)]


async def test_a_name_is_dialled_at_its_checked_address_with_the_original_host_header(server: Server, connects: list[object]):
    result = await web_fetch(make_ctx(web_allow_loopback=True), f"http://localhost:{server.port}/text")
    assert result == "plain ünïcode\n"
    assert server.requests[0][1]["Host"] == f"localhost:{server.port}"
    assert all(isinstance(a, tuple) and ipaddress.ip_address(a[0]).is_loopback for a in connects)


async def test_binary_is_refused(server: Server, connects: list[object]):
    with pytest.raises(ToolFailed, match="image/png, not text"):
        await web_fetch(make_ctx(web_allow_loopback=True), f"{server.base}/png")


async def test_size_cap_cuts_the_body(server: Server, connects: list[object]):
    result = await web_fetch(make_ctx(web_allow_loopback=True, web_max_bytes=1000), f"{server.base}/big")
    assert result == "x" * 1000 + "\n[… cut at 1000 bytes; the page is longer …]\n"


async def test_time_cap_gives_up(server: Server, connects: list[object]):
    # /slow answers only when the test releases it (it never does here): the cap is what ends the fetch
    with pytest.raises(ToolFailed, match="took longer than 0.5 s"):
        await web_fetch(make_ctx(web_allow_loopback=True, web_timeout_s=0.5), f"{server.base}/slow")
    assert not server.release.is_set()


async def test_redirects_within_allowed_hosts_are_followed(server: Server, connects: list[object]):
    result = await web_fetch(make_ctx(web_allow_loopback=True), f"{server.base}/hop/1/5")
    assert result.startswith(f"URL: {server.base}/page\n# Fetch & Tell")
    assert [p for p, _ in server.requests] == [*(f"/hop/{n}/5" for n in range(1, 6)), "/page"]


async def test_more_than_five_redirects_are_refused(server: Server, connects: list[object]):
    with pytest.raises(ToolFailed, match="Stopped after 5 redirects"):
        await web_fetch(make_ctx(web_allow_loopback=True), f"{server.base}/hop/1/6")
    assert len(server.requests) == 6


async def test_http_error_is_a_failure_with_the_status(server: Server, connects: list[object]):
    with pytest.raises(ToolFailed, match="answered HTTP 404 Not Found.\nno such page"):
        await web_fetch(make_ctx(web_allow_loopback=True), f"{server.base}/missing")


def test_tool_spec_declares_network_kind():
    assert [(t.name, t.kind, t.key_arg) for t in TOOLS] == [("web_fetch", "network", "url")]


# ---------------------------------------------------------------- pure parts


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("10.1", "10.0.0.1"),
        ("0x7f.0.1", "127.0.0.1"),
        ("[::1]", "::1"),
        ("127.0.0.1.", "127.0.0.1"),
        ("example.com", None),
        ("example.com.", None),
    ],
)
def test_parse_host_address_reads_numeric_forms(host: str, expected: str | None):
    parsed = parse_host_address(host)
    assert (str(parsed) if parsed is not None else None) == expected


@pytest.mark.parametrize("host", ["1.2.3.4.5", "256.0.0.1", "1.16777216", "example.08"])
def test_parse_host_address_rejects_invalid_numbers(host: str):
    with pytest.raises(ValueError):
        parse_host_address(host)


def test_check_address_allows_public_and_refuses_embedded_private():
    assert check_address("93.184.215.14") is None
    assert check_address("2606:4700::1111") is None
    assert check_address("::ffff:8.8.8.8") is None
    # Python 3.13 spells an IPv4-mapped address with its dotted tail, older versions in hex
    assert check_address("::ffff:10.0.0.1") in (
        "::ffff:a00:1 is IPv4-mapped and 10.0.0.1 is a private address",
        "::ffff:10.0.0.1 is IPv4-mapped and 10.0.0.1 is a private address",
    )
    assert check_address("127.0.0.9", allow_loopback=True) is None
    assert check_address("::1", allow_loopback=True) is None


def test_html_converter_drops_scripts_and_keeps_structure():
    html = (
        "<h2>T</h2><script>evil()</script><ol><li>a<ul><li>b</li></ul></li><li>c</li></ol>"
        "<blockquote>q</blockquote><p>x<br>y <code>z</code> <strong>s</strong></p>"
    )
    assert HtmlToMarkdown.convert(html) == "## T\n\n1. a\n  - b\n2. c\n\n> q\n\nx\ny `z` **s**\n"


def _self_signed_cert(directory: Path) -> tuple[Path, Path]:
    """A throwaway certificate for 'localhost' (not trusted by anyone)."""
    pytest.importorskip("cryptography")
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


async def test_https_dials_the_checked_ip_but_verifies_the_host_name(tmp_path: Path, connects: list[object]):
    """TLS SNI carries the URL's host name while the socket goes to the checked IP; the
    untrusted certificate is then rejected by verification."""
    import socket
    import ssl

    cert_path, key_path = _self_signed_cert(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_path, key_path)
    server_names: list[str | None] = []
    context.sni_callback = lambda _sock, name, _ctx: server_names.append(name)  # type: ignore[assignment,return-value]
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve_one() -> None:
        conn, _ = listener.accept()
        try:
            context.wrap_socket(conn, server_side=True).close()
        except (ssl.SSLError, OSError):
            conn.close()

    thread = threading.Thread(target=serve_one, daemon=True)
    thread.start()
    try:
        with pytest.raises(ToolFailed, match="CERTIFICATE_VERIFY_FAILED"):
            await web_fetch(make_ctx(web_allow_loopback=True), f"https://localhost:{port}/")
    finally:
        thread.join(5)
        listener.close()
    assert server_names == ["localhost"]
    assert ("127.0.0.1", port) in connects
