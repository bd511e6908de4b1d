"""The provider clients share one verifying SSL context (ketch.wire.tls): the same checks httpx's
own default makes (certificates required, host names checked, SSL_CERT_FILE honoured), built once
per process rather than once per client."""

from __future__ import annotations

import ssl
from pathlib import Path

import certifi
import httpx
import pytest

from ketch.wire import tls
from ketch.wire.http import WireClient


def _pool_context(client: httpx.AsyncClient) -> ssl.SSLContext:
    return client._transport._pool._ssl_context  # type: ignore[attr-defined]  # what each connection wraps with


def test_the_shared_context_verifies_and_is_built_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    ctx = tls.verifying_context()
    assert ctx is tls.verifying_context()
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    default = httpx.create_ssl_context()
    assert ctx.cert_store_stats() == default.cert_store_stats() and ctx.cert_store_stats()["x509_ca"] > 0
    wires = [WireClient(model_name="m", headers={}), WireClient(model_name="n", headers={})]
    assert all(_pool_context(wire._http()) is ctx for wire in wires)  # every wire's connections use it


def test_ssl_cert_file_is_honoured_as_httpx_honours_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    one = tmp_path / "one.pem"
    one.write_text(Path(certifi.where()).read_text().split("-----END CERTIFICATE-----")[0] + "-----END CERTIFICATE-----\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(one))
    ctx = tls.verifying_context()
    assert ctx.cert_store_stats()["x509_ca"] == 1 == httpx.create_ssl_context().cert_store_stats()["x509_ca"]
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    with pytest.raises(FileNotFoundError):
        tls.verifying_context()
