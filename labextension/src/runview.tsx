/**
 * What a running task's row and details show of its run: time left (ticking, from the task's
 * deadline), its GPU utilization (a sparkline of the service's samples, labelled with the mean),
 * its attempt when it has run more than once, its web ports as links (each opens in a new browser
 * tab, straight through the hub to the task: not through the Jupyter server) with a one-click
 * TensorBoard button, and the Terminal and Extend actions. The extend dialog offers +30m, +1h,
 * +4h or a typed duration, and shows the service's refusal (over the site maximum, over the
 * budget) with the field it names, keeping the dialog open to try again.
 */

import { Dialog, ReactWidget, showDialog } from '@jupyterlab/apputils';
import * as React from 'react';

import { Attempt, PortInfo, Task, Usage, formatDuration } from './model';
import {
  EXTEND_PRESETS,
  WARN_BEFORE,
  attemptLines,
  attemptText,
  fieldDetail,
  gpuLabel,
  meanUtil,
  parseDuration,
  sparkPoints,
  tensorboardPort,
  timeLeft,
  timeLeftText
} from './running';
import { TasksModel } from './tasks';

const SPARK_W = 44;
const SPARK_H = 14;

export function TimeLeft({ task, t }: { task: Task; t: number }): JSX.Element | null {
  const left = timeLeft(task, t);
  if (left === null) {
    return null;
  }
  const soon = left <= WARN_BEFORE;
  const deadline = task.deadline ? new Date(task.deadline * 1000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }) : null;
  return (
    <span
      className={`tacc-timeleft${soon ? ' tacc-timeleft-soon' : ''}`}
      data-time-left={Math.floor(left)}
      title={
        `Time limit ${formatDuration(task.time_limit ?? null)}` + (deadline ? `; stopped at ${deadline} unless extended` : '')
      }
    >
      {timeLeftText(left)}
    </span>
  );
}

export function GpuSpark({ usage }: { usage: Usage | null | undefined }): JSX.Element | null {
  const label = gpuLabel(usage);
  if (!usage || label === null) {
    return null;
  }
  const points = sparkPoints(usage.samples, SPARK_W, SPARK_H);
  const peak = usage.peak_util != null ? `, peak ${Math.round(usage.peak_util)}%` : '';
  const mean = meanUtil(usage);
  return (
    <span
      className="tacc-spark"
      data-mean={mean === null ? '' : Math.round(mean)}
      title={`GPU utilization of the last ${usage.samples.length} samples (every ${formatDuration(usage.interval)}): mean ${label.slice(4)}${peak}`}
    >
      <svg className="tacc-spark-svg" width={SPARK_W} height={SPARK_H} viewBox={`0 0 ${SPARK_W} ${SPARK_H}`} aria-hidden="true">
        <line className="tacc-spark-base" x1="0" y1={SPARK_H - 0.5} x2={SPARK_W} y2={SPARK_H - 0.5} />
        {points && <polygon className="tacc-spark-area" points={`0,${SPARK_H} ${points} ${SPARK_W},${SPARK_H}`} />}
        {points && <polyline className="tacc-spark-line" points={points} />}
      </svg>
      {label}
    </span>
  );
}

export function AttemptBadge({ task, attempts }: { task: Task; attempts: Attempt[] | null | undefined }): JSX.Element | null {
  const text = attemptText(task, attempts);
  if (!text) {
    return null;
  }
  return (
    <span className="tacc-attempt" title={attempts ? attemptLines(attempts).join('\n') : 'The task was restarted'}>
      {text}
    </span>
  );
}

function PortLink({ port }: { port: PortInfo }): JSX.Element {
  if (!port.listening) {
    return (
      <span className="tacc-port tacc-port-idle" title={`Port ${port.port}: nothing listens on it yet`}>
        :{port.port}
        {port.label ? ` ${port.label}` : ''}
      </span>
    );
  }
  return (
    <a
      className="tacc-port"
      href={port.url}
      target="_blank"
      rel="noopener noreferrer"
      data-port={port.port}
      title={`Open port ${port.port} of the task in a new tab`}
    >
      :{port.port}
      {port.label ? ` ${port.label}` : ''}
      <span className="tacc-ext" aria-hidden="true">
        ↗
      </span>
    </a>
  );
}

