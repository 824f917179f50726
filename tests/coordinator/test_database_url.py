"""`database_url` chooses PostgreSQL (TOML key, `ASTRAEUS_DATABASE_URL`, `--database-url`);
without it the SQLite file as before, and nothing of PostgreSQL is imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from astraeus.coordinator.service import main
from astraeus.coordinator.settings import load
from astraeus.coordinator.store.dialect import shown
from astraeus.shared.settings import SettingsError

URL = "postgresql://astraeus@db.example:5432/astraeus"


def test_each_source_gives_the_url_and_later_ones_win(tmp_path: Path) -> None:
    config = tmp_path / "coordinator.toml"
    config.write_text(f'database_url = "{URL}"\n')
    assert load(config=config, env={}).database == URL
    other = "postgres://other@127.0.0.1/astraeus"
    assert load(config=config, env={"ASTRAEUS_DATABASE_URL": other}).database == other
    flag = "postgresql://flag@127.0.0.1/x"
    settings = load(
        config=config, env={"ASTRAEUS_DATABASE_URL": other}, overrides={"database_url": flag}
    )
    assert settings.database == flag


def test_without_it_the_sqlite_file_is_the_database(tmp_path: Path) -> None:
    settings = load(env={"ASTRAEUS_STATE_DIR": str(tmp_path)})
    assert (settings.database_url, settings.database) == ("", tmp_path / "astraeus.db")


def test_a_url_of_another_engine_is_refused_naming_the_setting() -> None:
    with pytest.raises(SettingsError) as caught:
        load(env={"ASTRAEUS_DATABASE_URL": "mysql://root@db/astraeus"})
    assert str(caught.value) == (
        "ASTRAEUS_DATABASE_URL: 'mysql://root@db/astraeus' is not a postgresql:// URL, e.g."
        " postgresql://astraeus@db.example:5432/astraeus (leave it unset for the SQLite file)"
    )


def test_the_flag_is_checked_too(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["serve", "--state-dir", str(tmp_path), "--database-url", "sqlite:///x.db"])
    assert code == 2
    assert capsys.readouterr().err.startswith(
        "astraeus-coordinator: --database-url: 'sqlite:///x.db' is not a postgresql:// URL"
    )


def test_the_sqlite_store_imports_nothing_of_postgresql(tmp_path: Path) -> None:
    """The default needs no PostgreSQL driver installed: opening and writing the SQLite file
    never imports psycopg."""
    code = (
        "import sys; from pathlib import Path; from astraeus.coordinator.store import Store;"
        f"s = Store.open(Path({str(tmp_path / 'a.db')!r})); s.database.probe(); s.close();"
        "print(sorted(m for m in sys.modules if m.startswith('psycopg')))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert found.stdout.strip() == "[]"


FAILOVER = (
    "postgresql://astraeus:s3cret@db-a:5432,db-b:5432/astraeus?target_session_attrs=read-write"
)
"""Two hosts: libpq takes whichever accepts writes (docs/operator.md, "When PostgreSQL fails
over")."""


def test_a_url_of_several_hosts_is_taken_as_it_is() -> None:
    settings = load(env={"ASTRAEUS_DATABASE_URL": FAILOVER})
    assert settings.database == FAILOVER
    ipv6 = "postgresql://astraeus@[::1]:5432,[fd00::2]:5433/astraeus?target_session_attrs=primary"
    assert load(env={"ASTRAEUS_DATABASE_URL": ipv6}).database == ipv6


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        (
            "postgresql://astraeus:s3cret@db-a:5432,db-b:54x2/astraeus",
            "the port '54x2' of host 2 (db-b) is not a port number from 1 to 65535",
        ),
        (
            "postgresql://astraeus:s3cret@[::1]:70000/astraeus",
            "the port '70000' of host 1 (::1) is not a port number from 1 to 65535",
        ),
        (
            "postgresql://astraeus:s3cret@db-a,,db-b/astraeus?target_session_attrs=read-write",
            "host 2 of the URL's host list is empty",
        ),
        (
            "postgresql://astraeus:s3cret@db-a:5432,db-b:5432/astraeus",
            "the URL lists 2 hosts without target_session_attrs=read-write: libpq would keep the"
            " first that answers, a standby too; add ?target_session_attrs=read-write so the"
            " coordinator follows the primary",
        ),
        (
            "postgresql://astraeus:s3cret@db-a,db-b/astraeus?target_session_attrs=any",
            "the URL lists 2 hosts without target_session_attrs=read-write: libpq would keep the"
            " first that answers, a standby too; add ?target_session_attrs=read-write so the"
            " coordinator follows the primary",
        ),
        (
            "postgresql://astraeus:s3cret@db-b/astraeus?target_session_attrs=prefer-standby",
            "target_session_attrs='prefer-standby' would take a server that refuses writes; the"
            " coordinator writes: target_session_attrs=read-write",
        ),
        (
            "postgresql://astraeus:s3cret@db-a,db-b/astraeus?target_session_attrs=readwrite",
            "target_session_attrs='readwrite' is not one of any, read-write, read-only, primary,"
            " standby, prefer-standby (read-write: the primary, whichever host it is)",
        ),
        (
            "postgresql://astraeus:s3cret@db-a,db-b/astraeus?target_session=read-write",
            'libpq cannot read the URL: invalid URI query parameter: "target_session"',
        ),
        (
            "postgresql://astraeus@db-a/astraeus?password=s3%zz",
            'libpq cannot read the URL: invalid percent-encoded token: "***"',
        ),
    ],
)
def test_a_mistaken_url_is_refused_naming_the_problem_not_the_password(
    url: str, problem: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        load(env={"ASTRAEUS_DATABASE_URL": url})
    assert str(caught.value) == f"ASTRAEUS_DATABASE_URL: {problem}"
    assert "s3" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "seen"),
    [
        (
            FAILOVER,
            "postgresql://astraeus:***@db-a:5432,db-b:5432/astraeus?target_session_attrs=read-write",
        ),
        (
            "postgresql://astraeus@db-a,db-b/astraeus?password=s3cret&sslmode=require",
            "postgresql://astraeus@db-a,db-b/astraeus?password=***&sslmode=require",
        ),
        (
            "postgres://astraeus:s3%40cret@[::1]:5432,[::2]:5432",
            "postgres://astraeus:***@[::1]:5432,[::2]:5432",
        ),
        ("postgresql://astraeus@db-a/astraeus", "postgresql://astraeus@db-a/astraeus"),
    ],
)
def test_logs_and_messages_show_the_url_without_its_password(url: str, seen: str) -> None:
    assert shown(url) == seen
