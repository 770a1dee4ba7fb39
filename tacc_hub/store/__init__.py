"""The task store: task status machine, tables and migrations, and the ``Store`` API.

Only the service imports this package; see :mod:`tacc_hub.store.store` for the invariants.
"""

from .batcher import InsertBatcher
from .groups import ArrayRecord, DependencyRecord, PipelineRecord
from .models import api_tokens, code_snapshots, memberships, metadata, quotas, tasks
from .notify import OutboxRow
from .quotas import DEFAULT_GROUP, DEFAULT_NAME, QuotaError, QuotaRow
from .records import NewTask, TaskRecord
from .running import Attempt, AuditEvent, GpuSample
from .status import ACTIVE, TERMINAL, TRANSITIONS, IllegalTransition, TaskStatus, can_move, check_move
from .store import Store, TaskFields, alembic_config
from .tokens import TokenGrant, TokenInfo

__all__ = [
    "ACTIVE",
    "DEFAULT_GROUP",
    "DEFAULT_NAME",
    "TERMINAL",
    "TRANSITIONS",
    "ArrayRecord",
    "Attempt",
    "AuditEvent",
    "DependencyRecord",
    "GpuSample",
    "IllegalTransition",
    "InsertBatcher",
    "NewTask",
    "OutboxRow",
    "PipelineRecord",
    "QuotaError",
    "QuotaRow",
    "Store",
    "TaskFields",
    "TaskRecord",
    "TaskStatus",
    "TokenGrant",
    "TokenInfo",
    "alembic_config",
    "api_tokens",
    "can_move",
    "check_move",
    "code_snapshots",
    "memberships",
    "metadata",
    "quotas",
    "tasks",
]
