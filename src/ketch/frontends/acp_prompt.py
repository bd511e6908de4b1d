"""An editor's prompt blocks as the prompt ketch runs (``ketch acp``).

Text stays text. An embedded resource's text, and a linked file's text (read through the
editor, so its unsaved buffer, and only inside the workspace), come in as ``<context>``
blocks. An image (a block, or a linked or embedded image file) is kept in a private folder
and named in the prompt by its path, so it goes through the terminal's own attachment path:
sent to a model that takes images, and to one that does not, a clear message and no request.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

EXTENSIONS = {"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}


def _image_dir() -> Path:
    from ketch.config.settings import user_data_dir

    folder = user_data_dir() / "editor-images"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def keep_image(data: str, mime_type: str) -> str:
    """The path an editor's base64 image is kept at (named by its content); an error says why not."""
    from ketch.core.attachments import MAX_IMAGE_BYTES, AttachmentError

    extension = EXTENSIONS.get(mime_type)
    if extension is None:
        raise AttachmentError(f"an image of type {mime_type!r} cannot be sent; PNG, JPEG, GIF and WebP can")
    if len(data) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        raise AttachmentError(f"an image over {MAX_IMAGE_BYTES:,} bytes is not sent")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise AttachmentError("an image that is not valid base64 is not sent") from None
    path = _image_dir() / f"{hashlib.sha256(raw).hexdigest()[:24]}{extension}"
    if not path.exists():
        path.write_bytes(raw)
    return str(path)


def _local_file(session: Any, uri: str) -> Path | None:
    """The workspace file a ``file://`` URI names; None for any other URI or a path outside."""
    from pydantic_ai.exceptions import ToolFailed

    parsed = urlparse(uri)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    try:
        return session.workspace.resolve(unquote(parsed.path))
    except ToolFailed:
        return None


async def _linked(session: Any, block: Any) -> str:
    from ketch.frontends.acp_diffs import current_text

    path = _local_file(session, block.uri)
    if path is not None and Path(path).suffix.lower() in {".png", ".jpg", ".jpeg", ".gif", ".webp"}:
        return str(path)  # an image file: attached as one
    if path is None:
        return f"@{block.uri} (not read: only files inside the workspace are)"
    try:
        text = await current_text(session, path)
    except Exception as exc:  # noqa: BLE001 - binary, unreadable: the model is told, not given bytes
        return f"@{block.uri} (not read: {exc})"
    if text is None:
        return f"@{block.uri} (no such file)"
    return f"<context uri=\"{block.uri}\">\n{text}\n</context>"


async def prompt_text(session: Any, blocks: list[Any]) -> str:
    """The prompt as ketch runs it (``AttachmentError`` for an image that cannot be kept)."""
    from ketch.core.attachments import AttachmentError

    parts: list[str] = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "image":
            parts.append(keep_image(block.data, block.mime_type))
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if text is not None:
                parts.append(f"<context uri=\"{resource.uri}\">\n{text}\n</context>")
            elif (getattr(resource, "mime_type", None) or "") in EXTENSIONS:
                parts.append(keep_image(resource.blob, resource.mime_type))
            else:
                raise AttachmentError(f"{resource.uri} is binary and not an image; it was not sent")
        elif kind == "resource_link":
            parts.append(await _linked(session, block))
        elif kind == "audio":
            raise AttachmentError("audio is not sent: ketch's models take text and images")
    return "\n".join(parts)
