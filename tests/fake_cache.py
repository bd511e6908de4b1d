r"""Prompt-cache accounting of the fake provider, each wire by its provider's documented rules.

A `PromptCache` given to `FakeProvider(cache=...)` keeps, per provider and model (and, on
OpenAI, per `prompt_cache_key` + prefix route), the prefixes earlier requests left in the
cache, and rewrites each answer's usage in the wire's own fields. Without it the fake reports
the turn's scripted usage as before.

Tokens: the fake's own deterministic tokenizer, not the providers': a request is cut into
segments in the order the provider caches them, each segment is its canonical JSON (sorted keys,
no spaces, `cache_control` markers removed: moving a marker changes no content), and a prefix
of N characters of their concatenation is ceil(N / 4) tokens. The characters are counted as text,
as a provider tokenizes what the model reads: a JSON escape (`\n`, `\"`, `\t`, `\uXXXX`) is the
one character it stands for, not the two or six bytes of the request body. Identity (what is a
cached prefix) stays the canonical JSON. Input totals in the rewritten usage are counted the
same way, so shares and costs are consistent.

Rules (checked against the providers' caching guides; the parts the guides leave open are
marked "assumed"):

- Anthropic Messages: cache order tools -> system -> messages, one segment per tool, system
  block and content block. Nothing is cached without a marker: explicit `cache_control`
  breakpoints on blocks, and automatic caching (a top-level `cache_control`) puts one on the last
  block; more than 4 breakpoints in all is the API's 400. Each breakpoint reads the longest
  prefix cached at a block boundary up to 20 blocks before it (the lookback) and writes its own
  prefix when that is at least the model family's minimum (1024 tokens; 2048 Sonnet 4.6 and
  Haiku 3/3.5; 4096 Opus 4.5+/Haiku 4.5). TTL 5 minutes from the last use, 1 hour with
  `"ttl": "1h"`. Usage: `cache_read_input_tokens`, `cache_creation_input_tokens` (with the
  `cache_creation` 5m/1h split) and `input_tokens` = the uncached rest.
- OpenAI Chat Completions and Responses: automatic, prompts of 1024 tokens or more, hits in
  128-token increments (the longest cached prefix floored to a 1024 + 128k boundary). Routing by
  `prompt_cache_key` plus a hash of the first 256 tokens: a cache is shared only within one route.
  Order (assumed, as the harmony format renders it): system/developer instructions, tools, then
  the conversation. TTL: 5 minutes of inactivity (the guide says 5-10), 24 hours with
  `prompt_cache_retention: "24h"`. Usage: `prompt_tokens_details.cached_tokens` /
  `input_tokens_details.cached_tokens`; `prompt_tokens` / `input_tokens` stay the total.
  These are the rules of the models before GPT-5.6; a `prompt_cache_breakpoint` or
  `prompt_cache_options` sent to one of them is a 400 (assumed: the guide says only GPT-5.6 and
  later take them).
- OpenAI GPT-5.6 and later families (`gpt-5.6*`, `gpt-5.7*`, ..., `gpt-6*`; by name): a prefix is
  cached and matched only at a breakpoint, exactly (no 128-token rounding, no fallback to a shorter
  unmarked prefix). Breakpoints: each content block carrying `prompt_cache_breakpoint:
  {"mode": "explicit"}` (system/developer, user and tool-result blocks; one on assistant output is
  a 400, assumed shape), placed at the end of the message or item holding it (the fake's segments
  are whole messages; ketch marks a message's last block), and, unless `prompt_cache_options.mode`
  is `explicit`, one implicit breakpoint at the end of the newest eligible (non-assistant) message.
  Reads: the longest prefix of the request that an earlier breakpoint of its route cached and that
  is live, wherever it ends (no block lookback limit), among the route's latest 80 breakpoints
  (assumed: "latest" = most recently written or read; older ones are no longer matched). Writes: up to four per request, the implicit one plus the latest three explicit ones
  (explicit mode: the latest four), each once it is at least 1024 tokens (assumed: the guide's
  minimum); `cache_write_tokens` = from the end of the read to the furthest written breakpoint.
  More than four markers is not an error (the guide: "writes up to the latest three"). TTL
  `prompt_cache_options.ttl` (`30m` default, `12h`), a breakpoint's own `ttl` wins, refreshed on
  use (assumed: the guide calls it a minimum lifetime). Identity: a marker is part of the prefix
  (the guide does not say a marker is left out of it, so a marker moved is a changed prefix) but
  is not counted as tokens (assumed: it is request structure, not text). Routing as before.
  Usage: `cached_tokens` and `cache_write_tokens` in `prompt_tokens_details` /
  `input_tokens_details`.
- Gemini: implicit caching of a prefix seen before, at content boundaries (assumed), once it is at
  least the model's minimum (2048 tokens on 2.5, 4096 on 3.x and later; 2048 for other names);
  order system instruction, tools, contents (assumed); TTL 5 minutes (assumed: the guide gives
  none). Usage: `usageMetadata.cachedContentTokenCount`, `promptTokenCount` the total.

Not modelled: eviction under load, Anthropic's invalidation of message caches by a changed
`tool_choice` or thinking setting, the 1h-before-5m ordering rule, Gemini's explicit
`cachedContent`. Besides the cache, every request is compared at segment level with the previous
request of its route and kind (with tools: a step; without: a side request such as a summary):
`Counts.extends` says whether it starts with that whole request (append-only), `Counts.diverged_at`
names the first segment that differs otherwise.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

CHARS_PER_TOKEN = 4
ANTHROPIC_LOOKBACK = 20
ANTHROPIC_MAX_BREAKPOINTS = 4
OPENAI_MINIMUM = 1024
OPENAI_INCREMENT = 128
OPENAI_ROUTE_TOKENS = 256
OPENAI_MAX_WRITES = 4
OPENAI_MATCHED_BREAKPOINTS = 80
OPENAI_TTLS = {'30m': 1800.0, '12h': 43200.0}
FIVE_MINUTES, ONE_HOUR, ONE_DAY = 300.0, 3600.0, 86400.0


def tokens(chars: int) -> int:
    """The fake tokenizer: ceil(chars / 4)."""
    return -(-chars // CHARS_PER_TOKEN)


_ESCAPE = re.compile(r'\\(?:u[0-9a-fA-F]{4}|.)')
"""A JSON string escape in canonical text (a backslash never occurs outside one there)."""


def text_chars(text: str) -> int:
    """Characters of a canonical segment as text: each JSON escape counts as the one character it stands for."""
    return len(text) - sum(len(m.group()) - 1 for m in _ESCAPE.finditer(text))


def anthropic_minimum(model: str) -> int:
    """Minimum cacheable prompt of an Anthropic model family (Anthropic's prompt-caching guide)."""
    name = model.lower()
    if re.search(r'opus-4-[5-9]|haiku-4', name):
        return 4096
    if re.search(r'sonnet-4-[6-9]|haiku-3|3-5-haiku|3-haiku', name):
        return 2048
    return 1024


def openai_breakpoint_family(model: str) -> bool:
    """GPT-5.6 and later families (by name, a `vendor/` prefix dropped): explicit breakpoints and paid writes."""
    match = re.match(r'gpt-(\d+)(?:\.(\d+))?', model.lower().rsplit('/', 1)[-1])
    if not match:
        return False
    major, minor = int(match.group(1)), int(match.group(2) or 0)
    return major > 5 or (major == 5 and minor >= 6)


def gemini_minimum(model: str) -> int:
    """Minimum input of Gemini's implicit caching (Gemini caching guide): 2048 on 2.5, 4096 on 3.x+."""
    match = re.search(r'gemini-(\d+)', model.lower())
    return 4096 if match and int(match.group(1)) >= 3 else 2048


class ManualClock:
    """An injected clock for TTL tests: `advance(seconds)` moves it; calling it reads it."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass(frozen=True)
class Counts:
    """One request's accounting: `total` input tokens, `read` from the cache, `written` to it."""

    wire: str
    model: str
    total: int
    read: int = 0
    written: int = 0
    written_1h: int = 0
    """Of `written`, the part written with the 1-hour TTL (Anthropic)."""
    extends: bool | None = None
    """Starts with the whole previous request of its route and kind (None: the first one)."""
    diverged_at: str = ''
    """Where it departs from that previous request (when not `extends`)."""
    has_tools: bool = False
    error: dict[str, Any] | None = None
    breakpoints: bool = False
    """Accounted by the rules of OpenAI's GPT-5.6 and later (writes reported in `cache_write_tokens`)."""

    @property
    def uncached(self) -> int:
        return self.total - self.read - self.written


@dataclass
class _Segments:
    """A request cut into cache segments: labels, canonical texts, Anthropic markers (ttl or '')."""

    labels: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    marks: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    """Each segment's characters as text (`text_chars`): what its tokens are counted from."""

    def add(self, label: str, value: Any, mark: str = '') -> None:
        self.labels.append(label)
        text = canonical(value)
        self.texts.append(text)
        # an OpenAI breakpoint stays in the identity (`texts`) but is not counted as text
        self.sizes.append(text_chars(canonical(value, _ALL_MARKERS) if 'prompt_cache_breakpoint' in text else text))
        self.marks.append(mark)


_ALL_MARKERS = ('cache_control', 'prompt_cache_breakpoint')


def _strip_markers(value: Any, keys: tuple[str, ...] = ('cache_control',)) -> Any:
    if isinstance(value, dict):
        return {k: _strip_markers(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_strip_markers(v, keys) for v in value]
    return value


def canonical(value: Any, strip: tuple[str, ...] = ('cache_control',)) -> str:
    """The segment's text as the fake tokenizes it (Anthropic's markers removed, keys sorted)."""
    return json.dumps(_strip_markers(value, strip), sort_keys=True, separators=(',', ':'), ensure_ascii=False) + '\n'


def _openai_breakpoints(value: Any) -> Iterator[dict[str, Any]]:
    """Every `prompt_cache_breakpoint` object inside `value`."""
    if isinstance(value, dict):
        marker = value.get('prompt_cache_breakpoint')
        if marker is not None:
            yield marker if isinstance(marker, dict) else {'invalid': marker}
        for k, v in value.items():
            if k != 'prompt_cache_breakpoint':
                yield from _openai_breakpoints(v)
    elif isinstance(value, list):
        for v in value:
            yield from _openai_breakpoints(v)


def _markers(value: Any) -> Iterator[dict[str, Any]]:
    """Every `cache_control` object inside `value`."""
    if isinstance(value, dict):
        marker = value.get('cache_control')
        if isinstance(marker, dict):
            yield marker
        for k, v in value.items():
            if k != 'cache_control':
                yield from _markers(v)
    elif isinstance(value, list):
        for v in value:
            yield from _markers(v)


def _ttl_of(marker: dict[str, Any]) -> str:
    return '1h' if marker.get('ttl') == '1h' else '5m'


def anthropic_segments(body: dict[str, Any]) -> tuple[_Segments, int]:
    """Anthropic's cache order and its breakpoints; also the number of `cache_control` markers."""
    seg, count = _Segments(), 0

    def add(label: str, value: Any) -> None:
        nonlocal count
        found = list(_markers(value))
        count += len(found)
        seg.add(label, value, _ttl_of(found[-1]) if found else '')

    for n, tool in enumerate(body.get('tools') or []):
        add(f'tools[{n}]', tool)
    system = body.get('system')
    if isinstance(system, str) and system:
        add('system', {'type': 'text', 'text': system})
    elif isinstance(system, list):
        for n, block in enumerate(system):
            add(f'system[{n}]', block)
    for m, message in enumerate(body.get('messages') or []):
        role = message.get('role', '') if isinstance(message, dict) else ''
        content = message.get('content') if isinstance(message, dict) else message
        blocks = [{'type': 'text', 'text': content}] if isinstance(content, str) else content or []
        for b, block in enumerate(blocks):
            add(f'messages[{m}] ({role}) block {b}', {'m': m, 'role': role, 'block': block})
    automatic = body.get('cache_control')
    if isinstance(automatic, dict) and seg.marks:
        count += 1
        if not seg.marks[-1]:
            seg.marks[-1] = _ttl_of(automatic)
    return seg, count


def openai_segments(wire: str, body: dict[str, Any]) -> _Segments:
    """OpenAI's prompt order (assumed): instructions / leading system messages, tools, the rest.
    A segment's mark is the ttl of the last `prompt_cache_breakpoint` in it ('-' without its own)."""
    seg = _Segments()

    def add(label: str, value: Any) -> None:
        found = list(_openai_breakpoints(value)) if isinstance(value, dict | list) else []
        mark = (str(found[-1].get('ttl') or '-')) if found else ''
        seg.add(label, value, mark)

    if wire == 'responses':
        if body.get('instructions'):
            seg.add('instructions', body['instructions'])
        for n, tool in enumerate(body.get('tools') or []):
            add(f'tools[{n}]', tool)
        items = body.get('input')
        items = [{'role': 'user', 'content': items}] if isinstance(items, str) else items or []
        for n, item in enumerate(items):
            add(f'input[{n}] ({_kind(item)})', item)
        return seg
    messages = list(body.get('messages') or [])
    lead = 0
    while lead < len(messages) and isinstance(messages[lead], dict) and messages[lead].get('role') in ('system', 'developer'):
        add(f'messages[{lead}] ({messages[lead]["role"]})', messages[lead])
        lead += 1
    for n, tool in enumerate(body.get('tools') or []):
        add(f'tools[{n}]', tool)
    for n in range(lead, len(messages)):
        add(f'messages[{n}] ({_kind(messages[n])})', messages[n])
    return seg


_OPENAI_ELIGIBLE = ('system', 'developer', 'user', 'tool', 'function_call_output')
"""The messages / items a breakpoint may end (not assistant output, not tool definitions or calls)."""


def _openai_error(message: str) -> dict[str, Any]:
    return {'error': {'message': message, 'type': 'invalid_request_error', 'param': None, 'code': None}}


def gemini_segments(body: dict[str, Any]) -> _Segments:
    seg = _Segments()
    if body.get('systemInstruction'):
        seg.add('systemInstruction', body['systemInstruction'])
    for n, tool in enumerate(body.get('tools') or []):
        seg.add(f'tools[{n}]', tool)
    for n, content in enumerate(body.get('contents') or []):
        seg.add(f'contents[{n}] ({_kind(content)})', content)
    return seg


def _kind_of(label: str) -> str:
    """The kind a segment label names: 'messages[3] (tool)' -> 'tool'; 'tools[0]' -> 'tools'."""
    return label.split('(', 1)[1].split(')', 1)[0] if '(' in label else label.split('[', 1)[0]


def _kind(item: Any) -> str:
    if not isinstance(item, dict):
        return type(item).__name__
    return str(item.get('role') or item.get('type') or '?')


def _digests(seg: _Segments, seed: str) -> tuple[list[bytes], list[int]]:
    """The chained digest and the character count (as text) of the prefix ending at each segment."""
    h = hashlib.blake2b(seed.encode(), digest_size=16)
    digests, ends, chars = [], [], 0
    for text, size in zip(seg.texts, seg.sizes):
        h.update(text.encode())
        chars += size
        digests.append(h.copy().digest())
        ends.append(chars)
    return digests, ends


def _boundaries(text: str, step: int, seed: str) -> Iterator[tuple[int, bytes]]:
    """(chars, digest) of every prefix of `text` that is a whole number of `step` characters as
    text (an escape is one character); the digest is of the canonical prefix, escapes whole."""
    h = hashlib.blake2b(seed.encode(), digest_size=16)
    done = 0  # canonical characters hashed so far
    counted = 0  # characters as text up to `done`
    cuts = [(m.start(), m.end()) for m in _ESCAPE.finditer(text)]
    cuts.append((len(text), len(text)))
    for start, end in cuts:
        # plain characters from `done` to `start`, then one escape from `start` to `end`
        while counted + (start - done) >= (counted // step + 1) * step:
            at = done + (counted // step + 1) * step - counted
            h.update(text[done:at].encode())
            counted += at - done
            done = at
            yield counted, h.copy().digest()
        h.update(text[done:end].encode())
        counted += (start - done) + (1 if end > start else 0)
        done = end
        if end > start and counted % step == 0:
            yield counted, h.copy().digest()


@dataclass
class _Plan:
    """What a request would read and write, computed before the answer (committed when it is given)."""

    counts: Counts
    route: tuple[str, ...] = ()
    writes: list[tuple[bytes, float]] = field(default_factory=list)
    refresh: list[tuple[bytes, float]] = field(default_factory=list)
    seen: list[bytes] = field(default_factory=list)


class PromptCache:
    """The caches of one fake provider (one organisation / project), with an injectable clock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.log: list[Counts] = []
        self._entries: dict[tuple[str, ...], dict[bytes, float]] = {}
        self._ttls: dict[tuple[str, ...], dict[bytes, float]] = {}
        self._last: dict[tuple[str, ...], list[bytes]] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ the hook
    def plan(self, wire: str, path: str, body: dict[str, Any]) -> _Plan:
        """Work out what `body` reads and writes; `plan.counts.error` is the wire's 400 body, if any."""
        with self._lock:
            if wire == 'anthropic':
                return self._anthropic(body)
            if wire in ('chat', 'responses'):
                return self._openai(wire, body)
            if wire == 'gemini':
                return self._gemini(path, body)
            return _Plan(Counts(wire, '', 0))

    def commit(self, plan: _Plan) -> Counts:
        """The request was answered: store its writes and refreshes, log and return its counts."""
        with self._lock:
            entries = self._entries.setdefault(plan.route, {})
            ttls = self._ttls.setdefault(plan.route, {})
            now = self.clock()
            for digest, ttl in [*plan.refresh, *plan.writes]:
                entries.pop(digest, None)  # reinserted: an entry's place in the dict is its last use
                entries[digest] = now + ttl
                ttls[digest] = ttl
            while plan.counts.breakpoints and len(entries) > OPENAI_MATCHED_BREAKPOINTS:
                oldest = next(iter(entries))
                del entries[oldest], ttls[oldest]
            self.log.append(plan.counts)
            return plan.counts

    # ------------------------------------------------------------------ helpers
    def _live(self, route: tuple[str, ...], digest: bytes) -> bool:
        expiry = self._entries.get(route, {}).get(digest)
        return expiry is not None and expiry > self.clock()

    def _compare(self, route: tuple[str, ...], seg: _Segments, digests: list[bytes], tools: bool) -> tuple[bool | None, str]:
        """Whether the request starts with the whole previous request of its route and kind (with
        tools: a step; without: a side request such as a summary), else where it departs from it."""
        key = (*route, 'tools' if tools else 'no tools')
        previous = self._last.get(key)
        self._last[key] = digests
        if previous is None:
            return None, ''
        if previous and len(previous) <= len(digests) and digests[len(previous) - 1] == previous[-1]:
            return True, ''
        common = next((n for n, (a, b) in enumerate(zip(previous, digests)) if a != b), min(len(previous), len(digests)))
        return False, seg.labels[common] if common < len(seg.labels) else '(end: shorter than the previous request)'

    # ------------------------------------------------------------------ Anthropic
    def _anthropic(self, body: dict[str, Any]) -> _Plan:
        model = str(body.get('model', ''))
        seg, markers = anthropic_segments(body)
        if markers > ANTHROPIC_MAX_BREAKPOINTS:
            message = f'A maximum of {ANTHROPIC_MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {markers}.'
            error = {'type': 'error', 'error': {'type': 'invalid_request_error', 'message': message}}
            return _Plan(Counts('anthropic', model, 0, error=error))
        route = ('anthropic', model)
        digests, ends = _digests(seg, '|'.join(route))
        at = [tokens(c) for c in ends]
        total = at[-1] if at else 0
        extends, diverged = self._compare(('compare', *route), seg, digests, bool(body.get('tools')))
        breakpoints = [n for n, mark in enumerate(seg.marks) if mark]
        hit = -1
        for b in breakpoints:
            for k in range(b, max(-1, b - ANTHROPIC_LOOKBACK), -1):
                if self._live(route, digests[k]):
                    hit = max(hit, k)
                    break
        read = at[hit] if hit >= 0 else 0
        ttl_of = self._ttls.get(route, {})
        plan = _Plan(Counts('anthropic', model, total), route)
        if hit >= 0:
            plan.refresh.append((digests[hit], ttl_of.get(digests[hit], FIVE_MINUTES)))
        minimum = anthropic_minimum(model)
        written, written_1h, last = 0, 0, hit
        for b in breakpoints:
            ttl = ONE_HOUR if seg.marks[b] == '1h' else FIVE_MINUTES
            if b <= hit:
                if self._live(route, digests[b]):
                    plan.refresh.append((digests[b], ttl))
                continue
            if at[b] < minimum:
                continue
            plan.writes.append((digests[b], ttl))
            part = at[b] - (at[last] if last >= 0 else 0)
            written += part
            written_1h += part if ttl == ONE_HOUR else 0
            last = b
        plan.counts = Counts('anthropic', model, total, read, written, written_1h, extends, diverged,
                             bool(body.get('tools')))
        return plan

    # ------------------------------------------------------------------ OpenAI
    def _openai(self, wire: str, body: dict[str, Any]) -> _Plan:
        model = str(body.get('model', ''))
        seg = openai_segments(wire, body)
        if openai_breakpoint_family(model):
            return self._openai_breakpoints(wire, model, seg, body)
        if any(seg.marks) or 'prompt_cache_options' in body:
            error = _openai_error(f'prompt_cache_breakpoint and prompt_cache_options are not supported with {model}.')
            return _Plan(Counts(wire, model, 0, error=error))
        text = ''.join(seg.texts)
        total = tokens(sum(seg.sizes))
        route_head = hashlib.blake2b(text[:OPENAI_ROUTE_TOKENS * CHARS_PER_TOKEN].encode(), digest_size=8).hexdigest()
        key = body.get('prompt_cache_key')
        route = ('openai', model, key if isinstance(key, str) else '', route_head)
        digests, _ = _digests(seg, 'compare')
        extends, diverged = self._compare(('compare', wire, model, route[2]), seg, digests, bool(body.get('tools')))
        ttl = ONE_DAY if body.get('prompt_cache_retention') == '24h' else FIVE_MINUTES
        plan = _Plan(Counts(wire, model, total), route)
        read = 0
        if total >= OPENAI_MINIMUM:
            for chars, digest in _boundaries(text, OPENAI_INCREMENT * CHARS_PER_TOKEN, '|'.join(route)):
                if tokens(chars) < OPENAI_MINIMUM:
                    continue
                if self._live(route, digest):
                    read = tokens(chars)
                plan.writes.append((digest, ttl))
        plan.counts = Counts(wire, model, total, read, 0, 0, extends, diverged, bool(body.get('tools')))
        return plan

    def _openai_breakpoints(self, wire: str, model: str, seg: _Segments, body: dict[str, Any]) -> _Plan:
        """GPT-5.6 and later: exact prefixes at breakpoints (the module docstring's rules)."""
        options = body.get('prompt_cache_options') or {}
        if not isinstance(options, dict) or options.get('mode', 'implicit') not in ('implicit', 'explicit') or (
                options.get('ttl', '30m') not in OPENAI_TTLS):
            return _Plan(Counts(wire, model, 0, error=_openai_error(f'Invalid prompt_cache_options: {options!r}.')))
        for n, mark in enumerate(seg.marks):
            if mark and (_kind_of(seg.labels[n]) not in _OPENAI_ELIGIBLE or (mark != '-' and mark not in OPENAI_TTLS)):
                return _Plan(Counts(wire, model, 0, error=_openai_error(
                    f'prompt_cache_breakpoint is not supported on {seg.labels[n]}.')))
        text = ''.join(seg.texts)
        key = body.get('prompt_cache_key')
        route_head = hashlib.blake2b(text[:OPENAI_ROUTE_TOKENS * CHARS_PER_TOKEN].encode(), digest_size=8).hexdigest()
        route = ('openai', model, key if isinstance(key, str) else '', route_head)
        digests, ends = _digests(seg, '|'.join(route))
        at = [tokens(c) for c in ends]
        total = at[-1] if at else 0
        compare, _ = _digests(seg, 'compare')
        extends, diverged = self._compare(('compare', wire, model, route[2]), seg, compare, bool(body.get('tools')))
        default_ttl = OPENAI_TTLS[options.get('ttl', '30m')]
        ttl_at = {n: OPENAI_TTLS.get(mark, default_ttl) for n, mark in enumerate(seg.marks) if mark}
        explicit = sorted(ttl_at)
        written_at = explicit[-OPENAI_MAX_WRITES:]
        if options.get('mode', 'implicit') == 'implicit':
            eligible = [n for n, label in enumerate(seg.labels) if _kind_of(label) in _OPENAI_ELIGIBLE]
            if eligible:
                implicit = eligible[-1]
                ttl_at.setdefault(implicit, default_ttl)
                written_at = sorted({implicit, *explicit[-(OPENAI_MAX_WRITES - 1):]})
        # any prefix an earlier breakpoint of the route cached, wherever it ends (the route keeps its latest 80)
        hit = max((n for n in range(len(at)) if at[n] >= OPENAI_MINIMUM and self._live(route, digests[n])), default=-1)
        read = at[hit] if hit >= 0 else 0
        plan = _Plan(Counts(wire, model, total), route)
        ttl_of = self._ttls.get(route, {})
        if hit >= 0:
            plan.refresh.append((digests[hit], ttl_of.get(digests[hit], ttl_at.get(hit, default_ttl))))
        furthest = hit
        for b in written_at:
            if b <= hit:
                if self._live(route, digests[b]):
                    plan.refresh.append((digests[b], ttl_at[b]))
                continue
            if at[b] < OPENAI_MINIMUM:
                continue
            plan.writes.append((digests[b], ttl_at[b]))
            furthest = b
        written = at[furthest] - read if furthest > hit else 0
        plan.counts = Counts(wire, model, total, read, written, 0, extends, diverged, bool(body.get('tools')),
                             breakpoints=True)
        return plan

    # ------------------------------------------------------------------ Gemini
    def _gemini(self, path: str, body: dict[str, Any]) -> _Plan:
        match = re.search(r'/models/([^/:]+):', path)
        model = match.group(1) if match else ''
        seg = gemini_segments(body)
        route = ('gemini', model)
        digests, ends = _digests(seg, '|'.join(route))
        at = [tokens(c) for c in ends]
        total = at[-1] if at else 0
        extends, diverged = self._compare(('compare', *route), seg, digests, bool(body.get('tools')))
        minimum = gemini_minimum(model)
        plan = _Plan(Counts('gemini', model, total), route)
        read = 0
        for n, digest in enumerate(digests):
            if at[n] < minimum:
                continue
            if self._live(route, digest):
                read = at[n]
            plan.writes.append((digest, FIVE_MINUTES))
        plan.counts = Counts('gemini', model, total, read, 0, 0, extends, diverged, bool(body.get('tools')))
        return plan


# ---------------------------------------------------------------- usage in the wire's fields
def _usage_dicts(value: Any, keys: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            if k in keys and isinstance(v, dict):
                yield v
            else:
                yield from _usage_dicts(v, keys)
    elif isinstance(value, list):
        for v in value:
            yield from _usage_dicts(v, keys)


def apply_usage(wire: str, counts: Counts, events: list[tuple[str | None, dict[str, Any]]], final: dict[str, Any]) -> None:
    """Rewrite the input side of every usage object of an answer (stream events and whole body)."""
    seen: set[int] = set()
    for usage in _usage_dicts([[data for _, data in events], final], ('usage', 'usageMetadata')):
        if id(usage) in seen:
            continue
        seen.add(id(usage))
        if wire == 'chat':
            usage['prompt_tokens'] = counts.total
            usage['prompt_tokens_details'] = {'cached_tokens': counts.read}
            if counts.breakpoints:
                usage['prompt_tokens_details']['cache_write_tokens'] = counts.written
            usage['total_tokens'] = counts.total + int(usage.get('completion_tokens') or 0)
        elif wire == 'responses':
            usage['input_tokens'] = counts.total
            usage['input_tokens_details'] = {**(usage.get('input_tokens_details') or {}), 'cached_tokens': counts.read}
            if counts.breakpoints:
                usage['input_tokens_details']['cache_write_tokens'] = counts.written
            usage['total_tokens'] = counts.total + int(usage.get('output_tokens') or 0)
        elif wire == 'anthropic' and 'input_tokens' in usage:
            usage['input_tokens'] = counts.uncached
            usage['cache_read_input_tokens'] = counts.read
            usage['cache_creation_input_tokens'] = counts.written
            usage['cache_creation'] = {'ephemeral_5m_input_tokens': counts.written - counts.written_1h,
                                       'ephemeral_1h_input_tokens': counts.written_1h}
        elif wire == 'gemini':
            usage['promptTokenCount'] = counts.total
            if counts.read:
                usage['cachedContentTokenCount'] = counts.read
            usage['totalTokenCount'] = (counts.total + int(usage.get('candidatesTokenCount') or 0)
                                        + int(usage.get('thoughtsTokenCount') or 0))
