"""The certificate check every provider client shares: one verifying SSL context per process.

httpx builds a new context for each client by default, and loading the CA bundle into it costs
tens of milliseconds of CPU; ketch makes a client for each wire, window probe and token count,
so a session start paid it several times. This is the context httpx's ``verify=True`` builds
(``SSL_CERT_FILE``, else ``SSL_CERT_DIR``, else certifi's bundle), built once per value of
those variables. No client here uses HTTP/2, so the ALPN list httpcore sets on it is the same
for all of them.
"""

from __future__ import annotations

import functools
import os
import ssl


def verifying_context() -> ssl.SSLContext:
    """The shared context for the certificate settings the environment names now."""
    return _context(os.environ.get("SSL_CERT_FILE") or "", os.environ.get("SSL_CERT_DIR") or "")


@functools.cache
def _context(cert_file: str, cert_dir: str) -> ssl.SSLContext:
    if cert_file:
        return ssl.create_default_context(cafile=cert_file)
    if cert_dir:
        return ssl.create_default_context(capath=cert_dir)
    import certifi

    return ssl.create_default_context(cafile=certifi.where())
