"""Code snapshot upload: PUT the archive at its sha256, HEAD to ask whether it is there."""

from __future__ import annotations

import re

from tacc_hub.snapshot import SnapshotError

from .base import ApiError, ApiHandler
from .models import CodeOut

DIGEST_RE = re.compile(r"^[0-9a-f]{64}$")


class CodeHandler(ApiHandler):
    openapi = {
        "put": {"summary": "Upload a code snapshot (deterministic tar.gz) under its sha256.",
                "request": "application/gzip", "response": CodeOut, "status": 201},
        "head": {"summary": "200 if the snapshot is stored, 404 if not."},
    }

    def _digest(self, digest: str) -> str:
        if not DIGEST_RE.match(digest):
            raise ApiError(400, "the path must end in a sha256 digest (64 lowercase hex digits)")
        return digest

    def head(self, digest: str) -> None:
        if not self.ctx.code_store.has(self._digest(digest)):
            raise ApiError(404, "no such snapshot")
        self.finish()

    def put(self, digest: str) -> None:
        digest = self._digest(digest)
        body = self.request.body
        if len(body) > self.ctx.max_code_bytes:
            raise ApiError(413, f"snapshot larger than {self.ctx.max_code_bytes} bytes")
        try:
            self.ctx.code_store.put(digest, body)
        except SnapshotError as exc:
            raise ApiError(422, str(exc), [{"field": "body", "message": str(exc)}]) from None
        self.write_json(CodeOut(digest=digest, size=len(body)), status=201)
