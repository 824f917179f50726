"""`database_url` chooses PostgreSQL (TOML key, `ASTRAEUS_DATABASE_URL`, `--database-url`);
without it the SQLite file as before, and nothing of PostgreSQL is imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from astraeus.coordinator.service import main
from astraeus.coordinator.settings import load
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
