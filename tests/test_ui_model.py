"""/model lists every connection, the ad-hoc one the session started with included,
switches both ways, and a failed switch leaves one clean error line and one status line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakeprovider import Turn
from kettle import adhoc, write_project_config
from test_interactive import running


async def test_model_switches_away_from_the_adhoc_endpoint_and_back(tmp_path: Path, fake_provider: Any) -> None:
    fake = fake_provider([Turn(text="from adhoc"), Turn(text="from work"), Turn(text="adhoc again")])
    write_project_config(tmp_path, f'[connections.work]\npreset = "openai-compatible"\nbase_url = "{fake.base_url}"\n')
    async with running(tmp_path, *adhoc(fake, "openai-chat")) as (h, _):
        await h.wait_text("adhoc:fake-model · think off")
        await h.type("/model\r")
        await h.wait_text("work:")
        screen = h.sink.text()
        assert "adhoc:fake-model" in screen and "work:fake-model" in screen
        await h.type("work:fake")
        await h.wait_gone("adhoc:fake-model\n")
        await h.type("\r")
        await h.wait_text("work:fake-model · think off")
        await h.idle()
        await h.type("/model adhoc:fake-model\r")
        await h.wait_text("Model: adhoc:fake-model")
        await h.wait_text("adhoc:fake-model · think off")
        await h.idle()
        await h.type("/model nosuch:model\r")
        await h.wait_text("/model failed: unknown connection 'nosuch'")
        await h.idle()
        lines = h.sink.all_lines()
        assert sum("think off · build" in line for line in lines) == 1, "\n".join(lines)
        assert sum("/model failed" in line for line in lines) == 1
        await h.type("hello\r")
        await h.wait_text("from adhoc")
    assert [r.body["model"] for r in fake.model_requests] == ["fake-model"]
