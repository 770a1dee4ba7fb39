/**
 * Notification settings as the panel's dialog edits them (notifyview.tsx): the shapes of
 * `GET/PUT /api/notifications` (docs/notifications.md) and the pure steps between the form and them.
 * The service validates everything again (e-mail syntax, URL and SSRF rules, events, counts).
 */

export type HookFormat = 'json' | 'slack' | 'teams';

export interface Webhook {
  url: string;
  format: HookFormat;
}

export interface NotifySettings {
  email: string | null;
  events: string[];
  webhooks: Webhook[];
}

export interface NotifySite {
  email: boolean;
  webhooks: boolean;
  events: string[];
  formats: HookFormat[];
  max_webhooks: number;
  email_domains: string[];
  webhook_hosts_only: string[] | null;
}

export interface NotifyInfo {
  user: string;
  settings: NotifySettings;
  site: NotifySite;
  usage_url: string;
}

export interface Delivery {
  id: number;
  channel: string;
  destination: string;
  event: string;
  task_id: number | null;
  status: 'pending' | 'sent' | 'failed';
  attempts: number;
  created_at: number;
  last_error: string | null;
}

export interface Deliveries {
  user: string;
  deliveries: Delivery[];
}

/** The events a user can ask for, in the service's order, with what the dialog says of each. */
export const EVENT_LABELS: Record<string, string> = {
  started: 'started',
  ended: 'succeeded',
  failed: 'failed, timed out or lost',
  preempted: 'preempted or requeued',
  near_limit: 'near its time limit',
  cancelled: 'cancelled'
};

/** The settings to save from the form's fields: an empty address is none; events in the site's order. */
export function toSettings(email: string, events: Iterable<string>, webhooks: Webhook[], order: string[]): NotifySettings {
  const chosen = new Set(events);
  const address = email.trim();
  return {
    email: address === '' ? null : address,
    events: order.filter(e => chosen.has(e)),
    webhooks: webhooks.map(w => ({ url: w.url, format: w.format }))
  };
}

/**
 * `hooks` with `url` added (or its format changed when it is there already); an error message instead
 * when the URL is empty, not http(s), or one too many for the site.
 */
export function addWebhook(hooks: Webhook[], url: string, format: HookFormat, max: number): Webhook[] | string {
  const u = url.trim();
  if (!/^https?:\/\/\S+$/i.test(u)) {
    return 'A webhook is an http:// or https:// URL.';
  }
  const others = hooks.filter(h => h.url !== u);
  if (others.length >= max) {
    return max === 0 ? 'This site allows no webhooks.' : `At most ${max} webhooks.`;
  }
  return [...others, { url: u, format }];
}

/** The browser URL of the service page at `path` (a path on the hub's origin, as the service answers it). */
export function pageUrl(path: string, origin: string): string {
  return new URL(path, origin).toString();
}
