/**
 * The exec protocol of a task's terminal (the service's `api/tasks/ID/exec`, relayed by the user's
 * Jupyter server at `tacc/api/tasks/ID/exec`), without a DOM: the first frame asks for a tty of the
 * terminal's size (`{"tty": true, "rows", "cols"}`: the task owner's login shell), keystrokes go as
 * binary frames, a resize as `{"resize": [rows, cols]}`; the service answers binary frames (first
 * byte the channel, 1 stdout, 2 stderr: a tty is all 1; then the data) and a last text frame
 * `{"exit": CODE}`. A relay that cannot reach the service sends `{"error", "status"}` instead.
 */

/** The part of the browser's WebSocket that the session uses (a fake in tests). */
export interface SocketLike {
  binaryType: string;
  readyState: number;
  onopen: ((ev: any) => void) | null;
  onmessage: ((ev: { data: any }) => void) | null;
  onclose: ((ev: { code: number; reason: string }) => void) | null;
  onerror: ((ev: any) => void) | null;
  send(data: string | ArrayBufferLike | ArrayBufferView): void;
  close(code?: number, reason?: string): void;
}

export interface ExecCallbacks {
  onData: (data: Uint8Array, channel: number) => void;
  onOpen?: () => void;
  onExit?: (code: number) => void;
  onError?: (message: string) => void;
  onClose?: (code: number, reason: string) => void;
}

const OPEN = 1;
const encoder = new TextEncoder();

export type ExecState = 'connecting' | 'open' | 'exited' | 'closed';

export class ExecSession {
  state: ExecState = 'connecting';
  exitCode: number | null = null;
  error: string | null = null;

  constructor(
    private readonly socket: SocketLike,
    size: { rows: number; cols: number } | (() => { rows: number; cols: number }),
    private readonly cb: ExecCallbacks
  ) {
    socket.binaryType = 'arraybuffer';
    socket.onopen = () => {
      // the size when the socket opens (the terminal may have been fitted to its tab meanwhile)
      const { rows, cols } = typeof size === 'function' ? size() : size;
      socket.send(JSON.stringify({ tty: true, rows, cols }));
      this.state = 'open';
      cb.onOpen?.();
    };
    socket.onmessage = ev => this.message(ev.data);
    socket.onerror = () => {
      if (this.state === 'connecting') {
        this.fail('cannot open the terminal connection');
      }
    };
    socket.onclose = ev => {
      const was = this.state;
      if (this.state !== 'exited') {
        this.state = 'closed';
      }
      if (was === 'connecting' && !this.error) {
        this.fail(ev.reason || `the terminal connection was refused (code ${ev.code})`);
      }
      cb.onClose?.(ev.code, ev.reason);
    };
  }

  private fail(message: string): void {
    this.error = message;
    this.cb.onError?.(message);
  }

  private message(data: any): void {
    if (typeof data === 'string') {
      let frame: any = null;
      try {
        frame = JSON.parse(data);
      } catch {
        return; // not ours
      }
      if (frame && typeof frame.exit === 'number') {
        this.exitCode = frame.exit;
        this.state = 'exited';
        this.cb.onExit?.(frame.exit);
      } else if (frame && typeof frame.error === 'string') {
        this.fail(frame.error);
      } else if (frame && typeof frame.message === 'string') {
        this.fail(frame.message);
      }
      return;
    }
    const bytes = data instanceof Uint8Array ? data : new Uint8Array(data as ArrayBuffer);
    if (bytes.length < 1) {
      return;
    }
    this.cb.onData(bytes.subarray(1), bytes[0]);
  }

  get isOpen(): boolean {
    return this.state === 'open' && this.socket.readyState === OPEN;
  }

  /** Keystrokes (or pasted text) to the task's terminal. */
  input(data: string | Uint8Array): void {
    if (this.isOpen) {
      this.socket.send(typeof data === 'string' ? encoder.encode(data) : data);
    }
  }

  resize(rows: number, cols: number): void {
    if (this.isOpen && rows > 0 && cols > 0) {
      this.socket.send(JSON.stringify({ resize: [rows, cols] }));
    }
  }

  close(): void {
    if (this.socket.readyState <= OPEN) {
      this.socket.close(1000);
    }
  }
}
