/**
 * The routes of tacc_hub's jupyter_server extension, in one place: the user's own server
 * relays the tacc service under `<base_url>/tacc/api/...` (tacc_hub/jupyter/handlers.py).
 *
 * The client takes a `request(path, init)` function so that JupyterLab's
 * ServerConnection (base URL, token, XSRF) is plugged in by the plugin and a fake by tests.
 */

import type { ArrayInfo, PipelineInfo } from './arrays';
import type { Attempts, Cluster, Ports, Task, TaskList, Usage } from './model';
import type { Deliveries, NotifyInfo, NotifySettings } from './notify';

export type RequestFn = (path: string, init?: RequestInit) => Promise<Response>;

export const ROUTES = {
  tasks: 'tacc/api/tasks',
  task: (id: number) => `tacc/api/tasks/${id}`,
  cancel: (id: number) => `tacc/api/tasks/${id}/cancel`,
  logs: (id: number) => `tacc/api/tasks/${id}/logs`,
  logStream: (id: number) => `tacc/api/tasks/${id}/logs/stream`,
  capture: 'tacc/api/capture',
  submit: 'tacc/api/submit',
  ports: (id: number) => `tacc/api/tasks/${id}/ports`,
  usage: (id: number) => `tacc/api/tasks/${id}/usage`,
  attempts: (id: number) => `tacc/api/tasks/${id}/attempts`,
  extend: (id: number) => `tacc/api/tasks/${id}/extend`,
  exec: (id: number) => `tacc/api/tasks/${id}/exec`, // a WebSocket (terminal.ts)
  arrays: 'tacc/api/arrays',
  array: (id: number) => `tacc/api/arrays/${id}`,
  cancelArray: (id: number) => `tacc/api/arrays/${id}/cancel`,
  pipelines: 'tacc/api/pipelines',
  pipeline: (id: number) => `tacc/api/pipelines/${id}`,
  cancelPipeline: (id: number) => `tacc/api/pipelines/${id}/cancel`,
  cluster: 'tacc/api/cluster',
  quota: 'tacc/api/quota',
  notifications: 'tacc/api/notifications',
  notificationTest: 'tacc/api/notifications/test',
  notificationHistory: 'tacc/api/notifications/history'
} as const;

/** What the user picks in "Submit this notebook" (keys as the server extension reads them). */
export interface CaptureRequest {
  path: string;
  name?: string;
  resources?: { nodes?: number; gpus?: number; tasks_per_node?: number; cpus?: number; memory?: string; time?: string; partition?: string };
  runtime?: string;
  args?: string[];
  packages?: boolean;
  kernel_id?: string;
}

/** The captured environment: spec and digest, files of the snapshot, git state, notes. */
export interface CapturePreview {
  digest: string;
  spec: Record<string, any>;
  files: string[];
  snapshot_bytes: number;
  git: { commit?: string; branch?: string; dirty?: boolean; [k: string]: unknown } | null;
  diff: string;
  notes: string[];
  task?: Task;
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly errors: { field: string; message: string }[] = []
  ) {
    super(message);
  }

  /** The message and the fields it names, for a dialog (a field whose words the message already says once). */
  get detail(): string {
    const more = this.errors.filter(e => !this.message.includes(e.message));
    return [this.message, ...more.map(e => `${e.field}: ${e.message}`)].join('\n');
  }
}

/**
 * The server's clock minus this browser's, in seconds, from an answer's `Date` header (whole
 * seconds: +0.5 is its middle), or null (no header, or an answer slower than a second). Estimates are times on the server's clock; a laptop
 * whose clock is minutes off would otherwise show another start time than `%tacc` does.
 */
export function clockOffset(dateHeader: string | null, sentMs: number, receivedMs: number): number | null {
  const server = dateHeader ? Date.parse(dateHeader) : NaN;
  if (!isFinite(server) || receivedMs - sentMs > 1000) {
    // a slow answer says little about when the server wrote its Date
    return null;
  }
  return (server + 500 - (sentMs + receivedMs) / 2) / 1000;
}

export class TaccApi {
  /** Seconds to add to this browser's clock to read the server's; 0 while within 2 s (the header's resolution). */
  serverOffset = 0;

  constructor(private readonly request: RequestFn) {}

  /** Now on the server's clock, in seconds since the epoch. */
  now(): number {
    return Date.now() / 1000 + this.serverOffset;
  }

