import { ApiError } from '../src/api';
import {
  attemptLines,
  fieldDetail,
  attemptText,
  dueWarnings,
  gpuLabel,
  parseDuration,
  runKey,
  sparkPoints,
  tensorboardPort,
  timeLeft,
  timeLeftText
} from '../src/running';

import { task } from './fixtures';

describe('timeLeft', () => {
  it('ticks from the deadline on the server clock, never below 0', () => {
    const t = task(1, 'running', { deadline: 5000, time_left: 999 });
    expect(timeLeft(t, 4000)).toBe(1000);
    expect(timeLeft(t, 4999.5)).toBe(0.5);
    expect(timeLeft(t, 6000)).toBe(0);
  });
  it('falls back to time_left, and is null for tasks that do not run or have no limit', () => {
    expect(timeLeft(task(1, 'running', { time_left: 42 }), 1e9)).toBe(42);
    expect(timeLeft(task(1, 'running'), 1)).toBeNull();
    expect(timeLeft(task(1, 'succeeded', { deadline: 5000 }), 1)).toBeNull();
    expect(timeLeft(task(1, 'pending', { deadline: 5000 }), 1)).toBeNull();
  });
  it('reads as a person says it', () => {
    expect(timeLeftText(3725)).toBe('1h 02m left');
    expect(timeLeftText(185)).toBe('3m 05s left');
    expect(timeLeftText(0)).toBe('time is up');
  });
});

describe('parseDuration', () => {
  it.each([
    ['30m', 1800],
    ['+1h', 3600],
    ['4h', 14400],
    ['1.5h', 5400],
    ['1h30m', 5400],
    ['1h 30m', 5400],
    ['2 hours', 7200],
    ['1d 2h', 93600],
    ['90', 5400],
    ['1:30', 5400],
    ['0:45:30', 2730],
    ['45s', 45],
    [' 10 MIN ', 600]
  ])('%s is %d s', (text, seconds) => {
    expect(parseDuration(text)).toBe(seconds);
  });
  it.each(['', 'soon', '1x', '0', '0m', '-1h', '1:75', 'h', '1h foo', '1e9999'])('refuses %p', text => {
    expect(parseDuration(text)).toBeNull();
  });
});

describe('dueWarnings', () => {
  it('warns once per run, 10 minutes ahead, not after the end', () => {
    const warned = new Set<string>();
    const far = task(1, 'running', { deadline: 10_000 });
    const near = task(2, 'running', { deadline: 10_000, attempt: 0 });
    expect(dueWarnings([far], 10_000 - 601, warned)).toEqual([]);
    expect(dueWarnings([near], 10_000 - 600, warned).map(t => t.id)).toEqual([2]);
    expect(dueWarnings([near], 10_000 - 300, warned)).toEqual([]); // once
    // extended: the same run, no second warning; a restart is a new run
    expect(dueWarnings([{ ...near, deadline: 10_300 }], 10_000, warned)).toEqual([]);
    const restarted = { ...near, attempt: 1 };
    expect(dueWarnings([restarted], 10_000 - 100, warned).map(runKey)).toEqual(['2/1']);
    expect(dueWarnings([task(3, 'running', { deadline: 100 })], 200, warned)).toEqual([]); // already over
    expect(dueWarnings([task(4, 'pending', { deadline: 100 })], 50, warned)).toEqual([]);
  });
});

describe('GPU usage', () => {
  const usage = (utils: (number | null)[], mean: number | null = null) => ({
    task_id: 1,
    interval: 30,
    gpus: 1,
    samples: utils.map((util, i) => ({ at: i * 30, util })),
    mean_util: mean,
    peak_util: null
  });
  it('is labelled with the service mean, or the samples mean', () => {
    expect(gpuLabel(usage([10, 20], 37.4))).toBe('GPU 37%');
    expect(gpuLabel(usage([10, 20, null]))).toBe('GPU 15%');
    expect(gpuLabel(usage([]))).toBeNull();
    expect(gpuLabel(null)).toBeNull();
  });
  it('draws 0 % at the bottom and 100 % at the top, across the box', () => {
    expect(sparkPoints(usage([0, 100]).samples, 40, 12)).toBe('0,11 40,1');
    expect(sparkPoints(usage([50]).samples, 40, 12)).toBe('0,6 40,6');
    expect(sparkPoints(usage([0, 50, 150, null]).samples, 40, 12)).toBe('0,11 20,6 40,1');
    expect(sparkPoints(usage([]).samples, 40, 12)).toBe('');
  });
});

describe('attempts', () => {
  it('are shown only after a restart, counted from 1 (the service counts from 0)', () => {
    expect(attemptText(task(1, 'running', { attempt: 0, max_restarts: 2 }))).toBeNull();
    expect(attemptText(task(1, 'running', { attempt: 2, max_restarts: 2 }))).toBe('attempt 3 of 3');
    expect(attemptText(task(1, 'running', { attempt: 1 }))).toBe('attempt 2');
    const runs = [
      { attempt: 0, started_at: 0, finished_at: 723, outcome: 'node_failure', reason: 'node n2 down', nodes: ['n2'] },
      { attempt: 1, started_at: 800, finished_at: null, outcome: 'running' }
    ];
    expect(attemptText(task(1, 'running', { max_restarts: 3 }), runs)).toBe('attempt 2 of 4');
    expect(attemptLines(runs)).toEqual(['attempt 1 node_failure: node n2 down on n2 after 12m 03s']);
  });
});

describe('tensorboardPort', () => {
  it('finds the port labelled TensorBoard', () => {
    const ports = [
      { port: 8080, declared: true, listening: true, label: null, url: '/services/tacc/tasks/1/proxy/8080/' },
      { port: 6006, declared: true, listening: true, label: 'TensorBoard', url: '/services/tacc/tasks/1/proxy/6006/' }
    ];
    expect(tensorboardPort(ports)?.port).toBe(6006);
    expect(tensorboardPort(ports.slice(0, 1))).toBeNull();
    expect(tensorboardPort(null)).toBeNull();
  });
});

describe('fieldDetail', () => {
  it('names the field of a refusal, once', () => {
    const over = 'a time limit of 8d is over the site max_time_limit of 7d';
    expect(fieldDetail(new ApiError(422, over, [{ field: 'seconds', message: over }]))).toBe(`seconds: ${over}`);
    expect(fieldDetail(new ApiError(422, 'invalid request', [{ field: 'seconds', message: 'over the budget' }]))).toBe(
      'invalid request\nseconds: over the budget'
    );
    expect(fieldDetail(new ApiError(409, 'task 3 is succeeded, not running'))).toBe('task 3 is succeeded, not running');
    expect(fieldDetail(new Error('boom'))).toBe('boom');
  });
});
