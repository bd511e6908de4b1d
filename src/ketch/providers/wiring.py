"""What a session needs to survive real model servers, wired in one place.

:class:`ServerBehaviour` gives the session's agent its capabilities for servers nobody here
wrote: unreadable tool arguments never enter the history (``strict_args``), a server that
cannot stream tool calls is asked for whole answers (``stream_refusal``), a local server's
context window is read before a turn's first request, until it is known, and given to the
budget (``server_window``), after waiting out a server that is still loading its model.
``attach`` connects their notices to the session once it exists.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.capabilities import AbstractCapability

from ketch.config.settings import Config, Connection
from ketch.providers.server_window import PROBING_PRESETS, WINDOW_PRESETS, read_window
from ketch.providers.stream_refusal import StreamRefusalFallback, switch_for
from ketch.providers.strict_args import StrictToolArguments

Notify = Callable[[str, str], None]
"""``notify(level, text)``: a notice to the session's front end."""


LOADING_POLL = (0.1, 0.25, 0.5, 1.0)
"""Seconds between asks while a server loads its model (the last repeats): the user waits at most
about a second past the load; asking a loading server once a second costs it nothing."""


@dataclass
class ServerWindowReader(AbstractCapability[Any]):
    """Before a turn's first request, asks a local or OpenAI-compatible server for its window
    and sets the budget's.

    The window lands in ``compactor.window`` (``context.compaction.Compactor``), which the
    pruning threshold, the output cap and the status line read. An explicit ``context_window``
    in config wins (a local server is then asked only whether it is still loading its model). A failed read keeps the assumed window, with one
    notice, and is tried again at the next turn (a server down or still starting at the first
    turn may answer later). A server answering 503 "Loading model" is waited out, with a
    notice, for at most the connection's ``timeout``. After ``/model`` (the compactor follows
    the session's new connection) the new connection's server is asked at the next turn."""

    conn: Connection | None = None
    compactor: Any = None
    notify: Notify | None = None
    done: bool = False
    config: Config | None = None
    warned: bool = False
    sleep: Callable[[float], Any] | None = None
    """``await sleep(seconds)`` between asks of a loading server (tests may pass their own)."""

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    async def before_run(self, ctx: Any) -> None:
        if self.compactor is None:
            return
        current = getattr(self.compactor, "connection", None) or self.conn
        if current is not self.conn:  # /model: the session talks to another connection now
            self.conn, self.done, self.warned = current, False, False
        if self.done or self.conn is None:
            return
        conn = self.conn
        if self.config is not None and not asks_server(conn, self.config):
            self.done = True
            if _local_server(conn):  # the window is configured, but a server loading its model is still waited out
                await self._read(conn)
            return
        reading = await self._read(conn)
        if reading.window is not None:
            self.done = True
            self.compactor.use_server_window(reading.window)
            if reading.url.endswith("/props"):  # llama.cpp: it counts tokens too (POST /tokenize)
                from ketch.context.calibration import llamacpp_counter
                from ketch.providers.server_window import server_root

                self.compactor.calibration.counter = llamacpp_counter(server_root(conn.base_url), api_key=conn.api_key)
            self._say("info", f"{conn.name} runs {conn.model_name} with a context window of {reading.window:,} tokens ({reading.url})")
        else:
            self._assume(conn, reading)

    def _assume(self, conn: Connection, reading: Any) -> None:
        """The window could not be read: take the stricter reading for a local server (a local
        preset's requests are sized for :data:`LOCAL_UNKNOWN_WINDOW`; another server on this
        machine or a private network keeps the assumed window but asks for no more output
        than that window would get), and say once what was assumed and how to set it."""
        from ketch.context.windows import LOCAL_UNKNOWN_WINDOW

        local_preset = conn.preset.name in WINDOW_PRESETS
        local = _local_server(conn)  # (a server that is read is a local preset's or on an OpenAI wire)
        if local_preset:
            self.compactor.assume_window(window=LOCAL_UNKNOWN_WINDOW)
        elif local:
            self.compactor.assume_window(output=LOCAL_UNKNOWN_WINDOW // 4)
        if self.warned:
            return
        self.warned = True
        limits = self.compactor.limits
        if local_preset:
            assumed = (f"assuming {limits.window:,} tokens, the smallest window local servers commonly run, "
                       f"and asking for at most {limits.max_output:,} output tokens")
        elif local:
            assumed = (f"assuming {limits.window:,} tokens, but asking for at most {limits.max_output:,} output "
                       f"tokens, as a local server's smallest usual window ({LOCAL_UNKNOWN_WINDOW:,}) would get")
        else:
            assumed = f"assuming {limits.window:,} tokens"
        # A local preset's server should answer; a server of unknown kind often cannot say.
        level = "info" if conn.preset.name in PROBING_PRESETS else "warning"
        self._say(level, (
            f"could not read the context window from {reading.url or conn.base_url} ({reading.error}); {assumed} "
            f"(asked again at the next turn). The window is unknown: set it with context_window = N (tokens, "
            f"what the server was started with) under [models.\"{conn.ref}\"] in config.toml"
        ))

    async def _read(self, conn: Connection) -> Any:
        """The server's window reading, after waiting out a model that is still loading."""
        import asyncio
        import time

        sleep = self.sleep or asyncio.sleep
        deadline = time.monotonic() + conn.timeout
        polls = 0
        while True:
            reading = await read_window(conn.preset.name, conn.base_url, conn.model_name, api_key=conn.api_key,
                                        timeout=min(conn.timeout, 5.0))
            if not reading.loading or time.monotonic() >= deadline:
                if polls:
                    self._say("info", f"{conn.name} has loaded {conn.model_name}" if not reading.loading
                              else f"{conn.name} is still loading its model after {conn.timeout:.0f} s; trying anyway")
                return reading
            if polls == 0:
                self._say("info", f"{conn.name} is loading its model ({reading.url} answered 503 \"Loading model\"); "
                          f"waiting for it, up to {conn.timeout:.0f} s")
            await sleep(LOADING_POLL[min(polls, len(LOADING_POLL) - 1)])
            polls += 1

    def _say(self, level: str, text: str) -> None:
        """Notify, with credentials written into the server's URL (``user:pass@``, ``?token=``)
        and the connection's key taken out: these notices name the URL asked, and reach the
        output and the session store."""
        if self.notify is not None:
            from ketch.providers.errors import redact

            self.notify(level, redact(text, (getattr(self.conn, "api_key", None),)))


@dataclass
class ServerBehaviour:
    """The server-facing capabilities of one session's connection."""

    conn: Connection
    config: Config
    _strict: StrictToolArguments = field(default_factory=StrictToolArguments)
    _streams: StreamRefusalFallback | None = None
    _window: ServerWindowReader | None = None
    _profile: Any = None

    def __post_init__(self) -> None:
        from ketch.context.small_window import SmallWindowProfile

        self._streams = StreamRefusalFallback(switch=switch_for(connection_key(self.conn)), name=self.conn.name)
        self._window = ServerWindowReader(conn=self.conn, config=self.config)
        self._profile = SmallWindowProfile()

    def capabilities(self) -> list[AbstractCapability[Any]]:
        caps: list[AbstractCapability[Any]] = [self._strict]
        if self._streams is not None:
            caps.append(self._streams)
        if self._window is not None:
            caps.append(self._window)
        caps.append(self._profile)  # after the window reader: it decides on the window read
        from ketch.providers.endings import counted_cut_capability

        caps.append(counted_cut_capability())
        return caps

    def attach(self, session: Any, sources: Any = None) -> None:
        """Route the capabilities' notices to ``session``, give the window to its budget, and
        let the small-window profile narrow its tools and ``sources``' instructions (through
        the session's ``context_view``, never its private attributes)."""
        view = session.context_view
        notify = view.notify

        if self._streams is not None:
            self._streams.notify = lambda text: notify("warning", text)
        if self._window is not None:
            self._window.compactor = session.compactor
            self._window.notify = notify
        self._profile.session, self._profile.sources, self._profile.notify = view, sources, notify
        session.compactor.refit_profile = self._profile.refit_after_refusal


def _local_server(conn: Connection) -> bool:
    """Whether ``conn`` is a local server's preset or any server on this machine or a private
    network: such a server may still be loading its model (503 "Loading model" to every request)."""
    from ketch.providers.server_window import is_local_url

    return conn.preset.name in WINDOW_PRESETS or (conn.wire in ("openai-chat", "openai-responses")
                                                  and is_local_url(conn.base_url))


def asks_server(conn: Connection, config: Config) -> bool:
    """Whether ``conn``'s window is read from its server: a local server's preset, or any
    OpenAI-compatible server (``openai-compatible``, ``--base-url``) on an OpenAI wire, and no
    window in config for it."""
    explicit = conn.context_window or conn.window_ceiling or config.compaction.context_window or (
        conn.meta.context_window if conn.meta else None
    )
    if explicit:
        return False
    if conn.preset.name in WINDOW_PRESETS:
        return True
    return conn.preset.name in PROBING_PRESETS and conn.wire in ("openai-chat", "openai-responses")


def connection_key(conn: Connection) -> str:
    return f"{conn.name}|{conn.base_url}"


def child_capabilities(conn: Connection) -> list[AbstractCapability[Any]]:
    """What a subagent on ``conn`` needs of the above (its notices go nowhere: the parent saw them)."""
    return [StrictToolArguments(), StreamRefusalFallback(switch=switch_for(connection_key(conn)), name=conn.name)]


__all__ = ["ServerBehaviour", "ServerWindowReader", "asks_server", "child_capabilities", "connection_key"]
