/**
 * The live task list: polls the relay (quick while the panel is shown, slower while it is
 * hidden and a task of the user is still active so that state changes still notify, not at
 * all while the browser tab is hidden or nothing is active), merges each answer with the
 * previous one and signals the state changes. For each running task it also keeps what the
 * panel shows of the run (run.ts: ports, GPU usage, attempts), each fetched on its own schedule
 * (ports often, usage at about the service's sampling rate, attempts when the attempt changes);
 * an endpoint that answers 404 for a task that exists (a service without it) is left alone.
 */

import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { ApiError, TaccApi } from './api';
import { LogBuffer } from './logs';
import { Attempt, PortInfo, StateChange, Task, Usage, isActive, mergeTasks } from './model';

/** What the panel knows of a running task beyond the task list. */
export interface RunInfo {
  ports: PortInfo[] | null;
  usage: Usage | null;
  attempts: Attempt[] | null;
}

type RunPart = keyof RunInfo;

/** How often each part is fetched for a running task (ms); usage: as often as the service samples (5-60 s). */
export const RUN_INTERVALS: Record<RunPart, number> = { ports: 7500, usage: 30000, attempts: 60000 };

export function usageInterval(usage: Usage | null | undefined): number {
  const every = usage && typeof usage.interval === 'number' && usage.interval > 0 ? usage.interval * 1000 : RUN_INTERVALS.usage;
  return Math.min(60000, Math.max(5000, every));
}

const VISIBLE_INTERVAL = 2500;
const HIDDEN_INTERVAL = 15000;

export class TasksModel {
  tasks: Task[] = [];
  byId: Map<number, Task> | null = null;
  error: string | null = null;
  updatedAt: number | null = null;
  /** Specs of tasks not placed yet (the list has no spec): what a waiting task asks for. */
  readonly specs = new Map<number, Record<string, any>>();
  private readonly fetching = new Set<number>();
  /** Log buffers by task: a log view reopened later resumes from where it was. */
  readonly logs = new Map<number, LogBuffer>();
  /** Per running task: ports, usage, attempts (kept after it ended: the last ones seen). */
  readonly runs = new Map<number, RunInfo>();
  private readonly runFetched = new Map<string, { at: number; attempt: number | null }>();
  /** Endpoints the service does not have (404 on a task that exists): not asked again for a while. */
  private readonly missing = new Map<RunPart, number>();
  private visible = false;
  private readonly _changed = new Signal<this, void>(this);
  private readonly _stateChanged = new Signal<this, StateChange[]>(this);
  readonly poll: Poll;

  constructor(readonly api: TaccApi) {
    this.poll = new Poll({
      auto: true,
      factory: () => this.refresh(),
      frequency: { interval: HIDDEN_INTERVAL, backoff: true, max: 60000 },
      standby: () => this.standby(),
      name: 'tacc-hub:tasks'
    });
  }

  get changed(): ISignal<this, void> {
    return this._changed;
  }

  get stateChanged(): ISignal<this, StateChange[]> {
    return this._stateChanged;
  }

  private standby(): boolean | 'when-hidden' {
    if (typeof document !== 'undefined' && document.hidden) {
      return true;
    }
    if (!this.visible && this.byId !== null && !this.tasks.some(isActive)) {
      return true;
    }
    return false;
  }

  setVisible(visible: boolean): void {
    if (visible === this.visible) {
      return;
    }
    this.visible = visible;
    this.poll.frequency = { interval: visible ? VISIBLE_INTERVAL : HIDDEN_INTERVAL, backoff: true, max: 60000 };
    if (visible) {
      void this.poll.refresh();
    }
  }

  /** Nudge a refresh soon (after a submit or a cancel). */
  kick(): void {
    void this.poll.refresh();
  }

  noteSubmitted(task: Task): void {
    if (this.byId && !this.byId.has(task.id)) {
      this.byId.set(task.id, task);
      this.tasks = [task, ...this.tasks];
      this._changed.emit();
    }
    this.kick();
  }

