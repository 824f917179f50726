"""The agent's side of `PUT /api/v1/machines/{name}/report`."""

from urllib.parse import quote

import aiohttp
from pydantic import ValidationError

from astraeus.shared import AgentReport, ReportReply

TIMEOUT_SECONDS = 30.0


class CoordinatorError(Exception):
    """The report did not arrive, or the reply was not one; the text says which and why.
    `retry_after`: the seconds the coordinator asked to wait (`Retry-After`: overloaded, or
    its database takes no writes), None when it did not say."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after(value: str | None) -> float | None:
    """`Retry-After` in seconds; None when absent or not a number of seconds (an HTTP date,
    which the coordinator never sends, is not honoured)."""
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return seconds if seconds is not None and 0 <= seconds < float("inf") else None


class CoordinatorClient:
    """Sends one machine's reports with its bearer token; one connection pool for all of them."""

    def __init__(
        self, session: aiohttp.ClientSession, base_url: str, name: str, token: str
    ) -> None:
        self.session = session
        self.url = f"{base_url.rstrip('/')}/api/v1/machines/{quote(name, safe='')}/report"
        self.headers = {"Authorization": f"Bearer {token}"}

    async def report(self, body: AgentReport) -> ReportReply:
        """PUT the report and return the reply; CoordinatorError on any failure."""
        timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)
        payload = body.model_dump(mode="json")
        try:
            async with self.session.put(
                self.url, json=payload, headers=self.headers, timeout=timeout
            ) as response:
                text = await response.text()
                if response.status != 200:
                    raise CoordinatorError(
                        f"HTTP {response.status} from {self.url}: {text[:300]}",
                        retry_after(response.headers.get("Retry-After")),
                    )
                return ReportReply.model_validate_json(text)
        except (TimeoutError, aiohttp.ClientError) as error:
            raise CoordinatorError(
                f"{self.url} unreachable: {error or type(error).__name__}"
            ) from None
        except ValidationError as error:
            raise CoordinatorError(f"reply from {self.url} is not a ReportReply: {error}") from None
