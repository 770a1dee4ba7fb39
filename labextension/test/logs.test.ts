import { LogBuffer, SseParser, reconnectDelay, utf8Length } from '../src/logs';

describe('SseParser', () => {
  it('parses events split anywhere, with ids, comments and CRLF', () => {
    const p = new SseParser();
    const stream = ': stream open\r\n\r\nid: 5\r\nevent: log\r\ndata: {"offset": 0, "data": "hello"}\r\n\r\nevent: end\ndata: {"status":"succeeded"}\n\n';
    const events = [];
    for (let i = 0; i < stream.length; i += 3) {
      events.push(...p.feed(stream.slice(i, i + 3)));
    }
    expect(events).toEqual([
      { event: 'log', data: '{"offset": 0, "data": "hello"}', id: '5' },
      { event: 'end', data: '{"status":"succeeded"}', id: null }
    ]);
    expect(p.lastEventId).toBe('5');
  });

  it('joins multi-line data and defaults the type to message', () => {
    const p = new SseParser();
    expect(p.feed('data: a\ndata: b\n\n')).toEqual([{ event: 'message', data: 'a\nb', id: null }]);
    expect(p.feed('data:x\n')).toEqual([]);
    expect(p.feed('\n')).toEqual([{ event: 'message', data: 'x', id: null }]);
  });
});

describe('LogBuffer', () => {
  it('appends in order and counts bytes, not characters', () => {
    const b = new LogBuffer();
    b.append({ offset: 0, data: 'héllo\n' });
    expect(b.offset).toBe(7);
    b.append({ offset: 7, data: 'wörld\n' });
    expect(b.text).toBe('héllo\nwörld\n');
    expect(b.offset).toBe(7 + utf8Length('wörld\n'));
  });

  it('drops what it already has when a resumed stream repeats the tail', () => {
    const b = new LogBuffer();
    b.append({ offset: 0, data: 'line 1\nline 2\n' });
    expect(b.append({ offset: 0, data: 'line 1\n' })).toBe('');
    expect(b.append({ offset: 7, data: 'line 2\nline 3\n' })).toBe('line 3\n');
    expect(b.text).toBe('line 1\nline 2\nline 3\n');
    expect(b.offset).toBe(21);
  });

  it('refuses a gap', () => {
    const b = new LogBuffer();
    b.append({ offset: 0, data: 'abc' });
    expect(() => b.append({ offset: 10, data: 'x' })).toThrow(/gap/);
    expect(b.offset).toBe(3);
  });

  it('keeps only the last maxChars characters', () => {
    const b = new LogBuffer(5);
    b.append({ offset: 0, data: 'abcdefgh' });
    expect(b.text).toBe('defgh');
    expect(b.truncated).toBe(true);
    expect(b.offset).toBe(8);
  });

  it('applies log and end events and says how to resume', () => {
    const b = new LogBuffer();
    expect(b.resumeRequest()).toEqual({ query: 'offset=0', headers: {} });
    expect(b.applyEvent({ event: 'log', id: '4', data: JSON.stringify({ offset: 0, data: 'abcd' }) })).toBe(false);
    expect(b.resumeRequest()).toEqual({ query: 'offset=4', headers: { 'Last-Event-ID': '4' } });
    expect(b.applyEvent({ event: 'end', id: null, data: JSON.stringify({ status: 'succeeded', offset: 4 }) })).toBe(true);
    expect(b.ended).toEqual({ status: 'succeeded' });
  });

  it('reconnect delays grow and are capped', () => {
    expect(reconnectDelay(0)).toBe(500);
    expect(reconnectDelay(1)).toBe(1000);
    expect(reconnectDelay(10)).toBe(15000);
  });
});
