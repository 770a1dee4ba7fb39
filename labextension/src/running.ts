/**
 * A running task, pure (no JupyterLab, no DOM): its time left (ticking from the service's
 * `deadline`, on the server's clock), the durations a user types to extend it, the end-of-run
 * warnings (once per task run: keyed by task and attempt), the GPU-utilization sparkline of its
 * usage samples, its attempt ("attempt 2 of 3") and its TensorBoard port.
 */

import { ApiError } from './api';
import type { Attempt, PortInfo, Task, Usage, UsageSample } from './model';
import { formatDuration } from './model';

/** Seconds before a task's deadline at which the panel warns (a Lab notification). */
export const WARN_BEFORE = 600;

/** The extend dialog's one-click choices. */
export const EXTEND_PRESETS: readonly { label: string; seconds: number }[] = [
  { label: '+30m', seconds: 1800 },
  { label: '+1h', seconds: 3600 },
  { label: '+4h', seconds: 4 * 3600 }
];

/** Seconds left to a running task (0 once past its deadline), or null when it has no deadline. */
export function timeLeft(task: Task, now: number): number | null {
  if (task.status !== 'running' && task.status !== 'starting') {
    return null;
  }
  if (typeof task.deadline === 'number' && isFinite(task.deadline)) {
    return Math.max(0, task.deadline - now);
  }
  if (typeof task.time_left === 'number' && isFinite(task.time_left)) {
    return Math.max(0, task.time_left);
  }
  return null;
}

/** `1h 02m left`, `3m 05s left`; `time is up` at zero. */
export function timeLeftText(seconds: number): string {
  return seconds <= 0 ? 'time is up' : `${formatDuration(seconds)} left`;
}

const UNITS: Record<string, number> = {
  s: 1, sec: 1, secs: 1, second: 1, seconds: 1,
  m: 60, min: 60, mins: 60, minute: 60, minutes: 60,
  h: 3600, hr: 3600, hrs: 3600, hour: 3600, hours: 3600,
  d: 86400, day: 86400, days: 86400
};

/**
 * A duration as a person types it, in whole seconds, or null when it is not one:
 * `90` (minutes), `30m`, `1h`, `1.5h`, `1h30m`, `2 hours`, `1d 2h`, `1:30` (h:mm), `+45m`.
 */
export function parseDuration(text: string): number | null {
  let s = text.trim().toLowerCase().replace(/^\+/, '').trim();
  if (!s) {
    return null;
  }
  let m = /^(\d+):([0-5]\d)(?::([0-5]\d))?$/.exec(s);
  if (m) {
    const total = Number(m[1]) * 3600 + Number(m[2]) * 60 + Number(m[3] ?? 0);
    return total > 0 ? total : null;
  }
  if (/^\d+(\.\d+)?$/.test(s)) {
    const total = Math.round(Number(s) * 60);
    return total > 0 ? total : null;
  }
  let total = 0;
  const part = /^(\d+(?:\.\d+)?)\s*([a-z]+)\s*,?\s*/;
  while (s) {
    m = part.exec(s);
    if (!m || !(m[2] in UNITS)) {
      return null;
    }
    total += Number(m[1]) * UNITS[m[2]];
    s = s.slice(m[0].length);
  }
  total = Math.round(total);
  return total > 0 && isFinite(total) ? total : null;
}

/** The key of one run of a task: a warning is given once per key. */
export function runKey(task: Task): string {
  return `${task.id}/${task.attempt ?? 0}`;
}

/**
 * Running tasks whose end is at most `before` seconds away and that were not warned about in
 * this run yet; their keys are added to `warned`.
 */
export function dueWarnings(tasks: readonly Task[], now: number, warned: Set<string>, before = WARN_BEFORE): Task[] {
  const due: Task[] = [];
  for (const t of tasks) {
    const left = t.status === 'running' ? timeLeft(t, now) : null;
    if (left === null || left <= 0 || left > before) {
      continue;
    }
    const key = runKey(t);
    if (!warned.has(key)) {
      warned.add(key);
      due.push(t);
    }
  }
  return due;
}

