"""A small blocking client for the coordinator's API, turning every failure into a sentence."""

from __future__ import annotations

import json
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from astraeus.shared.tls import CaFileError, client_context

from .config import Target
from .errors import CliError, Exit, refusal

TIMEOUT_SECONDS = 30.0

_IN_WORKSPACE = ("/runs", "/tasks")
"""Paths that act in a workspace: an admin names it in the query."""

_STATUS_EXIT = {400: Exit.USAGE, 401: Exit.AUTH, 403: Exit.AUTH, 404: Exit.NOT_FOUND}


class Api:
    """Calls `/api/v1/...` with the bearer token; answers parsed JSON or raises `CliError`."""

    def __init__(self, target: Target, timeout: float = TIMEOUT_SECONDS) -> None:
        self.target = target
        self.timeout = timeout
        self._context: ssl.SSLContext | None = None

    def context(self) -> ssl.SSLContext | None:
        """For https: the CA file's or the system's trust, built once."""
        if not self.target.api.startswith("https://"):
            return None
        if self._context is None:
            try:
                self._context = client_context(self.target.ca_file, "ASTRA_CA or --ca-file")
            except CaFileError as exc:
                raise CliError(str(exc), Exit.USAGE) from None
        return self._context

    def url(self, path: str, query: dict[str, str] | None = None) -> str:
        tail = f"?{urllib.parse.urlencode(query)}" if query else ""
        return f"{self.target.api}/api/v1{path}{tail}"

    def get(self, path: str, **query: str | None) -> Any:
        return self.call("GET", path, query=query)

    def post(self, path: str, body: Any = None, **query: str | None) -> Any:
        return self.call("POST", path, body, query=query)

    def put(self, path: str, body: Any) -> Any:
        return self.call("PUT", path, body)

    def delete(self, path: str) -> Any:
        return self.call("DELETE", path)

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, str | None] | None = None,
    ) -> Any:
        if not self.target.token:
            raise CliError(
                'no API token: set ASTRA_TOKEN, pass --token, or write token = "..." in '
                f"{self.target.config}",
                Exit.AUTH,
            )
        kept = {k: v for k, v in (query or {}).items() if v is not None}
        if self.target.workspace and path.startswith(_IN_WORKSPACE) and "workspace" not in kept:
            kept["workspace"] = self.target.workspace
        request = urllib.request.Request(  # noqa: S310 - the scheme is checked in config.resolve
            self.url(path, kept),
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={
                "Authorization": f"Bearer {self.target.token}",
                "Content-Type": "application/json",
                "Accept": "application/json",
            },
        )
        context = self.context()
        try:
            with urllib.request.urlopen(  # noqa: S310
                request, timeout=self.timeout, context=context
            ) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise self._refused(exc) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise CliError(
                    f"the coordinator at {self.target.api} has a certificate this machine does "
                    f"not trust ({reason.verify_message}); name its CA with --ca-file or ASTRA_CA",
                    Exit.UNREACHABLE,
                ) from None
            if isinstance(reason, socket.timeout | TimeoutError):
                reason = f"no answer within {self.timeout:g} s"
            elif isinstance(reason, OSError) and reason.strerror:
                reason = reason.strerror
            raise CliError(
                f"cannot reach the coordinator at {self.target.api}: {reason}. "
                "Is it running? Point ASTRA_API or --api at it.",
                Exit.UNREACHABLE,
            ) from None
        try:
            return json.loads(raw) if raw else None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise self.not_the_api() from None

    def not_the_api(self) -> CliError:
        """What to say when the answer is not the coordinator's JSON (a proxy, another server)."""
        return CliError(
            f"{self.target.api} answered, but not as an Astraeus coordinator; "
            "check ASTRA_API or --api",
            Exit.UNREACHABLE,
        )

    def _refused(self, exc: urllib.error.HTTPError) -> CliError:
        try:
            data = json.loads(exc.read() or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = {}
        if not isinstance(data, dict):
            data = {}
        error = str(data.get("error") or exc.reason)
        if exc.code == 401:
            return CliError(
                f"the coordinator at {self.target.api} does not know this token ({error}). "
                "Check ASTRA_TOKEN or --token.",
                Exit.AUTH,
            )
        fields = [
            (field.get("field"), field.get("problem"))
            for field in data.get("fields") or []
            if isinstance(field, dict)
        ]
        return CliError(refusal(error, fields), _STATUS_EXIT.get(exc.code, Exit.FAILED))
