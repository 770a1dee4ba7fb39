/**
 * The live task list: polls the relay (quick while the panel is shown, slower while it is
 * hidden and a task of the user is still active so that state changes still notify, not at
 * all while the browser tab is hidden or nothing is active), merges each answer with the
 * previous one and signals the state changes. For each running task it also keeps what the
 * panel shows of the run (run.ts: ports, GPU usage, attempts), each fetched on its own schedule
 * (ports often, usage at about the service's sampling rate, attempts when the attempt changes);
 * an endpoint that answers 404 for a task that exists (a service without it) is left alone.
 *
 * With the tasks it fetches the user's arrays and pipelines (arrays.ts makes one row of each), and
 * the elements of each array whose row is open; state changes of array elements are not signalled
 * one by one (a sweep of 100 would be 100 notifications): `groupChanged` says when an array or a
 * pipeline as a whole ended.
 */

import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { ApiError, TaccApi } from './api';
import { ArrayInfo, GroupChange, PipelineInfo, arrayActive, groupChanges, pipelineActive } from './arrays';
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
/** Tasks asked for per refresh: array elements count too (a row of 100 elements is one row but 100 tasks). */
export const TASK_PAGE = 200;
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
  /** The user's arrays and pipelines (newest first), as the service's lists answered them. */
  arrays: ArrayInfo[] = [];
  pipelines: PipelineInfo[] = [];
  /** Arrays whose row is open: their elements (GET /api/arrays/ID), refreshed with the list. */
  readonly arrayDetails = new Map<number, ArrayInfo>();
  private readonly watched = new Set<number>();
  private groupsSeen: Map<string, string> | null = null;
  /** When /api/arrays or /api/pipelines answered 404 (a service without them): not asked again for a while. */
  private groupsMissingAt: number | null = null;
  private readonly _groupChanged = new Signal<this, GroupChange[]>(this);
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

  /** An array or a pipeline ended (succeeded, failed, cancelled). */
  get groupChanged(): ISignal<this, GroupChange[]> {
    return this._groupChanged;
  }

  /** Anything of the user's still to end: a task, an array, a pipeline. */
  anyActive(): boolean {
    return this.tasks.some(isActive) || this.arrays.some(arrayActive) || this.pipelines.some(pipelineActive);
  }

  /** Keep the elements of array `id` fetched (its row is open), or stop. */
  watchArray(id: number, on: boolean): void {
    if (on && !this.watched.has(id)) {
      this.watched.add(id);
      void this.fetchArray(id);
    } else if (!on) {
      this.watched.delete(id);
    }
  }

  /** Fetch one array with its elements now (after an action on it). */
  async fetchArray(id: number): Promise<void> {
    try {
      const a = await this.api.getArray(id);
      this.arrayDetails.set(id, a);
      this.arrays = this.arrays.map(x => (x.id === id ? { ...a, tasks: undefined } : x));
      this._changed.emit();
    } catch {
      // shown from the list until the next refresh
    }
  }

  private standby(): boolean | 'when-hidden' {
    if (typeof document !== 'undefined' && document.hidden) {
      return true;
    }
    if (!this.visible && this.byId !== null && !this.anyActive()) {
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
      const [list] = await Promise.all([this.api.listTasks({ limit: TASK_PAGE }), this.refreshGroups()]);
      const merged = mergeTasks(this.byId, list.tasks);
      this.tasks = merged.tasks;
      this.byId = merged.byId;
      this.error = null;
      this.updatedAt = Date.now();
      this._changed.emit();
      const own = merged.changes.filter(c => c.task.array_id == null); // elements: their array's change says it
      if (own.length) {
        this._stateChanged.emit(own);
      }
      this.fetchSpecs();
      this.fetchRuns();
    } catch (err) {
      this.error = err instanceof Error ? err.message : String(err);
      this._changed.emit();
      throw err; // the poll backs off
    }
  }

  /** The arrays and pipelines, and the elements of the open arrays; their ends signalled (not on the first load). */
  private async refreshGroups(): Promise<void> {
    if (this.groupsMissingAt !== null && Date.now() - this.groupsMissingAt < 60000) {
      return;
    }
    try {
      const [arrays, pipelines] = await Promise.all([this.api.listArrays(50), this.api.listPipelines(50)]);
      this.arrays = arrays.arrays ?? [];
      this.pipelines = pipelines.pipelines ?? [];
      this.groupsMissingAt = null;
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        this.groupsMissingAt = Date.now(); // a service without arrays: rows are made from the task list
        this.arrays = [];
        this.pipelines = [];
        return;
      }
      throw err;
    }
    await Promise.all([...this.watched].map(id => this.fetchArray(id)));
    const { seen, changes } = groupChanges(this.groupsSeen, this.arrays, this.pipelines);
    this.groupsSeen = seen;
    if (changes.length) {
      this._groupChanged.emit(changes);
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

  /** Fetch the specs of these tasks (an open array's elements: their parameters), a few at a time, once each. */
  ensureSpecs(ids: number[]): void {
    const wanted = ids.filter(id => !this.specs.has(id) && !this.fetching.has(id));
    for (const id of wanted.slice(0, Math.max(0, 8 - this.fetching.size))) {
      this.fetching.add(id);
      this.api.getTask(id).then(
        full => {
          this.fetching.delete(id);
          if (full.spec) {
            this.specs.set(id, full.spec);
            this._changed.emit(); // the next render asks for the next few
          }
        },
        () => this.fetching.delete(id)
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
