/**
 * An array and a pipeline as one row each in the task list. An array's row shows its name and size,
 * its aggregate status, a progress bar (done / failed / cancelled / running / waiting) with the counts,
 * and the service's queue line ("12 of 50 running, 38 waiting: Priority"); opened, it lists the elements
 * (index, parameters, status), each of which opens in place as the task row it is (log, spec, cancel),
 * and offers Cancel all. A pipeline's row shows its steps as a chain; opened, the steps in order with
 * their status and what each waits for, a step opening as its task's row (or its array's row).
 */

import { Dialog, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import * as React from 'react';

import { ApiError } from './api';
import {
  ArrayInfo,
  PipelineInfo,
  PipelineStep,
  arrayActive,
  arrayKey,
  arrayTitle,
  countsText,
  paramsText,
  pipelineActive,
  progress,
  stepWaits
} from './arrays';
import { Task, isTerminal } from './model';
import { TasksModel } from './tasks';

/** How many elements an open array lists before "Show more". */
export const ELEMENTS_SHOWN = 50;

export interface GroupProps {
  model: TasksModel;
  /** Whether the row (key) is open, and toggling it. */
  isOpen: (key: string) => boolean;
  onToggle: (key: string) => void;
  /** The task selected in the panel (its row is open), if any. */
  selectedId: number | null;
  onSelectTask: (id: number | null) => void;
  /** The task's own row (panel.tsx's TaskRow), open. */
  renderTask: (task: Task) => JSX.Element;
}

function Badge({ status }: { status: string }): JSX.Element {
  return <span className={`tacc-status tacc-status-${status}`}>{status.toUpperCase()}</span>;
}

/** The progress bar of an array: one coloured part per state, as wide as its share of the elements. */
export function ProgressBar({ array }: { array: ArrayInfo }): JSX.Element {
  const parts = progress(array);
  const total = Math.max(array.size, parts.reduce((s, p) => s + p.count, 0), 1);
  const label = parts.map(p => `${p.count} ${p.label}`).join(', ') || 'no elements';
  return (
    <span className="tacc-progress" role="img" aria-label={`Progress of array ${array.id}: ${label}`} title={label}>
      {parts.map(p => (
        <span
          key={p.kind}
          className={`tacc-progress-part tacc-progress-${p.kind}`}
          data-kind={p.kind}
          data-count={p.count}
          style={{ width: `${(100 * p.count) / total}%` }}
        />
      ))}
    </span>
  );
}

async function confirmCancel(what: string, body: string): Promise<boolean> {
  const answer = await showDialog({
    title: `Cancel ${what}?`,
    body,
    buttons: [Dialog.cancelButton({ label: 'Keep them' }), Dialog.warnButton({ label: 'Cancel all' })]
  });
  return answer.button.accept;
}

/** The task of an element or a step: from the task list, else the open array's elements, else fetched once. */
function useTask(model: TasksModel, id: number | null | undefined, known?: Task): Task | null {
  const listed = (id != null ? model.byId?.get(id) : undefined) ?? known ?? null;
  const [fetched, setFetched] = React.useState<Task | null>(null);
  React.useEffect(() => {
    if (id == null || listed) {
      return;
    }
    let live = true;
    model.api.getTask(id).then(
      t => live && setFetched(t),
      () => undefined
    );
    return () => {
      live = false;
    };
  }, [id, listed === null]);
  return listed ?? fetched;
}

function ElementRow({ props, task }: { props: GroupProps; task: Task }): JSX.Element {
  const { model } = props;
  const fresh = model.byId?.get(task.id) ?? task; // the task list is polled more often than the array
  if (props.selectedId === task.id) {
    return props.renderTask(fresh);
  }
  const params = paramsText(model.withSpec(fresh));
  return (
    <li className="tacc-element" data-task-id={fresh.id} data-index={fresh.array_index ?? ''} data-status={fresh.status}>
      <button
        className="tacc-element-head"
        aria-label={`Element ${fresh.array_index ?? '?'} (task ${fresh.id}), ${fresh.status}${params ? `, ${params}` : ''}`}
        title={`Open task ${fresh.id}: its log, spec and actions`}
        onClick={() => props.onSelectTask(fresh.id)}
      >
        <span className="tacc-element-index">[{fresh.array_index ?? '?'}]</span>
        <span className="tacc-element-params">{params || <span className="tacc-muted">#{fresh.id}</span>}</span>
        <Badge status={fresh.status} />
      </button>
    </li>
  );
}

export function ArrayRow({ props, array, nested = false }: { props: GroupProps; array: ArrayInfo; nested?: boolean }): JSX.Element {
  const { model } = props;
  const key = arrayKey(array.id);
  const open = props.isOpen(key);
  const [busy, setBusy] = React.useState(false);
  const [shown, setShown] = React.useState(ELEMENTS_SHOWN);
  React.useEffect(() => {
    model.watchArray(array.id, open);
    return () => model.watchArray(array.id, false);
  }, [array.id, open]);
  const detail = model.arrayDetails.get(array.id);
  const a: ArrayInfo = array.partial && detail ? detail : array;
  const elements = React.useMemo(() => {
    const list = detail?.tasks ?? model.tasks.filter(t => t.array_id === array.id);
    return [...list].sort((x, y) => (x.array_index ?? x.id) - (y.array_index ?? y.id));
  }, [detail, model.tasks, array.id]);
  React.useEffect(() => {
    if (open) {
      model.ensureSpecs(elements.slice(0, shown).filter(t => t.params == null).map(t => t.id));
    }
  }, [open, elements, shown]);

  const cancelAll = async () => {
    const left = a.running + a.waiting;
    if (!(await confirmCancel(`array ${a.id} (${arrayTitle(a)})`,
      `Its ${left} element${left === 1 ? '' : 's'} not yet ended are cancelled; ended ones keep their state and logs.`))) {
      return;
    }
    setBusy(true);
    try {
      await model.api.cancelArray(a.id);
      await model.fetchArray(a.id);
      model.kick();
    } catch (err) {
      await showErrorMessage(`Cancel array ${a.id}`, err instanceof ApiError ? err.detail : String(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <li
      className={`tacc-task tacc-group tacc-array${open ? ' tacc-open' : ''}${nested ? ' tacc-nested' : ''}`}
      data-array-id={a.id}
      data-status={a.status}
      data-size={a.size}
    >
      <button
        className="tacc-task-head"
        aria-expanded={open}
        aria-label={`Array ${a.id} ${arrayTitle(a)}, ${a.status}: ${countsText(a)}`}
        onClick={() => props.onToggle(key)}
      >
        <span className="tacc-task-title" title={`Array ${a.id}: ${arrayTitle(a)}`}>
          <span className="tacc-caret" aria-hidden="true">{open ? '▾' : '▸'}</span>
          <span className="tacc-task-id">#{a.id}</span> {a.name}
          <span className="tacc-size">[{a.size}]</span>
        </span>
        <Badge status={a.status} />
      </button>
      <div className="tacc-group-progress">
        <ProgressBar array={a} />
      </div>
      <div className="tacc-task-meta tacc-counts" data-done={a.done} data-running={a.running} data-waiting={a.waiting} data-failed={a.failed}>
        <span className="tacc-count tacc-count-done">{a.done} done</span>
        <span className="tacc-count tacc-count-running">{a.running} running</span>
        <span className="tacc-count tacc-count-waiting">{a.waiting} waiting</span>
        <span className="tacc-count tacc-count-failed">{a.failed} failed</span>
        {(a.counts?.['cancelled'] ?? 0) > 0 && <span className="tacc-count tacc-count-cancelled">{a.counts['cancelled']} cancelled</span>}
        {a.max_running != null && <span title="At most this many elements run at once">max {a.max_running} at once</span>}
      </div>
      {a.reason && a.waiting > 0 && <div className="tacc-queue tacc-group-reason">{a.reason}</div>}
      {open && (
        <div className="tacc-task-body">
          <div className="tacc-actions" role="toolbar" aria-label={`Actions for array ${a.id}`}>
            <span className="tacc-muted tacc-group-note">
              {elements.length < a.size ? `${elements.length} of ${a.size} elements` : `${a.size} elements`}
            </span>
            <span className="tacc-spacer" />
            <button
              className="jp-Button jp-mod-styled jp-mod-warn tacc-btn tacc-cancel-all"
              disabled={busy || !arrayActive(a)}
              aria-label={`Cancel all elements of array ${a.id}`}
              title="Cancel every element not yet ended"
              onClick={cancelAll}
            >
              Cancel all
            </button>
          </div>
          <ul className="tacc-elements" aria-label={`Elements of array ${a.id}`}>
            {elements.slice(0, shown).map(t => (
              <ElementRow key={t.id} props={props} task={t} />
            ))}
          </ul>
          {elements.length > shown && (
            <button
              className="jp-Button jp-mod-styled jp-mod-reject tacc-btn tacc-more"
              onClick={() => setShown(shown + ELEMENTS_SHOWN)}
            >
              Show {Math.min(ELEMENTS_SHOWN, elements.length - shown)} more of {elements.length - shown}
            </button>
          )}
        </div>
      )}
    </li>
  );
}

/** The steps as a chain on the row: `prepare ✓ → train ● → evaluate ○`. */
function StepChain({ steps }: { steps: PipelineStep[] }): JSX.Element {
  const mark = (s: string) =>
    s === 'succeeded' ? '✓' : s === 'failed' || s === 'lost' ? '✗' : s === 'cancelled' ? '–' : s === 'pending' ? '○' : '●';
  return (
    <span className="tacc-chain">
      {steps.map((s, i) => (
        <React.Fragment key={s.name}>
          {i > 0 && <span className="tacc-chain-arrow" aria-hidden="true">→</span>}
          <span className={`tacc-chain-step tacc-step-${s.status}`} data-step={s.name} data-status={s.status} title={`${s.name}: ${s.status}`}>
            <span aria-hidden="true">{mark(s.status)}</span> {s.name}
          </span>
        </React.Fragment>
      ))}
    </span>
  );
}

function StepRow({ props, step, steps, n }: { props: GroupProps; step: PipelineStep; steps: PipelineStep[]; n: number }): JSX.Element {
  const { model } = props;
  const task = useTask(model, step.task_id);
  const array = step.array_id != null ? model.arrays.find(x => x.id === step.array_id) : undefined;
  const waits = stepWaits(step, steps);
  const note = waits || (step.needs.length ? `after ${step.needs.join(', ')}` : '');
  const open = (step.task_id != null && props.selectedId === step.task_id) ||
    (step.array_id != null && props.isOpen(arrayKey(step.array_id)));
  const target = step.task_id != null ? `task #${step.task_id}` : step.array_id != null ? `array #${step.array_id}` : null;
  const toggle = () => {
    if (step.task_id != null) {
      props.onSelectTask(open ? null : step.task_id);
    } else if (step.array_id != null) {
      props.onToggle(arrayKey(step.array_id));
    }
  };
  return (
    <li className="tacc-step" data-step={step.name} data-status={step.status} data-task-id={step.task_id ?? ''} data-array-id={step.array_id ?? ''}>
      <button
        className="tacc-step-head"
        aria-expanded={open}
        disabled={target === null}
        aria-label={`Step ${n} ${step.name}, ${step.status}${target ? `: open ${target}` : ''}`}
        title={target ? `Open ${target}: its log, spec and actions` : undefined}
        onClick={toggle}
      >
        <span className="tacc-step-n">{n}.</span>
        <span className="tacc-step-name">{step.name}</span>
        {target && <span className="tacc-task-id tacc-step-target">#{step.task_id ?? step.array_id}</span>}
        <span className="tacc-spacer" />
        <Badge status={step.status} />
      </button>
      {note && <div className={waits && step.status === 'pending' ? 'tacc-step-waits' : 'tacc-step-needs'}>{note}</div>}
      {open && step.task_id != null && task && <ul className="tacc-tasks tacc-step-task">{props.renderTask(task)}</ul>}
      {open && array && (
        <ul className="tacc-tasks tacc-step-task">
          <ArrayRow props={props} array={array} nested />
        </ul>
      )}
    </li>
  );
}

export function PipelineRow({ props, pipeline }: { props: GroupProps; pipeline: PipelineInfo }): JSX.Element {
  const { model } = props;
  const key = `p${pipeline.id}`;
  const open = props.isOpen(key);
  const [busy, setBusy] = React.useState(false);
  const p = pipeline;
  const done = p.steps.filter(s => s.status === 'succeeded').length;

  const cancelAll = async () => {
    const left = p.steps.filter(s => !isTerminal(s.status)).length;
    if (!(await confirmCancel(`pipeline ${p.id} (${p.name})`,
      `Its ${left} step${left === 1 ? '' : 's'} not yet ended are cancelled; ended ones keep their state and logs.`))) {
      return;
    }
    setBusy(true);
    try {
      await model.api.cancelPipeline(p.id);
      model.kick();
    } catch (err) {
      await showErrorMessage(`Cancel pipeline ${p.id}`, err instanceof ApiError ? err.detail : String(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <li className={`tacc-task tacc-group tacc-pipeline${open ? ' tacc-open' : ''}`} data-pipeline-id={p.id} data-status={p.status}>
      <button
        className="tacc-task-head"
        aria-expanded={open}
        aria-label={`Pipeline ${p.id} ${p.name}, ${p.status}: ${done} of ${p.steps.length} steps succeeded`}
        onClick={() => props.onToggle(key)}
      >
        <span className="tacc-task-title" title={`Pipeline ${p.id}: ${p.name}`}>
          <span className="tacc-caret" aria-hidden="true">{open ? '▾' : '▸'}</span>
          <span className="tacc-task-id">#{p.id}</span> {p.name}
        </span>
        <Badge status={p.status} />
      </button>
      <div className="tacc-task-meta">
        <StepChain steps={p.steps} />
      </div>
      {open && (
        <div className="tacc-task-body">
          <div className="tacc-actions" role="toolbar" aria-label={`Actions for pipeline ${p.id}`}>
            <span className="tacc-muted tacc-group-note">
              {done} of {p.steps.length} steps succeeded
            </span>
            <span className="tacc-spacer" />
            <button
              className="jp-Button jp-mod-styled jp-mod-warn tacc-btn tacc-cancel-all"
              disabled={busy || !pipelineActive(p)}
              aria-label={`Cancel all steps of pipeline ${p.id}`}
              title="Cancel every step not yet ended"
              onClick={cancelAll}
            >
              Cancel all
            </button>
          </div>
          <ol className="tacc-steps" aria-label={`Steps of pipeline ${p.id}`}>
            {p.steps.map((s, i) => (
              <StepRow key={s.name} props={props} step={s} steps={p.steps} n={i + 1} />
            ))}
          </ol>
        </div>
      )}
    </li>
  );
}
