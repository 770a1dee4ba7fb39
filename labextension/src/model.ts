/**
 * The panel's state logic, pure (no JupyterLab, no DOM): task types as the tacc service
 * answers them, merging a fresh task list into the previous one and the state changes that
 * become notifications, and how times and resources are written (a waiting task's queue: queue.ts).
 */

import { isOverQuota, overQuotaMessage } from './queue';

export type TaskStatus =
  | 'pending'
  | 'starting'
  | 'running'
  | 'cancelling'
  | 'succeeded'
  | 'failed'
  | 'cancelled'
  | 'lost';

export const TERMINAL: ReadonlySet<string> = new Set(['succeeded', 'failed', 'cancelled', 'lost']);

/** Where a waiting task stands (the task JSON's `queue`): predictions, not promises. */
export interface QueueInfo {
  reason: string;
  position: number;
  estimated_start: number | null;
  detail?: string;
}

/** A task as GET /api/tasks and /api/tasks/ID answer it (times are seconds since the epoch). */
export interface Task {
  id: number;
  owner: string;
  name: string;
  status: TaskStatus | string;
  digest: string;
  reason?: string | null;
  exit_code?: number | null;
  submitted_at: number;
  started_at?: number | null;
  finished_at?: number | null;
  placement?: { nodes?: { node: string; gpus?: number[] }[] } | null;
  cancel_requested?: boolean;
  queue?: QueueInfo | null;
  spec?: Record<string, any> | null;
  plan?: Record<string, any> | null;
  /** Effective time limit in seconds (extensions included). */
  time_limit?: number | null;
  /** When the running task is stopped for its time limit (epoch s), or null. */
  deadline?: number | null;
  /** Seconds left until the deadline when the service answered, or null. */
  time_left?: number | null;
  /** The current run (1 for the first; more after restarts). */
  attempt?: number | null;
  max_restarts?: number | null;
  /** The array this task is an element of, its index there, the pipeline it is a step of (issue 20). */
  array_id?: number | null;
  array_index?: number | null;
  pipeline_id?: number | null;
  /** An element's parameters, where the service's answer has them (else its spec's array_element.params). */
  params?: Record<string, unknown> | null;
}

/** One web port of a task (GET .../ports): `url` is absolute-path on the hub's origin. */
export interface PortInfo {
  port: number;
  declared: boolean;
  listening: boolean;
  label: string | null;
  url: string;
}

export interface Ports {
  task_id: number;
  ports: PortInfo[];
}

export interface UsageSample {
  at: number;
  util: number | null;
  memory_mib?: number | null;
  gpus?: number | null;
}

export interface Usage {
  task_id: number;
  interval: number;
  gpus: number;
  samples: UsageSample[];
  mean_util: number | null;
  peak_util: number | null;
}

export interface Attempt {
  attempt: number;
  started_at: number | null;
  finished_at: number | null;
  outcome: string;
  exit_code?: number | null;
  reason?: string | null;
  nodes?: string[] | null;
}

export interface Attempts {
  task_id: number;
  attempts: Attempt[];
}

export interface TaskList {
  tasks: Task[];
  total: number;
  next_before?: number | null;
}

export function isTerminal(status: string): boolean {
  return TERMINAL.has(status);
}

export function isActive(task: Task): boolean {
  return !isTerminal(task.status);
}

/** A state change seen between two refreshes: what a notification tells. */
export interface StateChange {
  task: Task;
  from: string | null; // null: a task this panel had not seen (submitted elsewhere)
  to: string;
  overQuota?: boolean; // it became a task that can never start under the current quota (queue reason OverQuota)
}

/**
 * Merge a fresh list (newest first) with the previous one.
 *
 * Tasks that dropped out of the fresh page but were shown before are kept while they are
 * still active (a long list only shows the newest N) and dropped once they ended; the
 * result is ordered newest first. `changes` lists state changes: none on the first load
 * (`prev` null), otherwise every task whose status differs, every waiting task that became
 * OverQuota (it can never start under the current quota: `overQuota`), and tasks new to the
 * panel (only when `reportNew`, or when they are OverQuota).
 */
export function mergeTasks(
  prev: ReadonlyMap<number, Task> | null,
  fresh: readonly Task[],
  reportNew = false
): { tasks: Task[]; byId: Map<number, Task>; changes: StateChange[] } {
  const byId = new Map<number, Task>();
  const changes: StateChange[] = [];
  for (const t of fresh) {
    byId.set(t.id, t);
    if (prev === null) {
      continue;
    }
    const old = prev.get(t.id);
    const overQuota = isOverQuota(t) && !(old !== undefined && isOverQuota(old));
    if (old === undefined) {
      if (reportNew || overQuota) {
        changes.push({ task: t, from: null, to: t.status, ...(overQuota ? { overQuota } : {}) });
      }
    } else if (old.status !== t.status || overQuota) {
      changes.push({ task: t, from: old.status, to: t.status, ...(overQuota ? { overQuota } : {}) });
    }
  }
  if (prev !== null) {
    for (const [id, old] of prev) {
      if (!byId.has(id) && isActive(old)) {
        byId.set(id, old);
      }
    }
  }
  const tasks = [...byId.values()].sort((a, b) => b.id - a.id);
  return { tasks, byId, changes };
}

/** Transitional states (starting, cancelling) are not worth a notification; the others are. */
export function worthNotifying(c: StateChange): boolean {
  return c.to !== 'starting' && c.to !== 'cancelling';
}

