"""The everyday commands read the API's JSON without the models (issue 29): what the models
said for them is said here, and kept the same as the models by these tests."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest

from astraeus.coordinator.cli import main
from astraeus.coordinator.cli.machines_view import HEALTH_STATES, INFINIBAND
from astraeus.coordinator.cli.render import ENDED_RUN_STATES, ENDED_TASK_STATES
from astraeus.shared import GpuHealthState, LinkLayer, RunState, TaskState, task_name


def test_the_words_kept_beside_the_models_are_the_models() -> None:
    """The states that have ended, the GPU health words in their order and InfiniBand's link
    layer, as `shared/` defines them."""
    assert {state.value for state in RunState if state.ended} == ENDED_RUN_STATES
    assert {state.value for state in TaskState if state.ended} == ENDED_TASK_STATES
    assert tuple(state.value for state in GpuHealthState) == HEALTH_STATES
    assert LinkLayer.INFINIBAND.value == INFINIBAND
    assert task_name("train", 2) == "train-2"  # as `logs --attempt` names an attempt's tasks


class _Fake(http.server.BaseHTTPRequestHandler):
    """Answers every request with `answer` (200, JSON) and keeps each request line."""

    answer: ClassVar[object] = {}
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.seen.append(self.requestline)
        body = json.dumps(self.answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A server posing as a coordinator, on loopback; `astra` pointed at it, no proxy."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _Fake)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Fake.seen.clear()
    url = f"http://127.0.0.1:{server.server_port}"
    monkeypatch.setenv("ASTRA_API", url)
    monkeypatch.setenv("ASTRA_TOKEN", "astr_t")
    monkeypatch.setenv("ASTRA_CONFIG", "/nonexistent")
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    yield url
    server.shutdown()
    server.server_close()


def test_an_answer_of_another_shape_is_a_sentence(
    fake: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run without the fields this version reads (another server, another version): one
    sentence naming the first field missing, exit 1, no traceback."""
    _Fake.answer = {"name": "train"}
    assert main(["astraeus", "status", "train"]) == 1
    assert capsys.readouterr().err == (
        "astra: the coordinator's answer was not understood; is ASTRA_API an Astraeus "
        "coordinator of this version? (no field 'reason')\n"
    )


def test_a_name_stays_one_path_segment(fake: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A `/`, `?` or `#` typed in a name is sent escaped: it names a run, never another path
    or a query (`?workspace=` of someone else's)."""
    _Fake.answer = {"name": "x"}
    main(["astraeus", "status", "a/b?workspace=other#c"])
    assert _Fake.seen == ["GET /api/v1/runs/a%2Fb%3Fworkspace%3Dother%23c HTTP/1.1"]


def test_a_proxy_in_the_environment_is_used(
    fake: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With `http_proxy` set, the request goes through it (as `urllib.request` sends it: the
    whole URL on the request line), as `curl` and `kubectl` would."""
    _Fake.answer = {"machines": []}
    monkeypatch.setenv("ASTRA_API", "http://127.0.0.1:1")  # reached only through the proxy
    monkeypatch.setenv("http_proxy", fake)
    assert main(["astraeus", "machines"]) == 0
    assert capsys.readouterr().out.startswith("no machines yet")
    assert _Fake.seen == ["GET http://127.0.0.1:1/api/v1/machines HTTP/1.1"]


def test_a_token_with_a_line_break_is_refused_unsent(
    fake: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A token pasted with its line break would split the request: refused, exit 2, nothing
    sent."""
    monkeypatch.setenv("ASTRA_TOKEN", "astr_t\r\nX-Injected: 1")
    assert main(["astraeus", "list"]) == 2
    assert "the API token has a line break" in capsys.readouterr().err
    assert _Fake.seen == []
