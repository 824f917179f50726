"""Where the coordinator is and which token to send: flags, then `ASTRA_*`, then a TOML file."""

from __future__ import annotations

import os

from astraeus.shared.coordinators import CoordinatorListError, parse_coordinators
from astraeus.shared.tls import plain_http_refusal, plain_http_to_another_machine

from .errors import CliError, Exit

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` and `pathlib` (which loads `urllib.parse`): for mypy only
    from collections.abc import Mapping
    from pathlib import Path

DEFAULT_API = "http://127.0.0.1:8470"
KEYS = ("api", "token", "workspace", "ca_file")


class Target:
    """The coordinator to talk to, with what to say who we are. (A plain class: `dataclasses`
    would load `inspect` into every `astra` command, `NamedTuple` `typing`.)"""

    __slots__ = ("api", "ca_file", "config", "token", "workspace")

    def __init__(
        self,
        api: str,
        token: str | None,
        workspace: str | None,
        config: str | os.PathLike[str],
        ca_file: Path | None = None,
    ) -> None:
        self.api = api
        """The coordinator's URL, or every coordinator's, comma-separated (`apis`)."""
        self.token = token
        self.workspace = workspace
        self.config = config
        """The config file read (or looked for), as messages name it."""
        self.ca_file = ca_file
        """The CA that signed the coordinator's certificate; None: the system's CA store."""

    def __repr__(self) -> str:  # never the token: a repr may reach a log
        return f"Target(api={self.api!r}, workspace={self.workspace!r}, config={self.config!r})"

    @property
    def apis(self) -> tuple[str, ...]:
        """Each coordinator's URL, in the order given."""
        return tuple(self.api.split(","))


def config_path(environ: Mapping[str, str]) -> str:
    """`ASTRA_CONFIG`, else `$XDG_CONFIG_HOME/astra/config.toml` (~/.config by default)."""
    if environ.get("ASTRA_CONFIG"):
        return environ["ASTRA_CONFIG"]
    base = environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "astra", "config.toml")


def read_config(path: str) -> dict[str, str]:
    """The file's `api`, `token` and `workspace`; a missing file is an empty one. `api` may be
    a list of URLs too (every coordinator's)."""
    try:
        with open(path) as file:
            text = file.read()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CliError(f"cannot read the config file {path}: {exc.strerror}", Exit.USAGE) from None
    if not text.strip():  # an empty TOML table; no parser loaded for it
        return {}
    import tomllib  # only where there is a file: its parser costs as much as argparse

    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CliError(f"config file {path} is not valid TOML: {exc}", Exit.USAGE) from None
    for key, value in table.items():
        if key not in KEYS:
            known = ", ".join(KEYS)
            raise CliError(f"config file {path}: unknown key {key!r}; use {known}", Exit.USAGE)
        if key == "api" and isinstance(value, list) and all(isinstance(v, str) for v in value):
            if not value:
                raise CliError(
                    f"config file {path}: api is an empty list; name at least one coordinator",
                    Exit.USAGE,
                )
            table[key] = value = ",".join(value)
        if not isinstance(value, str):
            raise CliError(f"config file {path}: {key} must be a string", Exit.USAGE)
    return dict(table)


def read_token_file(path: str) -> str:
    """The token in a file (its first line): kept out of the command line, which every user of
    the machine can read in `ps`."""
    try:
        with open(path) as file:
            text = file.read()
    except OSError as exc:
        raise CliError(f"cannot read the token file {path}: {exc.strerror}", Exit.USAGE) from None
    token = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not token:
        raise CliError(f"the token file {path} is empty", Exit.USAGE)
    return token


def resolve(
    *,
    api: str | None,
    token: str | None,
    workspace: str | None,
    ca_file: str | None = None,
    environ: Mapping[str, str] | None = None,
    token_file: str | None = None,
    allow_plain_http: bool = False,
) -> Target:
    """Flags win over `ASTRA_API`/`ASTRA_TOKEN`/`ASTRA_WORKSPACE`/`ASTRA_CA`, which win over
    the file. The API is one URL or several, comma-separated (every coordinator of a cluster:
    `astra` talks to whichever leads); each may end in `/api/v1` (as the demo prints it) or
    not. `--token-file` is a flag: it wins over the variable and the file too. Plain `http://`
    to another machine is refused (the token would cross the network unencrypted) unless
    `allow_plain_http` or `ASTRA_ALLOW_PLAIN_HTTP=1`."""
    env = os.environ if environ is None else environ
    if token is None and token_file is not None:
        token = read_token_file(token_file)
    path = config_path(env)
    file = read_config(path)

    def pick(flag: str | None, key: str, variable: str | None = None) -> str | None:
        return flag or env.get(variable or f"ASTRA_{key.upper()}") or file.get(key) or None

    try:
        urls = parse_coordinators(pick(api, "api") or DEFAULT_API)
    except CoordinatorListError as exc:
        example = ", e.g. http://coordinator:8470" if "http(s) URL" in str(exc) else ""
        raise CliError(f"api: {exc}{example}", Exit.USAGE) from None
    allowed = allow_plain_http or env.get("ASTRA_ALLOW_PLAIN_HTTP", "") in ("1", "true", "yes")
    for url in urls:
        if plain_http_to_another_machine(url) and not allowed:
            allow = "--allow-plain-http (ASTRA_ALLOW_PLAIN_HTTP=1)"
            raise CliError(plain_http_refusal("api", url, allow), Exit.USAGE)
    ca = pick(ca_file, "ca_file", "ASTRA_CA")
    if ca:
        from pathlib import Path  # a CA file is named: https, which costs far more anyway
    return Target(
        api=",".join(urls),
        token=pick(token, "token"),
        workspace=pick(workspace, "workspace"),
        config=path,
        ca_file=Path(ca) if ca else None,
    )
