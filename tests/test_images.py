"""Images: ``@shot.png`` attaches the file as an image part on all three wires (asserted on
the bodies the fake provider recorded), the transcript shows ``[image: name, WxH]`` live and
after resume, and a model without image input gets a clear message and no request."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from fakeprovider import Turn
from kettle import adhoc, write_project_config
from test_interactive import running

from ketch.core.attachments import find_images, image_size


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\x00\x00\x00" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def image_parts(body: dict[str, Any]) -> list[str]:
    """The base64 data of every image part in the last user message, whatever the wire."""
    found: list[str] = []
    for item in body.get("messages") or body.get("input") or []:
        content = item.get("content") if isinstance(item, dict) else None
        for part in content if isinstance(content, list) else []:
            kind = part.get("type")
            if kind == "image_url":  # chat completions
                found.append(part["image_url"]["url"].split(",", 1)[1])
            elif kind == "input_image":  # responses
                found.append(part["image_url"].split(",", 1)[1])
            elif kind == "image":  # anthropic messages
                found.append(part["source"]["data"])
    return found


def test_sizes_from_headers_and_refs_in_text(tmp_path: Path) -> None:
    assert image_size(png(640, 480)) == (640, 480)
    assert image_size(b"GIF89a" + struct.pack("<HH", 7, 9)) == (7, 9)
    jpeg = b"\xff\xd8\xff\xe0\x00\x04ab\xff\xc0\x00\x11\x08" + struct.pack(">HH", 30, 40) + b"\x03" + b"\x00" * 9
    assert image_size(jpeg) == (40, 30)
    (tmp_path / "shot.png").write_bytes(png(2, 2))
    refs = find_images("see @shot.png, and @missing.png and email@x.png", tmp_path)
    assert [r.path.name for r in refs] == ["shot.png"]


@pytest.mark.parametrize("wire", ["openai-chat", "openai-responses", "anthropic-messages"])
async def test_an_at_image_reaches_the_provider_as_an_image_part(tmp_path: Path, fake_provider: Any, wire: str) -> None:
    data = png(64, 32)
    (tmp_path / "shots").mkdir()
    (tmp_path / "shots" / "shot.png").write_bytes(data)
    fake = fake_provider([Turn(text="A small black image."), Turn(text="Still black.")])
    async with running(tmp_path, *adhoc(fake, wire)) as (h, runtime):
        await h.wait_text("adhoc:fake-model")
        await h.type("what is in @shots/shot.png?\r")
        await h.wait_text("A small black image.")
        await h.idle()
        assert "› what is in [image: shot.png, 64x32]?" in h.sink.text()
        sid = runtime.session.session_id
    [request] = fake.model_requests
    assert image_parts(request.body) == [base64.b64encode(data).decode()]
    assert "what is in @shots/shot.png?" in json.dumps(request.body)

    async with running(tmp_path, *adhoc(fake, wire), "--resume", sid) as (h, _):
        await h.wait_text("── end of the earlier conversation ──")
        assert "› what is in [image: shot.png, 64x32]?" in h.sink.text()


async def test_a_model_without_image_input_gets_a_clear_message_and_no_request(tmp_path: Path, fake_provider: Any) -> None:
    (tmp_path / "shot.png").write_bytes(png(8, 8))
    write_project_config(tmp_path, '[models."adhoc:fake-model"]\ncapabilities = { image_input = false }\n')
    fake = fake_provider([Turn(text="never")])
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, _):
        await h.wait_text("adhoc:fake-model")
        await h.type("look at @shot.png\r")
        await h.wait_text("does not take images")
        await h.idle()
        assert "adhoc:fake-model does not take images, so shot.png was not sent and no request was made" in " ".join(h.sink.text().split())
    assert fake.model_requests == []


async def test_a_pasted_image_path_is_attached_too(tmp_path: Path, fake_provider: Any) -> None:
    elsewhere = tmp_path / "Screenshots"
    elsewhere.mkdir()
    data = png(3, 5)
    (elsewhere / "Screen Shot.png").write_bytes(b"")  # a name with a space is not taken apart
    (elsewhere / "shot-1.png").write_bytes(data)
    project = tmp_path / "proj"
    project.mkdir()
    fake = fake_provider([Turn(text="Seen.")])
    async with running(project, *adhoc(fake, "openai-chat")) as (h, _):
        await h.wait_text("adhoc:fake-model")
        await h.type("what is this ")
        await h.type(f"\x1b[200~{elsewhere}/shot-1.png\x1b[201~")
        await h.type("\r")
        await h.wait_text("Seen.")
        assert "› what is this [image: shot-1.png, 3x5]" in h.sink.text()
    [request] = fake.model_requests
    assert image_parts(request.body) == [base64.b64encode(data).decode()]


def test_a_summary_drops_an_image_whole_and_names_it() -> None:
    from pydantic_ai.messages import BinaryContent, ModelRequest, UserPromptPart

    from ketch.context.prune import render_for_summary

    image = BinaryContent(png(4, 4), media_type="image/png", identifier="shot.png")
    text = render_for_summary([ModelRequest(parts=[UserPromptPart(["what is in @shot.png?", image])])])
    assert "what is in @shot.png? [image: shot.png, not kept]" in text
    assert "iVBOR" not in text and "\\x89PNG" not in text  # no part of the image itself
