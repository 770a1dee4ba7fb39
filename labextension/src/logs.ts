/**
 * Log streaming, pure: a server-sent-events parser fed with text as it arrives, and a log
 * buffer that tracks the byte offset it has, so that a reconnect resumes exactly there
 * (`?offset=` and `Last-Event-ID`) and a chunk seen twice is not shown twice.
 *
 * The tacc service sends `event: log` with `id: <byte offset after the chunk>` and
 * `data: {"offset": <byte offset of the chunk>, "data": "<text>"}`, and `event: end` with
 * `data: {"status", "offset"}` when the task has ended and its log is drained.
 */

export interface SseEvent {
  event: string;
  data: string;
  id: string | null;
}

/** Incremental `text/event-stream` parser (https://html.spec.whatwg.org/#event-stream-interpretation). */
export class SseParser {
  private buf = '';
  private dataLines: string[] = [];
  private eventType = '';
  private lastId: string | null = null;
  private sawId = false;

  /** The last event id seen (what a reconnect sends as Last-Event-ID). */
  get lastEventId(): string | null {
    return this.lastId;
  }

  feed(text: string): SseEvent[] {
    const out: SseEvent[] = [];
    this.buf += text;
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buf);
      if (!m) {
        break;
      }
      // A lone "\r" at the very end may be the first half of "\r\n": wait for more.
      if (m[0] === '\r' && m.index === this.buf.length - 1) {
        break;
      }
      const line = this.buf.slice(0, m.index);
      this.buf = this.buf.slice(m.index + m[0].length);
      this.line(line, out);
    }
    return out;
  }

  private line(line: string, out: SseEvent[]): void {
    if (line === '') {
      if (this.dataLines.length) {
        out.push({ event: this.eventType || 'message', data: this.dataLines.join('\n'), id: this.sawId ? this.lastId : null });
      }
      this.dataLines = [];
      this.eventType = '';
      this.sawId = false;
      return;
    }
    if (line.startsWith(':')) {
      return; // a comment (keep-alive)
    }
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) {
      value = value.slice(1);
    }
    if (field === 'data') {
      this.dataLines.push(value);
    } else if (field === 'event') {
      this.eventType = value;
    } else if (field === 'id' && !value.includes('\0')) {
      this.lastId = value;
      this.sawId = true;
    }
  }
}

const encoder = new TextEncoder();

export function utf8Length(text: string): number {
  return encoder.encode(text).length;
}

/** The text after the first `bytes` bytes of `text` (UTF-8). */
function dropBytes(text: string, bytes: number): string {
  if (bytes <= 0) {
    return text;
  }
  const raw = encoder.encode(text);
  return bytes >= raw.length ? '' : new TextDecoder().decode(raw.slice(bytes));
}

export interface LogChunk {
  offset: number; // byte offset of the chunk's first byte
  data: string;
}

/**
 * The log text a view shows and the byte offset it has reached. `append` takes chunks in
 * any overlap with what it has (a resumed stream may repeat the tail) and refuses a gap.
 * Only the last `maxChars` characters are kept in memory; `truncated` says some were dropped.
 */
export class LogBuffer {
  text = '';
  offset: number;
  truncated = false;
  ended: { status: string } | null = null;

  constructor(readonly maxChars = 2_000_000, startOffset = 0) {
    this.offset = startOffset;
    this.truncated = startOffset > 0;
  }

  /** Add a chunk; returns the text that was new (empty when it was all seen before). */
  append(chunk: LogChunk): string {
    const len = utf8Length(chunk.data);
    const end = chunk.offset + len;
    if (end <= this.offset) {
      return '';
    }
    if (chunk.offset > this.offset) {
      throw new Error(`log gap: have bytes up to ${this.offset}, got a chunk at ${chunk.offset}`);
    }
    const fresh = dropBytes(chunk.data, this.offset - chunk.offset);
    this.offset = end;
    this.text += fresh;
    if (this.text.length > this.maxChars) {
      this.text = this.text.slice(this.text.length - this.maxChars);
      this.truncated = true;
    }
    return fresh;
  }

  /** Apply one SSE event of the log stream; returns true when the stream is over. */
  applyEvent(ev: SseEvent): boolean {
    if (ev.event === 'log') {
      const chunk = JSON.parse(ev.data) as LogChunk;
      this.append(chunk);
      return false;
    }
    if (ev.event === 'end') {
      const end = JSON.parse(ev.data) as { status: string; offset: number };
      this.ended = { status: end.status };
      return true;
    }
    return false;
  }

  /** Query and headers for (re)connecting to the stream from where this buffer is. */
  resumeRequest(): { query: string; headers: Record<string, string> } {
    return {
      query: `offset=${this.offset}`,
      headers: this.offset > 0 ? { 'Last-Event-ID': String(this.offset) } : {}
    };
  }
}

/** Reconnect delays for a dropped stream: 0.5 s doubling to `max`, reset after data flowed. */
export function reconnectDelay(attempt: number, max = 15000): number {
  return Math.min(max, 500 * 2 ** Math.max(0, attempt));
}
