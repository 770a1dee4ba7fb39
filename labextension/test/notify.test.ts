import { TaccApi, ROUTES } from '../src/api';
import { addWebhook, pageUrl, toSettings } from '../src/notify';

const ORDER = ['started', 'ended', 'failed', 'preempted', 'near_limit', 'cancelled'];

describe('toSettings', () => {
  it('makes an empty address none and lists events in the site order', () => {
    expect(toSettings('  ', ['failed', 'started'], [], ORDER)).toEqual({ email: null, events: ['started', 'failed'], webhooks: [] });
    const hooks = [{ url: 'https://example.org/h', format: 'slack' as const }];
    expect(toSettings(' a@uni.edu ', new Set(['near_limit']), hooks, ORDER)).toEqual({
      email: 'a@uni.edu',
      events: ['near_limit'],
      webhooks: hooks
    });
  });

  it('drops events the site does not offer', () => {
    expect(toSettings('', ['started', 'reboot'], [], ['started']).events).toEqual(['started']);
  });
});

describe('addWebhook', () => {
  it('adds, replaces the format of a known URL, and refuses what the service would', () => {
    const one = addWebhook([], ' https://hooks.slack.com/services/x ', 'slack', 2);
    expect(one).toEqual([{ url: 'https://hooks.slack.com/services/x', format: 'slack' }]);
    const same = addWebhook(one as any, 'https://hooks.slack.com/services/x', 'json', 2);
    expect(same).toEqual([{ url: 'https://hooks.slack.com/services/x', format: 'json' }]);
    expect(addWebhook([], 'file:///etc/passwd', 'json', 2)).toMatch(/http/);
    expect(addWebhook([], '', 'json', 2)).toMatch(/http/);
    const full = [{ url: 'https://a.example/1', format: 'json' as const }];
    expect(addWebhook(full, 'https://a.example/2', 'json', 1)).toBe('At most 1 webhooks.');
    expect(addWebhook([], 'https://a.example/2', 'json', 0)).toBe('This site allows no webhooks.');
  });
});

describe('pageUrl', () => {
  it('puts the service path on the hub origin', () => {
    expect(pageUrl('/services/tacc/usage', 'https://hub.uni.edu')).toBe('https://hub.uni.edu/services/tacc/usage');
  });
});

describe('TaccApi notifications', () => {
  it('PUTs the settings as JSON and reads the refusal with its field', async () => {
    const calls: { path: string; init?: RequestInit }[] = [];
    const api = new TaccApi(async (path, init) => {
      calls.push({ path, init });
      return new Response(
        JSON.stringify({ status: 422, message: 'invalid', errors: [{ field: 'webhooks[0].url', message: 'link-local' }] }),
        { status: 422 }
      );
    });
    await expect(api.saveNotifications({ email: null, events: ['failed'], webhooks: [] })).rejects.toMatchObject({
      status: 422,
      errors: [{ field: 'webhooks[0].url', message: 'link-local' }]
    });
    expect(calls[0].path).toBe(ROUTES.notifications);
    expect(calls[0].init?.method).toBe('PUT');
    expect(JSON.parse(String(calls[0].init?.body))).toEqual({ email: null, events: ['failed'], webhooks: [] });
  });

  it('asks for a test and the history on their routes', async () => {
    const paths: string[] = [];
    const api = new TaccApi(async path => {
      paths.push(path);
      return new Response(path.includes('history') ? '{"user": "a", "deliveries": []}' : '{"queued": 2}');
    });
    expect(await api.testNotification()).toEqual({ queued: 2 });
    expect((await api.notificationHistory(5)).deliveries).toEqual([]);
    expect(paths).toEqual([ROUTES.notificationTest, `${ROUTES.notificationHistory}?limit=5`]);
  });
});
