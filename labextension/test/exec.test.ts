import { ExecSession, SocketLike } from '../src/exec';

class FakeSocket implements SocketLike {
  binaryType = 'blob';
  readyState = 0;
  sent: (string | Uint8Array)[] = [];
  onopen: ((ev: any) => void) | null = null;
  onmessage: ((ev: { data: any }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  onerror: ((ev: any) => void) | null = null;
  closed: number | null = null;
  send(data: any): void {
    this.sent.push(typeof data === 'string' ? data : new Uint8Array(data));
  }
  close(code?: number): void {
    this.closed = code ?? 1000;
    this.readyState = 3;
  }
  open(): void {
    this.readyState = 1;
    this.onopen?.({});
  }
}

const frame = (channel: number, text: string) => {
  const data = new TextEncoder().encode(text);
  const out = new Uint8Array(data.length + 1);
  out[0] = channel;
  out.set(data, 1);
  return out.buffer;
};

describe('ExecSession', () => {
  it('asks for a tty of the terminal size first, then sends keystrokes as binary and resizes as text', () => {
    const ws = new FakeSocket();
    const out: string[] = [];
    const s = new ExecSession(ws, { rows: 24, cols: 80 }, { onData: d => out.push(new TextDecoder().decode(d)) });
    expect(ws.binaryType).toBe('arraybuffer');
    s.input('ignored before open');
    expect(ws.sent).toEqual([]);
    ws.open();
    expect(JSON.parse(ws.sent[0] as string)).toEqual({ tty: true, rows: 24, cols: 80 });
    s.input('whoami\r');
    expect(ws.sent[1]).toEqual(new TextEncoder().encode('whoami\r'));
    s.resize(30, 100);
    expect(JSON.parse(ws.sent[2] as string)).toEqual({ resize: [30, 100] });
    ws.onmessage?.({ data: frame(1, 'alice\r\n') });
    expect(out).toEqual(['alice\r\n']);
  });

  it('asks for the size the terminal has when the socket opens', () => {
    const ws = new FakeSocket();
    const size = { rows: 24, cols: 80 };
    new ExecSession(ws, () => size, { onData: () => undefined });
    size.rows = 51;
    size.cols = 120; // fitted to its tab before the socket opened
    ws.open();
    expect(JSON.parse(ws.sent[0] as string)).toEqual({ tty: true, rows: 51, cols: 120 });
  });

  it('reports the exit code of the last text frame and stops sending', () => {
    const ws = new FakeSocket();
    const exits: number[] = [];
    const s = new ExecSession(ws, { rows: 2, cols: 2 }, { onData: () => undefined, onExit: c => exits.push(c) });
    ws.open();
    ws.onmessage?.({ data: JSON.stringify({ exit: 3 }) });
    expect(exits).toEqual([3]);
    expect(s.state).toBe('exited');
    s.input('x');
    expect(ws.sent.length).toBe(1);
    ws.onclose?.({ code: 1000, reason: '' });
    expect(s.state).toBe('exited');
  });

  it('says why when the relay cannot reach the service or the connection is refused', () => {
    const ws = new FakeSocket();
    const errors: string[] = [];
    new ExecSession(ws, { rows: 2, cols: 2 }, { onData: () => undefined, onError: e => errors.push(e) });
    ws.open();
    ws.onmessage?.({ data: JSON.stringify({ error: 'task 9 is not running', status: 409 }) });
    expect(errors).toEqual(['task 9 is not running']);

    const refused = new FakeSocket();
    const why: string[] = [];
    const s = new ExecSession(refused, { rows: 2, cols: 2 }, { onData: () => undefined, onError: e => why.push(e) });
    refused.onerror?.({});
    refused.onclose?.({ code: 1006, reason: '' });
    expect(why).toEqual(['cannot open the terminal connection']);
    expect(s.state).toBe('closed');
  });

  it('closes its socket once', () => {
    const ws = new FakeSocket();
    const s = new ExecSession(ws, { rows: 2, cols: 2 }, { onData: () => undefined });
    ws.open();
    s.close();
    expect(ws.closed).toBe(1000);
  });
});
