"""Images in a prompt: ``@path/to/shot.png`` (or a pasted absolute path) attaches the file.

The prompt keeps its text as typed; each image that exists becomes a binary content part
after it (the SDK maps it onto each wire). The transcript shows an image as
``[image: name, WxH]``, read from the file's own header (PNG, JPEG, GIF, WebP). A model
whose profile (or ``[models."conn:model"] capabilities = { image_input = false }``) says
it takes no images gets a one-line error instead of a request.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ketch.protocol.exceptions import ConfigError

MEDIA_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp"}
MAX_IMAGE_BYTES = 10 * 1024 * 1024
_EXT = r"\.(?:png|jpe?g|gif|webp)"
_AT_REF = re.compile(rf"(?<!\S)@(\S+?{_EXT})(?=[\s,.;:!?)]|$)", re.IGNORECASE)
_PASTED = re.compile(rf"(?<!\S)((?:/|~/)\S+?{_EXT})(?=[\s,.;:!?)]|$)", re.IGNORECASE)


class AttachmentError(ConfigError):
    """An image that cannot be sent (too big, unreadable, or a model without image input)."""


@dataclass(frozen=True)
class ImageRef:
    """One image named in a prompt."""

    token: str
    """The text as typed (``@shot.png`` or the pasted path)."""
    path: Path


def find_images(text: str, root: Path) -> list[ImageRef]:
    """The images a prompt names that exist as regular files (``@`` paths are relative to
    ``root``, the workspace root; pasted ones absolute or from ``~``)."""
    found: list[ImageRef] = []
    seen: set[Path] = set()
    for pattern, base in ((_AT_REF, root), (_PASTED, None)):
        for match in pattern.finditer(text):
            raw = match.group(1)
            path = Path(os.path.expanduser(raw))
            if base is not None and not path.is_absolute():
                path = base / path
            try:
                if not path.is_file() or path in seen:
                    continue
            except OSError:
                continue
            seen.add(path)
            token = match.group(0)
            found.append(ImageRef(token=token, path=path))
    return found


def image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) from a PNG, GIF, JPEG or WebP header; None when not recognised."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return struct.unpack(">II", data[16:24])
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return struct.unpack("<HH", data[6:10])
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return _webp_size(data)
    if data[:2] == b"\xff\xd8":
        return _jpeg_size(data)
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8X" and len(data) >= 30:
        return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
    if chunk == b"VP8 " and len(data) >= 30:
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L" and len(data) >= 25:
        bits = int.from_bytes(data[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = int.from_bytes(data[i + 2:i + 4], "big")
        if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
            h, w = struct.unpack(">HH", data[i + 5:i + 9])
            return w, h
        i += 2 + length
    return None


def label(name: str, data: bytes) -> str:
    """``[image: shot.png, 640x480]`` (size left out when the header is not recognised)."""
    size = image_size(data)
    return f"[image: {name}, {size[0]}x{size[1]}]" if size else f"[image: {name}]"


def display_text(text: str, images: list[tuple[str, str, bytes]]) -> str:
    """The prompt as the transcript shows it: each (token, name, data) becomes its label."""
    for token, name, data in images:
        text = text.replace(token.strip(), label(name, data), 1)
    return text


def _open_image(path: Path) -> Any:
    """The file opened once, its checks made on that descriptor (a path swapped for a FIFO,
    a device or a bigger file after ``find_images`` looked cannot block or change the read)."""
    import stat as st

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    info = os.fstat(fd)
    if not st.S_ISREG(info.st_mode):
        os.close(fd)
        raise AttachmentError(f"{path.name} is not a regular file (a device, pipe or socket); it is not sent")
    return os.fdopen(fd, "rb")


def read_image(ref: ImageRef) -> bytes:
    """The file's bytes, refused when over the size cap or not an image it knows."""
    try:
        with _open_image(ref.path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > MAX_IMAGE_BYTES:
                raise AttachmentError(f"{ref.path.name} is {size:,} bytes; images over {MAX_IMAGE_BYTES:,} are not sent")
            data = handle.read(MAX_IMAGE_BYTES + 1)
    except OSError as exc:
        raise AttachmentError(f"cannot read {ref.path}: {exc.strerror or exc}") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise AttachmentError(f"{ref.path.name} grew past {MAX_IMAGE_BYTES:,} bytes while it was read; it is not sent")
    if image_size(data) is None:
        raise AttachmentError(f"{ref.path.name} is not a PNG, JPEG, GIF or WebP image")
    return data


def user_prompt(text: str, root: Path, *, accepts_images: bool, model: str) -> Any:
    """``text`` as is when it names no image, else the text followed by one binary part per
    image (``AttachmentError`` when the model takes no images or a file cannot be sent)."""
    refs = find_images(text, root)
    if not refs:
        return text
    names = ", ".join(r.path.name for r in refs)
    if not accepts_images:
        raise AttachmentError(
            f"{model} does not take images, so {names} was not sent and no request was made; "
            "switch to a model that does with /model, or send the prompt without the image"
        )
    from pydantic_ai.messages import BinaryContent

    parts: list[Any] = [text]
    for ref in refs:
        parts.append(BinaryContent(read_image(ref), media_type=MEDIA_TYPES[ref.path.suffix.lower()], identifier=ref.path.name))
    return parts


def _header(path: Path, size: int = 256 * 1024) -> bytes:
    try:
        with _open_image(path) as handle:
            return handle.read(size)
    except (OSError, AttachmentError):
        return b""


def echo_text(text: str, root: Path) -> str:
    """How the transcript shows a prompt being sent: each image it names as its label."""
    refs = find_images(text, root)
    return display_text(text, [(r.token, r.path.name, _header(r.path)) for r in refs]) if refs else text


def stored_text(parts: list[Any]) -> str | None:
    """How the transcript shows a stored prompt (its text, then binary parts): the same
    labels as when it was sent, from the stored bytes."""
    texts = [p for p in parts if isinstance(p, str)]
    if not texts:
        return None
    text = "\n".join(texts)
    images = [(getattr(p, "identifier", None) or "image", getattr(p, "data", b"")) for p in parts
              if getattr(p, "kind", "") == "binary" and str(getattr(p, "media_type", "")).startswith("image/")]
    tokens = [m.group(0) for pattern in (_AT_REF, _PASTED) for m in pattern.finditer(text)]
    pairs: list[tuple[str, str, bytes]] = []
    for name, data in images:
        token = next((t for t in tokens if os.path.basename(t.strip().lstrip("@")) == name), None)
        if token is not None:
            tokens.remove(token)
            pairs.append((token, name, data))
    return display_text(text, pairs)