export function warningMessage(task: Task, now: number): string {
  const left = timeLeft(task, now) ?? 0;
  return `Task ${task.id} (${task.name}) reaches its time limit in ${formatDuration(left)}: extend it to keep it running`;
}

/** The mean GPU utilization (the service's, or the samples'), or null when nothing was sampled. */
export function meanUtil(usage: Usage | null | undefined): number | null {
  if (!usage) {
    return null;
  }
  if (typeof usage.mean_util === 'number' && isFinite(usage.mean_util)) {
    return usage.mean_util;
  }
  const values = usage.samples.map(s => s.util).filter((u): u is number => typeof u === 'number' && isFinite(u));
  return values.length ? values.reduce((a, b) => a + b, 0) / values.length : null;
}

/** `GPU 37%` (the mean), or null when nothing was sampled. */
export function gpuLabel(usage: Usage | null | undefined): string | null {
  const mean = meanUtil(usage);
  return mean === null ? null : `GPU ${Math.round(mean)}%`;
}

/**
 * The sparkline of the last `max` samples as SVG polyline points in a `width` x `height` box
 * (0 % at the bottom, 100 % at the top; samples without a reading are skipped); '' for none.
 * A single sample is drawn as a flat line across the box.
 */
export function sparkPoints(samples: readonly UsageSample[], width: number, height: number, max = 60): string {
  const values = samples
    .slice(-max)
    .map(s => s.util)
    .filter((u): u is number => typeof u === 'number' && isFinite(u));
  if (!values.length) {
    return '';
  }
  const y = (u: number) => {
    const clamped = Math.min(100, Math.max(0, u));
    return +(height - 1 - (clamped / 100) * (height - 2)).toFixed(1);
  };
  if (values.length === 1) {
    return `0,${y(values[0])} ${width},${y(values[0])}`;
  }
  const step = width / (values.length - 1);
  return values.map((u, i) => `${+(i * step).toFixed(1)},${y(u)}`).join(' ');
}

/**
 * `attempt 3 of 3` once a task has run more than once, else null. The service counts runs from 0
 * (`attempt` 0 is the first, as TACC_ATTEMPT); people count them from 1.
 */
export function attemptText(task: Task, attempts?: readonly Attempt[] | null): string | null {
  const index = Math.max(task.attempt ?? 0, attempts?.length ? Math.max(...attempts.map(a => a.attempt)) : 0);
  if (index < 1) {
    return null;
  }
  const runs = typeof task.max_restarts === 'number' ? task.max_restarts + 1 : null;
  return runs ? `attempt ${index + 1} of ${Math.max(runs, index + 1)}` : `attempt ${index + 1}`;
}

/** One line per earlier run: `attempt 1 node_failure: node n2 down on n2 after 12m 03s` (counted from 1). */
export function attemptLines(attempts: readonly Attempt[]): string[] {
  return attempts
    .filter(a => a.outcome !== 'running')
    .map(a => {
      const ran = a.started_at != null && a.finished_at != null ? ` after ${formatDuration(a.finished_at - a.started_at)}` : '';
      const why = a.reason ? `: ${a.reason}` : a.exit_code != null ? `: exit ${a.exit_code}` : '';
      const where = a.nodes?.length ? ` on ${a.nodes.join(', ')}` : '';
      return `attempt ${a.attempt + 1} ${a.outcome}${why}${where}${ran}`;
    });
}

/** The port labelled TensorBoard (listening or not: the service knows it is the task's). */
export function tensorboardPort(ports: readonly PortInfo[] | null | undefined): PortInfo | null {
  return ports?.find(p => (p.label ?? '').toLowerCase() === 'tensorboard') ?? null;
}

/** The message of a refusal with each field it names (`seconds: over the site's max_time_limit ...`). */
export function fieldDetail(err: unknown): string {
  if (!(err instanceof ApiError)) {
    return String(err instanceof Error ? err.message : err);
  }
  if (!err.errors.length) {
    return err.message;
  }
  const fields = err.errors.map(e => `${e.field}: ${e.message}`);
  const said = err.errors.some(e => e.message === err.message || err.message.includes(e.message));
  return (said ? fields : [err.message, ...fields]).join('\n');
}
