/**
 * Arrays and pipelines in the panel, pure (no JupyterLab, no DOM): their types as the tacc service
 * answers them (GET /api/arrays, /api/pipelines), and how the task list becomes rows: one row per
 * array and one per pipeline, never also their elements or steps one by one; the progress of an
 * array (done / running / waiting / failed); and the group changes that become notifications
 * (an array's aggregate status, not each of its 100 elements).
 *
 * An array the service's list has not returned (yet, or a service without /api/arrays) is still
 * one row: it is built from the elements the task list holds, with counts of those.
 */

import { Task, isTerminal } from './model';

/** An array as the service answers it (ArrayOut); `tasks` only from GET /api/arrays/ID (index order). */
export interface ArrayInfo {
  id: number;
  owner: string;
  name: string;
  size: number;
  max_running?: number | null;
  pipeline_id?: number | null;
  step?: string | null;
  created_at: number;
  status: string;
  counts: Record<string, number>;
  running: number;
  waiting: number;
  done: number;
  failed: number;
  reason?: string | null;
  tasks?: Task[];
  /** Built here from the task list (the service's list did not have it): counts are of the elements seen. */
  partial?: boolean;
}

export interface PipelineStep {
  name: string;
  needs: string[];
  task_id?: number | null;
  array_id?: number | null;
  status: string;
  reason?: string | null;
}

export interface PipelineInfo {
  id: number;
  owner: string;
  name: string;
  created_at: number;
  status: string;
  steps: PipelineStep[];
}

export type Row =
  | { kind: 'task'; key: string; at: number; task: Task }
  | { kind: 'array'; key: string; at: number; array: ArrayInfo }
  | { kind: 'pipeline'; key: string; at: number; pipeline: PipelineInfo };

export const arrayKey = (id: number): string => `a${id}`;
export const pipelineKey = (id: number): string => `p${id}`;

const RUNNING = new Set(['running', 'starting', 'cancelling']);
const FAILED = new Set(['failed', 'lost']);

/** Counts per status of some elements. */
export function countStates(tasks: readonly Task[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const t of tasks) {
    counts[t.status] = (counts[t.status] ?? 0) + 1;
  }
  return counts;
}

/**
 * The aggregate status, as the service defines it: running if any runs (or starts), else pending if
 * any waits, else succeeded if all succeeded, else failed if any failed or was lost, else cancelled.
 */
export function aggregateStatus(counts: Record<string, number>): string {
  const n = (s: string) => counts[s] ?? 0;
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  if (n('running') + n('starting') + n('cancelling') > 0) {
    return 'running';
  }
  if (n('pending') > 0) {
    return 'pending';
  }
  if (total > 0 && n('succeeded') === total) {
    return 'succeeded';
  }
  if (n('failed') + n('lost') > 0) {
    return 'failed';
  }
  return total > 0 ? 'cancelled' : 'pending';
}

/** An array row for elements the task list holds but the service's array list did not (yet). */
export function arrayFromTasks(id: number, elements: readonly Task[]): ArrayInfo {
  const counts = countStates(elements);
  const sum = (set: Set<string>) => Object.entries(counts).reduce((s, [k, v]) => s + (set.has(k) ? v : 0), 0);
  const first = [...elements].sort((a, b) => a.id - b.id)[0];
  return {
    id,
    owner: first?.owner ?? '',
    name: first?.name ?? `array ${id}`,
    size: elements.length,
    created_at: first?.submitted_at ?? 0,
    status: aggregateStatus(counts),
    counts,
    running: sum(RUNNING),
    waiting: counts['pending'] ?? 0,
    done: counts['succeeded'] ?? 0,
    failed: sum(FAILED),
    reason: null,
    pipeline_id: first?.pipeline_id ?? null,
    partial: true
  };
}

/**
 * The rows of the task list, newest first: a task of its own is a row; the elements of an array are
 * one row (the array); the steps of a pipeline (tasks and arrays) are one row (the pipeline).
 */
export function groupRows(tasks: readonly Task[], arrays: readonly ArrayInfo[], pipelines: readonly PipelineInfo[]): Row[] {
  const rows: Row[] = [];
  const arraysById = new Map<number, ArrayInfo>(arrays.map(a => [a.id, a]));
  const pipelineIds = new Set<number>(pipelines.map(p => p.id));
  const elements = new Map<number, Task[]>();
  for (const t of tasks) {
    if (t.array_id != null) {
      const list = elements.get(t.array_id) ?? [];
      list.push(t);
      elements.set(t.array_id, list);
    } else if (t.pipeline_id != null && pipelineIds.has(t.pipeline_id)) {
      continue; // a step of a pipeline: shown in its pipeline's row
    } else {
      rows.push({ kind: 'task', key: `t${t.id}`, at: t.submitted_at, task: t });
    }
  }
  for (const [id, list] of elements) {
    if (!arraysById.has(id)) {
      arraysById.set(id, arrayFromTasks(id, list));
    }
  }
  for (const a of arraysById.values()) {
    if (a.pipeline_id != null && pipelineIds.has(a.pipeline_id)) {
      continue; // a step of a pipeline
    }
    rows.push({ kind: 'array', key: arrayKey(a.id), at: a.created_at, array: a });
  }
  for (const p of pipelines) {
    rows.push({ kind: 'pipeline', key: pipelineKey(p.id), at: p.created_at, pipeline: p });
  }
  const order = (r: Row) => (r.kind === 'task' ? r.task.id : r.kind === 'array' ? r.array.id : r.pipeline.id);
  return rows.sort((x, y) => y.at - x.at || order(y) - order(x));
}