/** The task's web ports: TensorBoard as a button, the others as links; nothing when it has none. */
export function PortsLine({ ports }: { ports: PortInfo[] | null | undefined }): JSX.Element | null {
  if (!ports || !ports.length) {
    return null;
  }
  const tb = tensorboardPort(ports);
  const others = ports.filter(p => p !== tb);
  return (
    <div className="tacc-ports" aria-label="Web ports of the task">
      {tb && (
        <a
          className={`jp-Button jp-mod-styled jp-mod-accept tacc-btn tacc-tensorboard${tb.listening ? '' : ' tacc-disabled'}`}
          href={tb.listening ? tb.url : undefined}
          target="_blank"
          rel="noopener noreferrer"
          aria-disabled={!tb.listening}
          data-port={tb.port}
          title={tb.listening ? 'Open TensorBoard in a new tab' : 'TensorBoard is starting'}
        >
          TensorBoard
          <span className="tacc-ext" aria-hidden="true">
            ↗
          </span>
        </a>
      )}
      {others.length > 0 && <span className="tacc-ports-label">Ports</span>}
      {others.map(p => (
        <PortLink key={p.port} port={p} />
      ))}
    </div>
  );
}

/** The runs before this one, one line each (shown with the details once there were several). */
export function AttemptHistory({ attempts }: { attempts: Attempt[] | null | undefined }): JSX.Element | null {
  const lines = attempts && attempts.length > 1 ? attemptLines(attempts) : [];
  if (!lines.length) {
    return null;
  }
  return (
    <ul className="tacc-attempts" aria-label="Earlier runs">
      {lines.map(l => (
        <li key={l}>{l}</li>
      ))}
    </ul>
  );
}

function ExtendForm(props: {
  task: Task;
  now: number;
  initial: string;
  error: string | null;
  onChange: (v: string) => void;
}): JSX.Element {
  const [value, setValue] = React.useState(props.initial);
  const seconds = parseDuration(value);
  const left = timeLeft(props.task, props.now);
  const set = (v: string) => {
    setValue(v);
    props.onChange(v);
  };
  return (
    <div className="tacc-extend">
      <div className="tacc-extend-presets" role="group" aria-label="Extend by">
        {EXTEND_PRESETS.map(p => (
          <button
            key={p.label}
            type="button"
            className="jp-Button jp-mod-styled jp-mod-reject tacc-btn tacc-preset"
            aria-pressed={seconds === p.seconds}
            onClick={() => set(p.label)}
          >
            {p.label}
          </button>
        ))}
      </div>
      <label className="tacc-field">
        <span>Or a duration</span>
        <input
          className="jp-mod-styled tacc-extend-input"
          value={value}
          placeholder="e.g. 90m, 2h, 1h30m, 1:30"
          aria-invalid={value.trim() !== '' && seconds === null}
          onChange={e => set(e.target.value)}
        />
      </label>
      <div className="tacc-extend-preview tacc-muted" aria-live="polite">
        {seconds === null
          ? value.trim()
            ? 'Not a duration: try 30m, 2h, 1h30m or 1:30'
            : ' '
          : left !== null
            ? `${timeLeftText(left)} now; ${formatDuration(left + seconds)} left after extending by ${formatDuration(seconds)}`
            : `Extend by ${formatDuration(seconds)}`}
      </div>
      {props.error && (
        <div className="tacc-error tacc-extend-error" role="alert">
          {props.error}
        </div>
      )}
    </div>
  );
}

class ExtendBody extends ReactWidget implements Dialog.IBodyWidget<string> {
  private value: string;

  constructor(
    private readonly task: Task,
    private readonly now: number,
    initial: string,
    private readonly error: string | null
  ) {
    super();
    this.value = initial;
    this.addClass('tacc-extend-dialog');
  }

  getValue(): string {
    return this.value;
  }

  render(): JSX.Element {
    return (
      <ExtendForm task={this.task} now={this.now} initial={this.value} error={this.error} onChange={v => (this.value = v)} />
    );
  }
}

/**
 * The extend dialog of a task: again (with what was typed and why it was refused) until the service
 * takes it or the user gives up; the task as the service answered, or null.
 */
export async function extendTask(model: TasksModel, task: Task): Promise<Task | null> {
  let value = '+1h';
  let error: string | null = null;
  for (;;) {
    const current = model.byId?.get(task.id) ?? task;
    const answer = await showDialog({
      title: `Extend task ${task.id} (${task.name})`,
      body: new ExtendBody(current, model.api.now(), value, error),
      buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Extend' })],
      focusNodeSelector: '.tacc-extend-input'
    });
    if (!answer.button.accept) {
      return null;
    }
    value = answer.value ?? '';
    const seconds = parseDuration(value);
    if (seconds === null) {
      error = `"${value}" is not a duration: try 30m, 2h, 1h30m or 1:30`;
      continue;
    }
    try {
      const updated = await model.api.extend(task.id, seconds);
      model.noteTask(updated);
      model.kick();
      return updated;
    } catch (err) {
      error = fieldDetail(err);
    }
  }
}
