/**
 * Follow one task's log stream: read the SSE body as it arrives into a LogBuffer, and when the
 * connection drops before the `end` event, reconnect from the buffer's offset (with
 * `Last-Event-ID`) after a backoff. No JupyterLab here: the view subscribes with callbacks.
 */

import { ApiError, TaccApi } from './api';
import { LogBuffer, SseParser, reconnectDelay } from './logs';

export type FollowState = 'connecting' | 'streaming' | 'reconnecting' | 'ended' | 'error' | 'stopped';

export interface FollowOptions {
  onUpdate: (buffer: LogBuffer) => void;
  onState?: (state: FollowState, detail?: string) => void;
  sleep?: (ms: number) => Promise<void>;
  maxAttempts?: number; // consecutive failed connects before giving up (default: 20)
}

const defaultSleep = (ms: number) => new Promise<void>(resolve => setTimeout(resolve, ms));

export class LogFollower {
  readonly buffer: LogBuffer;
  private controller: AbortController | null = null;
  private stopped = false;
  connects = 0;

  constructor(
    private readonly api: TaccApi,
    readonly taskId: number,
    private readonly opts: FollowOptions,
    buffer?: LogBuffer
  ) {
    this.buffer = buffer ?? new LogBuffer();
  }

  stop(): void {
    this.stopped = true;
    this.controller?.abort();
    this.opts.onState?.('stopped');
  }

  /** Runs until the task's log has ended, the follower is stopped, or it gives up. */
  async run(): Promise<void> {
    const sleep = this.opts.sleep ?? defaultSleep;
    const maxAttempts = this.opts.maxAttempts ?? 20;
    let failures = 0;
    while (!this.stopped && !this.buffer.ended) {
      this.opts.onState?.(this.connects === 0 ? 'connecting' : 'reconnecting');
      const before = this.buffer.offset;
      try {
        await this.once();
      } catch (err) {
        if (this.stopped) {
          return;
        }
        if (err instanceof ApiError && err.status >= 400 && err.status < 500) {
          this.opts.onState?.('error', err.message);
          return; // 404 or 403: retrying does not help
        }
      }
      if (this.stopped || this.buffer.ended) {
        break;
      }
      failures = this.buffer.offset > before ? 0 : failures + 1;
      if (failures >= maxAttempts) {
        this.opts.onState?.('error', 'the log stream keeps dropping; reopen the log to retry');
        return;
      }
      this.opts.onState?.('reconnecting');
      await sleep(reconnectDelay(failures));
    }
    if (this.buffer.ended && !this.stopped) {
      this.opts.onState?.('ended', this.buffer.ended.status);
    }
  }

  private async once(): Promise<void> {
    this.controller = new AbortController();
    const { query, headers } = this.buffer.resumeRequest();
    this.connects += 1;
    const resp = await this.api.openLogStream(this.taskId, query, headers, this.controller.signal);
    if (!resp.body) {
      throw new ApiError(0, 'the log stream has no body');
    }
    this.opts.onState?.('streaming');
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    const parser = new SseParser();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) {
          return;
        }
        let changed = false;
        for (const ev of parser.feed(decoder.decode(value, { stream: true }))) {
          const before = this.buffer.offset;
          const over = this.buffer.applyEvent(ev);
          changed = changed || this.buffer.offset !== before || over;
          if (over) {
            this.opts.onUpdate(this.buffer);
            return;
          }
        }
        if (changed) {
          this.opts.onUpdate(this.buffer);
        }
      }
    } finally {
      reader.cancel().catch(() => undefined);
      this.controller.abort();
    }
  }
}