/** The row (key) a task is shown in: its own, its array's, or its pipeline's. */
export function rowOf(task: Task, rows: readonly Row[]): string | null {
  if (task.pipeline_id != null && rows.some(r => r.key === pipelineKey(task.pipeline_id!))) {
    return pipelineKey(task.pipeline_id);
  }
  if (task.array_id != null && rows.some(r => r.key === arrayKey(task.array_id!))) {
    return arrayKey(task.array_id);
  }
  return `t${task.id}`;
}

/** One part of an array's progress bar. */
export interface Segment {
  kind: 'done' | 'failed' | 'cancelled' | 'running' | 'waiting';
  count: number;
  label: string;
}

/** The parts of the progress bar, in this order: done, failed, cancelled, running, waiting (empty ones left out). */
export function progress(a: ArrayInfo): Segment[] {
  const c = a.counts ?? {};
  const cancelled = c['cancelled'] ?? 0;
  const parts: Segment[] = [
    { kind: 'done', count: a.done, label: 'done' },
    { kind: 'failed', count: a.failed, label: 'failed' },
    { kind: 'cancelled', count: cancelled, label: 'cancelled' },
    { kind: 'running', count: a.running, label: 'running' },
    { kind: 'waiting', count: a.waiting, label: 'waiting' }
  ];
  return parts.filter(p => p.count > 0);
}

/** "3 done · 2 running · 4 waiting · 1 failed" (the four the issue names, always; cancelled when there are). */
export function countsText(a: ArrayInfo): string {
  const cancelled = a.counts?.['cancelled'] ?? 0;
  const parts = [`${a.done} done`, `${a.running} running`, `${a.waiting} waiting`, `${a.failed} failed`];
  if (cancelled) {
    parts.push(`${cancelled} cancelled`);
  }
  return parts.join(' · ');
}

/** `sweep[50]`: the name and the size, as tcloud ps and the admin queue write an array. */
export function arrayTitle(a: ArrayInfo): string {
  return `${a.name}[${a.size}]`;
}

/** Whether any element of the array is not ended (Cancel all has something to do). */
export function arrayActive(a: ArrayInfo): boolean {
  return a.running + a.waiting > 0 || !isTerminal(a.status);
}

export function pipelineActive(p: PipelineInfo): boolean {
  return !isTerminal(p.status) || p.steps.some(s => !isTerminal(s.status));
}

/** The parameters of an element as one line: `lr=0.001 bs=32` (from the task's `params` or its spec). */
export function paramsText(task: Task): string {
  const params = task.params ?? task.spec?.array_element?.params;
  if (!params || typeof params !== 'object') {
    return '';
  }
  return Object.entries(params)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
}

/** What a pipeline step waits for: "waits for prepare, train" while it waits and has needs; else its reason. */
export function stepWaits(step: PipelineStep, steps: readonly PipelineStep[]): string {
  if (step.status === 'pending' && step.needs.length) {
    const open = step.needs.filter(n => {
      const s = steps.find(x => x.name === n);
      return !s || s.status !== 'succeeded';
    });
    if (open.length) {
      return `waits for ${open.join(', ')}`;
    }
  }
  return step.reason ?? '';
}

/** A change of an array's or a pipeline's aggregate status between two refreshes. */
export interface GroupChange {
  kind: 'array' | 'pipeline';
  id: number;
  title: string;
  from: string | null;
  to: string;
  summary: string;
}

/** Group changes worth a notification: one that ended (succeeded, failed, cancelled); none on the first load. */
export function groupChanges(
  prev: ReadonlyMap<string, string> | null,
  arrays: readonly ArrayInfo[],
  pipelines: readonly PipelineInfo[]
): { seen: Map<string, string>; changes: GroupChange[] } {
  const seen = new Map<string, string>();
  const changes: GroupChange[] = [];
  const note = (c: GroupChange) => {
    const key = `${c.kind}${c.id}`;
    seen.set(key, c.to);
    const before = prev?.get(key);
    if (prev !== null && before !== undefined && before !== c.to && isTerminal(c.to)) {
      changes.push({ ...c, from: before });
    }
  };
  for (const a of arrays) {
    if (!a.partial) {
      note({ kind: 'array', id: a.id, title: arrayTitle(a), from: null, to: a.status, summary: countsText(a) });
    }
  }
  for (const p of pipelines) {
    const done = p.steps.filter(s => s.status === 'succeeded').length;
    note({ kind: 'pipeline', id: p.id, title: p.name, from: null, to: p.status, summary: `${done} of ${p.steps.length} steps succeeded` });
  }
  return { seen, changes };
}

export function describeGroupChange(c: GroupChange): { level: 'success' | 'error' | 'warning' | 'info'; message: string } {
  const what = `${c.kind === 'array' ? 'Array' : 'Pipeline'} ${c.id} (${c.title})`;
  switch (c.to) {
    case 'succeeded':
      return { level: 'success', message: `${what} succeeded: ${c.summary}` };
    case 'failed':
      return { level: 'error', message: `${what} failed: ${c.summary}` };
    case 'cancelled':
      return { level: 'warning', message: `${what} was cancelled: ${c.summary}` };
    default:
      return { level: 'info', message: `${what} is ${c.to}` };
  }
}
