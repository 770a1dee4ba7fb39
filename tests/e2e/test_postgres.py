"""The whole service on PostgreSQL (the production store): run, cancel, restart, re-adopt."""

from __future__ import annotations

import json
import signal
import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from .conftest import Api, ServiceProcess, tcloud, write_task


@pytest.fixture
def pg_service_db(pg_server_url):
    name = f"tacc_e2e_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(pg_server_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    with admin.connect() as conn:
        conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield sa.make_url(pg_server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


@pytest.mark.postgres
def test_service_on_postgresql(tmp_path, pg_service_db):
    svc = ServiceProcess(tmp_path / "state", "--TaccHub.grace_period=2", db_url=pg_service_db).start()
    try:
        quick = write_task(tmp_path / "q", "name: quick\ncode: .\nentrypoint: echo on-postgres\n")
        res = tcloud(svc, "alice", "submit", str(quick), "-f")
        assert res.returncode == 0 and "on-postgres" in res.stdout, res.stderr
        slow = write_task(tmp_path / "s", "name: slow\ncode: .\nentrypoint:\n  - sleep 3\n  - echo survived\n")
        tid = json.loads(tcloud(svc, "alice", "submit", str(slow), "--json").stdout)["id"]
        victim = json.loads(tcloud(svc, "alice", "submit", str(slow), "--json").stdout)["id"]
        api = Api(svc.url, svc.token("alice"))
        api.wait_status(tid, {"running"})
        status, _ = api.call("POST", f"/api/tasks/{victim}/cancel")
        assert status == 200
        api.wait_status(victim, {"cancelled"})
        svc.stop(signal.SIGKILL)
        svc2 = ServiceProcess(svc.state_dir, port=svc.port, db_url=pg_service_db)
        svc2.tokens = svc.tokens
        svc2.start()
        try:
            done = api.wait_status(tid, {"succeeded"}, timeout=30)
            assert done["exit_code"] == 0
            _, listing = api.call("GET", "/api/tasks?limit=10")
            assert listing["total"] == 3
            assert {t["status"] for t in listing["tasks"]} == {"succeeded", "cancelled"}
        finally:
            svc2.stop()
    finally:
        svc.stop()
