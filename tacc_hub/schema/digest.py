"""Canonical serialization and digest of a TaskSpec.

Invariant: ``canonical_json(spec)`` depends only on the spec's values (fields
in declaration order, mapping keys sorted by the schema's validators, no
whitespace, UTF-8, every field including defaults, schema version prefixed),
so identical specs give identical digests in any process, and any change of
any field changes the digest; except ``depends_on``, which says when a task runs, not
what it runs (a pipeline submitted again gives its steps the same digests). pydantic-core writes the JSON (in Rust): the
digest is on the submit hot path.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .task import TaskSpec


_NOT_DIGESTED = {"depends_on"}


def canonical_json(spec: TaskSpec) -> str:
    from .task import SCHEMA_VERSION

    return f'{{"schema":{SCHEMA_VERSION},"spec":{spec.model_dump_json(by_alias=True, exclude=_NOT_DIGESTED)}}}'


def spec_digest(spec: TaskSpec) -> str:
    return hashlib.sha256(canonical_json(spec).encode()).hexdigest()
