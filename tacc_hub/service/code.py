"""Code snapshot upload: PUT the archive at its sha256, HEAD to ask whether you uploaded it.

A snapshot belongs to each user who uploaded its bytes (several may upload the same ones): HEAD
answers 200 only to them, and only they may name it in a task (anyone else: 404, as for another
user's task). The body is streamed to a private temporary file in the code store while it is
hashed, never held in memory; the archive is then checked in a worker process
(``snapshot.check_archive``: caps on unpacked bytes, member count, path depth and compression
ratio; no links out of the tree, hard links, devices or FIFOs) and refused with 422 naming the
member, before anything is stored.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import tempfile

from .base import ApiError, ApiHandler
from .heavyjobs import Refused, store_code_job
from .models import CodeOut

DIGEST_RE = re.compile(r"[0-9a-f]{64}")


class CodeHandler(ApiHandler):
    openapi = {
        "put": {"summary": "Upload a code snapshot (deterministic tar.gz) under its sha256. 413 above "
                           "max_code_bytes; 422 naming the member for an archive that is refused.",
                "request": "application/gzip", "response": CodeOut, "status": 201},
        "head": {"summary": "200 if you uploaded this snapshot, 404 if not (whether or not someone else did)."},
    }

    def body_limit(self) -> int:
        return self.ctx.max_code_bytes if self.request.method == "PUT" else self.ctx.max_body_bytes

    async def prepare(self) -> None:
        await super().prepare()
        if self.request.method == "PUT" and self._received >= 0:
            self._spool = tempfile.NamedTemporaryFile(dir=self.ctx.code_store.root, prefix=".upload-")  # 0600
            self._sha = hashlib.sha256()

    def data_received(self, chunk: bytes) -> None:
        if self._received < 0:
            return
        self._received += len(chunk)
        if self._received > self._limit:  # a chunked body: tornado closes the connection as well
            self._refuse_body()
            return
        self._sha.update(chunk)
        self._spool.write(chunk)

    def on_finish(self) -> None:
        spool = getattr(self, "_spool", None)
        if spool is not None:
            spool.close()

    def _digest(self, digest: str) -> str:
        if not DIGEST_RE.fullmatch(digest):
            raise ApiError(400, "the path must end in a sha256 digest (64 lowercase hex digits)",
                           [{"field": "digest", "message": "not a sha256 digest"}])
        return digest

    def head(self, digest: str) -> None:
        digest = self._digest(digest)
        if not (self.ctx.store.owns_code(digest, self.user) and self.ctx.code_store.has(digest)):
            raise ApiError(404, "no such snapshot of yours")
        self.finish()

    async def put(self, digest: str) -> None:
        digest = self._digest(digest)
        if not hmac.compare_digest(self._sha.hexdigest(), digest):
            raise ApiError(422, "the archive does not match its digest (the sha256 of the body must be the "
                           "path's digest)", [{"field": "body", "message": "sha256 mismatch"}])
        self._spool.flush()
        out = await self.offload(store_code_job, str(self.ctx.code_store.root), digest, self._spool.name,
                                 self.ctx.archive_limits)
        if isinstance(out, Refused):
            field = "body" if out.member is None else f"body[{out.member[:200]}]"
            raise ApiError(422, out.message[:2000], [{"field": field, "message": out.message[:2000]}])
        summary = out
        self.ctx.store.add_code_owner(digest, self.user, self._received)
        self.write_json(CodeOut(digest=digest, size=self._received, members=summary.members,
                                unpacked_bytes=summary.unpacked_bytes), status=201)

