"""The migrations build exactly the schema that models.py declares, on both databases."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from tacc_hub.store import Store, alembic_config, metadata


def _diff(store: Store) -> list:
    with store.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
        return compare_metadata(ctx, metadata)


def _current(store: Store) -> str | None:
    with store.engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def test_migrated_schema_matches_models(store: Store):
    assert _diff(store) == []
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None and _current(store) == head


def test_migrate_is_idempotent(store: Store):
    store.migrate()
    store.migrate()
    assert _diff(store) == []


def test_empty_database_differs_then_migrate_fixes_it(db_url: str):
    store = Store(db_url)
    try:
        assert _diff(store) != []
        assert _current(store) is None
        store.migrate()
        assert _diff(store) == []
    finally:
        store.close()


def test_downgrade_to_base_and_back(store: Store):
    cfg = alembic_config()
    with store.engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "base")
    assert set(sa.inspect(store.engine).get_table_names()) <= {"alembic_version"}
    store.migrate()
    assert _diff(store) == []


def test_migrations_ship_inside_the_package():
    from tacc_hub.store.store import MIGRATIONS_DIR

    assert (MIGRATIONS_DIR / "env.py").is_file()
    assert (MIGRATIONS_DIR / "script.py.mako").is_file()
    assert list((MIGRATIONS_DIR / "versions").glob("0001_*.py"))
    assert list((MIGRATIONS_DIR / "versions").glob("0002_*.py"))
