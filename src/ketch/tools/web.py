"""The ``web_fetch`` tool: GET one http(s) page and return it as text (HTML as Markdown).

Every hop, redirects included, goes through ``netguard``: the host is resolved, every
address it resolves to is checked, and the connection is made to the checked address, so
private, loopback, link-local and metadata addresses are never reached. Redirects are
followed by hand (at most ``MAX_REDIRECTS``); the body is read up to a size cap and the
whole fetch runs under a time cap.
"""

from __future__ import annotations

import asyncio
import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx
from pydantic_ai import RunContext
from pydantic_ai.exceptions import ToolFailed

from ketch.tools.netguard import AddressRefused, GuardedTransport, check_address, parse_host_address
from ketch.tools.base import ToolDeps, ToolSettings, ToolSpec

MAX_REDIRECTS = 5
USER_AGENT = "ketch-web-fetch/0.1"
_REDIRECT_CODES = {301, 302, 303, 307, 308}
_TEXT_TYPES = re.compile(
    r"^(text/.*|application/(json|xml|javascript|ecmascript|x-javascript|x-yaml|yaml|toml"
    r"|x-sh|x-python|sql|graphql|ld\+json|rss\+xml|atom\+xml)|application/.*\+(json|xml))$"
)
_HTML_TYPES = {"text/html", "application/xhtml+xml"}
_TRANSPORT_ERRORS = (httpx.HTTPError, httpcore.NetworkError, httpcore.ProtocolError, httpcore.UnsupportedProtocol)


# --------------------------------------------------------------------------- HTML → Markdown

_BLOCK_TAGS = {
    "p", "div", "section", "article", "header", "footer", "main", "nav", "aside", "figure",
    "figcaption", "form", "thead", "tbody", "dl", "dt", "dd", "details", "summary",
    "address", "center",
}  # fmt: skip
_SKIP_TAGS = {"script", "style", "noscript", "template", "svg", "head", "iframe", "button", "select"}
_BREAK = "\x00"


