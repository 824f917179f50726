"""How agents and `astra` check the coordinator's certificate: against the system's CA store, or
a CA file the operator names (a private CA)."""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:  # `astra status` loads this module: `typing` and `pathlib` only for mypy
    import ssl
    from pathlib import Path

SYSTEM_BUNDLES = (
    "/etc/ssl/certs/ca-certificates.crt",  # Debian, Ubuntu
    "/etc/pki/tls/certs/ca-bundle.crt",  # RHEL, Rocky, Fedora
    "/etc/ssl/ca-bundle.pem",  # SUSE
    "/etc/ssl/cert.pem",  # Alpine, Arch
)
"""Where distributions keep their CA bundle: a single-file build carries an OpenSSL whose
compiled-in default path may not be this distribution's."""


class CaFileError(ValueError):
    """The CA file cannot be read; the text names the setting, the file and why."""


def client_context(ca_file: Path | None, setting: str = "ca_file") -> ssl.SSLContext:
    """Verify the server's certificate and host name against `ca_file`, else the system store.
    (`ssl` is imported here, not with the module: `astra` asking a plain-http coordinator on
    loopback never loads OpenSSL, a tenth of its start.)"""
    import ssl

    if ca_file is not None:
        try:
            return ssl.create_default_context(cafile=str(ca_file))
        except FileNotFoundError:
            raise CaFileError(f"{setting}: {ca_file} does not exist") from None
        except (ssl.SSLError, OSError) as exc:
            why = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc
            message = f"{setting}: {ca_file} holds no usable PEM certificate: {why}"
            raise CaFileError(message) from None
    context = ssl.create_default_context()
    if not context.get_ca_certs() and not _default_paths_exist():
        for bundle in SYSTEM_BUNDLES:
            if os.path.isfile(bundle):
                context.load_verify_locations(cafile=bundle)
                break
    return context


def _default_paths_exist() -> bool:
    import ssl

    paths = ssl.get_default_verify_paths()
    return any(p and os.path.exists(p) for p in (paths.cafile, paths.capath))


_LOOPBACK = ("localhost", "127.0.0.1", "[::1]")


def _loopback_as_written(url: str) -> bool:
    """Plain http to this machine, written as most write it (`http://127.0.0.1:8470/...`),
    told without `re`, `urllib.parse` or `ipaddress` (a test keeps it in step with those)."""
    if url[:7].lower() != "http://":
        return False
    netloc = url[7:].partition("/")[0]
    cut = 5 if netloc.startswith("[::1]") else len(netloc.partition(":")[0])
    host, port = netloc[:cut].lower(), netloc[cut + 1 :]
    if cut < len(netloc) and netloc[cut] != ":":
        return False
    return host in _LOOPBACK and (not port or (port.isascii() and port.isdigit()))


def plain_http_to_another_machine(url: str) -> bool:
    """Whether `url` is plain `http://` to a host that is not this machine (a loopback address
    or `localhost`): a token sent there crosses the network unencrypted."""
    if url.startswith("https://"):
        return False
    if _loopback_as_written(url):  # answered without `urllib` and `ipaddress`
        return False
    return _plain_http_parsed(url)


def _plain_http_parsed(url: str) -> bool:
    """`plain_http_to_another_machine`, told by `urllib.parse` and `ipaddress` alone."""
    import ipaddress
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if parts.scheme != "http":
        return False
    host = (parts.hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True  # a name: it may resolve anywhere


def plain_http_refusal(setting: str, url: str, allow: str) -> str:
    """What a client says when it will not send a token over plain http to another machine."""
    return (
        f"{setting}: {url} is plain http to another machine, so the token would cross the network"
        f" unencrypted; use https:// (docs/operator.md), or {allow} on a network you trust"
    )
