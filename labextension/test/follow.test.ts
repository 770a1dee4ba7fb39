import { ApiError, RequestFn, ROUTES, TaccApi } from '../src/api';
import { FollowState, LogFollower } from '../src/follow';

function sse(events: { id?: number; event: string; data: unknown }[]): string {
  return events
    .map(e => `${e.id !== undefined ? `id: ${e.id}\n` : ''}event: ${e.event}\ndata: ${JSON.stringify(e.data)}\n\n`)
    .join('');
}

/** A Response whose body delivers `parts` and then ends (a dropped connection unless it sent `end`). */
function streamResponse(parts: string[]): Response {
  const enc = new TextEncoder();
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const p of parts) {
        controller.enqueue(enc.encode(p));
      }
      controller.close();
    }
  });
  return new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } });
}

describe('LogFollower', () => {
  it('resumes from its last offset after the stream drops, with Last-Event-ID', async () => {
    const calls: { path: string; headers: Record<string, string> }[] = [];
    const request: RequestFn = async (path, init) => {
      calls.push({ path, headers: (init?.headers ?? {}) as Record<string, string> });
      if (calls.length === 1) {
        // first connection: two chunks, the second cut mid-event, then the connection drops
        const first = sse([{ id: 6, event: 'log', data: { offset: 0, data: 'line1\n' } }]);
        return streamResponse([': stream open\n\n', first, 'id: 12\nevent: log\ndata: {"offset": 6, "da']);
      }
      if (calls.length === 2) {
        return new Response(JSON.stringify({ message: 'bad gateway' }), { status: 502 });
      }
      // the service resumes at the offset asked for (repeating nothing) and ends
      return streamResponse([
        sse([
          { id: 12, event: 'log', data: { offset: 6, data: 'line2\n' } },
          { event: 'end', data: { status: 'succeeded', offset: 12 } }
        ])
      ]);
    };
    const states: FollowState[] = [];
    const texts: string[] = [];
    const sleeps: number[] = [];
    const f = new LogFollower(new TaccApi(request), 7, {
      onUpdate: b => texts.push(b.text),
      onState: s => states.push(s),
      sleep: async ms => {
        sleeps.push(ms);
      }
    });
    await f.run();
    expect(f.buffer.text).toBe('line1\nline2\n');
    expect(f.buffer.ended).toEqual({ status: 'succeeded' });
    expect(calls.map(c => c.path)).toEqual([
      `${ROUTES.logStream(7)}?offset=0`,
      `${ROUTES.logStream(7)}?offset=6`,
      `${ROUTES.logStream(7)}?offset=6`
    ]);
    expect(calls[0].headers['Last-Event-ID']).toBeUndefined();
    expect(calls[2].headers['Last-Event-ID']).toBe('6');
    expect(texts).toEqual(['line1\n', 'line1\nline2\n']);
    expect(states[0]).toBe('connecting');
    expect(states).toContain('reconnecting');
    expect(states[states.length - 1]).toBe('ended');
    expect(sleeps).toEqual([500, 1000]); // after the drop (data had flowed: attempt 1), after the 502 (attempt 2)
  });

  it('gives up at once on 404 and after maxAttempts of nothing', async () => {
    const notFound = new LogFollower(
      new TaccApi(async () => new Response(JSON.stringify({ message: 'no such task' }), { status: 404 })),
      1,
      { onUpdate: () => undefined, onState: (s, d) => s === 'error' && expect(d).toBe('no such task'), sleep: async () => undefined }
    );
    await notFound.run();
    expect(notFound.connects).toBe(1);

    const down = new LogFollower(
      new TaccApi(async () => {
        throw new TypeError('network down');
      }),
      1,
      { onUpdate: () => undefined, sleep: async () => undefined, maxAttempts: 3 }
    );
    await down.run();
    expect(down.connects).toBe(3);
  });
});

describe('LogFollower behind a buffering proxy', () => {
  it('reads chunks from its offset when the stream sends nothing in time', async () => {
    const paths: string[] = [];
    const log = 'a\nbb\nccc\n';
    const request: RequestFn = (path, init) => {
      paths.push(path);
      if (path.includes('/logs/stream')) {
        // a proxy that holds the whole response: nothing until the abort
        return new Promise<Response>((_, reject) => {
          init!.signal!.addEventListener('abort', () => reject(new DOMException('aborted', 'AbortError')));
        });
      }
      const offset = Number(new URL(path, 'http://x/').searchParams.get('offset'));
      // two bytes per read; the task has ended, so eof comes with the last bytes
      const data = log.slice(offset, offset + 2);
      const eof = offset + data.length >= log.length;
      return Promise.resolve(
        new Response(JSON.stringify({ offset, next_offset: offset + data.length, data, eof, status: eof ? 'succeeded' : 'running' }))
      );
    };
    const states: FollowState[] = [];
    const f = new LogFollower(new TaccApi(request), 3, {
      onUpdate: () => undefined,
      onState: s => states.push(s),
      sleep: async () => undefined,
      firstByteTimeout: 20
    });
    await f.run();
    expect(f.mode).toBe('poll');
    expect(f.buffer.text).toBe(log);
    expect(f.buffer.ended).toEqual({ status: 'succeeded' });
    expect(paths[0]).toBe(`${ROUTES.logStream(3)}?offset=0`);
    expect(paths.slice(1)).toEqual([0, 2, 4, 6, 8].map(o => `${ROUTES.logs(3)}?offset=${o}`));
    expect(states).toContain('polling');
    expect(states[states.length - 1]).toBe('ended');
  });
});

describe('TaccApi', () => {
  it('uses the relay routes and turns errors into ApiError with fields', async () => {
    const seen: { path: string; method: string; body?: string }[] = [];
    const api = new TaccApi(async (path, init) => {
      seen.push({ path, method: init?.method ?? 'GET', body: init?.body as string | undefined });
      if (path === ROUTES.submit) {
        return new Response(JSON.stringify({ message: 'invalid', errors: [{ field: 'resources.nodes', message: 'too many' }] }), {
          status: 400
        });
      }
      return new Response(JSON.stringify({ tasks: [], total: 0 }), { status: 200 });
    });
    await api.listTasks({ states: ['running', 'pending'], limit: 10 });
    await api.cancel(3);
    await api.submitSpec({ name: 'x' });
    const err = await api.submitNotebook({ path: 'a.ipynb' }).catch(e => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(400);
    expect(err.detail).toBe('invalid\nresources.nodes: too many');
    expect(seen.map(s => `${s.method} ${s.path}`)).toEqual([
      'GET tacc/api/tasks?state=running%2Cpending&limit=10',
      'POST tacc/api/tasks/3/cancel',
      'POST tacc/api/tasks',
      'POST tacc/api/submit'
    ]);
    expect(JSON.parse(seen[2].body!)).toEqual({ name: 'x' });
  });
});