class HtmlToMarkdown(HTMLParser):
    """A small HTML → Markdown converter: headings, paragraphs, links, lists, code, quotes.

    Scripts, styles and other non-content elements are dropped. Use ``convert``.
    """

    def __init__(self, base_url: str = "") -> None:
        super().__init__(convert_charrefs=True)
        self._base_url = base_url
        self._blocks: list[str] = []
        self._inline: list[str] = []
        self._skip: list[str] = []
        self._pre: list[str] | None = None
        self._pre_language = ""
        self._lists: list[list[int]] = []  # per open list: [ordered, next number]
        self._marker = ""
        self._quote = 0
        self._heading = 0
        self._links: list[tuple[str, int]] = []
        self._title: list[str] | None = None
        self._previous_tight = False
        self._tables = 0
        self.title = ""

    @classmethod
    def convert(cls, html: str, base_url: str = "") -> str:
        """Markdown for ``html``; relative links are resolved against ``base_url``."""
        parser = cls(base_url)
        parser.feed(html)
        parser.close()
        parser._flush()
        body = "\n\n".join(parser._blocks)
        if parser.title and not body.startswith("# "):
            body = f"# {parser.title}\n\n{body}"
        return re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"

    # -- structure
    def _flush(self) -> None:
        text = "".join(self._inline)
        self._inline = []
        self._links = []
        text = re.sub(r"\s+", " ", text).replace(f" {_BREAK} ", _BREAK).strip().replace(_BREAK, "\n")
        if not text:
            return
        if self._heading:
            text = "#" * self._heading + " " + text.replace("\n", " ")
        elif self._tables and not self._lists:
            text = "| " + text.replace("\n", " ") + " |"
        indent = "  " * max(len(self._lists) - 1, 0)
        if self._marker:
            lines = text.split("\n")
            pad = " " * len(self._marker)
            text = "\n".join([indent + self._marker + lines[0], *(indent + pad + x for x in lines[1:])])
            self._marker = ""
        elif self._lists:
            text = "\n".join(indent + "  " + line for line in text.split("\n"))
        self._add_block(text)

    def _add_block(self, text: str) -> None:
        """Append a block; consecutive list lines stay together as one tight list."""
        if self._quote:
            text = "\n".join(("> " * self._quote + line).rstrip() for line in text.split("\n"))
        tight = bool(self._lists) or self._tables > 0
        if tight and self._previous_tight and self._blocks:
            self._blocks[-1] += "\n" + text
        else:
            self._blocks.append(text)
        self._previous_tight = tight

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = {k: v or "" for k, v in attrs}
        if self._skip:
            if tag == self._skip[-1]:
                self._skip.append(tag)
            return
        if tag in _SKIP_TAGS:
            self._skip.append(tag)
            return
        if tag == "title":
            self._title = []
        elif self._pre is not None:
            if tag == "br":
                self._pre.append("\n")
            elif tag == "code" and not self._pre:
                match = re.search(r"language-([\w+-]+)", attributes.get("class", ""))
                self._pre_language = match.group(1) if match else ""
        elif tag == "pre":
            self._flush()
            self._pre = []
            self._pre_language = ""
        elif tag == "code" and self._pre is None:
            self._inline.append("`")
        elif re.fullmatch(r"h[1-6]", tag):
            self._flush()
            self._heading = int(tag[1])
        elif tag in ("ul", "ol", "menu"):
            self._flush()
            self._lists.append([tag == "ol", 1])
        elif tag == "li":
            self._flush()
            if self._lists:
                ordered, number = self._lists[-1]
                self._marker = f"{number}. " if ordered else "- "
                self._lists[-1][1] += 1
            else:
                self._marker = "- "
        elif tag == "blockquote":
            self._flush()
            self._quote += 1
        elif tag == "table":
            self._flush()
            self._tables += 1
        elif tag in _BLOCK_TAGS or tag == "tr":
            self._flush()
        elif tag in ("td", "th"):
            if self._inline:
                self._inline.append(" | ")
        elif tag == "br":
            self._inline.append(f" {_BREAK} ")
        elif tag == "hr":
            self._flush()
            self._add_block("---")
        elif tag in ("strong", "b"):
            self._inline.append("**")
        elif tag in ("em", "i"):
            self._inline.append("*")
        elif tag == "a":
            self._links.append((attributes.get("href", ""), len(self._inline)))
        elif tag == "img" and attributes.get("alt"):
            src = urljoin(self._base_url, attributes.get("src", ""))
            self._inline.append(f"![{attributes['alt']}]({src})")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in ("br", "hr", "img"):
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._skip:
            if tag == self._skip[-1]:
                self._skip.pop()
            return
        if tag == "title" and self._title is not None:
            self.title = re.sub(r"\s+", " ", "".join(self._title)).strip()
            self._title = None
        elif tag == "pre" and self._pre is not None:
            code = "".join(self._pre).strip("\n")
            self._pre = None
            self._add_block(f"```{self._pre_language}\n{code}\n```")
        elif self._pre is not None:
            return
        elif tag == "code":
            self._inline.append("`")
        elif re.fullmatch(r"h[1-6]", tag):
            self._flush()
            self._heading = 0
        elif tag in ("ul", "ol", "menu"):
            self._flush()
            if self._lists:
                self._lists.pop()
        elif tag == "li":
            self._flush()
        elif tag == "blockquote":
            self._flush()
            self._quote = max(self._quote - 1, 0)
        elif tag == "table":
            self._flush()
            self._tables = max(self._tables - 1, 0)
        elif tag in _BLOCK_TAGS or tag == "tr":
            self._flush()
        elif tag in ("strong", "b"):
            self._inline.append("**")
        elif tag in ("em", "i"):
            self._inline.append("*")
        elif tag == "a" and self._links:
            self._close_link()

    def _close_link(self) -> None:
        href, start = self._links.pop()
        text = re.sub(r"\s+", " ", "".join(self._inline[start:])).strip()
        if not text or not href or href.startswith(("#", "javascript:")):
            return
        self._inline[start:] = [f"[{text}]({urljoin(self._base_url, href)})"]

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._title is not None:
            self._title.append(data)
        elif self._pre is not None:
            self._pre.append(data)
        else:
            self._inline.append(data)


# --------------------------------------------------------------------------- the tool


def _checked_url(url: str, allow_loopback: bool) -> httpx.URL:
    """Refuse non-http(s) URLs, hosts with control bytes (``config.hostcheck``) and numeric hosts
    that are refused addresses, before any I/O."""
    from ketch.config.hostcheck import url_problem

    problem = url_problem(url.strip())
    if problem is not None:
        raise ToolFailed(f"Refused: {problem}; nothing was fetched.")
    parts = urlsplit(url.strip())
    if parts.scheme.lower() not in ("http", "https"):
        kind = f"{parts.scheme!r} URLs" if parts.scheme else "relative URLs"
        raise ToolFailed(f"Only http and https URLs can be fetched, not {kind}: {url}")
    host = parts.hostname
    if not host:
        raise ToolFailed(f"The URL has no host: {url}")
    try:
        literal = parse_host_address(host)
    except ValueError as exc:
        raise ToolFailed(f"Refused {url}: {exc}.") from exc
    if literal is not None:
        reason = check_address(literal, allow_loopback=allow_loopback)
        if reason is not None:
            raise ToolFailed(f"Refused {url}: {reason}; fetching from it is not allowed.")
    try:
        return httpx.URL(url.strip())
    except httpx.InvalidURL as exc:
        raise ToolFailed(f"Invalid URL {url}: {exc}.") from exc


