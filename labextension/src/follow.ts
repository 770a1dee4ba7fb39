/**
 * Follow one task's log stream: read the SSE body as it arrives into a LogBuffer, and when the
 * connection drops before the `end` event, reconnect from the buffer's offset (with
 * `Last-Event-ID`) after a backoff. No JupyterLab here: the view subscribes with callbacks.
 *
 * A proxy that buffers whole responses (the Python configurable-http-proxy does) delivers
 * nothing of a stream until it ends: when the first bytes do not come within
 * `firstByteTimeout` (the service sends a comment at once), the follower reads the log
 * in chunks from its offset instead (`GET .../logs?offset=`), every `pollInterval`.
 */

import { ApiError, TaccApi } from './api';
import { LogBuffer, SseParser, reconnectDelay } from './logs';

export type FollowState = 'connecting' | 'streaming' | 'polling' | 'reconnecting' | 'ended' | 'error' | 'stopped';

export interface FollowOptions {
  onUpdate: (buffer: LogBuffer) => void;
  onState?: (state: FollowState, detail?: string) => void;
  sleep?: (ms: number) => Promise<void>;
  maxAttempts?: number; // consecutive failed connects before giving up (default: 20)
  firstByteTimeout?: number; // ms to wait for the stream's first bytes (default 5000)
  pollInterval?: number; // ms between chunk reads once streaming does not work (default 1000)
}

class NoStream extends Error {}

const defaultSleep = (ms: number) => new Promise<void>(resolve => setTimeout(resolve, ms));

export class LogFollower {
  readonly buffer: LogBuffer;
  private controller: AbortController | null = null;
  private stopped = false;
  connects = 0;
  mode: 'stream' | 'poll' = 'stream';

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
      if (this.mode === 'stream') {
        this.opts.onState?.(this.connects === 0 ? 'connecting' : 'reconnecting');
      }
      const before = this.buffer.offset;
      try {
        if (this.mode === 'poll') {
          await this.pollOnce();
          failures = 0;
          if (!this.buffer.ended && !this.stopped && this.buffer.offset === before) {
            await sleep(this.opts.pollInterval ?? 1000);
          }
          continue;
        }
        await this.once();
      } catch (err) {
        if (this.stopped) {
          return;
        }
        if (err instanceof NoStream) {
          this.mode = 'poll';
          continue;
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

  /** One chunk read from the buffer's offset (the fallback when streams are buffered). */
  private async pollOnce(): Promise<void> {
    this.opts.onState?.('polling');
    const chunk = await this.api.logs(this.taskId, this.buffer.offset);
    const before = this.buffer.offset;
    this.buffer.append({ offset: chunk.offset, data: chunk.data });
    if (chunk.eof) {
      this.buffer.ended = { status: chunk.status };
    }
    if (this.buffer.offset !== before || chunk.eof) {
      this.opts.onUpdate(this.buffer);
    }
  }

  private async once(): Promise<void> {
    const controller = (this.controller = new AbortController());
    const { query, headers } = this.buffer.resumeRequest();
    this.connects += 1;
    let firstBytes = false;
    let timedOut = false;
    const timer = setTimeout(() => {
      if (!firstBytes) {
        timedOut = true;
        controller.abort();
      }
    }, this.opts.firstByteTimeout ?? 5000);
    let resp: Response;
    try {
      resp = await this.api.openLogStream(this.taskId, query, headers, controller.signal);
    } catch (err) {
      clearTimeout(timer);
      throw timedOut ? new NoStream() : err;
    }
    if (!resp.body) {
      clearTimeout(timer);
      throw new ApiError(0, 'the log stream has no body');
    }
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    const parser = new SseParser();
    try {
      for (;;) {
        let step: ReadableStreamReadResult<Uint8Array>;
        try {
          step = await reader.read();
        } catch (err) {
          throw timedOut ? new NoStream() : err;
        }
        const { value, done } = step;
        if (!firstBytes) {
          firstBytes = true;
          clearTimeout(timer);
          this.opts.onState?.('streaming');
        }
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
      clearTimeout(timer);
      reader.cancel().catch(() => undefined);
      controller.abort();
    }
  }
}
