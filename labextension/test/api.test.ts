import { ApiError, TaccApi, clockOffset } from '../src/api';

describe('ApiError.detail', () => {
  it('says a refusal once, and adds the fields the message does not name', () => {
    const msg = 'resources: over quota: needs 2 GPUs; user alice may hold at most 1 (1 over)';
    const same = new ApiError(422, msg, [{ field: 'resources', message: 'over quota: needs 2 GPUs; user alice may hold at most 1 (1 over)' }]);
    expect(same.detail).toBe(msg);
    const more = new ApiError(422, 'invalid spec', [{ field: 'resources.time', message: 'not a duration' }]);
    expect(more.detail).toBe('invalid spec\nresources.time: not a duration');
  });
});

describe('clockOffset', () => {
  it('reads the server clock from the Date header, null for a slow answer or none', () => {
    const sent = Date.parse('2026-12-01T10:00:00.000Z');
    // a server 4 minutes ahead answering in 200 ms: its Date says 10:04:00 (whole seconds)
    expect(clockOffset('Tue, 01 Dec 2026 10:04:00 GMT', sent, sent + 200)).toBeCloseTo(240.4, 3);
    expect(clockOffset('Tue, 01 Dec 2026 10:00:00 GMT', sent, sent + 100)).toBeCloseTo(0.45, 3);
    expect(clockOffset('Tue, 01 Dec 2026 10:04:00 GMT', sent, sent + 3000)).toBeNull();
    expect(clockOffset(null, sent, sent)).toBeNull();
    expect(clockOffset('garbage', sent, sent)).toBeNull();
  });

  it('TaccApi.now follows the server clock only when it is more than 2 s off', async () => {
    const ahead = new Date(Date.now() + 600_000).toUTCString();
    const api = new TaccApi(async () => new Response('{"tasks": [], "total": 0}', { headers: { Date: ahead } }));
    await api.listTasks();
    expect(api.serverOffset).toBeGreaterThan(597);
    expect(api.now() - Date.now() / 1000).toBeGreaterThan(597);
    const near = new TaccApi(async () => new Response('{"tasks": [], "total": 0}', { headers: { Date: new Date().toUTCString() } }));
    await near.listTasks();
    expect(near.serverOffset).toBe(0);
  });
});