def _media_type(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def _decode(body: bytes, response: httpx.Response, is_html: bool) -> str:
    encoding = response.charset_encoding
    if encoding is None and is_html:
        match = re.search(rb"<meta[^>]+charset=[\"']?([\w-]+)", body[:4096], re.IGNORECASE)
        encoding = match.group(1).decode("ascii") if match else None
    try:
        return body.decode(encoding or "utf-8", errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


async def _read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """Up to ``max_bytes`` of the (decompressed) body, and whether more was left unread."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) >= max_bytes:
            return bytes(body[:max_bytes]), len(body) > max_bytes or not response.is_stream_consumed
    return bytes(body), False


async def _fetch(url: str, settings: ToolSettings) -> str:
    current = url
    _checked_url(current, settings.web_allow_loopback)  # refuse before building a client
    transport = GuardedTransport(allow_loopback=settings.web_allow_loopback)
    async with httpx.AsyncClient(
        transport=transport,
        follow_redirects=False,
        trust_env=False,
        timeout=settings.web_timeout_s,
        headers={"User-Agent": USER_AGENT},
    ) as client:
        for _hop in range(MAX_REDIRECTS + 1):
            target = _checked_url(current, settings.web_allow_loopback)
            async with client.stream("GET", target) as response:
                if response.status_code in _REDIRECT_CODES:
                    location = response.headers.get("location")
                    if not location:
                        raise ToolFailed(f"{current} answered {response.status_code} without a Location.")
                    current = str(target.join(location))
                    continue
                return await _render(response, url, str(target), settings)
    raise ToolFailed(f"Stopped after {MAX_REDIRECTS} redirects; the next one pointed to {current}.")


async def _render(response: httpx.Response, requested: str, final: str, settings: ToolSettings) -> str:
    media_type = _media_type(response)
    is_html = media_type in _HTML_TYPES
    if media_type and not is_html and not _TEXT_TYPES.match(media_type):
        raise ToolFailed(f"{final} is {media_type}, not text; web_fetch returns only text pages.")
    body, truncated = await _read_capped(response, settings.web_max_bytes)
    if not media_type and b"\x00" in body[:4096]:
        raise ToolFailed(f"{final} looks binary; web_fetch returns only text pages.")
    text = _decode(body, response, is_html)
    if is_html:
        text = HtmlToMarkdown.convert(text, final)
    if response.status_code >= 400:
        snippet = text[:2000].strip()
        raise ToolFailed(f"{final} answered HTTP {response.status_code} {response.reason_phrase}.\n{snippet}".strip())
    header = f"URL: {final}\n" if final != requested else ""
    if truncated:
        text += f"\n[… cut at {settings.web_max_bytes} bytes; the page is longer …]\n"
    return header + text


async def web_fetch(ctx: RunContext[ToolDeps], url: str) -> str:
    """Fetch a public web page over http or https and return its text; HTML becomes Markdown.

    Private, loopback and cloud-metadata addresses are refused. Binary content is refused;
    long pages are cut.

    Args:
        url: The http:// or https:// address to fetch.
    """
    settings = ctx.deps.settings
    try:
        async with asyncio.timeout(settings.web_timeout_s):
            return await _fetch(url, settings)
    except AddressRefused as exc:
        raise ToolFailed(f"Refused {url}: {exc}.") from exc
    except TimeoutError as exc:
        raise ToolFailed(f"Fetching {url} took longer than {settings.web_timeout_s:g} s; gave up.") from exc
    except httpcore.TimeoutException as exc:
        raise ToolFailed(f"Fetching {url} took longer than {settings.web_timeout_s:g} s; gave up.") from exc
    except _TRANSPORT_ERRORS as exc:
        raise ToolFailed(f"Could not fetch {url}: {str(exc) or type(exc).__name__}.") from exc


TOOLS: list[ToolSpec] = [ToolSpec(name="web_fetch", function=web_fetch, kind="network", key_arg="url")]
