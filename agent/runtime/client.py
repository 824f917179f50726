"""The agent's side of `PUT /api/v1/machines/{name}/report`, to whichever coordinator leads."""

import logging
from urllib.parse import quote

import aiohttp
from pydantic import ValidationError

from astraeus.shared import AgentReport, ReportReply
from astraeus.shared.coordinators import LEADER_HEADER, Coordinators, Round, standby_answer

log = logging.getLogger(__name__)

TIMEOUT_SECONDS = 30.0
CONNECT_SECONDS = 5.0
"""How long a new connection may take: a coordinator whose host is gone answers nothing, and
the next address is tried after this, not after the whole `TIMEOUT_SECONDS`."""


class CoordinatorError(Exception):
    """The report did not arrive, or the reply was not one; the text says which and why.
    `retry_after`: the seconds the coordinator asked to wait (`Retry-After`: overloaded, or
    its database takes no writes), None when it did not say. `misconfigured`: the agent's own
    settings are wrong (its CA, its URL's scheme, its token), which trying again soon will not
    mend: the loop backs off further and the text names the setting to fix."""

    def __init__(
        self, message: str, retry_after: float | None = None, *, misconfigured: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.misconfigured = misconfigured


def failure(base: str, error: BaseException) -> tuple[str, bool]:
    """Why `base` took no report, in one sentence that names the fix where the fix is the
    agent's own setting; and whether it is such a mistake."""
    if isinstance(error, aiohttp.ClientConnectorCertificateError):
        cert = error.certificate_error
        detail = getattr(cert, "verify_message", None) or str(cert)
        return (
            f"its certificate is not trusted here ({detail}); name the CA that signed it with "
            "ca_file in agent.toml, --ca-file or ASTRAEUS_CA_FILE (docs/operator.md §5)",
            True,
        )
    # Connected, then hung up on (or reset) without a word: what a TLS port does to plain http.
    hung_up = isinstance(error, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError)
    if (
        base.startswith("http://")
        and hung_up
        and not isinstance(error, aiohttp.ClientConnectorError)
    ):
        return (
            "it answered nothing over plain http; it may serve https: try "
            f"{'https://' + base.removeprefix('http://')} as coordinator",
            True,
        )
    return f"unreachable: {error or type(error).__name__}", False


def retry_after(value: str | None) -> float | None:
    """`Retry-After` in seconds; None when absent or not a number of seconds (an HTTP date,
    which the coordinator never sends, is not honoured)."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds < float("inf") else None


class CoordinatorClient:
    """Sends one machine's reports with its bearer token; one connection pool for all of them.

    Given several coordinators (`URL,URL`), a report goes to the one that led last; refused,
    unanswered or answered by a standby, the same report goes to the next address within the
    same call, each at most once (`shared/coordinators.py` orders them). Nothing is lost to a
    switch: the report is rebuilt from what the agent keeps until a reply acknowledges it, and
    the coordinators keep updates by their number and logs by their offset."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        coordinators: str | Coordinators,
        name: str,
        token: str,
        read_from: str | None = None,
    ) -> None:
        self.session = session
        self.name = name
        self.read_from = read_from or "the token file"
        """Where the token was read from, named when it is refused."""
        self.coordinators = (
            coordinators
            if isinstance(coordinators, Coordinators)
            else Coordinators.of(coordinators)
        )
        self.path = f"/api/v1/machines/{quote(name, safe='')}/report"
        self.headers = {"Authorization": f"Bearer {token}"}

    @property
    def url(self) -> str:
        """The report's URL at the coordinator tried first (the last leader)."""
        return self.coordinators.current + self.path

    async def report(self, body: AgentReport) -> ReportReply:
        """PUT the report to the leader and return its reply; CoordinatorError on any failure."""
        payload = body.model_dump(mode="json")
        attempt = self.coordinators.round()
        asked: list[float] = []
        alone = ""
        misconfigured = True  # until one coordinator fails for another reason
        while (base := attempt.next()) is not None:
            url = base + self.path
            try:
                status, text, wait, named = await self._put(url, payload)
            except (TimeoutError, aiohttp.ClientError) as error:
                why, mistake = failure(base, error)
                misconfigured &= mistake
                attempt.failed(base, why)
                alone = f"{url} {why}" if why.startswith("unreachable") else f"{url}: {why}"
                continue
            standby = standby_answer(status, named, text)
            if standby is not None:
                alone = f"{url}: {attempt.standby(base, standby)}"
                asked += [wait] if wait is not None else []
                misconfigured = False
                continue
            self._answered(attempt, base)
            return self._reply(url, status, text, wait)
        single = len(self.coordinators.urls) == 1
        message = alone if single else f"no coordinator took the report: {attempt.summary()}"
        raise CoordinatorError(message, max(asked) if asked else None, misconfigured=misconfigured)

    async def _put(self, url: str, payload: object) -> tuple[int, str, float | None, str | None]:
        """Status, body, `Retry-After` and the named leader of one PUT. No redirect is followed:
        the token goes to the configured coordinators only."""
        timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS, sock_connect=CONNECT_SECONDS)
        async with self.session.put(
            url, json=payload, headers=self.headers, timeout=timeout, allow_redirects=False
        ) as response:
            text = await response.text()
            headers = response.headers
            return (
                response.status,
                text,
                retry_after(headers.get("Retry-After")),
                headers.get(LEADER_HEADER),
            )

    def _answered(self, attempt: Round, base: str) -> None:
        """A coordinator answered, not as a standby: it leads; one line when that is news."""
        if attempt.answered(base) and len(self.coordinators.urls) > 1:
            log.info("coordinator: now reporting to %s (leader)", base)

    def _reply(self, url: str, status: int, text: str, wait: float | None) -> ReportReply:
        if status in (401, 403):
            raise CoordinatorError(self._refused_token(url, status, text), misconfigured=True)
        if status != 200:
            raise CoordinatorError(f"HTTP {status} from {url}: {text[:300]}", wait)
        try:
            return ReportReply.model_validate_json(text)
        except ValidationError as error:
            raise CoordinatorError(f"reply from {url} is not a ReportReply: {error}") from None

    def _refused_token(self, url: str, status: int, text: str) -> str:
        """A 401 (the token is unknown or revoked) or a 403 (another machine's): which file the
        token came from and how to make the right one."""
        why = (
            "does not know this agent's token (unknown or revoked)"
            if status == 401
            else f"refused this agent's token for machine {self.name!r} (another machine's?)"
        )
        return (
            f"HTTP {status} from {url}: the coordinator {why}; the token came from "
            f"{self.read_from}: put the agent token made for this machine there "
            f"(astra astraeus token create --role agent --machine {self.name}) and restart "
            f"the agent. The coordinator said: {text[:300]}"
        )
