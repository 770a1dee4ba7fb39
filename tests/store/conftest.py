"""Fixtures for the store tests: every store test runs on SQLite and on a real PostgreSQL.

PostgreSQL comes from ``scripts/postgres.sh`` (a throwaway cluster in a temporary directory
on a free port, stopped at the end of the session) unless ``TACC_TEST_PG_URL`` names a
server to use; the tests then work in a database of their own that they create and drop.
There is no skip: when PostgreSQL cannot be started, the PostgreSQL tests fail and say why.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from tacc_hub.store import Store

REPO = Path(__file__).resolve().parents[2]
PG_SCRIPT = REPO / "scripts" / "postgres.sh"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """URL of a PostgreSQL server (any database on it) the tests may create databases on."""
    env_url = os.environ.get("TACC_TEST_PG_URL")
    if env_url:
        yield env_url
        return
    # Not under pytest's tmp dir: that one is private to root, and the server runs as postgres.
    pg_dir = tempfile.mkdtemp(prefix="tacc-pg-")
    try:
        errors = []
        for _ in range(3):  # the free port can be taken between our probe and the server's bind
            proc = subprocess.run(
                [str(PG_SCRIPT), "start", pg_dir, str(_free_port())],
                capture_output=True,
                text=True,
                timeout=900,
            )
            if proc.returncode == 0:
                break
            errors.append(proc.stderr.strip())
        else:
            pytest.fail(
                "could not start PostgreSQL with scripts/postgres.sh (set TACC_TEST_PG_URL to use a running "
                "server):\n" + "\n---\n".join(errors),
                pytrace=False,
            )
        yield proc.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([str(PG_SCRIPT), "stop", pg_dir], capture_output=True, timeout=120, check=False)
        shutil.rmtree(pg_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_url(pg_server_url: str) -> Iterator[str]:
    """A database of the tests' own on the PostgreSQL server, dropped at the end."""
    name = f"tacc_test_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(pg_server_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        yield sa.make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.dispose()


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
