"""The coordinator's certificate is reloaded in place: a renewal is served to new connections
without a restart, and a broken renewal leaves the previous certificate serving."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
from helpers import until_async

from astraeus.coordinator.tls import ServerCertificate, TlsError
from astraeus.shared.tls import CaFileError, client_context

from .rig import OPENSSL, make_ca, make_server_cert

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed")


async def _served(port: int, ca: Path) -> bytes:
    context = client_context(ca)
    _reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    served = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    assert isinstance(served, bytes)
    return served


def _der(pem: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.read_text())


async def test_renewed_files_are_served_after_a_broken_renewal_kept_the_old(
    tmp_path: Path,
) -> None:
    """A half-written certificate is refused (the old one keeps serving); the finished renewal
    is picked up by the file watch and served to the next connection."""
    ca = make_ca(tmp_path)
    cert, key = make_server_cert(tmp_path, "server")
    first = _der(cert)
    certificate = ServerCertificate(cert, key)
    server = await asyncio.start_server(
        lambda r, w: w.close(), "127.0.0.1", 0, ssl=certificate.context
    )
    port = server.sockets[0].getsockname()[1]
    watch = asyncio.create_task(certificate.watch(0.05))
    try:
        assert await _served(port, ca) == first
        cert.write_text("-----BEGIN CERTIFICATE-----\n")  # a renewal caught half-way
        assert certificate.changed()
        assert not certificate.reload("test")
        assert await _served(port, ca) == first
        renewed, renewed_key = make_server_cert(tmp_path, "renewed")
        key.write_bytes(renewed_key.read_bytes())
        cert.write_bytes(renewed.read_bytes())
        await until_async("the renewed certificate to be loaded", lambda: not certificate.changed())
        assert await _served(port, ca) == _der(renewed)
    finally:
        watch.cancel()
        server.close()
        await server.wait_closed()


def test_missing_certificate_names_the_setting(tmp_path: Path) -> None:
    """A certificate path that does not exist names tls_cert and the path."""
    with pytest.raises(TlsError) as caught:
        ServerCertificate(tmp_path / "none.pem", tmp_path / "none.key")
    assert str(caught.value) == f"tls_cert: {tmp_path / 'none.pem'} does not exist or is not a file"


def test_ca_file_errors_name_the_setting(tmp_path: Path) -> None:
    """A CA file that is missing or holds no certificate is refused, naming the setting."""
    with pytest.raises(CaFileError) as missing:
        client_context(tmp_path / "ca.pem", "--ca-file")
    assert str(missing.value) == f"--ca-file: {tmp_path / 'ca.pem'} does not exist"
    (tmp_path / "ca.pem").write_text("hello\n")
    with pytest.raises(CaFileError) as empty:
        client_context(tmp_path / "ca.pem", "--ca-file")
    assert str(empty.value).startswith(f"--ca-file: {tmp_path / 'ca.pem'} holds no usable PEM")
