"""The cluster's name and console URL: settings, their defaults and `GET /api/v1/cluster`."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from astraeus.coordinator.api.cluster import console_url
from astraeus.coordinator.api.keys import SETTINGS
from astraeus.coordinator.settings import Settings, load
from astraeus.shared.settings import SettingsError


def _console_for(settings: Settings, host: str = "gpu-east.example:8470") -> str:
    app = web.Application()
    app[SETTINGS] = settings
    return console_url(make_mocked_request("GET", "/api/v1/cluster", {"Host": host}, app=app))


def test_cluster_name_defaults_to_the_short_hostname() -> None:
    """Without a setting the cluster is named by this host's name up to its first dot."""
    assert load(env={}).cluster_name == socket.gethostname().split(".")[0]


def test_cluster_settings_come_from_the_environment() -> None:
    """ASTRAEUS_CLUSTER_NAME and ASTRAEUS_CONSOLE_URL set the two settings."""
    env = {"ASTRAEUS_CLUSTER_NAME": "gpu-east", "ASTRAEUS_CONSOLE_URL": "https://c.example/"}
    settings = load(env=env)
    assert (settings.cluster_name, settings.console_url) == ("gpu-east", "https://c.example/")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"console_url": "c.example"}, "console_url: 'c.example' is not an http(s) URL"),
        ({"console_url": "https://c.example/#/runs"}, "without a fragment"),
        ({"cluster_name": " "}, "cluster_name: must not be empty"),
    ],
    ids=["no-scheme", "fragment", "empty-name"],
)
def test_bad_cluster_settings_name_the_setting(overrides: dict[str, str], message: str) -> None:
    """A console URL that is not http(s) or has a fragment, or an empty name, is refused."""
    with pytest.raises(SettingsError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load(env={}, overrides=overrides)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (Settings(console_url="https://c.example/x/"), "https://c.example/x/"),
        (Settings(listen="10.0.0.5:8470"), "http://gpu-east.example:8470/console/"),
        (Settings(listen="0.0.0.0:8470"), "http://gpu-east.example:8470/console/"),
        (Settings(listen="127.0.0.1:0"), "http://gpu-east.example:8470/console/"),
        (
            Settings(listen="10.0.0.5:8470", tls_cert=Path("c.pem"), tls_key=Path("k.pem")),
            "https://gpu-east.example:8470/console/",
        ),
    ],
    ids=["set", "listen-address", "every-interface", "ephemeral-port", "tls"],
)
def test_console_url_default(settings: Settings, expected: str) -> None:
    """The console is `console_url`, else the host the caller reached (the name the user typed,
    not the listen address), over https when the coordinator serves TLS."""
    assert _console_for(settings) == expected