/** Notification level and message for a state change. */
export function describeChange(c: StateChange): { level: 'info' | 'success' | 'error' | 'warning'; message: string } {
  const name = `Task ${c.task.id} (${c.task.name})`;
  if (c.overQuota) {
    return { level: 'warning', message: overQuotaMessage(c.task) };
  }
  switch (c.to) {
    case 'succeeded':
      return { level: 'success', message: `${name} succeeded` };
    case 'failed': {
      const why = c.task.reason ? `: ${c.task.reason}` : c.task.exit_code != null ? `: exit ${c.task.exit_code}` : '';
      return { level: 'error', message: `${name} failed${why}` };
    }
    case 'lost':
      return { level: 'error', message: `${name} was lost${c.task.reason ? `: ${c.task.reason}` : ''}` };
    case 'cancelled':
      return { level: 'warning', message: `${name} was cancelled` };
    case 'running':
      return { level: 'info', message: `${name} is running` };
    case 'pending':
      if (c.from && c.from !== 'pending') {
        return { level: 'warning', message: `${name} is back in the queue${c.task.reason ? `: ${c.task.reason}` : ''}` };
      }
      return { level: 'info', message: `${name} is queued` };
    default:
      return { level: 'info', message: `${name} is ${c.to}` };
  }
}

/** `1h 02m`, `3m 05s`, `42s`; negative or missing durations are `-`. */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds == null || !isFinite(seconds) || seconds < 0) {
    return '-';
  }
  const s = Math.floor(seconds);
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  const two = (n: number) => String(n).padStart(2, '0');
  if (d > 0) {
    return `${d}d ${two(h)}h`;
  }
  if (h > 0) {
    return `${h}h ${two(m)}m`;
  }
  if (m > 0) {
    return `${m}m ${two(sec)}s`;
  }
  return `${sec}s`;
}

/** Run time so far (running), or in total (ended); `now` in seconds since the epoch. */
export function runtimeOf(task: Task, now: number): number | null {
  if (task.started_at == null) {
    return null;
  }
  const end = task.finished_at ?? (isTerminal(task.status) ? task.started_at : now);
  return Math.max(0, end - task.started_at);
}

/** Time since submission (until it ended). */
export function elapsedOf(task: Task, now: number): number {
  const end = task.finished_at ?? now;
  return Math.max(0, end - task.submitted_at);
}

/**
 * GPUs and nodes: where it runs (placement) once placed, else what its spec asks for (the
 * list answers carry no spec; a task's own answer does).
 */
export function resourcesText(task: Task): string {
  const placed = task.placement?.nodes;
  const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;
  if (placed && placed.length) {
    const gpus = placed.reduce((s, n) => s + (n.gpus?.length ?? 0), 0);
    return `${gpus ? plural(gpus, 'GPU') : 'no GPU'} on ${placed.map(n => n.node).join(', ')}`;
  }
  const r = task.spec?.resources;
  if (r && typeof r.nodes === 'number') {
    const gpn = typeof r.gpus_per_node === 'number' ? r.gpus_per_node : 0;
    return `${plural(gpn * r.nodes, 'GPU')}, ${plural(r.nodes, 'node')}`;
  }
  return '';
}

/**
 * The delay before the next refresh: quick while something is active, slower when
 * everything ended, doubling after each failure up to `max`.
 */
export function nextDelay(opts: { failures: number; active: boolean; base?: number; idle?: number; max?: number }): number {
  const base = opts.base ?? 2000;
  const idle = opts.idle ?? 10000;
  const max = opts.max ?? 60000;
  if (opts.failures > 0) {
    return Math.min(max, base * 2 ** opts.failures);
  }
  return opts.active ? base : idle;
}

/** The spec to send again for a resubmit: the task's own spec, unchanged (same spec, same digest). */
export function resubmitSpec(task: Task): Record<string, any> {
  if (!task.spec) {
    throw new Error(`task ${task.id} has no spec in this answer; fetch it with GET /tasks/${task.id}`);
  }
  return JSON.parse(JSON.stringify(task.spec));
}

/** Cluster view: free GPUs per node, grouped by switch. */
export interface ClusterNode {
  name: string;
  gpus: number;
  gpus_used: number;
  gpus_free: number;
  switch?: string;
  schedulable?: boolean;
  state?: string | null;
  gpu_type?: string | null;
  partition?: string | null;
  tasks?: number[];
}

export interface Cluster {
  executor: string;
  nodes: ClusterNode[];
  switches?: Record<string, string[]>;
  gpus: number;
  gpus_used: number;
  gpus_free: number;
  pending: number;
  running: number;
}

export function bySwitch(cluster: Cluster): { name: string; free: number; total: number; nodes: ClusterNode[] }[] {
  const groups = new Map<string, ClusterNode[]>();
  for (const n of cluster.nodes) {
    const sw = n.switch ?? '0';
    if (!groups.has(sw)) {
      groups.set(sw, []);
    }
    groups.get(sw)!.push(n);
  }
  return [...groups.entries()]
    .sort(([a], [b]) => a.localeCompare(b, undefined, { numeric: true }))
    .map(([name, nodes]) => ({
      name,
      nodes: nodes.sort((a, b) => a.name.localeCompare(b.name, undefined, { numeric: true })),
      free: nodes.reduce((s, n) => s + (n.schedulable === false ? 0 : n.gpus_free), 0),
      total: nodes.reduce((s, n) => s + n.gpus, 0)
    }));
}
