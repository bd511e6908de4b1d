"""JSON-RPC 2.0 over a byte stream with LSP's ``Content-Length`` framing.

``Channel`` owns one server's stdin and stdout: it writes requests and notifications, reads
frames in a task, resolves each response to the request that asked for it, hands
notifications to a callback and answers the server's own requests (a server that asks and
gets no answer may wait forever). The server is untrusted: a frame's header and body are
bounded, a malformed frame closes the channel, and nothing it sends is coerced.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

MAX_HEADER_BYTES = 8192
"""The most one frame's header block may take."""
MAX_BODY_BYTES = 32 * 1024 * 1024
"""The most one frame's JSON body may take (a workspace's diagnostics can be large)."""

Notify = Callable[[str, Any], None]
Answer = Callable[[str, Any], Any]


class ChannelClosed(Exception):
    """The server's stream ended or sent something that is not LSP; the message says which."""


def encode(message: dict[str, Any]) -> bytes:
    """One frame: the header and the compact UTF-8 JSON body."""
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    return b"Content-Length: " + str(len(body)).encode("ascii") + b"\r\n\r\n" + body


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any]:
    """The next message from ``reader``; ``ChannelClosed`` at the end or on a broken frame."""
    length: int | None = None
    used = 0
    while True:
        try:
            line = await reader.readuntil(b"\r\n")
        except asyncio.IncompleteReadError as exc:
            raise ChannelClosed("the server closed its output") from exc
        except asyncio.LimitOverrunError as exc:
            raise ChannelClosed("the server sent a header line that is too long") from exc
        used += len(line)
        if used > MAX_HEADER_BYTES:
            raise ChannelClosed("the server sent a header block that is too long")
        if line == b"\r\n":
            break
        name, sep, value = line[:-2].decode("ascii", "replace").partition(":")
        if not sep:
            raise ChannelClosed(f"the server sent a header line without a colon: {line[:80]!r}")
        if name.strip().lower() == "content-length":
            text = value.strip()
            if not text.isdigit():
                raise ChannelClosed(f"the server sent a bad Content-Length: {text[:40]!r}")
            length = int(text)
    if length is None:
        raise ChannelClosed("the server sent a frame without Content-Length")
    if length > MAX_BODY_BYTES:
        raise ChannelClosed(f"the server sent a {length}-byte frame, over the {MAX_BODY_BYTES}-byte limit")
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError as exc:
        raise ChannelClosed("the server closed its output in the middle of a frame") from exc
    try:
        message = json.loads(body.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ChannelClosed(f"the server sent a frame that is not JSON ({exc})") from exc
    if not isinstance(message, dict):
        raise ChannelClosed("the server sent a frame that is not a JSON object")
    return message


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class ResponseError(Exception):
    """The server answered a request with an error object."""

    def __init__(self, code: Any, message: str) -> None:
        super().__init__(message)
        self.code = code


class Channel:
    """Requests out, responses matched by id, notifications and server requests dispatched."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, notify: Notify, answer: Answer) -> None:
        self._reader = reader
        self._writer = writer
        self._notify = notify
        self._answer = answer
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self.closed: asyncio.Event = asyncio.Event()
        self.close_reason = ""
        self._task = asyncio.get_running_loop().create_task(self._read_loop())

    async def request(self, method: str, params: Any) -> Any:
        """Send a request and wait for its result (no timeout here: the caller bounds the wait)."""
        self._next_id += 1
        number = self._next_id
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[number] = future
        try:
            await self._send({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
            return await future
        finally:
            self._pending.pop(number, None)

    async def notify(self, method: str, params: Any) -> None:
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def _send(self, message: dict[str, Any]) -> None:
        if self.closed.is_set():
            raise ChannelClosed(self.close_reason or "the channel is closed")
        try:
            self._writer.write(encode(message))
            await self._writer.drain()
        except (ConnectionError, RuntimeError) as exc:
            self._close(f"the server's input closed ({exc})")
            raise ChannelClosed(self.close_reason) from exc

    async def _read_loop(self) -> None:
        try:
            while True:
                self._dispatch(await read_frame(self._reader))
        except ChannelClosed as exc:
            self._close(str(exc))
        except asyncio.CancelledError:
            self._close("the client stopped reading")
            raise

    def _dispatch(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        if isinstance(method, str):
            if "id" in message:
                asyncio.get_running_loop().create_task(self._reply(message["id"], method, message.get("params")))
            else:
                self._notify(method, message.get("params"))
            return
        number = message.get("id")
        future = self._pending.get(number) if isinstance(number, int) and not isinstance(number, bool) else None
        if future is None or future.done():
            return  # an answer to nothing we asked (or asked and gave up on)
        error = message.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            text = error.get("message") if isinstance(error, dict) else None
            future.set_exception(ResponseError(code, str(text)[:500] if text is not None else "error"))
        else:
            future.set_result(message.get("result"))

    async def _reply(self, number: Any, method: str, params: Any) -> None:
        try:
            result = self._answer(method, params)
        except LookupError:
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": number, "error": {"code": -32601, "message": f"{method} is not supported"}}
        else:
            reply = {"jsonrpc": "2.0", "id": number, "result": result}
        try:
            await self._send(reply)
        except ChannelClosed:
            pass

    def _close(self, reason: str) -> None:
        if self.closed.is_set():
            return
        self.close_reason = reason
        self.closed.set()
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ChannelClosed(reason))

    async def aclose(self) -> None:
        self._close("the client closed the channel")
        self._task.cancel()
        try:
            await self._task
        except (asyncio.CancelledError, ChannelClosed):
            pass
