"""TaccSpawner: each single-user server is a tacc task, scheduled (quotas, fair share) like any other.

``start`` uploads the server's code snapshot (``payload``: the wrapper and, privately, the hub's
environment for the server), submits the task as the user (their ``tacc_api_token``, else a
short-lived hub token with ``custom:tacc:tasks``), and polls ``GET /api/tasks/ID`` until the task
runs and the wrapper has printed where the server listens (``tacc-server: listening on HOST:PORT``
in the task's log). With the local executor the spawner chooses the port and the host is
127.0.0.1; on Slurm the wrapper picks a free port on its node (servers may share a node) and
reports the node's address on its route to the hub.

Every call to the service goes over its REST API (``client``: tornado's non-blocking HTTP client),
so the hub's event loop never waits on the service, and the hub's environment needs nothing of
tacc_hub. ``poll`` never reads an unreachable service, a 5xx or a Slurm
failure that the service reports as a dead server: the task's own state decides.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from jupyterhub.spawner import Spawner
from jupyterhub.utils import random_port
from tornado import web
from traitlets import Bool, Dict, Float, Integer, List, Unicode, Union, default
from traitlets import Callable as CallableTrait

from . import form as F
from .client import ApiClientError, ServiceClient
from .payload import server_snapshot, server_spec, task_name
from .progress import ENDED, task_event, timeout_message
from .server import CULLED_PREFIX, READY_PREFIX

TRANSIENT = frozenset({0, 500, 502, 503, 504})


class StartTimeout(TimeoutError):
    """The server did not start in ``start_timeout``; the message says where the task stood."""


# jupyterhub-singleuser's own entry point, without the slow optional import (see ``fast_start``).
FAST_SINGLEUSER = ("import sys; sys.modules.setdefault('rfc3987_syntax', None); sys.argv[0] = 'jupyterhub-singleuser'; "
                   "from jupyterhub.singleuser import main; sys.exit(main())")


class TaccSpawner(Spawner):
    tacc_url = Unicode(config=True, help="URL of the tacc service (default: $TACC_URL, else http://127.0.0.1:8765).")

    @default("tacc_url")
    def _tacc_url(self) -> str:
        import os

        return os.environ.get("TACC_URL") or "http://127.0.0.1:8765"

    tacc_api_token = Union(
        [Unicode(), CallableTrait()], default_value="", config=True,
        help="Token the spawner uses against the tacc service, for the user it spawns: a string, or a "
             "callable(spawner) -> str (e.g. a per-user token of a standalone service). Empty: a hub token is "
             "minted for the user with `token_scopes`, valid `token_lifetime` seconds, and renewed as needed.")
    token_scopes = List(Unicode(), ["custom:tacc:tasks"], config=True, help="Scopes of the minted hub token.")
    token_lifetime = Integer(3600, config=True, help="Seconds a minted hub token is valid.")
    request_timeout = Float(10.0, config=True, help="Seconds one request to the tacc service may take.")
    start_poll_interval = Float(0.2, config=True, help="Seconds between looks at the task while it starts.")
    ready_poll_interval = Float(0.05, config=True, help="Seconds between checks that a started server answers "
                                "HTTP (start() returns once it does).")
    outage_warning_after = Float(600.0, config=True, help="poll() keeps a server through an outage of the tacc "
                                 "service (it answers None); after this many seconds it says so in the log, again "
                                 "every as many seconds.")
    stop_wait = Float(30.0, config=True, help="Seconds stop() waits for the cancelled task to end.")
    profiles = List(Dict(), config=True, help="Named server configurations for the options form, like "
                    "KubeSpawner's profile_list: {slug, display_name, description, default, gpus, gpu_type, memory, "
                    "time_limit, partition, python, requirements}.")
    max_time_limit = Unicode("24h", config=True, help="Longest time limit a server may ask for.")
    task_name_template = Unicode("jupyter-{username}", config=True, help="Name of server tasks "
                                 "({username}, {servername}).")
    qos_class = Unicode("interactive", config=True, help="QoS class of server tasks.")
    python = Unicode("python3", config=True, help="Interpreter (in the task's environment) that runs the wrapper.")
    bind_ip = Unicode("0.0.0.0", config=True, help="Address the server binds on a Slurm node (local executor: "
                      "127.0.0.1).")
    fast_start = Bool(True, config=True, help="Run the default jupyterhub-singleuser without importing rfc3987_syntax, "
                      "whose import builds a parser grammar: about 1.4 s of a 3 s server start measured here "
                      "(`python -X importtime -c 'import jupyterhub.singleuser.app'`). jsonschema then skips the "
                      "'iri' formats, which the server's schemas do not use. Only applies while `cmd` is the default.")
    allow_root = Bool(False, config=True, help="Pass --ServerApp.allow_root=True (tasks that run as root: dev/test "
                      "clusters only).")
    gpu_idle_timeout = Float(8 * 3600.0, config=True, help="Stop a server whose GPUs have all been below "
                             "gpu_idle_threshold for this many seconds (TACC rule: 8 hours), even with a browser "
                             "tab open. 0: never. Servers without GPUs, or without a reading, are left to the idle "
                             "culler.")
    gpu_idle_threshold = Float(5.0, config=True, help="GPU utilization (percent) below which a GPU counts as idle.")
    gpu_sample_interval = Float(60.0, config=True, help="Seconds between GPU utilization readings.")
    gpu_report_activity = Bool(True, config=True, help="Report a server whose GPUs are busy (a reading at or above "
                               "gpu_idle_threshold) to the hub as active, so the idle culler keeps it while it "
                               "computes with no browser attached.")
    gpu_util_command = List(Unicode(), config=True, help="Command printing the task's GPU utilization "
                            "('index, percent' lines); default: nvidia-smi --query-gpu=index,utilization.gpu.")

    # jupyterhub's own: wait for the service's queue within start_timeout, not the default 60 s
    @default("start_timeout")
    def _start_timeout(self) -> int:
        return 300

    @default("options_form")
    def _default_options_form(self) -> Callable[[Spawner], Any]:
        return TaccSpawner._render_options_form

    @default("options_from_form")
    def _default_options_from_form(self) -> Callable[[dict[str, Any]], Any]:
        return self._tacc_options_from_form

    @default("apply_user_options")
    def _default_apply_user_options(self) -> Callable[[Spawner, dict[str, Any]], Any]:
        return TaccSpawner._check_user_options

    @staticmethod
    async def _check_user_options(spawner: Spawner, user_options: dict[str, Any]) -> None:
        """user_options from the form or the REST API, checked against the site and the quota (400 if refused)."""
        assert isinstance(spawner, TaccSpawner)
        try:
            opts = F.normalize_options(dict(user_options or {}), spawner._profiles())
            limits, _, notice = await spawner._limits()
            if notice is None:
                F.check_options(opts, limits)
        except F.OptionsError as exc:
            raise web.HTTPError(400, str(exc)) from None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.task_id: int | None = None
        self._minted: tuple[str, float] | None = None
        self._events: list[dict[str, Any]] = []
        self._event_added = asyncio.Event()
        self._outage_since: float | None = None
        self._outage_warned_at: float | None = None

    # --- state --------------------------------------------------------------------------

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        if state.get("task_id") is not None:
            self.task_id = int(state["task_id"])

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        if self.task_id is not None:
            state["task_id"] = self.task_id
        return state

    def clear_state(self) -> None:
        super().clear_state()
        self.task_id = None

    # --- talking to the service ------------------------------------------------------

    def _token(self) -> str:
        given = self.tacc_api_token
        if callable(given):
            return str(given(self))
        if given:
            return str(given)
        now = time.time()
        if self._minted is None or self._minted[1] - now < min(300.0, self.token_lifetime / 4):
            token = self.user.new_api_token(note=f"TaccSpawner: {self._log_name} -> tacc service",
                                            scopes=list(self.token_scopes), expires_in=self.token_lifetime)
            self._minted = (token, now + self.token_lifetime)
        return self._minted[0]

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """One call to the service (a ``ServiceClient`` method); a minted token it refuses (401) is renewed once."""
        for attempt in (0, 1):
            client = ServiceClient(self.tacc_url, self._token(), timeout=self.request_timeout)
            try:
                return await getattr(client, method)(*args, **kwargs)
            except ApiClientError as exc:
                if exc.status == 401 and not self.tacc_api_token and attempt == 0:
                    self._minted = None
                    continue
                raise
        raise AssertionError("unreachable")

    # --- the options form -------------------------------------------------------------

    def _profiles(self) -> list[F.Profile]:
        return F.profiles_from_config(self.profiles)

    def _max_time_s(self) -> int:
        seconds = F.parse_duration_s(self.max_time_limit)
        return int(seconds) if isinstance(seconds, int) else 24 * 3600

    async def _limits(self) -> tuple[F.Limits, dict[str, Any] | None, str | None]:
        cluster = quota = None
        notice = None
        try:
            cluster, quota = await asyncio.gather(self._call("cluster"), self._call("my_quota"))
        except ApiClientError as exc:
            notice = f"The tacc service could not be asked about the cluster and your quota ({exc.message})."
        return F.Limits.from_service(cluster, quota, self._max_time_s()), quota, notice

    @staticmethod
    async def _render_options_form(spawner: Spawner) -> str:
        assert isinstance(spawner, TaccSpawner)
        limits, quota, notice = await spawner._limits()
        return F.render_form(limits, spawner._profiles(), quota, notice)

    async def _tacc_options_from_form(self, formdata: dict[str, Any]) -> dict[str, Any]:
        """Checked against the site and the quota here; the service's dry run has the last word."""
        raw = F.parse_form(formdata)
        opts = F.normalize_options(raw, self._profiles())
        limits, _, notice = await self._limits()
        if notice is None:
            F.check_options(opts, limits)
        spec = server_spec(name=task_name(self.task_name_template, self.user.name, self.name), digest="0" * 64,
                           size=0, opts=opts, qos_class=self.qos_class, python=self.python)
        try:
            await self._call("submit", spec, dry_run=True)
        except ApiClientError as exc:
            if exc.status and exc.status < 500:
                raise F.OptionsError(exc.message) from None
        return raw

    # --- start ------------------------------------------------------------------------

    def _emit(self, event: dict[str, Any]) -> None:
        if not self._events or self._events[-1].get("message") != event.get("message"):
            self._events.append(event)
            self._event_added.set()
            self.log.info("%s: %s", self._log_name, event["message"])

    async def progress(self) -> AsyncIterator[dict[str, Any]]:
        seen = 0
        while True:
            while seen < len(self._events):
                yield self._events[seen]
                seen += 1
            self._event_added.clear()
            try:
                await asyncio.wait_for(self._event_added.wait(), 1.0)
            except TimeoutError:
                pass

    def _server_config(self, opts: dict[str, Any], port: int, ip: str, bind_ip: str,
                       server_python: str | None = None) -> dict[str, Any]:
        base = list(self.cmd)
        if self.fast_start and base == ["jupyterhub-singleuser"]:
            base = [self.python, "-c", FAST_SINGLEUSER]
        cmd = [*base, *self.get_args()]
        if self.allow_root:
            cmd.append("--ServerApp.allow_root=True")
        return {
            "env": self.get_env(), "cmd": cmd, "port": port, "ip": ip, "bind_ip": bind_ip,
            **({"python": self.python, "server_python": server_python} if server_python else {}),
            "gpu": {"idle_timeout": self.gpu_idle_timeout if opts.get("gpus") else 0,
                    "threshold": self.gpu_idle_threshold, "interval": self.gpu_sample_interval,
                    "command": list(self.gpu_util_command), "report_activity": self.gpu_report_activity},
        }

    async def start(self) -> tuple[str, int]:
        began = time.monotonic()
        self._events = []
        opts = F.normalize_options(dict(self.user_options or {}), self._profiles())
        cluster = await self._call("cluster")
        local = cluster.get("executor") == "local"
        port = (self.port or random_port()) if local else 0
        ip, bind_ip = ("127.0.0.1", "127.0.0.1") if local else ("", self.bind_ip)
        name = task_name(self.task_name_template, self.user.name, self.name)
        server_python = await self._server_python(name, opts)
        digest, archive = server_snapshot(self._server_config(opts, port, ip, bind_ip, server_python))
        await self._call("upload_code", digest, archive)
        spec = server_spec(name=name, digest=digest, size=len(archive), opts=opts, qos_class=self.qos_class,
                           python=self.python)
        try:
            task = await self._call("submit", spec)
        except ApiClientError as exc:
            raise RuntimeError(f"the tacc service refused the server: {exc.message}") from None
        self.task_id = int(task["id"])
        self._emit({"progress": 10, "message": f"Submitted task {self.task_id} ({opts['gpus']} GPUs, "
                    f"{opts['time_limit']})"})
        margin = min(5.0, self.start_timeout * 0.1)
        deadline = began + self.start_timeout - margin
        offset, tail, task = 0, "", None
        while True:
            try:
                task = await self._call("show", self.task_id)
            except ApiClientError as exc:
                if exc.status not in TRANSIENT:
                    raise
                task = None
            if task is not None:
                self._emit(task_event(task))
                status = task["status"]
                if status in ENDED:
                    out = await self._log_tail(self.task_id)
                    raise RuntimeError(f"task {self.task_id} {status}"
                                       f"{': ' + task['reason'] if task.get('reason') else ''} before the server "
                                       f"started; last output: {out[-500:]!r}")
                if status == "running":
                    try:
                        chunk = await self._call("logs", self.task_id, offset)
                    except ApiClientError as exc:
                        if exc.status not in TRANSIENT:
                            raise
                        chunk = None
                    if chunk is not None:
                        offset = int(chunk["next_offset"])
                        tail = (tail + chunk["data"])[-4000:]
                        found = _listening(tail)
                        if found is not None:
                            self._emit({"progress": 80, "message": f"Server starting at {found[0]}:{found[1]}"})
                            if await self._answers(found, deadline):
                                self._emit({"progress": 95, "message": "Server is up"})
                            return found
            if time.monotonic() >= deadline:
                msg = timeout_message(task, self.start_timeout, tail)
                await self._cancel_quietly()
                self._emit({"progress": 100, "message": msg})
                raise StartTimeout(msg)
            await asyncio.sleep(self.start_poll_interval)

    async def _server_python(self, name: str, opts: dict[str, Any]) -> str | None:
        """With extra packages, the interpreter the task's venv is built from (the service's dry run says which):
        the server runs on it, so the packages cannot drop or shadow what the server needs (see ``server``)."""
        if not opts.get("requirements"):
            return None  # the task runs on that interpreter itself
        spec = server_spec(name=name, digest="0" * 64, size=0, opts=opts, qos_class=self.qos_class, python=self.python)
        try:
            dry = await self._call("submit", spec, dry_run=True)
        except ApiClientError as exc:
            raise RuntimeError(f"the tacc service refused the server: {exc.message}") from None
        env = (dry.get("plan") or {}).get("env") or {}
        return str(env["python"]) if env.get("kind") == "venv" and env.get("python") else None

    async def _answers(self, where: tuple[str, int], deadline: float) -> bool:
        """Wait (polling every ``ready_poll_interval``) until the server answers HTTP, or the task ends.

        JupyterHub checks a started server with an exponential backoff (0.2 s, 0.4 s, 0.8 s, ...
        between tries), which can find a server up to half its start time late; returning only once
        it answers lets the hub's first check succeed. False (and the hub's own wait takes over)
        when it has not answered before ``deadline`` or within ``http_timeout``.
        """
        from tornado.httpclient import AsyncHTTPClient, HTTPRequest

        base = self.server.base_url if self.server is not None else f"/user/{self.user.name}/"
        url = f"http://{where[0]}:{where[1]}{base}api"
        client = AsyncHTTPClient()
        end = min(deadline, time.monotonic() + self.http_timeout)
        checked = time.monotonic()
        while time.monotonic() < end:
            try:
                resp = await client.fetch(HTTPRequest(url, request_timeout=2.0, follow_redirects=False),
                                          raise_error=False)
                if resp.code != 599:
                    return True
            except OSError:
                pass
            if time.monotonic() - checked >= 2.0:  # the task may have died meanwhile
                checked = time.monotonic()
                try:
                    task = await self._call("show", self.task_id)
                    if task.get("status") in ENDED:
                        return False
                except ApiClientError:
                    pass
            await asyncio.sleep(self.ready_poll_interval)
        return False

    async def _log_tail(self, task_id: int) -> str:
        try:
            chunk = await self._call("logs", task_id, 0)
        except ApiClientError:
            return ""
        return str(chunk.get("data", ""))[-2000:]

    async def _cancel_quietly(self) -> None:
        if self.task_id is None:
            return
        try:
            await self._call("cancel", self.task_id)
        except ApiClientError as exc:
            if exc.status not in (404, 409):
                self.log.error("%s: could not cancel task %s: %s", self._log_name, self.task_id, exc)

    # --- poll / stop --------------------------------------------------------------------

    async def poll(self) -> int | None:
        if self.task_id is None:
            return 0
        try:
            task = await self._call("show", self.task_id)
        except ApiClientError as exc:
            if exc.status == 404:
                self.log.warning("%s: task %s is unknown to the tacc service; the server is gone",
                                 self._log_name, self.task_id)
                return 1
            self._outage(exc)
            return None
        if self._outage_since is not None:
            self.log.info("%s: the tacc service answers again after %.0f s", self._log_name,
                          time.monotonic() - self._outage_since)
            self._outage_since = self._outage_warned_at = None
        status = task.get("status")
        if status not in ENDED:
            return None
        code = task.get("exit_code")
        if code is None:
            code = 0 if status in ("succeeded", "cancelled") else 1
        self.log.info("%s: task %s %s (exit %s)%s", self._log_name, self.task_id, status, code,
                      f": {task['reason']}" if task.get("reason") else "")
        return int(code)

    def _outage(self, exc: ApiClientError) -> None:
        now = time.monotonic()
        if self._outage_since is None:
            self._outage_since = now
            self.log.debug("%s: tacc service unavailable (%s); keeping the server", self._log_name, exc)
            return
        if now - self._outage_since >= self.outage_warning_after and (
                self._outage_warned_at is None or now - self._outage_warned_at >= self.outage_warning_after):
            self._outage_warned_at = now
            self.log.warning("%s: the tacc service has not answered for %.0f s (%s); task %s is still taken to be "
                             "running", self._log_name, now - self._outage_since, exc, self.task_id)

    async def stop(self, now: bool = False) -> None:
        if self.task_id is None:
            return
        for attempt in range(5):
            try:
                await self._call("cancel", self.task_id)
                break
            except ApiClientError as exc:
                if exc.status in (404, 409):  # gone or already ended
                    return
                if exc.status not in TRANSIENT or attempt == 4:
                    self.log.error("%s: could not cancel task %s: %s", self._log_name, self.task_id, exc)
                    return
                await asyncio.sleep(0.5 * 2 ** attempt)
        if now:
            return
        deadline = time.monotonic() + self.stop_wait
        while time.monotonic() < deadline:
            try:
                task = await self._call("show", self.task_id)
                if task.get("status") in ENDED:
                    return
            except ApiClientError as exc:
                if exc.status == 404:
                    return
            await asyncio.sleep(0.2)
        self.log.warning("%s: task %s did not end within %.0f s of its cancel", self._log_name, self.task_id,
                         self.stop_wait)


def _listening(text: str) -> tuple[str, int] | None:
    for line in text.splitlines():
        if line.startswith(READY_PREFIX):
            host, _, port = line[len(READY_PREFIX):].strip().rpartition(":")
            if host and port.isdigit():
                return host, int(port)
        if line.startswith(CULLED_PREFIX):
            return None
    return None
