"""Canonical serialization and digest of a TaskSpec.

Invariant: ``canonical_json(spec)`` depends only on the spec's values (keys
sorted, no whitespace, UTF-8, every field including defaults, schema version
prefixed), so identical specs give identical digests in any process, and any
change of any field changes the digest.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .task import TaskSpec


def canonical_json(spec: TaskSpec) -> str:
    from .task import SCHEMA_VERSION

    body = spec.model_dump(mode="json", by_alias=True)
    return json.dumps(
        {"schema": SCHEMA_VERSION, "spec": body}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def spec_digest(spec: TaskSpec) -> str:
    return hashlib.sha256(canonical_json(spec).encode()).hexdigest()
