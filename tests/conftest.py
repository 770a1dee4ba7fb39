"""Fixtures shared by every test package: a real PostgreSQL server.

PostgreSQL comes from ``scripts/postgres.sh`` (a throwaway cluster in a temporary directory
on a free port, stopped at the end of the session) unless ``TACC_TEST_PG_URL`` names a
server to use; the tests then work in databases of their own that they create and drop.
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

REPO = Path(__file__).resolve().parents[1]
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
