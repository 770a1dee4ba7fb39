"""Fixtures for the store tests: every store test runs on SQLite and on a real PostgreSQL.

The PostgreSQL server and the tests' own database come from ``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from tacc_hub.store import Store

REPO = Path(__file__).resolve().parents[2]
PG_SCRIPT = REPO / "scripts" / "postgres.sh"


def _reset_pg(url: str) -> None:
    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("DROP SCHEMA public CASCADE")
            conn.exec_driver_sql("CREATE SCHEMA public")
    finally:
        engine.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """URL of an empty database (no tables yet), once per backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tacc.db'}"
    url = request.getfixturevalue("pg_url")
    _reset_pg(url)
    return url


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """A freshly migrated, empty store on each backend."""
    s = Store(db_url)
    s.migrate()
    try:
        yield s
    finally:
        s.close()
