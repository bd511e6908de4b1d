"""The Responses warm-up: what it builds, that the first stream waits for it, and its off switch."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import httpx2

from ketch.providers import sdk_warmup

SRC = str(Path(__file__).resolve().parents[1] / "src")


def run_fresh(code: str, **env: str) -> str:
    """Run ``code`` in a new interpreter (nothing built yet) and return its stdout."""
    import os

    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": SRC, **env},
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_warm_up_builds_every_stream_event_model_the_sdk_would_build_lazily():
    out = run_fresh(
        """
        from ketch.providers import sdk_warmup
        classes = sdk_warmup._event_classes()
        before = sum(cls.__pydantic_complete__ for cls in classes)
        ok = sdk_warmup.warm_responses_events()
        after = sum(cls.__pydantic_complete__ for cls in classes)
        from openai.types.responses import ResponseCompletedEvent, ResponseTextDeltaEvent, Response
        names = {cls.__name__ for cls in classes}
        print(ok, len(classes), before, after, {"Response", "ResponseCompletedEvent", "ResponseTextDeltaEvent"} <= names)
        """
    )
    ok, count, before, after, covered = out.split()
    assert ok == "True"
    assert int(count) > 40 and covered == "True"  # Response and the union's event classes
    assert int(before) < int(count)  # the SDK defers them: there is work to move
    assert int(after) == int(count)


def test_start_is_off_with_the_switch_and_runs_once_otherwise():
    assert run_fresh(
        "from ketch.providers import sdk_warmup; sdk_warmup.start(); print(sdk_warmup._thread)", KETCH_SDK_WARMUP="0"
    ) == "None"
    out = run_fresh(
        """
        from ketch.providers import sdk_warmup
        sdk_warmup.start(); first = sdk_warmup._thread
        sdk_warmup.start()
        first.join(60)
        print(first is sdk_warmup._thread, first.daemon, first.is_alive())
        """
    )
    assert out == "True True False"


async def test_a_successful_response_is_read_only_after_a_running_warm_up():
    """The SDK must not build a model while the warm-up thread is building it. The warm-up
    stands on a gate the test opens, so what waits for it is shown without a clock."""
    saved = sdk_warmup._thread
    gate, done = threading.Event(), threading.Event()

    def gated_warm_up() -> None:
        gate.wait(60)
        done.set()

    try:
        sdk_warmup._thread = threading.Thread(target=gated_warm_up, daemon=True)
        sdk_warmup._thread.start()
        await sdk_warmup.wait_before_reading(httpx2.Response(500))  # an error body builds no event models: no wait
        assert not done.is_set()
        reading = asyncio.ensure_future(sdk_warmup.wait_before_reading(httpx2.Response(200)))
        for _ in range(20):
            await asyncio.sleep(0)
        assert not reading.done()  # still waiting for the running warm-up
        gate.set()
        await reading
        assert done.is_set()
        finished = sdk_warmup.wait_before_reading(httpx2.Response(200))
        try:
            finished.send(None)  # the warm-up is over: the hook returns without suspending once
        except StopIteration:
            pass
        else:
            finished.close()
            raise AssertionError("the hook waited although the warm-up had finished")
    finally:
        gate.set()
        sdk_warmup._thread = saved


def test_a_failing_warm_up_reports_it_and_raises_nothing():
    out = run_fresh(
        """
        import openai._models
        def broken(**kwargs):
            raise RuntimeError("the SDK changed")
        openai._models.construct_type = broken
        from ketch.providers import sdk_warmup
        print(sdk_warmup.warm_responses_events())
        """
    )
    assert out == "False"


def test_a_headless_run_warms_up_as_its_first_responses_request_goes_out_and_chat_never_does(tmp_path):
    """The request hook starts the warm-up on the Responses wire only, and the turn completes."""
    from fakeprovider import FakeProvider, Turn

    child = """
        import sys
        from ketch.providers import sdk_warmup
        from ketch.frontends.cli import main
        sys.argv = ["ketch", "-p", "hi", "--base-url", {url!r}, "--wire", {wire!r}, "--model", "fake-model"]
        try:
            code = main()
        except SystemExit as exit:
            code = exit.code
        print("exit", code, "warmed", sdk_warmup._thread is not None and not sdk_warmup._thread.is_alive())
    """
    for wire, warmed in (("openai-responses", "True"), ("openai-chat", "False")):
        with FakeProvider([Turn(text="the answer")]) as fake:
            out = run_fresh(child.format(url=fake.base_url, wire=wire), KETCH_DATA_DIR=str(tmp_path / wire))
        assert out.splitlines()[-1] == f"exit 0 warmed {warmed}", out
        assert "the answer" in out
