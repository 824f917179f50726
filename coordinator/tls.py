"""The coordinator's HTTPS: one SSLContext whose certificate chain is reloaded in place, on SIGHUP
and when the files change, so a renewed certificate needs no restart of anyone: connections
made after the reload are served the new certificate, open ones finish on the old."""

from __future__ import annotations

import asyncio
import logging
import ssl
from pathlib import Path

log = logging.getLogger("astraeus.coordinator.tls")


class TlsError(ValueError):
    """The certificate or key cannot be used; the text names the file and why."""


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class ServerCertificate:
    """The server's SSLContext and the two files it was loaded from."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.cert = cert
        self.key = key
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self._stamps = (_stamp(cert), _stamp(key))
        self.load()

    def load(self) -> None:
        """Load the chain and key into the live context; TlsError leaves the old ones serving."""
        for name, path in (("tls_cert", self.cert), ("tls_key", self.key)):
            if not path.is_file():
                raise TlsError(f"{name}: {path} does not exist or is not a file")
        try:
            self.context.load_cert_chain(self.cert, self.key)
        except ssl.SSLError as exc:
            raise TlsError(
                f"tls_cert {self.cert}, tls_key {self.key}: cannot be used together: "
                f"{exc.reason or exc}"
            ) from None
        except OSError as exc:
            raise TlsError(f"tls_cert {self.cert}: {exc.strerror or exc}") from None
        self._stamps = (_stamp(self.cert), _stamp(self.key))

    def reload(self, why: str) -> bool:
        """Reload and log the outcome; a bad new file is logged and the old one keeps serving."""
        try:
            self.load()
        except TlsError as exc:
            log.error("TLS certificate not reloaded (%s): %s; the previous one serves", why, exc)
            return False
        log.info("TLS certificate reloaded from %s (%s)", self.cert, why)
        return True

    def changed(self) -> bool:
        return (_stamp(self.cert), _stamp(self.key)) != self._stamps

    async def watch(self, interval: float) -> None:
        """Reload when either file changes (a renewal by certbot or cert-manager)."""
        while True:
            await asyncio.sleep(interval)
            if self.changed():
                # Give the renewer a moment to write both files before reading them.
                await asyncio.sleep(min(1.0, interval))
                self.reload("the files changed")
