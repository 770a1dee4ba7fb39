/**
 * The "Notifications" dialog of the panel: the user's e-mail address, the events they are told of and
 * their webhooks (with the payload format), within what the site allows; Save replaces the settings
 * (PUT /api/notifications, the service's refusal shown with the field it names), Send test queues a test
 * notification, and the last deliveries are listed with their status and last error.
 */

import { Dialog, ReactWidget, showDialog } from '@jupyterlab/apputils';
import * as React from 'react';

import { ApiError, TaccApi } from './api';
import { Delivery, EVENT_LABELS, HookFormat, NotifyInfo, Webhook, addWebhook, toSettings } from './notify';

function NotifyForm({ api }: { api: TaccApi }): JSX.Element {
  const [info, setInfo] = React.useState<NotifyInfo | null>(null);
  const [email, setEmail] = React.useState('');
  const [events, setEvents] = React.useState<Set<string>>(new Set());
  const [hooks, setHooks] = React.useState<Webhook[]>([]);
  const [newUrl, setNewUrl] = React.useState('');
  const [newFormat, setNewFormat] = React.useState<HookFormat>('json');
  const [status, setStatus] = React.useState('');
  const [error, setError] = React.useState('');
  const [history, setHistory] = React.useState<Delivery[]>([]);

  const show = (got: NotifyInfo) => {
    setInfo(got);
    setEmail(got.settings.email ?? '');
    setEvents(new Set(got.settings.events));
    setHooks(got.settings.webhooks);
  };
  const loadHistory = () =>
    api.notificationHistory(5).then(
      h => setHistory(h.deliveries),
      () => setHistory([])
    );
  React.useEffect(() => {
    api.notifications().then(show, (e: ApiError) => setError(e.detail ?? String(e)));
    void loadHistory();
  }, [api]);

  if (info === null) {
    return error ? <div className="tacc-error" role="alert">{error}</div> : <div className="tacc-muted">Loading…</div>;
  }
  const site = info.site;
  const fail = (e: unknown) => {
    setStatus('');
    setError(e instanceof ApiError ? e.detail : String(e));
  };
  const save = async () => {
    setError('');
    setStatus('Saving…');
    try {
      show(await api.saveNotifications(toSettings(email, events, hooks, site.events)));
      setStatus('Saved.');
    } catch (e) {
      fail(e);
    }
  };
  const test = async () => {
    setError('');
    try {
      const out = await api.testNotification();
      setStatus(out.queued ? `Test queued to ${out.queued} channel(s).` : 'Nothing to send to: save an address or a webhook first.');
      setTimeout(() => void loadHistory(), 3000);
    } catch (e) {
      fail(e);
    }
  };
  const add = () => {
    const out = addWebhook(hooks, newUrl, newFormat, site.max_webhooks);
    if (typeof out === 'string') {
      setError(out);
      return;
    }
    setError('');
    setHooks(out);
    setNewUrl('');
  };
  const toggle = (name: string, on: boolean) => {
    const next = new Set(events);
    if (on) {
      next.add(name);
    } else {
      next.delete(name);
    }
    setEvents(next);
  };

  return (
    <div className="tacc-notify">
      <label className="tacc-notify-row">
        <span>E-mail</span>
        <input
          className="jp-mod-styled tacc-notify-email"
          type="email"
          value={email}
          disabled={!site.email}
          placeholder={site.email ? 'you@example.org' : 'this site sends no e-mail'}
          onChange={e => setEmail(e.target.value)}
        />
      </label>
      <fieldset className="tacc-notify-events">
        <legend>Tell me when a task…</legend>
        {site.events.map(name => (
          <label key={name} className="tacc-notify-event">
            <input
              type="checkbox"
              name={name}
              checked={events.has(name)}
              onChange={e => toggle(name, e.target.checked)}
            />
            {EVENT_LABELS[name] ?? name}
          </label>
        ))}
      </fieldset>
      {site.webhooks && (
        <fieldset className="tacc-notify-hooks">
          <legend>Webhooks</legend>
          <ul>
            {hooks.map(h => (
              <li key={h.url} className="tacc-notify-hook">
                <code title={h.url}>{h.url}</code> <span className="tacc-muted">{h.format}</span>
                <button
                  className="jp-Button jp-mod-styled jp-mod-reject tacc-btn"
                  aria-label={`Remove webhook ${h.url}`}
                  onClick={() => setHooks(hooks.filter(o => o.url !== h.url))}
                >
                  Remove
                </button>
              </li>
            ))}
          </ul>
          <div className="tacc-notify-row">
            <input
              className="jp-mod-styled tacc-notify-url"
              type="url"
              value={newUrl}
              placeholder="https://hooks.slack.com/services/…"
              aria-label="Webhook URL"
              onChange={e => setNewUrl(e.target.value)}
            />
            <select
              className="jp-mod-styled tacc-notify-format"
              aria-label="Webhook format"
              value={newFormat}
              onChange={e => setNewFormat(e.target.value as HookFormat)}
            >
              {site.formats.map(f => (
                <option key={f} value={f}>
                  {f}
                </option>
              ))}
            </select>
            <button className="jp-Button jp-mod-styled jp-mod-reject tacc-btn tacc-notify-add" onClick={add}>
              Add
            </button>
          </div>
        </fieldset>
      )}
      {error && (
        <div className="tacc-error tacc-notify-error" role="alert">
          {error}
        </div>
      )}
      <div className="tacc-notify-row">
        <button className="jp-Button jp-mod-styled jp-mod-accept tacc-btn tacc-notify-save" onClick={save}>
          Save
        </button>
        <button className="jp-Button jp-mod-styled jp-mod-reject tacc-btn tacc-notify-test" onClick={test}>
          Send test
        </button>
        <span className="tacc-notify-status" aria-live="polite">
          {status}
        </span>
      </div>
      {history.length > 0 && (
        <details className="tacc-notify-history">
          <summary>Last deliveries</summary>
          <ul>
            {history.map(d => (
              <li key={d.id} data-status={d.status}>
                {d.event} {d.task_id !== null ? `#${d.task_id}` : ''} → {d.channel}: {d.status}
                {d.last_error ? ` (${d.last_error})` : ''}
              </li>
            ))}
          </ul>
        </details>
      )}
    </div>
  );
}

/** Open the dialog (its own Save and Send test buttons; Close leaves what was not saved). */
export async function openNotifications(api: TaccApi): Promise<void> {
  const body = ReactWidget.create(<NotifyForm api={api} />);
  body.addClass('tacc-notify-dialog');
  await showDialog({ title: 'Notifications', body, buttons: [Dialog.okButton({ label: 'Close' })] });
}
