/**
 * The side panel: the user's tasks (state, GPUs and nodes, runtime, queue position, reason
 * and the service's estimated start, elapsed time), per task its log (streamed, following the
 * tail, once the task runs), its spec (a summary, the digest, the whole spec as YAML), cancel
 * and resubmit; and the cluster view (free GPUs per node and switch). A running task also shows
 * its time left, GPU utilization, attempt and web ports, with Terminal and Extend (runview.tsx).
 */

import { Clipboard, Dialog, ReactWidget, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { copyIcon, refreshIcon } from '@jupyterlab/ui-components';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import { ApiError } from './api';
import { ArrayRow, GroupProps, PipelineRow } from './arrayview';
import { groupRows, rowOf } from './arrays';
import { LogFollower, FollowState } from './follow';
import { LogBuffer } from './logs';
import { pageUrl } from './notify';
import { openNotifications } from './notifyview';
import {
  Cluster,
  Task,
  bySwitch,
  elapsedOf,
  formatDuration,
  isTerminal,
  resourcesText,
  resubmitSpec,
  runtimeOf
} from './model';
import { isServerTask, queueSummary, waitingText } from './queue';
import { AttemptBadge, AttemptHistory, GpuSpark, PortsLine, TimeLeft, extendTask } from './runview';
import { shortDigest, specSummary, toYaml } from './spec';
import { TasksModel } from './tasks';

function useSignal(model: TasksModel): number {
  const [version, setVersion] = React.useState(0);
  React.useEffect(() => {
    const bump = () => setVersion(v => v + 1);
    model.changed.connect(bump);
    return () => {
      model.changed.disconnect(bump);
    };
  }, [model]);
  return version;
}

/** Re-render every second while something is active (elapsed times move); `now` is the server's clock. */
function useClock(active: boolean, now: () => number): number {
  const [t, setT] = React.useState(now());
  React.useEffect(() => {
    if (!active) {
      return;
    }
    setT(now());
    const timer = setInterval(() => setT(now()), 1000);
    return () => clearInterval(timer);
  }, [active]);
  return t;
}

function StatusBadge({ status }: { status: string }): JSX.Element {
  return <span className={`tacc-status tacc-status-${status}`}>{status.toUpperCase()}</span>;
}

/**
 * The log of a task: nothing is streamed while it waits to start (the area says why it waits);
 * the stream opens once it leaves the queue, and resumes from the buffer's offset.
 */
function LogView({ model, task }: { model: TasksModel; task: Task }): JSX.Element {
  const taskId = task.id;
  const waiting = task.status === 'pending';
  const [text, setText] = React.useState('');
  const [state, setState] = React.useState<{ s: FollowState; detail?: string }>({ s: 'connecting' });
  const [follow, setFollow] = React.useState(true);
  const pre = React.useRef<HTMLPreElement>(null);

  React.useEffect(() => {
    let buffer = model.logs.get(taskId);
    if (!buffer) {
      buffer = new LogBuffer();
      model.logs.set(taskId, buffer);
    }
    setText(buffer.text);
    if (waiting && !buffer.ended) {
      return; // no stream to show yet
    }
    const follower = new LogFollower(
      model.api,
      taskId,
      {
        onUpdate: b => setText(b.text),
        onState: (s, detail) => setState({ s, detail })
      },
      buffer
    );
    if (buffer.ended) {
      setState({ s: 'ended', detail: buffer.ended.status });
    } else {
      void follower.run();
    }
    return () => follower.stop();
  }, [model, taskId, waiting]);

  React.useLayoutEffect(() => {
    if (follow && pre.current) {
      pre.current.scrollTop = pre.current.scrollHeight;
    }
  }, [text, follow]);

  const shown = waiting ? 'waiting' : state.s;
  const label =
    shown === 'waiting'
      ? waitingText(task)
      : state.s === 'ended'
        ? `Log: ended (${state.detail})`
        : state.s === 'error'
          ? `Log: error: ${state.detail}`
          : `Log: ${state.s}`;
  return (
    <div className="tacc-log">
      <div className="tacc-log-bar">
        <span className="tacc-log-state" data-state={shown} aria-live="polite">
          {label}
        </span>
        {shown !== 'waiting' && (
          <label className="tacc-follow">
            <input type="checkbox" checked={follow} onChange={e => setFollow(e.target.checked)} /> Follow tail
          </label>
        )}
      </div>
      <pre
        ref={pre}
        className={`tacc-log-text${shown === 'waiting' && !text ? ' tacc-log-empty' : ''}`}
        tabIndex={0}
        aria-label={`Log of task ${taskId}`}
        onScroll={e => {
          const el = e.currentTarget;
          const atBottom = el.scrollHeight - el.scrollTop - el.clientHeight < 8;
          if (atBottom !== follow) {
            setFollow(atBottom);
          }
        }}
      >
        {text || (shown === 'waiting' ? '' : state.s === 'ended' ? '(no output)' : state.s === 'streaming' || state.s === 'polling' ? '(no output yet)' : '')}
      </pre>
    </div>
  );
}

function SpecView({ model, task }: { model: TasksModel; task: Task }): JSX.Element {
  const [full, setFull] = React.useState<Task | null>(task.spec ? task : null);
  const [error, setError] = React.useState<string | null>(null);
  React.useEffect(() => {
    if (full) {
      return;
    }
    model.api.getTask(task.id).then(setFull, err => setError(String(err.message ?? err)));
  }, [task.id]);
  if (error) {
    return <div className="tacc-error" role="alert">{error}</div>;
  }
  if (!full) {
    return <div className="tacc-muted">Loading the spec…</div>;
  }
  const spec = full.spec ?? {};
  const yaml = toYaml(spec);
  return (
    <div className="tacc-spec">
      <dl className="tacc-spec-summary">
        {specSummary(spec).map(f => (
          <React.Fragment key={f.label}>
            <dt>{f.label}</dt>
            <dd>{f.value}</dd>
          </React.Fragment>
        ))}
        <dt>Digest</dt>
        <dd className="tacc-digest-row">
          <code className="tacc-spec-digest" title={full.digest} data-digest={full.digest}>
            {shortDigest(full.digest)}
          </code>
          <CopyButton text={full.digest} what="digest" iconOnly />
        </dd>
      </dl>
      <div className="tacc-spec-bar">
        <span className="tacc-muted">Full spec (YAML)</span>
        <CopyButton text={yaml} what="spec (YAML)" />
      </div>
      <pre className="tacc-spec-text" tabIndex={0} aria-label={`Spec of task ${task.id}`}>
        {yaml}
      </pre>
    </div>
  );
}

/** A small copy button (Lab's clipboard: works on plain-HTTP hubs too); says "copied" for a moment. */
function CopyButton({ text, what, iconOnly = false }: { text: string; what: string; iconOnly?: boolean }): JSX.Element {
  const [done, setDone] = React.useState(false);
  React.useEffect(() => {
    if (!done) {
      return;
    }
    const timer = setTimeout(() => setDone(false), 1500);
    return () => clearTimeout(timer);
  }, [done]);
  return (
    <button
      className="jp-Button jp-mod-styled jp-mod-reject tacc-btn tacc-copy"
      aria-label={`Copy the ${what}`}
      title={done ? 'Copied' : `Copy the ${what}`}
      onClick={() => {
        Clipboard.copyToSystem(text);
        setDone(true);
      }}
    >
      {done && iconOnly ? <span aria-hidden="true">✓</span> : <copyIcon.react tag="span" className="tacc-icon" />}
      {!iconOnly && <span className="tacc-btn-label">{done ? 'Copied' : 'Copy'}</span>}
    </button>
  );
}

type View = 'log' | 'spec' | null;

function TaskRow(props: {
  model: TasksModel;
  task: Task;
  t: number;
  open: boolean;
  view: View;
  onToggle: () => void;
  onView: (v: View) => void;
  onSelect: (id: number) => void;
  onTerminal: (task: Task) => void;
}): JSX.Element {
  const { model, task, t, open, view } = props;
  const running = task.status === 'running';
  const runInfo = running ? model.run(task.id) : undefined;
  const [busy, setBusy] = React.useState(false);
  const run = runtimeOf(task, t);
  const queue = queueSummary(task, t);
  const res = resourcesText(model.withSpec(task));
  const server = isServerTask(task);

  const cancel = async () => {
    const answer = await showDialog({
      title: `Cancel task ${task.id} (${task.name})?`,
      body: server
        ? 'This task is a Jupyter server: cancelling it stops that server (it may be the one this page runs on).'
        : 'Its processes get SIGTERM, then SIGKILL after the grace period.',
      buttons: [Dialog.cancelButton({ label: 'Keep it' }), Dialog.warnButton({ label: 'Cancel task' })]
    });
    if (!answer.button.accept) {
      return;
    }
    setBusy(true);
    try {
      await model.api.cancel(task.id);
      model.kick();
    } catch (err) {
      await showErrorMessage(`Cancel task ${task.id}`, err instanceof ApiError ? err.detail : String(err));
    } finally {
      setBusy(false);
    }
  };
  const resubmit = async () => {
    setBusy(true);
    try {
      const full = task.spec ? task : await model.api.getTask(task.id);
      const created = await model.api.submitSpec(resubmitSpec(full));
      model.noteSubmitted(created);
      props.onSelect(created.id);
    } catch (err) {
      await showErrorMessage(`Resubmit task ${task.id}`, err instanceof ApiError ? err.detail : String(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <li className={`tacc-task${open ? ' tacc-open' : ''}`} data-task-id={task.id} data-status={task.status}>
      <button
        className="tacc-task-head"
        aria-expanded={open}
        aria-label={`Task ${task.id} ${task.name}, ${task.status}`}
        onClick={props.onToggle}
      >
        <span className="tacc-task-title">
          <span className="tacc-task-id">#{task.id}</span> {task.name}
        </span>
        <StatusBadge status={task.status} />
      </button>
      <div className="tacc-task-meta">
        {task.array_id != null && (
          <span className="tacc-element-mark" title={`Element ${task.array_index ?? '?'} of array ${task.array_id}`}>
            [{task.array_index ?? '?'}] of array #{task.array_id}
          </span>
        )}
        {server && (
          <span className="tacc-server-mark" title="The task that runs your Jupyter server (JupyterHub started it)">
            your Jupyter server
          </span>
        )}
        {res && <span title="GPUs and nodes">{res}</span>}
        {run !== null && <span title="Run time">ran {formatDuration(run)}</span>}
        <span title="Since submitted">elapsed {formatDuration(elapsedOf(task, t))}</span>
        {task.reason && !queue && <span className="tacc-reason">{task.reason}</span>}
      </div>
      {running && (
        <div className="tacc-run" aria-label={`Task ${task.id} as it runs`}>
          <TimeLeft task={task} t={t} />
          <GpuSpark usage={runInfo?.usage} />
          <AttemptBadge task={task} attempts={runInfo?.attempts} />
        </div>
      )}
      {running && (
        // the user's Jupyter server: its own port is the page this panel runs in; only ports it declares are shown
        <PortsLine ports={server ? runInfo?.ports?.filter(p => p.declared) : runInfo?.ports} />
      )}
      {queue && (
        <div
          className={`tacc-queue${queue.overQuota ? ' tacc-overquota' : ''}`}
          data-reason={task.queue?.reason}
          data-estimated-start={queue.estimatedStart ?? ''}
          role={queue.overQuota ? 'alert' : undefined}
        >
          <div className="tacc-queue-head">{queue.headline}</div>
          {queue.detail && <div className="tacc-queue-detail">{queue.detail}</div>}
        </div>
      )}
      {open && (
        <div className="tacc-task-body">
          <div className="tacc-actions" role="toolbar" aria-label={`Actions for task ${task.id}`}>
            <button
              className="jp-Button jp-mod-styled jp-mod-reject tacc-btn"
              aria-pressed={view === 'log'}
              onClick={() => props.onView(view === 'log' ? null : 'log')}
            >
              Log
            </button>
            <button
              className="jp-Button jp-mod-styled jp-mod-reject tacc-btn"
              aria-pressed={view === 'spec'}
              onClick={() => props.onView(view === 'spec' ? null : 'spec')}
            >
              Spec
            </button>
            <span className="tacc-spacer" />
            <button
              className="jp-Button jp-mod-styled jp-mod-warn tacc-btn"
              disabled={busy || isTerminal(task.status) || task.status === 'cancelling'}
              aria-label={`Cancel task ${task.id}`}
              title={`Cancel task ${task.id}`}
              onClick={cancel}
            >
              Cancel
            </button>
            {task.array_id == null && (
              // an element is its array's: a new one is a new array (%tacc submit, tcloud submit)
              <button
                className="jp-Button jp-mod-styled jp-mod-reject tacc-btn"
                disabled={busy}
                aria-label={`Resubmit task ${task.id} with the same spec`}
                title="Resubmit: the same spec again, as a new task"
                onClick={resubmit}
              >
                Resubmit
              </button>
            )}
          </div>
          {running && (
            <div className="tacc-run-actions" role="toolbar" aria-label={`Task ${task.id} while it runs`}>
              <button
                className="jp-Button jp-mod-styled jp-mod-reject tacc-btn tacc-terminal-btn"
                aria-label={`Open a terminal in task ${task.id}`}
                title="A shell inside the running task, in a new tab"
                onClick={() => props.onTerminal(task)}
              >
                <span aria-hidden="true" className="tacc-glyph">
                  &gt;_
                </span>
                Terminal
              </button>
              <button
                className="jp-Button jp-mod-styled jp-mod-reject tacc-btn tacc-extend-btn"
                aria-label={`Extend the time limit of task ${task.id}`}
                title="Give the task more time"
                disabled={task.deadline == null && task.time_left == null}
                onClick={() => void extendTask(model, task)}
              >
                Extend…
              </button>
            </div>
          )}
          {running && <AttemptHistory attempts={runInfo?.attempts} />}
          {view === 'log' && <LogView model={model} task={task} />}
          {view === 'spec' && <SpecView model={model} task={task} />}
        </div>
      )}
    </li>
  );
}

function ClusterView({ model }: { model: TasksModel }): JSX.Element {
  const [cluster, setCluster] = React.useState<Cluster | null>(null);
  const [error, setError] = React.useState<string | null>(null);
  const load = React.useCallback(() => {
    model.api.cluster().then(
      c => {
        setCluster(c);
        setError(null);
      },
      err => setError(String(err.message ?? err))
    );
  }, [model]);
  React.useEffect(() => {
    // refreshed with the task list (while the cluster view is open)
    load();
    model.changed.connect(load);
    return () => {
      model.changed.disconnect(load);
    };
  }, [load]);
  if (error) {
    return <div className="tacc-error" role="alert">Cluster: {error}</div>;
  }
  if (!cluster) {
    return <div className="tacc-muted">Loading the cluster…</div>;
  }
  return (
    <section className="tacc-cluster" aria-label="Cluster">
      <div className="tacc-cluster-sum">
        {cluster.gpus_free} of {cluster.gpus} GPUs free · {cluster.running} running · {cluster.pending} waiting ·{' '}
        {cluster.executor}
      </div>
      {bySwitch(cluster).map(sw => (
        <div key={sw.name} className="tacc-switch">
          <div className="tacc-switch-head">
            switch {sw.name}: {sw.free}/{sw.total} GPUs free
          </div>
          <ul className="tacc-nodes">
            {sw.nodes.map(n => (
              <li key={n.name} className={`tacc-node${n.schedulable === false ? ' tacc-node-down' : ''}`}>
                <span className="tacc-node-name">{n.name}</span>
                <span className="tacc-gpus" aria-label={`${n.gpus_free} of ${n.gpus} GPUs free`}>
                  {Array.from({ length: n.gpus }, (_, i) => (
                    <span key={i} className={`tacc-gpu${i < n.gpus_used ? ' tacc-gpu-used' : ''}`} />
                  ))}
                </span>
                <span className="tacc-muted">
                  {n.gpus_free}/{n.gpus} free{n.state ? ` · ${n.state}` : ''}
                </span>
              </li>
            ))}
          </ul>
        </div>
      ))}
    </section>
  );
}

/**
 * A row under the header: "Notifications" (the settings dialog, notifyview.tsx) and "My usage" (the service's
 * page of the user's GPU-hours, opened in a new tab; its path comes with the notification settings).
 */
function UserLinks({ model }: { model: TasksModel }): JSX.Element {
  const [usage, setUsage] = React.useState<string | null>(null);
  React.useEffect(() => {
    model.api.notifications().then(
      info => setUsage(pageUrl(info.usage_url, window.location.origin)),
      () => setUsage(null)
    );
  }, [model]);
  return (
    <nav className="tacc-links" aria-label="Your settings and usage">
      <button className="tacc-link tacc-notify-open" onClick={() => void openNotifications(model.api)}>
        Notifications…
      </button>
      {usage && (
        <a className="tacc-link tacc-usage-link" href={usage} target="_blank" rel="noopener noreferrer">
          My usage ↗
        </a>
      )}
    </nav>
  );
}

export interface PanelCallbacks {
  submitCurrent: () => void;
  canSubmit: () => boolean;
  openTerminal: (task: Task) => void;
}

function PanelBody({ model, cb, selected, onSelect, openGroups, onToggleGroup }: {
  model: TasksModel;
  cb: PanelCallbacks;
  selected: { id: number | null; view: View };
  onSelect: (id: number | null, view: View) => void;
  openGroups: ReadonlySet<string>;
  onToggleGroup: (key: string, selectedInside: boolean) => void;
}): JSX.Element {
  useSignal(model);
  const [showCluster, setShowCluster] = React.useState(false);
  // the clock ticks while something is active; any re-render (a refresh) reads the time afresh too
  const now = () => model.api.now();
  const t = Math.max(useClock(model.anyActive(), now), now());
  const rows = groupRows(model.tasks, model.arrays, model.pipelines);
  // the row the selected task is in (an element's array, a step's pipeline) is open with it
  const selectedTask = selected.id !== null ? model.byId?.get(selected.id) : undefined;
  const selectedRow = selectedTask ? rowOf(selectedTask, rows) : null;
  const selectedArray = selectedTask?.array_id != null ? `a${selectedTask.array_id}` : null;
  const isOpen = (key: string) => openGroups.has(key) || key === selectedRow || key === selectedArray;
  const renderTask = (task: Task) => (
    <TaskRow
      key={task.id}
      model={model}
      task={task}
      t={t}
      open={selected.id === task.id}
      view={selected.id === task.id ? selected.view : null}
      onToggle={() => onSelect(selected.id === task.id ? null : task.id, 'log')}
      onView={v => onSelect(task.id, v)}
      onSelect={id => onSelect(id, 'log')}
      onTerminal={cb.openTerminal}
    />
  );
  const group: GroupProps = {
    model,
    isOpen,
    onToggle: key => onToggleGroup(key, key === selectedRow || key === selectedArray),
    selectedId: selected.id,
    onSelectTask: id => onSelect(id, 'log'),
    renderTask
  };
  return (
    <div className="tacc-panel-inner">
      <header className="tacc-header">
        <h2 className="tacc-title">GPU tasks</h2>
        <div className="tacc-header-actions">
          <button
            className="jp-Button jp-mod-styled jp-mod-accept tacc-btn tacc-submit-current"
            onClick={cb.submitCurrent}
            disabled={!cb.canSubmit()}
            title="Submit the current notebook as a task"
          >
            Submit<span className="tacc-wide"> notebook</span>
          </button>
          <button
            className="jp-Button jp-mod-styled jp-mod-reject tacc-btn"
            aria-pressed={showCluster}
            onClick={() => setShowCluster(!showCluster)}
          >
            Cluster
          </button>
          <button
            className="jp-Button jp-mod-styled jp-mod-reject tacc-btn tacc-refresh"
            aria-label="Refresh tasks"
            title="Refresh tasks"
            onClick={() => model.kick()}
          >
            <refreshIcon.react tag="span" className="tacc-icon" />
          </button>
        </div>
      </header>
      <UserLinks model={model} />
      {model.error && (
        <div className="tacc-error" role="alert">
          {model.error}
        </div>
      )}
      {showCluster && <ClusterView model={model} />}
      {model.byId === null && !model.error && <div className="tacc-muted">Loading your tasks…</div>}
      {model.byId !== null && rows.length === 0 && (
        <div className="tacc-muted">No tasks yet. Open a notebook and use “Submit notebook”.</div>
      )}
      <ul className="tacc-tasks" aria-label="Your tasks">
        {rows.map(row =>
          row.kind === 'task' ? (
            renderTask(row.task)
          ) : row.kind === 'array' ? (
            <ArrayRow key={row.key} props={group} array={row.array} />
          ) : (
            <PipelineRow key={row.key} props={group} pipeline={row.pipeline} />
          )
        )}
      </ul>
    </div>
  );
}

export class TaccPanel extends ReactWidget {
  private selected: { id: number | null; view: View } = { id: null, view: null };
  /** Array and pipeline rows the user opened (arrays.ts keys: a7, p3). */
  private readonly openGroups = new Set<string>();

  constructor(
    readonly model: TasksModel,
    private readonly cb: PanelCallbacks
  ) {
    super();
    this.id = 'tacc-hub-panel';
    this.addClass('tacc-panel');
    this.title.caption = 'GPU cluster tasks';
  }

  /** Open a task's log (or spec) in the panel. */
  select(id: number | null, view: View = 'log'): void {
    this.selected = { id, view };
    this.update();
  }

  /** Open an array's or a pipeline's row (a notification's "Show"). */
  openGroup(key: string): void {
    this.openGroups.add(key);
    this.update();
  }

  /** Open or close an array's or a pipeline's row; closing the row of the selected task unselects it. */
  toggleGroup(key: string, selectedInside: boolean): void {
    if (this.openGroups.has(key) || selectedInside) {
      this.openGroups.delete(key);
      if (selectedInside) {
        this.selected = { id: null, view: null };
      }
    } else {
      this.openGroups.add(key);
    }
    this.update();
  }

  protected onAfterShow(msg: Message): void {
    super.onAfterShow(msg);
    this.model.setVisible(true);
  }

  protected onAfterHide(msg: Message): void {
    super.onAfterHide(msg);
    this.model.setVisible(false);
  }

  protected onAfterAttach(msg: Message): void {
    super.onAfterAttach(msg);
    this.model.setVisible(this.isVisible);
  }

  render(): JSX.Element {
    return (
      <PanelBody
        model={this.model}
        cb={this.cb}
        selected={this.selected}
        onSelect={(id, v) => this.select(id, v)}
        openGroups={this.openGroups}
        onToggleGroup={(key, selectedInside) => this.toggleGroup(key, selectedInside)}
      />
    );
  }
}