  async refresh(): Promise<void> {
    try {
      const list = await this.api.listTasks({ limit: 50 });
      const merged = mergeTasks(this.byId, list.tasks);
      this.tasks = merged.tasks;
      this.byId = merged.byId;
      this.error = null;
      this.updatedAt = Date.now();
      this._changed.emit();
      if (merged.changes.length) {
        this._stateChanged.emit(merged.changes);
      }
      this.fetchSpecs();
      this.fetchRuns();
    } catch (err) {
      this.error = err instanceof Error ? err.message : String(err);
      this._changed.emit();
      throw err; // the poll backs off
    }
  }

  /** The specs of waiting tasks (a few per refresh; a spec never changes, so once each). */
  private fetchSpecs(): void {
    const wanted = this.tasks.filter(
      t => isActive(t) && !t.placement?.nodes?.length && !this.specs.has(t.id) && !this.fetching.has(t.id)
    );
    for (const t of wanted.slice(0, 5)) {
      this.fetching.add(t.id);
      this.api.getTask(t.id).then(
        full => {
          this.fetching.delete(t.id);
          if (full.spec) {
            this.specs.set(t.id, full.spec);
            this._changed.emit();
          }
        },
        () => this.fetching.delete(t.id)
      );
    }
  }

  /** What the panel has of a running task's run (ports, usage, attempts). */
  run(id: number): RunInfo | undefined {
    return this.runs.get(id);
  }

  /** Fetch `part` of task `id` now (after an action that changes it, e.g. a new port). */
  refreshRun(id: number, part: RunPart): void {
    this.runFetched.delete(`${id}/${part}`);
    const task = this.byId?.get(id);
    if (task) {
      this.fetchRun(task, part);
    }
  }

  /** A task as the service answered an action on it (an extend): shown at once. */
  noteTask(task: Task): void {
    if (this.byId?.has(task.id)) {
      this.byId.set(task.id, task);
      this.tasks = this.tasks.map(t => (t.id === task.id ? task : t));
      this._changed.emit();
    }
  }

  private fetchRuns(): void {
    if (!this.visible) {
      return; // nothing of it is shown
    }
    for (const t of this.tasks) {
      if (t.status !== 'running') {
        continue;
      }
      for (const part of ['ports', 'usage', 'attempts'] as RunPart[]) {
        this.fetchRun(t, part);
      }
    }
  }

  private fetchRun(task: Task, part: RunPart): void {
    const key = `${task.id}/${part}`;
    const now = Date.now();
    const last = this.runFetched.get(key);
    const missingSince = this.missing.get(part);
    if (missingSince !== undefined && now - missingSince < 60000) {
      return;
    }
    const attempt = task.attempt ?? null;
    const every = part === 'usage' ? usageInterval(this.runs.get(task.id)?.usage) : RUN_INTERVALS[part];
    if (last && now - last.at < every && (part !== 'attempts' || last.attempt === attempt)) {
      return;
    }
    if (part === 'attempts' && (attempt ?? 0) < 1 && !task.max_restarts) {
      return; // one run, and no restart possible: nothing to show
    }
    this.runFetched.set(key, { at: now, attempt });
    const call: Promise<any> =
      part === 'ports' ? this.api.ports(task.id) : part === 'usage' ? this.api.usage(task.id) : this.api.attempts(task.id);
    call.then(
      body => {
        this.missing.delete(part);
        const info = this.runs.get(task.id) ?? { ports: null, usage: null, attempts: null };
        const value = part === 'ports' ? body?.ports : part === 'usage' ? body : body?.attempts;
        this.runs.set(task.id, { ...info, [part]: value ?? null });
        this._changed.emit();
      },
      err => {
        if (err instanceof ApiError && err.status === 404 && this.byId?.has(task.id)) {
          this.missing.set(part, Date.now()); // the service has no such endpoint (yet)
        }
      }
    );
  }

  /** A task with its spec when the panel has it. */
  withSpec(task: Task): Task {
    const spec = task.spec ?? this.specs.get(task.id);
    return spec ? { ...task, spec } : task;
  }

  dispose(): void {
    this.poll.dispose();
    Signal.clearData(this);
  }
}
