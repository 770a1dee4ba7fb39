"""The service the hostile corpus is sent to (one per session), and the runner that sends an entry.

The service runs tasks as their owners (as the e2e service does), with no GPUs and room for many
tasks at once. Before the corpus: bob (the victim) uploads a snapshot and runs a task; mallory (the
attacker) uploads her own snapshot and runs a sentinel task, whose id bounds the ids the corpus
may use. The canary directory is writable by every account: anything a hostile value managed to
run (``touch @CANARY@/x``) would leave a file there.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import urllib3

from tacc_hub.snapshot import digest_of, pack
from tests import accounts
from tests.e2e.conftest import Api, ServiceProcess

from .corpus import ADMIN, BOB, MALLORY, NO_ACCOUNT, Entry

TERMINAL = {"succeeded", "failed", "cancelled", "lost"}


@dataclass
class Outcome:
    status: int | None
    body: Any
    error: str = ""
    task_id: int | None = None  # a task the request created (whatever the entry expected)


@dataclass
class Hostile:
    svc: ServiceProcess
    canary: Path
    places: dict[str, str]
    tokens: dict[str, str]
    sentinel_before: int
    http: urllib3.PoolManager = field(default_factory=lambda: urllib3.PoolManager(maxsize=4))
    outcomes: dict[str, Outcome] = field(default_factory=dict)

    def fill(self, text: str) -> str:
        for key, value in self.places.items():
            text = text.replace(key, value)
        return text

    def fill_bytes(self, data: bytes) -> bytes:
        for key, value in self.places.items():
            data = data.replace(key.encode(), value.encode())
        return data

    def api(self, user: str = MALLORY) -> Api:
        return Api(self.svc.url, self.tokens[user])

    def send(self, entry: Entry) -> Outcome:
        """Send ``entry`` as written (placeholders filled); never raises for what the server does."""
        body = entry.body() if callable(entry.body) else entry.body
        if body is not None and entry.subst:
            body = self.fill_bytes(body)
        path = self.fill(entry.path)
        if "@DIGEST@" in path:
            path = path.replace("@DIGEST@", hashlib.sha256(body or b"").hexdigest())
        headers: dict[str, Any] = {k: self.fill(v) for k, v in entry.headers.items()}
        for k, v in headers.items():
            try:
                v.encode("latin-1")
            except UnicodeEncodeError:
                headers[k] = v.encode()  # sent as its UTF-8 bytes (http.client would refuse the str)
        if entry.user is not None and "Authorization" not in headers:
            headers["Authorization"] = f"token {self.tokens[entry.user]}"
        try:
            r = self.http.request(entry.method, self.svc.url + path, body=body, headers=headers, retries=False,
                                  redirect=False, timeout=urllib3.Timeout(connect=10, read=120))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            out = Outcome(None, None, f"{type(exc).__name__}: {exc}"[:500])
            self.outcomes[entry.id] = out
            return out
        data: Any
        try:
            data = json.loads(r.data) if r.data else {}
        except ValueError:
            data = {"raw": r.data[:2000].decode("utf-8", "replace")}
        out = Outcome(r.status, data)
        if (entry.method == "POST" and path.split("?")[0] == "/api/tasks" and r.status == 201
                and isinstance(data, dict) and isinstance(data.get("id"), int)):
            out.task_id = data["id"]
        self.outcomes[entry.id] = out
        return out

    def created(self) -> list[int]:
        return sorted(o.task_id for o in self.outcomes.values() if o.task_id is not None)

    def wait_terminal(self, ids: list[int], timeout: float = 120) -> dict[int, dict]:
        api = self.api(MALLORY)
        deadline = time.monotonic() + timeout
        done: dict[int, dict] = {}
        while time.monotonic() < deadline and len(done) < len(ids):
            for tid in ids:
                if tid not in done:
                    _, t = api.call("GET", f"/api/tasks/{tid}")
                    if t.get("status") in TERMINAL:
                        done[tid] = t
            time.sleep(0.2)
        return done


def named(body: Any, fields: tuple[str, ...]) -> bool:
    """True when one of ``fields`` appears in an ``errors[].field`` or in the ``message`` (case-insensitive)."""
    if not isinstance(body, dict):
        return False
    names = [str(e.get("field", "")) for e in body.get("errors") or [] if isinstance(e, dict)]
    text = " ".join([str(body.get("message", "")), *names]).lower()
    return any(f.lower() in text for f in fields)


def snapshot(tmp: Path, files: dict[str, str]) -> bytes:
    tmp.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (tmp / name).write_text(text)
    return pack(tmp)


def submit_sentinel(api: Api, code: str, name: str) -> int:
    status, t = api.call("POST", "/api/tasks", {"name": name, "code": {"kind": "snapshot", "digest": code},
                                                "entrypoint": {"argv": ["true"]}})
    assert status == 201, t
    api.wait_status(t["id"], TERMINAL)
    return int(t["id"])


@pytest.fixture(scope="session")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    svc = ServiceProcess(tmp_path_factory.mktemp("hostile-svc"), "--gpus=0", "--TaccHub.grace_period=1",
                         "--TaccHub.max_running_per_user=16").start()
    try:
        canary = accounts.data_dir("tacc-canary-")
        canary.chmod(0o1777)  # every task account can write here: a file appearing means something ran
        # bob's token first (id 1): a token route that revokes "token 1" must not lock the attacker out
        tokens = {BOB: svc.token(BOB), ADMIN: svc.token(ADMIN, admin=True), NO_ACCOUNT: svc.token(NO_ACCOUNT),
                  MALLORY: svc.token(MALLORY)}
        bob, mallory = Api(svc.url, tokens[BOB]), Api(svc.url, tokens[MALLORY])
        tmp = tmp_path_factory.mktemp("hostile-code")
        codes = {}
        for user, api in ((BOB, bob), (MALLORY, mallory)):
            data = snapshot(tmp / user, {"main.py": f"print('{user}')\n"})
            status, out = api.call("PUT", f"/api/code/{digest_of(data)}", data, content_type="application/gzip")
            assert status == 201, out
            codes[user] = digest_of(data)
        bob_task = submit_sentinel(bob, codes[BOB], "victim")
        before = submit_sentinel(mallory, codes[MALLORY], "sentinel-before")
        places = {"@CANARY@": str(canary), "@BOBCODE@": codes[BOB], "@CODE@": codes[MALLORY],
                  "@BOBTASK@": str(bob_task), "@MYTASK@": str(before), "@TOKENHALF@": tokens[MALLORY][:20],
                  "@TOKEN@": tokens[MALLORY]}
        yield Hostile(svc, canary, places, tokens, before)
    finally:
        svc.stop()
