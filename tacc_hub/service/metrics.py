"""Prometheus metrics of the service: what ``GET /metrics`` exposes (see docs/metrics.md).

One :class:`Metrics` per service, with a registry of its own (never prometheus_client's global
one: tests and several apps in one process do not collide). Two kinds of series:

- Counters and histograms are updated where things happen: a request ends (the application's
  log function, :meth:`Metrics.instrument`), a scheduling pass ends (``Controller.pass_observer``),
  an executor command returns (``Executor.command_observer``), a task event is emitted
  (``controller.events``), a log stream opens or closes. Each is an in-memory increment.
- Gauges of state (tasks by state, the queue by reason, GPUs by node, switch, group and user,
  GPU-hours this period) are computed at scrape time by :class:`StateCollector` from the
  controller's in-memory view, plus one grouped count of the store's tasks by status: the
  scheduling pass and the request path pay nothing for them.

Invariants: no label value comes from request text (routes are the matched pattern, methods a
fixed set, status a class like ``2xx``), so no caller can grow the number of series; a metric
that fails never fails the request or pass that fed it.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import tornado.web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from tacc_hub.scheduler.policy import REASONS, Explanation
from tacc_hub.store import DEFAULT_GROUP

from .events import EVENT_KINDS, TaskEvent

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from tacc_hub.notify import Notifier

    from .controller import Controller

log = logging.getLogger("tacc_hub.metrics")

QUEUE_REASONS: tuple[str, ...] = (*REASONS, "Dependency", "ArrayLimit", "Backoff", "Unavailable", "Queued")
"""Why waiting tasks wait, as the queue explains it (``scheduler.policy.REASONS``), and the service's own:
``Dependency``/``ArrayLimit`` (gated, ``groups``), ``Backoff`` (a restart's wait, ``recovery``),
``Unavailable`` (the cluster cannot be reached), ``Queued`` (submitted since the last explanation)."""
EXPLAIN_MAX_AGE = 5.0
"""Seconds: a scrape reuses the queue's explanations up to this old instead of computing them again."""
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
SUBMIT_ROUTES = frozenset({"/api/tasks", "/api/arrays", "/api/pipelines"})
STARTS_FILE = "service_starts"
"""In ``state_dir``: how many times the service started on it (``tacc_service_starts_total``)."""

API_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
PASS_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
COMMAND_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

_NAMED = re.compile(r"\(\?P<(\w+)>")


def route_label(pattern: str) -> str:
    """A route's label: its pattern with each group (nested ones included) named as the OpenAPI document
    names it, e.g. ``/api/tasks/(\\d+)/logs$`` -> ``/api/tasks/{id}/logs``; a trailing ``/?`` dropped."""
    path = pattern.rstrip("$")
    path = path[:-2] if path.endswith("/?") else path
    default = "digest" if "/code/" in path else "id"
    out: list[str] = []
    depth, i = 0, 0
    while i < len(path):
        c = path[i]
        if c == "\\":  # an escaped character: itself outside a group, skipped inside one
            if depth == 0 and i + 1 < len(path):
                out.append(path[i + 1])
            i += 2
            continue
        if c == "(":
            if depth == 0:
                m = _NAMED.match(path, i)
                out.append("{" + (m.group(1) if m else default) + "}")
            depth += 1
        elif c == ")":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(c)
        i += 1
    return "".join(out) or "/"


def count_start(state_dir: Path) -> int:
    """Add this start to ``state_dir/service_starts`` (made 0600 when missing) and return the new count."""
    path = state_dir / STARTS_FILE
    try:
        n = int(path.read_text().strip() or 0) + 1 if path.exists() else 1
    except (OSError, ValueError):
        n = 1  # unreadable or not a number: start counting again rather than not start
    tmp = path.with_name(f".{STARTS_FILE}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(f"{n}\n")
    tmp.replace(path)
    return n


class Metrics:
    """The service's registry and the series that are updated as things happen."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        ProcessCollector(registry=r)
        self.api_latency = Histogram(
            "tacc_api_request_duration_seconds", "Time to answer an HTTP request, by route pattern (never the raw "
            "path), method and status class (2xx, 4xx, ...). A log stream counts until it closes.",
            ["route", "method", "status"], buckets=API_BUCKETS, registry=r)
        self.submit_latency = Histogram(
            "tacc_submit_duration_seconds", "Time to accept a submission (POST /api/tasks, /api/arrays or "
            "/api/pipelines answered 2xx): checks, compile, store.", ["route"], buckets=API_BUCKETS, registry=r)
        self.pass_duration = Histogram(
            "tacc_scheduling_pass_duration_seconds", "Time of one pass of the controller's loop: observe the "
            "executor, enforce limits, schedule.", buckets=PASS_BUCKETS, registry=r)
        self.command_latency = Histogram(
            "tacc_executor_command_duration_seconds", "Time of an executor command (Slurm: sbatch, squeue, "
            "scancel, sinfo, scontrol, srun; local: launcher-start, launcher-cancel, launcher-kill), failed or not.",
            ["command"], buckets=COMMAND_BUCKETS, registry=r)
        self.command_failures = Counter(
            "tacc_executor_command_failures", "Executor commands that failed (non-zero exit, timeout, could not "
            "start), by command.", ["command"], registry=r)
        self.log_streams = Gauge("tacc_log_streams_open", "Log streams (server-sent events) open now.", registry=r)
        self.task_events = Counter(
            "tacc_task_events", "Task lifecycle events by kind (submitted, started, succeeded, failed, cancelled, "
            "lost, timeout, preempted, requeued, near_limit) since the service started.", ["kind"], registry=r)
        for kind in EVENT_KINDS:
            self.task_events.labels(kind)  # every kind is a series from the start, at 0
        self.lost_after_recovery = Counter(
            "tacc_recovery_lost_tasks", "Tasks re-adopted at this start that were then found lost (the executor "
            "could not find them).", registry=r)
        self.starts = 0  # times the service started on its state dir (count_start), 0 until serve() counts it
        self.started_at = time.time()
        self.routes: dict[type, str] = {}
        self.controller: Controller | None = None

    # --- wiring ---------------------------------------------------------------------------

    def watch(self, controller: Controller, quota_period: str) -> None:
        """Read the controller's state at scrape time, and count its events, passes and executor commands."""
        self.controller = controller
        self.registry.register(StateCollector(self, controller, quota_period))
        controller.events.subscribe(self.on_event)
        controller.pass_observer = self.pass_duration.observe
        controller.executor.command_observer = self.observe_command

    def watch_notifier(self, notifier: Notifier) -> None:
        """Count the notifier's deliveries at scrape time (its own in-memory counts)."""
        self.registry.register(NotifyCollector(notifier))

    def count_start(self, state_dir: Path) -> None:
        """This process is a start of the service on ``state_dir`` (kept there: it survives restarts)."""
        try:
            self.starts = count_start(state_dir)
        except OSError as exc:
            log.warning("could not count this start in %s: %s", state_dir / STARTS_FILE, exc)
            self.starts = max(1, self.starts)
        self.started_at = time.time()

    def instrument(self, app: tornado.web.Application, prefix: str) -> None:
        """Observe every request ``app`` answers (its log function; websockets and pages included), labelled by
        the route pattern it matched under ``prefix``."""
        for rule in app.wildcard_router.rules:
            regex = getattr(rule.matcher, "regex", None)
            if regex is None or not isinstance(rule.target, type):
                continue
            path = regex.pattern
            path = path[len(prefix):] if prefix and path.startswith(prefix) else path
            self.routes.setdefault(rule.target, route_label(path))
        logged: Callable[[tornado.web.RequestHandler], None] | None = app.settings.get("log_function")

        def log_function(handler: tornado.web.RequestHandler) -> None:
            if logged is not None:
                logged(handler)
            self.observe_request(handler)

        app.settings["log_function"] = log_function

    # --- observations ---------------------------------------------------------------------

    def observe_request(self, handler: tornado.web.RequestHandler) -> None:
        try:
            route = self.routes.get(type(handler), "unmatched")
            method = handler.request.method or ""
            method = method if method in METHODS else "other"
            status = handler.get_status()
            seconds = handler.request.request_time()
            self.api_latency.labels(route, method, f"{status // 100}xx").observe(seconds)
            if method == "POST" and route in SUBMIT_ROUTES and 200 <= status < 300:
                self.submit_latency.labels(route).observe(seconds)
        except Exception:  # never fail a request for its metrics
            log.exception("observing a request failed")

    def observe_command(self, command: str, seconds: float, ok: bool) -> None:
        self.command_latency.labels(command).observe(seconds)
        failures = self.command_failures.labels(command)  # a series from the first run on, at 0 until one fails
        if not ok:
            failures.inc()

    def on_event(self, event: TaskEvent) -> None:
        self.task_events.labels(event.kind).inc()
        ctl = self.controller
        if event.kind == "lost" and ctl is not None and event.task_id in ctl.adopted:
            self.lost_after_recovery.inc()

    def stream_opened(self) -> None:
        self.log_streams.inc()

    def stream_closed(self) -> None:
        self.log_streams.dec()


class StateCollector(Collector):
    """Gauges read at scrape time from the controller's in-memory view (and one grouped count of the store)."""

    def __init__(self, metrics: Metrics, controller: Controller, quota_period: str) -> None:
        self.metrics = metrics
        self.ctl = controller
        self.period = quota_period

    def collect(self) -> Iterator[Metric]:
        yield from self._service()
        yield from self._tasks()
        yield from self._queue(time.time())
        yield from self._gpus()
        yield from self._usage()

    def _service(self) -> Iterator[Metric]:
        m = self.metrics
        yield CounterMetricFamily("tacc_service_starts", "Times the service started on its state directory (kept "
                                  "in state_dir/service_starts: it survives restarts); restarts = this - 1.",
                                  value=m.starts)
        yield GaugeMetricFamily("tacc_service_start_time_seconds", "When this service process started (Unix time).",
                                value=m.started_at)
        yield GaugeMetricFamily("tacc_recovery_readopted_tasks", "Tasks found starting, running or cancelling at "
                                "this start and watched again (re-adopted).", value=len(self.ctl.adopted))

    def _tasks(self) -> Iterator[Metric]:
        g = GaugeMetricFamily("tacc_tasks", "Tasks in the store by state (every state, 0 included).", labels=["state"])
        for status, n in self.ctl.store.counts_by_status().items():
            g.add_metric([str(status)], n)
        yield g

    def _queue(self, now: float) -> Iterator[Metric]:
        ctl = self.ctl
        count = dict.fromkeys(QUEUE_REASONS, 0)
        first = dict.fromkeys(QUEUE_REASONS, now)  # the earliest time a task of each reason entered the queue

        def add(reason: str, since: float) -> None:
            count[reason] = count.get(reason, 0) + 1
            if since < first.get(reason, now):
                first[reason] = since

        waiting = ctl.queue.waiting
        if ctl.launch_hold is not None:
            for t in waiting.values():
                add("Unavailable", t.queued or t.submit)
        else:  # one pass over the queue (9,000 waiting: a few ms), no call per task
            explained = self._explained(now)
            for tid, t in waiting.items():
                e = explained.get(tid)
                r = e.reason if e is not None else "Queued"
                count[r] = count.get(r, 0) + 1
                since = t.queued or t.submit
                if since < first.get(r, now):
                    first[r] = since
        for tid, gate in ctl.gated.items():
            info = ctl.gate_info(tid)
            add(info.reason if info is not None else "Dependency", gate.view.queued or gate.view.submit)
        for _, view in ctl.held.values():
            add("Backoff", view.queued or view.submit)
        oldest = {r: max(0.0, now - t) for r, t in first.items()}
        length = GaugeMetricFamily("tacc_queue_length", "Waiting tasks by why they wait (the queue's explanation: "
                                   "Resources, Quota, Priority, Topology, OverQuota, Dependency, ArrayLimit, "
                                   "Backoff, Unavailable, Queued).", labels=["reason"])
        wait = GaugeMetricFamily("tacc_queue_oldest_wait_seconds", "How long the longest-waiting task of each "
                                 "reason has waited (since it last entered the queue), seconds; 0 when none.",
                                 labels=["reason"])
        for reason in sorted(count):
            length.add_metric([reason], count[reason])
            wait.add_metric([reason], round(oldest[reason], 3))
        yield length
        yield wait

    def _explained(self, now: float) -> dict[int, Explanation]:
        """The queue's explanations: the controller's last ones when at most EXPLAIN_MAX_AGE s old (the API's
        reads keep them fresh on a busy service), else computed now (~40 ms at 9,000 waiting tasks)."""
        ctl = self.ctl
        if not ctl.queue.waiting:
            return {}
        if 0 <= now - ctl._explained_at <= EXPLAIN_MAX_AGE:
            return ctl._explained
        return ctl.explanations()

    def _gpus(self) -> Iterator[Metric]:
        ctl = self.ctl
        alloc = GaugeMetricFamily("tacc_node_gpus_allocated", "GPUs of a node held by the service's tasks, by "
                                  "node and its switch.", labels=["node", "switch"])
        free = GaugeMetricFamily("tacc_node_gpus_free", "GPUs of a node free for new tasks (neither held by ours "
                                 "nor by jobs outside the service), by node and switch; 0 on an unschedulable node.",
                                 labels=["node", "switch"])
        for node in ctl.cluster.nodes.values():
            alloc.add_metric([node.name, node.switch], len(node.holders))
            free.add_metric([node.name, node.switch], len(node.free) if node.schedulable else 0)
        users: dict[str, int] = {}
        groups: dict[str, int] = {}
        for t in ctl.queue.running.values():
            users[t.owner] = users.get(t.owner, 0) + t.gpus
            groups[t.group] = groups.get(t.group, 0) + t.gpus
        by_user = GaugeMetricFamily("tacc_user_gpus_allocated", "GPUs held by each user's tasks (users holding "
                                    "none are left out).", labels=["user"])
        by_group = GaugeMetricFamily("tacc_group_gpus_allocated", "GPUs held by each group's tasks (groups holding "
                                     "none are left out).", labels=["group"])
        for user, n in sorted(users.items()):
            by_user.add_metric([user], n)
        for group, n in sorted(groups.items()):
            by_group.add_metric([group], n)
        yield alloc
        yield free
        yield by_user
        yield by_group

    def _usage(self) -> Iterator[Metric]:
        ctl = self.ctl
        hours = dict.fromkeys((DEFAULT_GROUP, *ctl.groups.values()), 0.0)  # every known group, 0 included
        for owner, seconds in ctl.usage.items():
            g = ctl.groups.get(owner, DEFAULT_GROUP)
            hours[g] = hours.get(g, 0.0) + seconds / 3600.0
        fam = GaugeMetricFamily("tacc_group_gpu_hours_used", "GPU-hours each group's tasks used this quota period "
                                "(running ones up to the last re-count, at most quota_refresh = 30 s old), as the "
                                "quotas count them; every group with members, and default.", labels=["group", "period"])
        for group, h in sorted(hours.items()):
            fam.add_metric([group, self.period], round(h, 6))
        yield fam



class NotifyCollector(Collector):
    """Notification deliveries since the service started, read from the notifier at scrape time."""

    OUTCOMES = ("sent", "retry", "failed")
    CHANNELS = ("email", "webhook")

    def __init__(self, notifier: Notifier) -> None:
        self.notifier = notifier

    def collect(self) -> Iterator[Metric]:
        c = CounterMetricFamily("tacc_notification_tries", "Notification delivery tries since the service started, "
                                "by channel (email, webhook) and outcome: sent, retry (failed, tried again "
                                "later), failed (failed for good: the user's history says why).",
                                labels=["channel", "outcome"])
        for channel in self.CHANNELS:
            for outcome in self.OUTCOMES:
                c.add_metric([channel, outcome], self.notifier.tries.get((channel, outcome), 0))
        yield c
        yield CounterMetricFamily("tacc_notifications_dropped", "Notifications dropped over a user's rate cap "
                                  "(notify_rate_per_minute) since the service started.",
                                  value=self.notifier.dropped_total)
