"""The task store: task status machine, tables and migrations, and the ``Store`` API.

Only the service imports this package; see :mod:`tacc_hub.store.store` for the invariants.
"""

from .batcher import InsertBatcher
from .models import api_tokens, metadata, tasks
from .records import NewTask, TaskRecord
from .status import ACTIVE, TERMINAL, TRANSITIONS, IllegalTransition, TaskStatus, can_move, check_move
from .store import Store, TaskFields, alembic_config

__all__ = [
    "ACTIVE",
    "TERMINAL",
    "TRANSITIONS",
    "IllegalTransition",
    "InsertBatcher",
    "NewTask",
    "Store",
    "TaskFields",
    "TaskRecord",
    "TaskStatus",
    "alembic_config",
    "api_tokens",
    "can_move",
    "check_move",
    "metadata",
    "tasks",
]
