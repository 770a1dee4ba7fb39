import { isOverQuota, isServerTask, queueSummary, startText, waitingText } from '../src/queue';

import { task } from './fixtures';

describe('startText: the %tacc monitor rule on the service estimate', () => {
  it('is now under a second, else the largest whole unit', () => {
    expect(startText(null, 1000)).toBe('start time unknown');
    expect(startText(undefined, 1000)).toBe('start time unknown');
    expect(startText(1000.5, 1000)).toBe('starts now');
    expect(startText(900, 1000)).toBe('starts now'); // passed: not negative
    expect(startText(1003, 1000)).toBe('starts in 3s');
    expect(startText(1000 + 4 * 60 + 59, 1000)).toBe('starts in 4m');
    expect(startText(1000 + 2 * 3600 + 10, 1000)).toBe('starts in 2h');
    expect(startText(1000 + 3 * 86400, 1000)).toBe('starts in 3d');
  });
});

describe('queueSummary', () => {
  it('position, reason and estimate from the service, with the detail as it is', () => {
    const detail = 'user alice holds 1 of at most 1 GPUs: your Jupyter server jupyter-alice (task 3) holds it';
    const t = task(4, 'pending', { queue: { reason: 'Quota', position: 1, estimated_start: 1250, detail } });
    expect(queueSummary(t, 1000)).toEqual({
      headline: '#1 in queue · Quota · starts in 4m',
      detail,
      overQuota: false,
      estimatedStart: 1250
    });
    const unknown = task(4, 'pending', { queue: { reason: 'Resources', position: 2, estimated_start: null } });
    expect(queueSummary(unknown, 1000)!.headline).toBe('#2 in queue · Resources · start time unknown');
    expect(queueSummary(task(4, 'running', { queue: null }), 1000)).toBeNull();
    expect(queueSummary(task(4, 'pending'), 1000)).toBeNull();
  });

  it('OverQuota: no estimate, even where one was sent', () => {
    const q = { reason: 'OverQuota', position: 1, estimated_start: 1250, detail: 'can never start under the current quota: needs 4 GPUs, user bob may hold at most 2' };
    const t = task(4, 'pending', { queue: q });
    expect(isOverQuota(t)).toBe(true);
    expect(queueSummary(t, 1000)).toEqual({
      headline: 'Can never start under the current quota',
      detail: 'Needs 4 GPUs, user bob may hold at most 2.',
      overQuota: true,
      estimatedStart: null
    });
    expect(isOverQuota(task(4, 'cancelled', { queue: q }))).toBe(false);
  });
});

describe('waitingText: the log area of a task that has not started', () => {
  it('says it waits and why, and that the log comes when it runs', () => {
    const quota = task(4, 'pending', {
      queue: { reason: 'Quota', position: 1, estimated_start: null, detail: 'your Jupyter server holds your 1 GPU.' }
    });
    expect(waitingText(quota)).toBe('Waiting to start (Quota): the log streams here once it runs.');
    expect(waitingText(task(4, 'pending', { reason: 'queued' }))).toBe('Waiting to start (queued): the log streams here once it runs.');
    expect(waitingText(task(4, 'pending'))).toBe('Waiting to start: the log streams here once it runs.');
    const over = task(4, 'pending', { queue: { reason: 'OverQuota', position: 1, estimated_start: null, detail: 'x' } });
    expect(waitingText(over)).toBe('Not started: it can never start under the current quota (see above). There is no log.');
  });
});

describe('isServerTask', () => {
  it('is a task of TaccSpawner', () => {
    expect(isServerTask(task(1, 'running', { name: 'jupyter-alice' }))).toBe(true);
    expect(isServerTask(task(1, 'running', { name: 'train' }))).toBe(false);
  });
});
