/**
 * "Submit this notebook": a dialog with the resources (GPUs, nodes, time), the runtime and a
 * preview of the captured environment (the spec, its digest, the snapshot's files, git state
 * and the pinned packages), refreshed when a choice changes; Submit sends it.
 */

import { Dialog, ReactWidget, showDialog, showErrorMessage } from '@jupyterlab/apputils';
import * as React from 'react';

import { ApiError, CapturePreview, TaccApi } from './api';
import { Task } from './model';
import { RUNTIMES, SubmitChoice, captureRequest, defaultChoice } from './choice';

function Field(props: { id: string; label: string; children: React.ReactNode }): JSX.Element {
  return (
    <div className="tacc-field">
      <label htmlFor={props.id}>{props.label}</label>
      {props.children}
    </div>
  );
}

function Preview({ preview }: { preview: CapturePreview }): JSX.Element {
  const spec = preview.spec;
  const env = spec.environment ?? {};
  const reqs: string[] = env.requirements ?? [];
  return (
    <div className="tacc-preview" aria-label="Captured environment">
      <div>
        <b>digest</b> <code className="tacc-digest">{preview.digest}</code>
      </div>
      <div>
        <b>runs</b> <code>{JSON.stringify(spec.entrypoint?.argv ?? spec.entrypoint)}</code>
      </div>
      <div>
        <b>python</b> {env.python ?? '-'} · <b>packages</b> {reqs.length} pinned · <b>snapshot</b>{' '}
        {preview.files.length} files, {Math.ceil(preview.snapshot_bytes / 1024)} KiB
      </div>
      {preview.git && (
        <div>
          <b>git</b> {String(preview.git.branch ?? '')} {String(preview.git.commit ?? '').slice(0, 10)}
          {preview.diff ? ` + uncommitted changes (${preview.diff.length} bytes of diff)` : ''}
        </div>
      )}
      {preview.notes.length > 0 && (
        <ul className="tacc-notes">
          {preview.notes.map((n, i) => (
            <li key={i}>{n}</li>
          ))}
        </ul>
      )}
      <details>
        <summary>Packages ({reqs.length})</summary>
        <pre className="tacc-preview-pre">{reqs.join('\n')}</pre>
      </details>
      <details>
        <summary>Files ({preview.files.length})</summary>
        <pre className="tacc-preview-pre">{preview.files.join('\n')}</pre>
      </details>
      <details>
        <summary>Spec</summary>
        <pre className="tacc-preview-pre">{JSON.stringify(spec, null, 2)}</pre>
      </details>
    </div>
  );
}

function SubmitForm(props: { api: TaccApi; path: string; kernelId?: string; initial: SubmitChoice; onChange: (c: SubmitChoice) => void }): JSX.Element {
  const [choice, setChoice] = React.useState(props.initial);
  const [preview, setPreview] = React.useState<CapturePreview | null>(null);
  const [error, setError] = React.useState<string | null>(null);
  const [loading, setLoading] = React.useState(true);
  const seq = React.useRef(0);

  React.useEffect(() => {
    props.onChange(choice);
    const mine = ++seq.current;
    setLoading(true);
    const timer = setTimeout(() => {
      props.api.capture(captureRequest(props.path, choice, props.kernelId)).then(
        p => {
          if (mine === seq.current) {
            setPreview(p);
            setError(null);
            setLoading(false);
          }
        },
        err => {
          if (mine === seq.current) {
            setError(err instanceof ApiError ? err.detail : String(err));
            setLoading(false);
          }
        }
      );
    }, 300);
    return () => clearTimeout(timer);
  }, [choice]);

  const set = (k: 'name' | 'gpus' | 'nodes' | 'time' | 'runtime', v: string | number) => setChoice({ ...choice, [k]: v });
  const num = (v: string) => Math.max(0, Math.floor(Number(v) || 0));
  return (
    <div className="tacc-submit-form">
      <div className="tacc-muted">{props.path}</div>
      <div className="tacc-fields">
        <Field id="tacc-f-name" label="Name">
          <input id="tacc-f-name" className="jp-mod-styled" value={choice.name} onChange={e => set('name', e.target.value)} />
        </Field>
        <Field id="tacc-f-gpus" label="GPUs per node">
          <input id="tacc-f-gpus" className="jp-mod-styled" type="number" min={0} value={choice.gpus} onChange={e => set('gpus', num(e.target.value))} />
        </Field>
        <Field id="tacc-f-nodes" label="Nodes">
          <input id="tacc-f-nodes" className="jp-mod-styled" type="number" min={1} value={choice.nodes} onChange={e => set('nodes', Math.max(1, num(e.target.value)))} />
        </Field>
        <Field id="tacc-f-time" label="Time limit">
          <input id="tacc-f-time" className="jp-mod-styled" value={choice.time} placeholder="e.g. 30m, 2h" onChange={e => set('time', e.target.value)} />
        </Field>
        <Field id="tacc-f-runtime" label="Runtime">
          <select id="tacc-f-runtime" className="jp-mod-styled" value={choice.runtime} onChange={e => set('runtime', e.target.value)}>
            {RUNTIMES.map(r => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        </Field>
      </div>
      <label className="tacc-check">
        <input
          id="tacc-f-packages"
          type="checkbox"
          checked={choice.packages}
          onChange={e => setChoice({ ...choice, packages: e.target.checked })}
        />{' '}
        Pin this environment's packages (the task installs the same versions)
      </label>
      <div className="tacc-preview-wrap" aria-live="polite" aria-busy={loading}>
        {error && (
          <div className="tacc-error" role="alert">
            {error}
          </div>
        )}
        {loading && <div className="tacc-muted">Capturing the environment…</div>}
        {preview && !error && <Preview preview={preview} />}
      </div>
    </div>
  );
}

class SubmitBody extends ReactWidget implements Dialog.IBodyWidget<SubmitChoice> {
  private choice: SubmitChoice;

  constructor(
    private readonly api: TaccApi,
    private readonly path: string,
    private readonly kernelId: string | undefined,
    initial: SubmitChoice
  ) {
    super();
    this.choice = initial;
    this.addClass('tacc-submit-dialog');
  }

  getValue(): SubmitChoice {
    return this.choice;
  }

  render(): JSX.Element {
    return (
      <SubmitForm api={this.api} path={this.path} kernelId={this.kernelId} initial={this.choice} onChange={c => (this.choice = c)} />
    );
  }
}

/** Ask, then submit; resolves to the created task, or null when the user cancelled. */
export async function submitNotebookDialog(api: TaccApi, path: string, kernelId?: string): Promise<Task | null> {
  const body = new SubmitBody(api, path, kernelId, defaultChoice(path));
  const result = await showDialog({
    title: 'Submit this notebook to the GPU cluster',
    body,
    buttons: [Dialog.cancelButton(), Dialog.okButton({ label: 'Submit', ariaLabel: 'Submit the notebook as a task' })],
    focusNodeSelector: 'input'
  });
  if (!result.button.accept || !result.value) {
    return null;
  }
  try {
    const out = await api.submitNotebook(captureRequest(path, result.value, kernelId));
    return out.task ?? null;
  } catch (err) {
    await showErrorMessage('Submit failed', err instanceof ApiError ? err.detail : String(err));
    return null;
  }
}
