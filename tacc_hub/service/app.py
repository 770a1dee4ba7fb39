"""The tacc_hub service: configuration (traitlets, JupyterHub-style) and the tornado application.

Every setting is declared here with its help text; ``tacc-hub config-doc``
prints the reference generated from them (docs/config.md is that output).
Settings come from ``tacc_hub_config.py`` (``c.TaccHub.port = 8765``), the
command line (``--TaccHub.port=8765`` or the short aliases) and the
environment (``TACC_DB_URL``, ``TACC_STATE_DIR``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import shlex
import shutil
import signal
import site as pysite
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import tornado.httpserver
import tornado.web
from tornado.log import access_log
from traitlets import Bool, Dict, Enum, Float, Integer, List, Unicode, default
from traitlets.config import Application

import tacc_hub
from tacc_hub.compiler import SiteProfile
from tacc_hub.executors import Executor, LocalExecutor, SlurmExecutor
from tacc_hub.executors.identity import Identity
from tacc_hub.notify import Notifier, NotifyConfig, SitePolicy
from tacc_hub.notify.deliver import SmtpSettings
from tacc_hub.notify.settings import USER_EVENTS
from tacc_hub.notify.urlcheck import own_addresses
from tacc_hub.scheduler import native
from tacc_hub.scheduler.policies import POLICIES, make
from tacc_hub.snapshot import DEFAULT_LIMITS, CodeStore
from tacc_hub.store import Store

from . import logformat
from .arrays import ROUTES as ARRAY_ROUTES
from .audit import ROUTES as AUDIT_ROUTES
from .auth import Authenticator, TokenAuth
from .base import ServiceContext
from .cluster import ClusterHandler
from .code import CodeHandler
from .controller import Controller
from .execws import ROUTES as EXEC_ROUTES
from .gpusampler import GpuSampler
from .logs import LogsHandler, LogStreamHandler
from .meta import HealthHandler, OpenAPIHandler, WhoAmIHandler
from .metrics import Metrics
from .metrics_api import MetricsHandler
from .myusage import MyUsageHandler
from .notifications import ROUTES as NOTIFY_ROUTES
from .offload import HeavyWork
from .openapi import build_openapi
from .proxy import ROUTES as PROXY_ROUTES
from .quotas import GroupsHandler, MyQuotaHandler, QuotaHandler, QuotasHandler, UserGroupHandler
from .running import ROUTES as RUNNING_ROUTES
from .running_settings import RunningSettings
from .tasks import CancelHandler, OutputsHandler, TaskHandler, TasksHandler
from .taskusage import ROUTES as USAGE_ROUTES
from .tokens import TOKEN_ROUTES
from .usage import AdminQueueHandler, StatsHandler, UsageHandler

if TYPE_CHECKING:
    from jupyterhub.services.auth import HubOAuth

ROUTES: list[tuple[str, Any]] = [
    (r"/api/health", HealthHandler),
    (r"/api/openapi.json", OpenAPIHandler),
    (r"/api/whoami", WhoAmIHandler),
    (r"/api/tasks", TasksHandler),
    (r"/api/tasks/(\d+)", TaskHandler),
    (r"/api/tasks/(\d+)/cancel", CancelHandler),
    (r"/api/tasks/(\d+)/logs", LogsHandler),
    (r"/api/tasks/(\d+)/logs/stream", LogStreamHandler),
    (r"/api/tasks/(\d+)/outputs", OutputsHandler),
    (r"/api/code/([^/]+)", CodeHandler),
    (r"/api/cluster", ClusterHandler),
    (r"/api/quota", MyQuotaHandler),
    (r"/api/admin/quotas", QuotasHandler),
    (r"/api/admin/quotas/(?P<kind>user|group)/(?P<name>[^/]+)", QuotaHandler),
    (r"/api/admin/groups", GroupsHandler),
    (r"/api/admin/usage", UsageHandler),
    (r"/api/admin/stats", StatsHandler),
    (r"/api/admin/queue", AdminQueueHandler),
    (r"/api/usage", MyUsageHandler),
    (r"/api/admin/users/(?P<user>[^/]+)/group", UserGroupHandler),
    (r"/metrics", MetricsHandler),  # Prometheus (metrics_api.py)
    *TOKEN_ROUTES,
    *RUNNING_ROUTES,  # a running task's time and runs (running.py)
    *USAGE_ROUTES,  # its GPU samples (taskusage.py)
    *EXEC_ROUTES,  # exec and shell (execws.py)
    *PROXY_ROUTES,  # its web ports (proxy.py)
    *ARRAY_ROUTES,  # arrays and pipelines (arrays.py)
    *NOTIFY_ROUTES,  # notification settings, test and history (notifications.py)
    *AUDIT_ROUTES,  # the audit trail (audit.py)
]


def make_app(ctx: ServiceContext, base_url: str = "/", *, hub: HubOAuth | None = None,
             cookie_secret: bytes | None = None) -> tornado.web.Application:
    """The API under ``base_url``; with ``hub``, also the browser pages of hub mode (OAuth, landing page)."""
    OpenAPIHandler.document = build_openapi(ROUTES)
    prefix = base_url.rstrip("/")
    handlers: list[Any] = [(prefix + pattern, handler, {"ctx": ctx}) for pattern, handler in ROUTES]
    settings: dict[str, Any] = {}
    if hub is not None:
        from .hubpages import hub_routes  # jupyterhub takes 0.9 s to import: only in hub mode

        handlers += hub_routes(prefix, ctx)
        settings.update(hub_auth=hub, cookie_secret=cookie_secret, login_url=hub.login_url)
    app = tornado.web.Application(handlers, default_handler_class=_NotFound, default_handler_args={"ctx": ctx},
                                  log_function=log_request, **settings)
    if ctx.metrics is not None:
        ctx.metrics.instrument(app, prefix)  # every request's latency, by route pattern
    return app


def log_request(handler: tornado.web.RequestHandler) -> None:
    """Access log: successes at DEBUG (a busy hub answers thousands a second), 4xx INFO, 5xx ERROR."""
    status = handler.get_status()
    if status < 400:
        if not access_log.isEnabledFor(logging.DEBUG):
            return
        level = logging.DEBUG
    else:
        level = logging.INFO if status < 500 else logging.ERROR
    req = handler.request
    ms = 1000.0 * req.request_time()
    fields: dict[str, Any] = {"status": status, "method": req.method, "path": req.path, "remote_ip": req.remote_ip,
                              "duration_ms": round(ms, 2)}  # fields of a JSON log line (log_format json)
    rid = getattr(handler, "request_id", None)
    if rid:
        fields["request_id"] = rid
    access_log.log(level, "%d %s %s (%s) %.2fms", status, req.method, req.path, req.remote_ip, ms, extra=fields)


class _NotFound(HealthHandler):
    openapi = {}

    async def prepare(self) -> None:
        from .base import ApiError

        self._refuse_body(ApiError(404, f"no such endpoint {self.request.path[:200]!r}"))


SERVICE_COMMANDS = frozenset({"tacc-hub", "tacc-launcher"})  # never on a task's PATH (see TaccHub.task_bin)


def unsearchable(path: Path) -> Path | None:
    """The first directory on the way to ``path`` that other users cannot search (o+x), or None."""
    for d in [*reversed(path.parents), path]:
        if d.exists() and not d.stat().st_mode & 0o001:
            return d
    return None


class TaccHub(Application):
    name = "tacc-hub"
    description = "tacc_hub service: task API, scheduler and executor for a shared GPU cluster."
    version = tacc_hub.__version__

    aliases = {
        "ip": "TaccHub.ip", "port": "TaccHub.port", "state-dir": "TaccHub.state_dir", "db-url": "TaccHub.db_url",
        "gpus": "TaccHub.local_gpus", "config": "TaccHub.config_file", "log-level": "Application.log_level",
    }

    config_file = Unicode("tacc_hub_config.py", config=True,
                          help="Python config file to load (``c.TaccHub.<setting> = ...``); missing is fine.")
    ip = Unicode("127.0.0.1", config=True, help="Interface the API listens on. Use 0.0.0.0 only behind a proxy.")
    port = Integer(8765, config=True, help="TCP port of the API.")
    base_url = Unicode(config=True, help="URL prefix of every route. Default: / ; under JupyterHub, the prefix the "
                       "hub gives the service ($JUPYTERHUB_SERVICE_PREFIX, e.g. /services/tacc/).")
    auth = Enum(["auto", "token", "hub"], "auto", config=True,
                help="Who identifies callers. token: the service's own API tokens (`tacc-hub token`). hub: JupyterHub "
                     "(tokens with the custom:tacc:tasks or custom:tacc:admin scope, and the hub's OAuth for "
                     "browsers); the service's own tokens still work. auto: hub when running as a JupyterHub "
                     "service ($JUPYTERHUB_API_TOKEN and $JUPYTERHUB_API_URL set), else token. See docs/hub.md.")
    state_dir = Unicode(config=True, help="Directory for task files, logs, code snapshots and environments. "
                        "Default: $TACC_STATE_DIR or ./.tacc")
    data_dir = Unicode(config=True, help="Directory for what tasks see: tasks/<id>/ (each task's work/, output.log "
                       "and checkpoint/, owned by the task's user, mode 0700), users/<name>/ (each user's TACC_USERDIR "
                       "when it is not their home) and envs/. Kept apart from state_dir, which only the service can "
                       "enter (0700); every directory above it must be searchable by the users (o+x). Slurm: the "
                       "nodes must see it at the same path. Default: $TACC_DATA_DIR or <state_dir>-data")
    task_identity = Enum(["owner", "service"], "owner", config=True,
                         help="Who tasks run as. owner: each task (and each user's Jupyter server) runs as its "
                         "owner's Unix account (after username_map); a user without one is refused at submit "
                         "(403 \"no Unix account for 'carol' on this cluster\"). The service switches users "
                         "through tacc-launcher (as root, or through sudo: see docs/security.md). service: every "
                         "task runs as the service's own account and can read every other task's files: for one "
                         "person only; the service warns at every start. See docs/security.md.")
    username_map = Dict(config=True, help="tacc user (hub name or token user) -> Unix account name, for sites where "
                        "they differ (as JupyterHub's Authenticator.username_map). Unlisted users: the same name. "
                        "Example: {'alice@uni.edu': 'alice'}.")
    min_task_uid = Integer(1000, config=True, help="Lowest uid a task may run as (task_identity=owner): root and "
                           "system accounts below it never run tasks. tacc-launcher enforces it too.")
    launcher_command = List(Unicode(), config=True,
                            help="Command that runs tacc-launcher, the one privileged step (it starts, signals and "
                            "reaps a task's processes as their owner; see docs/security.md). Default: the launcher "
                            "itself when the service runs as root, else ['sudo', '-n', '<bin>/tacc-launcher'] (the "
                            "sudoers rule in deploy/sudoers.d/tacc-hub).")
    task_path = Unicode("/usr/local/bin:/usr/bin:/bin", config=True,
                        help="PATH a task starts with (its environment's bin directory comes first). The service's "
                        "own PATH is never passed on: its CLI and state are not a task's business.")
    slurm_account_map = Dict(config=True, help="tacc group -> Slurm account (sbatch --account), so that Slurm's "
                             "accounting (sacct, sreport) charges the right people. '*' is the fallback for unlisted "
                             "groups; '{group}' in a value is the group's name. Empty: no --account (Slurm uses the "
                             "user's default account). Example: {'nlp': 'nlp-lab', '*': '{group}'}.")
    slurm_qos_map = Dict(config=True, help="tacc group -> Slurm QOS (sbatch --qos), as slurm_account_map ('*' and "
                         "'{group}' likewise). Empty: no --qos.")
    db_url = Unicode(config=True, help="SQLAlchemy URL of the store: sqlite:///path (default, WAL mode) or "
                     "postgresql+psycopg://user@host/db. Default: $TACC_DB_URL or sqlite:///<state_dir>/tacc.sqlite")
    local_gpus = Integer(0, config=True, help="GPUs on this machine handed out by the local executor through "
                         "CUDA_VISIBLE_DEVICES (0 on a machine without GPUs: tasks must then ask for none).")
    node_name = Unicode("localhost", config=True, help="Name of the local executor's node in cluster state.")
    max_running_per_user = Integer(8, config=True, help="Most tasks one user may have starting or running at once.")
    policy = Enum(sorted(POLICIES), "tacc", config=True,
                  help="Scheduling policy (the same code the simulator replays; see `tacc-hub simulate`).")
    poll_interval = Float(1.0, config=True, help="Seconds between executor polls when nothing wakes the loop "
                          "(task exits and submissions wake it at once).")
    node_refresh_interval = Float(30.0, config=True, help="Seconds between reads of the executor's nodes (Slurm: "
                                  "sinfo and the topology), so that drained or down nodes get no new tasks and "
                                  "nodes that come back get them again; 0 reads them only at start.")
    gc_freeze_interval = Float(600.0, config=True, help="Seconds between the service's own full garbage "
                               "collections (between scheduling passes; the survivors are frozen so that the "
                               "collector's own full collections stay short); 0 leaves collection to Python.")
    grace_period = Float(10.0, config=True, help="Seconds between SIGTERM and SIGKILL when a task is cancelled.")
    log_poll_interval = Float(0.05, config=True, help="Seconds between checks of a log file for new output while "
                              "streaming it (sets the log latency floor).")
    max_body_bytes = Integer(2 * 1024 * 1024, config=True, help="Largest task spec accepted, in bytes.")
    max_code_bytes = Integer(256 * 1024 * 1024, config=True, help="Largest code snapshot accepted, in bytes "
                             "(the compressed archive; a larger upload is refused with 413 from its Content-Length, "
                             "before any of it is read).")
    max_code_unpacked_bytes = Integer(4 * 1024**3, config=True, help="Most bytes a code snapshot may unpack to; "
                                      "checked at upload while the archive is read (a gzip bomb stops there) and "
                                      "again when a task's code is unpacked.")
    max_code_members = Integer(100_000, config=True, help="Most files, directories and links in a code snapshot.")
    heavy_workers = Integer(2, config=True, help="Threads that do CPU-heavy request work off the event loop "
                            "(archive checks, YAML and large JSON specs); each user may have 2 such requests in "
                            "flight (more: 429), and 32 may wait in all (more: 503 with Retry-After).")
    datasets = Dict(config=True, help="Shared datasets: name -> path; a task lists names and finds them under "
                    "$TACC_WORKDIR/datasets/<name>. Example: {'imagenet': '/data/imagenet'}.")
    pythons = Dict(config=True, help="Extra interpreters for task envs: 'major.minor' -> path. The service's own "
                   "interpreter is always available and is the default.")
    env_builder = Enum(["auto", "uv", "pip"], "auto", config=True,
                       help="Tool that installs pip requirements into task envs; auto: uv where present, else pip.")
    inherit_packages = Bool(True, config=True, help="Let task envs see the service interpreter's packages (fast "
                            "envs when the site pre-installs large frameworks); False for fully isolated envs.")
    quota_period = Enum(["day", "week", "month"], "month", config=True,
                        help="Accounting period of GPU-hour budgets (``gpu_hours`` of a quota): usage counts from "
                        "the start of the current UTC calendar day, week (from Monday 00:00 UTC) or month (the "
                        "1st, 00:00 UTC) and starts again at zero with the next one. A budget of 100 with "
                        "'month' means 100 GPU-hours per calendar month, e.g. 4 GPUs for 25 hours.")
    quota_version = Integer(0, help="Bumped by quotas_changed() after every quota or membership change; the "
                            "scheduler reloads quotas when it moves (observe it). Not a setting.")
    executor = Enum(["local", "slurm"], "local", config=True,
                    help="Where tasks run: 'local' (process groups on this machine, one node of local_gpus GPU "
                    "slots) or 'slurm' (one batch job per task run, on the nodes and GPU counts our scheduler "
                    "chose; the cluster's nodes must see state_dir at the same path). Example: "
                    "--TaccHub.executor=slurm.")
    slurm_conf = Unicode(config=True, help="slurm.conf that every Slurm command of the service uses (exported as "
                         "SLURM_CONF to them and to the jobs). Default: $SLURM_CONF, else Slurm's own default.")
    slurm_partition = Unicode("", config=True, help="Slurm partition whose nodes the service schedules on and "
                              "submits to, unless a task names its own; empty: every partition's nodes, and the "
                              "cluster's default partition. Example: 'gpu'.")
    slurm_submit_as = Unicode("", config=True, help="Submit and cancel Slurm jobs as this user (through "
                              "`runuser -u USER --`; the service must run as root) and hand it the task "
                              "directories. Empty: as the service's own user.")
    max_time_limit = Integer(7 * 86400, config=True, help="Longest a task's run may last, in seconds, extensions "
                             "included: `tcloud extend` beyond it is refused (naming this limit).")
    gpu_sample_interval = Float(30.0, config=True, help="Seconds between samples of every running task's GPU "
                                "utilization (GET /api/tasks/ID/usage, `tcloud show`); 0 turns sampling off.")
    gpu_query_command = List(Unicode(), ["nvidia-smi", "--query-gpu=index,utilization.gpu,memory.used",
                                         "--format=csv,noheader,nounits"], config=True,
                             help="Command that prints one line 'index, utilization %, memory MiB' per GPU of the "
                             "node it runs on (nvidia-smi's CSV). Where it is missing, no samples are taken.")
    tensorboard_command = List(Unicode(), ["python", "-m", "tensorboard.main"], config=True,
                               help="The Python interpreter (with the tensorboard package) that runs TensorBoard "
                               "beside a task with `tensorboard: {logdir: ...}`, as the task's user, in its "
                               "environment (its first word found on the task's PATH); a trailing '-m "
                               "tensorboard.main' is accepted. It serves under a secret path prefix that only the "
                               "service's proxy knows (never on a command line), so a console script "
                               "('tensorboard') is refused. Empty: such tasks are refused.")
    max_exec_sessions = Integer(4, config=True, help="Exec and shell sessions one user may have open at once.")
    exec_idle_timeout = Float(3600.0, config=True, help="Seconds a shell may sit with no input or output before "
                              "the service closes it.")
    restart_backoff = Float(30.0, config=True, help="Seconds a task that asks for restarts (qos.max_restarts) waits "
                            "before its first restart; it doubles for each further one, up to 10 minutes.")
    max_requeues = Integer(3, config=True, help="Most times a task that asks for it (qos.requeue) is put back in "
                           "the queue after a node it ran on failed (Slurm NODE_FAIL); after that, or when it does "
                           "not ask, such a task fails with the node named in its reason. 0: never requeue.")
    slurm_unreachable_after = Float(60.0, config=True, help="Seconds Slurm (slurmctld) may fail to answer before "
                                    "the service stops trying to launch tasks and only probes it (`scontrol ping`, "
                                    "backing off up to 10 s). Meanwhile running tasks stay running (their state is "
                                    "unknown, never lost), new tasks wait with the reason 'Slurm unreachable since "
                                    "HH:MM:SS UTC (N failed tries)', and they launch once Slurm answers again. A "
                                    "launch that cannot reach Slurm, sooner, also makes its task wait again.")
    slurm_node_python = Unicode("", config=True, help="Interpreter that runs tacc_hub's environment step on the "
                                "Slurm nodes (python -m tacc_hub.executors.prepare_env builds a task's venv/conda env "
                                "as the job's first step); it must see this tacc_hub at the same path. Default: the "
                                "service's own interpreter (a shared file system).")
    conda_command = Unicode("", config=True, help="conda or micromamba executable for conda specs; default: found "
                            "on PATH, else conda specs are refused with a clear error.")

    # -- notifications (tacc_hub/notify, docs/notifications.md) --
    smtp_host = Unicode("", config=True, help="SMTP server that e-mails notifications (host name). Empty: no "
                        "e-mail; users may then set only webhooks. Example: 'smtp.uni.edu'.")
    smtp_port = Integer(587, config=True, help="TCP port of smtp_host: 587 for STARTTLS (submission), 465 for "
                        "implicit TLS, 25 for a relay on a trusted network.")
    smtp_security = Enum(["starttls", "ssl", "none"], "starttls", config=True,
                         help="How the connection to smtp_host is encrypted: starttls (upgrade after connecting; "
                         "port 587), ssl (TLS from the first byte; port 465) or none (a local relay only: the "
                         "password, if any, would cross the network in clear).")
    smtp_from = Unicode("tacc@localhost", config=True, help="From: address of notification e-mails. Example: "
                        "'GPU cluster <tacc-noreply@uni.edu>'.")
    smtp_user = Unicode("", config=True, help="User name to log in to smtp_host with; empty: no login.")
    smtp_password_file = Unicode("", config=True, help="File holding the SMTP password (its first line), read at "
                                 "start, so the password stays out of the config file and the process list; keep "
                                 "it mode 0600. Example: '/etc/tacc-hub/smtp-password'.")
    notify_webhooks = Bool(True, config=True, help="Whether users may set webhooks (a JSON POST in the generic, "
                           "Slack or Teams shape). Off: e-mail only.")
    notify_webhook_hosts = List(Unicode(), config=True,
                                help="Webhook hosts exempt from the address rule: 'host' or 'host:port' patterns, "
                                "'*' as a wildcard (e.g. 'hooks.internal.uni.edu', '*.webhook.office.com', "
                                "'10.1.2.3:8080'). By default a webhook URL must lead only to public addresses: "
                                "never loopback, link-local (169.254.169.254), private, multicast or reserved ones "
                                "nor the service's own, checked when it is saved and again at each delivery (so "
                                "that DNS rebinding reaches nothing); this list lets a site allow its own chat "
                                "server on a private network.")
    notify_webhook_hosts_only = Bool(False, config=True, help="Accept only webhooks whose host matches "
                                     "notify_webhook_hosts (a strict allow-list, e.g. ['hooks.slack.com', "
                                     "'*.webhook.office.com']).")
    notify_events = List(Unicode(), ["started", "ended", "failed", "preempted", "near_limit", "cancelled"],
                         config=True, help="Events users may be told of: started, ended (succeeded), failed "
                         "(failed, lost, timed out), preempted (preempted or requeued), near_limit (the task's "
                         "SIGUSR1 warning, qos.warn_before, default 5 minutes before its time limit), cancelled. "
                         "Empty: notifications are off.")
    notify_max_webhooks = Integer(5, config=True, help="Most webhooks one user may set (each event is POSTed to "
                                  "each of them).")
    notify_email_domains = List(Unicode(), config=True, help="Domains users may have notifications e-mailed to "
                                "(subdomains included), e.g. ['uni.edu']; empty: any. Keeps the service from being "
                                "a way to mail strangers.")
    notify_rate_per_minute = Integer(20, config=True, help="Most notifications one user gets a minute (events; "
                                     "each goes to all their channels). Beyond it they are dropped and counted, and "
                                     "the next one says how many were; so that an array of 1,000 tasks cannot make "
                                     "the service spam.")
    notify_retry_delays = List(Float(), [30.0, 120.0, 600.0, 1800.0], config=True,
                               help="Seconds to wait before each retry of a delivery that failed (the length is the "
                               "number of retries); after the last one it is marked failed, with its last error "
                               "in the user's history (tcloud notify history). Default: 30 s, 2, 10 and 30 min.")
    notify_timeout = Float(10.0, config=True, help="Seconds one delivery try (SMTP conversation or webhook POST) "
                           "may take before it counts as failed; a slow endpoint holds up only its own "
                           "notifications, and one delivery slot for at most this long.")
    notify_concurrency = Integer(16, config=True, help="Most deliveries tried at once, all destinations together "
                                 "(each destination has at most one try in flight).")
    notify_task_link = Unicode("", config=True, help="Link to a task put in each notification; '{id}' is replaced "
                               "by its id. Example: 'https://hub.uni.edu/services/tacc/api/tasks/{id}'. Empty: "
                               "no link.")
    log_format = Enum(["text", "json"], "text", config=True,
                      help="How the service writes its log lines (stderr), the access log included. text: for "
                      "people ('2026-12-03 18:40:02,114 INFO tornado.access [5f0c2a9e41d7b386]: 403 GET "
                      "/api/admin/audit (127.0.0.1) 1.92ms', the request id in brackets). json: one JSON object "
                      "per line, for a log collector (Loki, Elasticsearch, journald): {\"time\": "
                      "\"2026-12-03T18:40:02.114+00:00\", \"level\": \"INFO\", \"logger\": \"tornado.access\", "
                      "\"message\": \"403 GET /api/admin/audit (127.0.0.1) 1.92ms\", \"request_id\": "
                      "\"5f0c2a9e41d7b386\", \"status\": 403, ...}; a traceback is in \"exception\". Every "
                      "line written in a request carries its id (the X-Request-Id response header). See "
                      "docs/audit.md.")

    @default("log_level")
    def _log_level(self) -> int:
        return logging.INFO  # the access log and the startup lines; --log-level=WARN silences them

    @default("base_url")
    def _base_url(self) -> str:
        return os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/") if self.hub_mode else "/"

    @property
    def hub_mode(self) -> bool:
        if self.auth == "auto":
            return bool(os.environ.get("JUPYTERHUB_API_TOKEN") and os.environ.get("JUPYTERHUB_API_URL"))
        return self.auth == "hub"

    def cookie_secret(self) -> bytes:
        """The key of the OAuth cookie (hub mode), kept in the state directory so a restart logs nobody out."""
        path = Path(self.state_dir) / "cookie_secret"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(32))
        return path.read_text().strip().encode()

    @default("state_dir")
    def _state_dir(self) -> str:
        return os.environ.get("TACC_STATE_DIR") or os.path.abspath(".tacc")

    @default("data_dir")
    def _data_dir(self) -> str:
        return os.environ.get("TACC_DATA_DIR") or str(Path(self.state_dir).resolve()) + "-data"

    @default("slurm_conf")
    def _slurm_conf(self) -> str:
        return os.environ.get("SLURM_CONF", "")

    @default("db_url")
    def _db_url(self) -> str:
        return os.environ.get("TACC_DB_URL") or f"sqlite:///{Path(self.state_dir).resolve() / 'tacc.sqlite'}"

    def initialize(self, argv: list[str] | None = None) -> None:
        self.parse_command_line(argv)
        if self.config_file and Path(self.config_file).exists():
            self.load_config_file(self.config_file)
            self.parse_command_line(argv)  # the command line wins over the file
        self._configure_logging()
        logging.getLogger("alembic").setLevel(logging.WARNING)  # "Context impl SQLiteImpl" on every start

    def _configure_logging(self) -> None:
        """One handler on the root logger for every line, in ``log_format`` (:mod:`.logformat`); traitlets' own
        handler for this application's logger (whose format template ``log_format`` was) is not used."""
        level = self.log_level  # --log-level / c.Application.log_level (traitlets turns a name into its number)
        logformat.configure(level if isinstance(level, int | str) else logging.INFO, self.log_format)
        own = logging.getLogger(type(self).__name__)
        own.propagate = True  # self.log: through the root's handler, as every other logger
        self._logging_configured = True

    def quotas_changed(self) -> None:
        """Quotas or memberships were changed through the API: let the live scheduler reload them."""
        self.quota_version += 1

    def make_executor(self) -> Executor:
        root = Path(self.state_dir).resolve()
        executor: Executor
        if self.executor == "slurm":
            executor = SlurmExecutor(self.data_root(), partition=self.slurm_partition or None,
                                     slurm_conf=self.slurm_conf or None, submit_as=self.slurm_submit_as or None,
                                     grace_period=self.grace_period, unreachable_after=self.slurm_unreachable_after,
                                     node_python=self.slurm_node_python or None,
                                     account_map={str(k): str(v) for k, v in self.slurm_account_map.items()},
                                     qos_map={str(k): str(v) for k, v in self.slurm_qos_map.items()},
                                     control_dir=root / "run", task_path=self.task_path)
            executor.identity = self.identity()
            return executor
        return LocalExecutor(self.data_root(), run_dir=root / "run", identity=self.identity(),
                             launcher=list(self.launcher_command) or None, gpus=self.local_gpus,
                             node_name=self.node_name, grace_period=self.grace_period, task_path=self.task_path)

    def identity(self) -> Identity:
        mode: Literal["owner", "service"] = "owner" if self.task_identity == "owner" else "service"
        return Identity(mode=mode, username_map=dict(self.username_map), min_uid=self.min_task_uid)

    def data_root(self) -> Path:
        """``data_dir``, made (0711: users reach their own entries, list nobody's)."""
        data = Path(self.data_dir).resolve()
        data.mkdir(parents=True, exist_ok=True)
        data.chmod(0o711)  # searchable, not listable
        return data

    def task_bin(self) -> Path:
        """``<data_dir>/bin``: a task's view of the service's interpreter, first on the PATH of tasks that use it.

        One wrapper per command of the interpreter's bin directory (python, pip, torchrun, jupyter, ...) that
        execs it, except the service's own commands (``tacc-hub``, ``tacc-launcher``) and the activate scripts:
        the service's CLI is no task's business. Made again at every start.
        """
        real = Path(sys.executable).parent
        out = self.data_root() / "bin"
        out.mkdir(exist_ok=True)
        out.chmod(0o755)
        wanted: set[str] = set()
        for entry in sorted(real.iterdir()):
            name = entry.name
            if name in SERVICE_COMMANDS or name.lower().startswith("activate") or not os.access(entry, os.X_OK) \
                    or entry.is_dir():
                continue
            wanted.add(name)
            text = f"#!/bin/sh\nexec {shlex.quote(str(entry))} \"$@\"\n"
            path = out / name
            if not path.is_file() or path.is_symlink() or path.read_text() != text:
                tmp = out / f".{name}.tmp"
                tmp.write_text(text)
                tmp.chmod(0o755)
                tmp.replace(path)
        for stale in out.iterdir():
            if stale.name not in wanted and not stale.name.startswith("."):
                stale.unlink()
        return out

    def check_identity(self) -> None:
        """Owner identity needs a way to switch users and a data_dir every user can reach; say so at start."""
        if self.task_identity == "service":
            self.log.warning("task_identity is 'service': every task runs as this service's account (uid %d) and "
                             "can read every other task's files and the service's own; this is for one person "
                             "only (see docs/security.md)", os.geteuid())
            return
        if os.geteuid() != 0 and not self.launcher_command and not shutil.which("sudo"):
            raise SystemExit("tacc-hub: task_identity 'owner' runs tasks as their owners, which needs root or sudo "
                             "(deploy/sudoers.d/tacc-hub); neither is available. Set "
                             "--TaccHub.task_identity=service to run every task as this account (one person only).")
        blocked = unsearchable(Path(self.data_dir).resolve())
        if blocked is not None:
            raise SystemExit(f"tacc-hub: task_identity 'owner': other users cannot reach data_dir {self.data_dir}: "
                             f"{blocked} is not searchable by them (chmod o+x, or choose another data_dir)")

    def site_profile(self, executor: Executor | None = None) -> SiteProfile:
        """What the compiler checks specs against; with the Slurm executor, limits come from its nodes."""
        root = Path(self.state_dir).resolve()
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        pythons = {version: str(self.task_bin() / f"python{version}"),
                   **{str(k): str(v) for k, v in self.pythons.items()}}
        builder = self.env_builder
        if builder == "auto":
            builder = "uv" if shutil.which("uv") else "pip"
        conda = self.conda_command or shutil.which("micromamba") or shutil.which("conda")
        inherit = [p for p in pysite.getsitepackages() if Path(p).is_dir()] if self.inherit_packages else []
        return SiteProfile(
            name=self.node_name, pythons=pythons, default_python=version,
            env_root=str(Path(self.data_dir).resolve() / "envs"),
            code_root=str(root / "code"), env_builder=builder, conda_command=conda or None,
            inherit_packages=inherit, datasets={str(k): str(v) for k, v in self.datasets.items()},
            tensorboard_command=[str(w) for w in self.tensorboard_command], **self._limits(executor),
        )

    def _limits(self, executor: Executor | None) -> dict[str, Any]:
        if self.executor != "slurm" or executor is None:
            return {"max_nodes": 1, "max_gpus_per_node": self.local_gpus}
        nodes = executor.nodes()
        return {
            "max_nodes": max(1, len(nodes)), "max_gpus_per_node": max((n.gpus for n in nodes), default=0),
            "partitions": sorted({n.partition for n in nodes if n.partition}),
            "gpu_types": sorted({n.gpu_type for n in nodes if n.gpu_type}),
        }

    def running_settings(self) -> RunningSettings:
        return RunningSettings(
            max_time_limit=self.max_time_limit, gpu_sample_interval=self.gpu_sample_interval,
            gpu_query_command=tuple(self.gpu_query_command),
            max_exec_sessions=self.max_exec_sessions, exec_idle_timeout=self.exec_idle_timeout)

    def notify_config(self) -> NotifyConfig:
        """The notifier's settings from the ``smtp_*`` and ``notify_*`` ones."""
        password = ""
        if self.smtp_password_file:
            lines = Path(self.smtp_password_file).read_text().splitlines()
            password = lines[0] if lines else ""
        site = SitePolicy(email=bool(self.smtp_host), webhooks=self.notify_webhooks,
                          events=tuple(e for e in USER_EVENTS if e in self.notify_events),
                          max_webhooks=self.notify_max_webhooks, email_domains=tuple(self.notify_email_domains),
                          webhook_hosts=tuple(self.notify_webhook_hosts),
                          webhook_hosts_only=self.notify_webhook_hosts_only, own_addresses=own_addresses(self.ip))
        smtp = SmtpSettings(host=self.smtp_host, port=self.smtp_port, sender=self.smtp_from,
                            security=self.smtp_security, user=self.smtp_user, password=password)
        return NotifyConfig(site=site, smtp=smtp, retry_delays=tuple(self.notify_retry_delays),
                            timeout=self.notify_timeout, concurrency=self.notify_concurrency,
                            rate_per_minute=self.notify_rate_per_minute, task_link=self.notify_task_link)

    def open_store(self) -> Store:
        Path(self.state_dir).mkdir(parents=True, exist_ok=True)
        Path(self.state_dir).chmod(0o700)  # the store, tokens, cookie secret, code store: the service's alone
        store = Store(self.db_url)
        store.migrate()
        return store

    def build(self) -> tuple[ServiceContext, tornado.web.Application]:
        store = self.open_store()
        root = Path(self.state_dir).resolve()
        executor = self.make_executor()
        code_store = CodeStore(root / "code")
        controller = Controller(store, executor, self.site_profile(executor), make(self.policy), code_store,
                                poll_interval=self.poll_interval, max_running_per_user=self.max_running_per_user,
                                quota_period=self.quota_period, max_requeues=self.max_requeues,
                                node_refresh_interval=self.node_refresh_interval,
                                gc_freeze_interval=self.gc_freeze_interval)

        def changed() -> None:
            self.quotas_changed()
            controller.quotas_changed()

        metrics = Metrics()  # its own registry; reads the controller at scrape time (metrics.py)
        metrics.watch(controller, self.quota_period)
        tokens = TokenAuth(store)
        hub: HubOAuth | None = None
        auth: Authenticator = tokens
        if self.hub_mode:
            from jupyterhub.services.auth import HubOAuth

            from .hubauth import HubModeAuth

            # the instance that HubOAuthCallbackHandler and the pages use (HubOAuth.instance()): one store of OAuth
            # states, so a login begun elsewhere (the port proxy) finds its PKCE verifier at oauth_callback
            hub = HubOAuth.instance(cache_max_age=30)
            auth = HubModeAuth(tokens, hub)
        limits = replace(DEFAULT_LIMITS, max_bytes=self.max_code_bytes,
                         max_unpacked_bytes=self.max_code_unpacked_bytes, max_members=self.max_code_members)
        ctx = ServiceContext(store=store, controller=controller, auth=auth, code_store=code_store,
                             max_code_bytes=self.max_code_bytes,
                             max_body_bytes=self.max_body_bytes, log_poll_interval=self.log_poll_interval,
                             quota_period=self.quota_period, quotas_changed=changed,
                             heavy=HeavyWork(workers=self.heavy_workers), archive_limits=limits,
                             running=self.running_settings(), metrics=metrics,
                             notifier=Notifier(store, self.notify_config()))
        controller.events.subscribe(ctx.notifier.on_event)  # type: ignore[union-attr]
        metrics.watch_notifier(ctx.notifier)  # type: ignore[arg-type]
        controller.running = ctx.running
        controller.restart_backoff = self.restart_backoff
        return ctx, make_app(ctx, self.base_url, hub=hub, cookie_secret=self.cookie_secret() if hub else None)

    async def serve(self) -> None:
        self.check_identity()
        ctx, app = self.build()
        if ctx.metrics is not None:
            ctx.metrics.count_start(Path(self.state_dir))  # tacc_service_starts_total survives restarts
        await ctx.controller.start()
        if ctx.notifier is not None:
            await ctx.notifier.start()
        sampler = GpuSampler(ctx)
        sampler.start()
        # Every API handler streams its body and sets its own limit before reading any of it (see base.py);
        # a body must arrive within 5 minutes, and a connection idle for 75 s between requests is closed.
        server = tornado.httpserver.HTTPServer(app, max_body_size=max(self.max_body_bytes, self.max_code_bytes),
                                               xheaders=True, idle_connection_timeout=75, body_timeout=300)
        server.listen(self.port, self.ip)
        self.log.info("tacc_hub %s listening on http://%s:%s%s (state in %s)", self.version, self.ip, self.port,
                      self.base_url, self.state_dir)
        self.log.info("scheduler: policy %s, %s", self.policy, native.status())
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        self.log.info("stopping; running tasks keep running and are re-adopted at the next start")
        server.stop()
        ctx.heavy.close()
        await sampler.stop()
        await ctx.controller.stop()
        if ctx.notifier is not None:
            await ctx.notifier.stop()  # after the controller: its last events are written to the outbox
        ctx.store.close()
        await self._abandon_leftovers()

    async def _abandon_leftovers(self, wait: float = 5.0) -> None:
        """Cancel what still runs on the loop (request handlers, executor commands) and wait ``wait`` seconds;
        one that ignores its cancellation is named in the log and left: the process exits anyway, since
        asyncio.run would wait for it forever (seen with Slurm commands in flight), and tasks do not depend on
        the service's process."""
        me = asyncio.current_task()
        pending = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
        for t in pending:
            t.cancel()
        if not pending:
            return
        _, stuck = await asyncio.wait(pending, timeout=wait)
        if stuck:  # asyncio.run's own clean-up would wait for them forever: exit now, everything else is closed
            self.log.warning("stopping: %d piece(s) of work did not end when cancelled, left behind: %s", len(stuck),
                             "; ".join(repr(t.get_coro())[:200] for t in stuck))
            logging.shutdown()
            os._exit(0)

    def start(self) -> None:
        asyncio.run(self.serve())
