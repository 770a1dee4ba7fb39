/**
 * The live task list: polls the relay (quick while the panel is shown, slower while it is
 * hidden and a task of the user is still active so that state changes still notify, not at
 * all while the browser tab is hidden or nothing is active), merges each answer with the
 * previous one and signals the state changes.
 */

import { Poll } from '@lumino/polling';
import { ISignal, Signal } from '@lumino/signaling';

import { TaccApi } from './api';
import { LogBuffer } from './logs';
import { StateChange, Task, isActive, mergeTasks } from './model';

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