  private async json<T>(path: string, init?: RequestInit): Promise<T> {
    let resp: Response;
    const sent = Date.now();
    try {
      resp = await this.request(path, init);
    } catch (err) {
      throw new ApiError(0, `cannot reach the Jupyter server: ${err}`);
    }
    const offset = clockOffset(resp.headers?.get('Date') ?? null, sent, Date.now());
    if (offset !== null) {
      this.serverOffset = Math.abs(offset) > 2 ? offset : 0;
    }
    const text = await resp.text();
    let body: any = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = null;
    }
    if (!resp.ok) {
      const message = body?.message ?? `${resp.status} ${resp.statusText || 'error'}`;
      throw new ApiError(resp.status, message, Array.isArray(body?.errors) ? body.errors : []);
    }
    return body as T;
  }

  private post<T>(path: string, body?: unknown): Promise<T> {
    return this.json<T>(path, {
      method: 'POST',
      body: body === undefined ? undefined : JSON.stringify(body),
      headers: { 'Content-Type': 'application/json' }
    });
  }

  listTasks(opts: { states?: string[]; limit?: number } = {}): Promise<TaskList> {
    const q = new URLSearchParams();
    if (opts.states?.length) {
      q.set('state', opts.states.join(','));
    }
    q.set('limit', String(opts.limit ?? 50));
    return this.json<TaskList>(`${ROUTES.tasks}?${q}`);
  }

  getTask(id: number): Promise<Task> {
    return this.json<Task>(ROUTES.task(id));
  }

  cancel(id: number): Promise<Task> {
    return this.post<Task>(ROUTES.cancel(id));
  }

  /** Submit a spec as it is (a resubmit: the same spec gives the same digest). */
  submitSpec(spec: Record<string, any>): Promise<Task> {
    return this.post<Task>(ROUTES.tasks, spec);
  }

  capture(req: CaptureRequest): Promise<CapturePreview> {
    return this.post<CapturePreview>(ROUTES.capture, req);
  }

  submitNotebook(req: CaptureRequest): Promise<CapturePreview> {
    return this.post<CapturePreview>(ROUTES.submit, req);
  }

  logs(id: number, offset = 0): Promise<{ offset: number; next_offset: number; data: string; eof: boolean; status: string }> {
    return this.json(`${ROUTES.logs(id)}?offset=${offset}`);
  }

  /** The task's web ports (each with the hub URL that opens it in a browser tab). */
  ports(id: number): Promise<Ports> {
    return this.json<Ports>(ROUTES.ports(id));
  }

  /** Sampled GPU utilization of a running task. */
  usage(id: number): Promise<Usage> {
    return this.json<Usage>(ROUTES.usage(id));
  }

  /** The task's runs (restarts after a failure, a lost node or a preemption), the current one last. */
  attempts(id: number): Promise<Attempts> {
    return this.json<Attempts>(ROUTES.attempts(id));
  }

  /** Give a running task `seconds` more; the task as the service now sees it (its new deadline). */
  extend(id: number, seconds: number): Promise<Task> {
    return this.post<Task>(ROUTES.extend(id), { seconds });
  }

  /** The user's arrays, newest first (counts and aggregate status of each). */
  listArrays(limit = 50): Promise<{ arrays: ArrayInfo[]; next_before?: number | null }> {
    return this.json(`${ROUTES.arrays}?limit=${limit}`);
  }

  /** One array with its elements (`tasks`, index order, without their specs). */
  getArray(id: number): Promise<ArrayInfo> {
    return this.json<ArrayInfo>(ROUTES.array(id));
  }

  /** Cancel every element of the array not yet ended; the array as it is now. */
  cancelArray(id: number): Promise<ArrayInfo> {
    return this.post<ArrayInfo>(ROUTES.cancelArray(id));
  }

  listPipelines(limit = 50): Promise<{ pipelines: PipelineInfo[]; next_before?: number | null }> {
    return this.json(`${ROUTES.pipelines}?limit=${limit}`);
  }

  getPipeline(id: number): Promise<PipelineInfo> {
    return this.json<PipelineInfo>(ROUTES.pipeline(id));
  }

  cancelPipeline(id: number): Promise<PipelineInfo> {
    return this.post<PipelineInfo>(ROUTES.cancelPipeline(id));
  }

  cluster(): Promise<Cluster> {
    return this.json<Cluster>(ROUTES.cluster);
  }

  /** The user's notification settings, what the site allows, and the path of their "My usage" page. */
  notifications(): Promise<NotifyInfo> {
    return this.json<NotifyInfo>(ROUTES.notifications);
  }

  /** Replace the user's notification settings; the service's refusal (422) names the field. */
  saveNotifications(settings: NotifySettings): Promise<NotifyInfo> {
    return this.json<NotifyInfo>(ROUTES.notifications, {
      method: 'PUT',
      body: JSON.stringify(settings),
      headers: { 'Content-Type': 'application/json' }
    });
  }

  /** Queue a test notification to each of the user's channels. */
  testNotification(): Promise<{ queued: number }> {
    return this.post<{ queued: number }>(ROUTES.notificationTest);
  }

  notificationHistory(limit = 10): Promise<Deliveries> {
    return this.json<Deliveries>(`${ROUTES.notificationHistory}?limit=${limit}`);
  }

  /** Open the log stream from `query` (e.g. `offset=N`); the caller reads the body. */
  async openLogStream(id: number, query: string, headers: Record<string, string>, signal: AbortSignal): Promise<Response> {
    const resp = await this.request(`${ROUTES.logStream(id)}?${query}`, {
      headers: { Accept: 'text/event-stream', ...headers },
      signal
    });
    if (!resp.ok) {
      let message = `${resp.status} ${resp.statusText}`;
      try {
        message = (await resp.json()).message ?? message;
      } catch {
        // not JSON
      }
      throw new ApiError(resp.status, message);
    }
    return resp;
  }
}
