/**
 * What the panel says about a waiting task, pure: the start estimate (only the service's
 * `queue.estimated_start`, written relative to now by the `%tacc` monitor's rule), the queue
 * line with its reason and detail, a task that can never start under the current quota
 * (`OverQuota`), what the log area says before the task runs, and the user's own server task.
 */

import type { Task } from './model';

/** The queue reason of a task that can never fit the current quota (it stays queued, with no estimate). */
export const OVER_QUOTA = 'OverQuota';

/**
 * `starts now`, `starts in 4m`, `start time unknown`: the %tacc monitor's rule (tacc_hub/jupyter/taskline.py
 * `eta`): under a second is now, else the largest whole unit of d, h, m, s.
 */
export function startText(estimatedStart: number | null | undefined, now: number): string {
  if (estimatedStart == null || !isFinite(estimatedStart)) {
    return 'start time unknown';
  }
  const d = estimatedStart - now;
  if (d < 1) {
    return 'starts now';
  }
  for (const [unit, size] of [['d', 86400], ['h', 3600], ['m', 60], ['s', 1]] as const) {
    if (d >= size) {
      return `starts in ${Math.floor(d / size)}${unit}`;
    }
  }
  return 'starts now';
}

const NEVER = 'can never start under the current quota';

/** The service's detail without its own opening words when they say the same as ours. */
function overQuotaWhy(detail: string | undefined): string {
  const d = (detail ?? '').trim();
  const out = d.toLowerCase().startsWith(NEVER) ? d.slice(NEVER.length).replace(/^[\s:;,.-]+/, '') : d;
  return out.replace(/\.$/, '');
}

export function isOverQuota(task: Task): boolean {
  return task.status === 'pending' && task.queue?.reason === OVER_QUOTA;
}

/** A server task of JupyterHub's TaccSpawner (named `jupyter-USER` by default). */
export function isServerTask(task: Task): boolean {
  return task.name.startsWith('jupyter-');
}

/** The queue of a waiting task as the panel writes it: a headline and the service's detail. */
export interface QueueSummary {
  headline: string; // `#2 in queue · Quota · starts in 4m`, or `Can never start under the current quota`
  detail: string; // the service's queue.detail, as it is (OverQuota: without the headline's words; may be empty)
  overQuota: boolean;
  estimatedStart: number | null; // exactly the service's value
}

export function queueSummary(task: Task, now: number): QueueSummary | null {
  const q = task.queue;
  if (task.status !== 'pending' || !q) {
    return null;
  }
  const detail = q.detail ?? '';
  if (q.reason === OVER_QUOTA) {
    const why = overQuotaWhy(detail); // the headline says its opening words already
    const said = why ? `${why.charAt(0).toUpperCase()}${why.slice(1)}.` : '';
    return { headline: 'Can never start under the current quota', detail: said, overQuota: true, estimatedStart: null };
  }
  const headline = `#${q.position} in queue · ${q.reason} · ${startText(q.estimated_start, now)}`;
  return { headline, detail, overQuota: false, estimatedStart: q.estimated_start ?? null };
}

/**
 * What the log area says while the task has not started: that it waits, and its reason (the
 * queue block above it has the service's detail), or that it can never start.
 */
export function waitingText(task: Task): string {
  const q = task.queue;
  if (q?.reason === OVER_QUOTA) {
    return `Not started: it ${NEVER} (see above). There is no log.`;
  }
  const why = q?.reason ?? task.reason;
  return `Waiting to start${why ? ` (${why})` : ''}: the log streams here once it runs.`;
}

/** The notification for a task that became OverQuota: it stays queued; raise the quota or cancel it. */
export function overQuotaMessage(task: Task): string {
  const why = overQuotaWhy(task.queue?.detail);
  return `Task ${task.id} (${task.name}) ${NEVER}${why ? `: ${why}` : ''}`;
}
