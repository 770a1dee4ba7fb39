/**
 * The side panel: the user's tasks (state, GPUs and nodes, runtime, queue position and
 * estimated start, elapsed time), per task its log (streamed, following the tail), its spec,
 * cancel and resubmit; and the cluster view (free GPUs per node and switch).
 */

import { Dialog, ReactWidget, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import { Message } from '@lumino/messaging';
import * as React from 'react';

import { ApiError } from './api';
import { LogFollower, FollowState } from './follow';
import { LogBuffer } from './logs';
import {
  Cluster,
  Task,
  bySwitch,
  elapsedOf,
  formatDuration,
  isActive,
  isTerminal,
  queueText,
  resourcesText,
  resubmitSpec,
  runtimeOf
} from './model';
import { TasksModel } from './tasks';

const now = () => Date.now() / 1000;

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

/** Re-render every second while something is active (elapsed times move). */
function useClock(active: boolean): number {
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

function LogView({ model, taskId }: { model: TasksModel; taskId: number }): JSX.Element {
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
  }, [model, taskId]);

  React.useLayoutEffect(() => {
    if (follow && pre.current) {
      pre.current.scrollTop = pre.current.scrollHeight;
    }
  }, [text, follow]);

  const label =
    state.s === 'ended'
      ? `ended (${state.detail})`
      : state.s === 'error'
        ? `error: ${state.detail}`
        : state.s;
  return (
    <div className="tacc-log">
      <div className="tacc-log-bar">
        <span className="tacc-log-state" data-state={state.s} aria-live="polite">
          Log: {label}
        </span>
        <label className="tacc-follow">
          <input type="checkbox" checked={follow} onChange={e => setFollow(e.target.checked)} /> Follow tail
        </label>
      </div>
      <pre
        ref={pre}
        className="tacc-log-text"
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
        {text || (state.s === 'ended' ? '(no output)' : '')}
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
  return (
    <div className="tacc-spec">
      <div className="tacc-muted">digest {full.digest}</div>
      <pre className="tacc-spec-text" tabIndex={0} aria-label={`Spec of task ${task.id}`}>
        {JSON.stringify(full.spec, null, 2)}
      </pre>
    </div>
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
}): JSX.Element {
  const { model, task, t, open, view } = props;
  const [busy, setBusy] = React.useState(false);
  const run = runtimeOf(task, t);
  const queue = task.status === 'pending' ? queueText(task, t) : '';
  const res = resourcesText(model.withSpec(task));

  const cancel = async () => {
    const server = task.name.startsWith('jupyter-');
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
        {res && <span title="GPUs and nodes">{res}</span>}
        {run !== null && <span title="Run time">ran {formatDuration(run)}</span>}
        <span title="Since submitted">elapsed {formatDuration(elapsedOf(task, t))}</span>
        {queue && (
          <span className="tacc-queue" title={task.queue?.detail || undefined}>
            {queue}
          </span>
        )}
        {task.reason && !queue && <span className="tacc-reason">{task.reason}</span>}
      </div>
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
            <button
              className="jp-Button jp-mod-styled jp-mod-warn tacc-btn"
              disabled={busy || isTerminal(task.status) || task.status === 'cancelling'}
              aria-label={`Cancel task ${task.id}`}
              onClick={cancel}
            >
              Cancel
            </button>
            <button
              className="jp-Button jp-mod-styled jp-mod-reject tacc-btn"
              disabled={busy}
              aria-label={`Resubmit task ${task.id} with the same spec`}
              onClick={resubmit}
            >
              Resubmit
            </button>
          </div>
          {view === 'log' && <LogView model={model} taskId={task.id} />}
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

export interface PanelCallbacks {
  submitCurrent: () => void;
  canSubmit: () => boolean;
}

function PanelBody({ model, cb, selected, onSelect }: {
  model: TasksModel;
  cb: PanelCallbacks;
  selected: { id: number | null; view: View };
  onSelect: (id: number | null, view: View) => void;
}): JSX.Element {
  useSignal(model);
  const [showCluster, setShowCluster] = React.useState(false);
  // the clock ticks while something is active; any re-render (a refresh) reads the time afresh too
  const t = Math.max(useClock(model.tasks.some(isActive)), now());
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
            Submit notebook
          </button>
          <button
            className="jp-Button jp-mod-styled jp-mod-reject tacc-btn"
            aria-pressed={showCluster}
            onClick={() => setShowCluster(!showCluster)}
          >
            Cluster
          </button>
          <button className="jp-Button jp-mod-styled jp-mod-reject tacc-btn" aria-label="Refresh tasks" onClick={() => model.kick()}>
            ⟳
          </button>
        </div>
      </header>
      {model.error && (
        <div className="tacc-error" role="alert">
          {model.error}
        </div>
      )}
      {showCluster && <ClusterView model={model} />}
      {model.byId === null && !model.error && <div className="tacc-muted">Loading your tasks…</div>}
      {model.byId !== null && model.tasks.length === 0 && (
        <div className="tacc-muted">No tasks yet. Open a notebook and use “Submit notebook”.</div>
      )}
      <ul className="tacc-tasks" aria-label="Your tasks">
        {model.tasks.map(task => (
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
          />
        ))}
      </ul>
    </div>
  );
}

export class TaccPanel extends ReactWidget {
  private selected: { id: number | null; view: View } = { id: null, view: null };

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
    return <PanelBody model={this.model} cb={this.cb} selected={this.selected} onSelect={(id, v) => this.select(id, v)} />;
  }
}
