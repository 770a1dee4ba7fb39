import {
  bySwitch,
  describeChange,
  elapsedOf,
  formatDuration,
  mergeTasks,
  nextDelay,
  resourcesText,
  resubmitSpec,
  runtimeOf,
  worthNotifying
} from '../src/model';

import { task } from './fixtures';

describe('mergeTasks', () => {
  it('reports nothing on the first load', () => {
    const out = mergeTasks(null, [task(2, 'running'), task(1, 'succeeded')]);
    expect(out.changes).toEqual([]);
    expect(out.tasks.map(t => t.id)).toEqual([2, 1]);
  });

  it('reports each status change once, with from and to', () => {
    const first = mergeTasks(null, [task(2, 'pending'), task(1, 'running')]);
    const second = mergeTasks(first.byId, [task(2, 'running'), task(1, 'succeeded')]);
    expect(second.changes.map(c => [c.task.id, c.from, c.to])).toEqual([
      [2, 'pending', 'running'],
      [1, 'running', 'succeeded']
    ]);
    const third = mergeTasks(second.byId, [task(2, 'running'), task(1, 'succeeded')]);
    expect(third.changes).toEqual([]);
  });

  it('new tasks are news only when asked', () => {
    const first = mergeTasks(null, [task(1, 'running')]);
    expect(mergeTasks(first.byId, [task(3, 'pending'), task(1, 'running')]).changes).toEqual([]);
    const withNew = mergeTasks(first.byId, [task(3, 'pending'), task(1, 'running')], true);
    expect(withNew.changes).toEqual([{ task: task(3, 'pending'), from: null, to: 'pending' }]);
  });

  it('keeps active tasks that fell off the page, drops ended ones, newest first', () => {
    const first = mergeTasks(null, [task(5, 'pending'), task(4, 'running'), task(3, 'failed')]);
    const second = mergeTasks(first.byId, [task(7, 'pending'), task(6, 'running')]);
    expect(second.tasks.map(t => t.id)).toEqual([7, 6, 5, 4]);
  });
});

describe('OverQuota', () => {
  const over = (id: number, detail = 'can never start under the current quota: needs 4 GPUs, user bob may hold at most 2') =>
    task(id, 'pending', { name: 'big', queue: { reason: 'OverQuota', position: 1, estimated_start: null, detail } });
  const capped = (id: number) => task(id, 'pending', { name: 'big', queue: { reason: 'Quota', position: 1, estimated_start: null } });

  it('is news once, when a waiting task becomes OverQuota (not on the first load, not again)', () => {
    const first = mergeTasks(null, [over(2), capped(1)]);
    expect(first.changes).toEqual([]);
    const second = mergeTasks(first.byId, [over(2), over(1)]);
    expect(second.changes.map(c => [c.task.id, c.from, c.to, c.overQuota])).toEqual([[1, 'pending', 'pending', true]]);
    expect(mergeTasks(second.byId, [over(2), over(1)]).changes).toEqual([]);
    // a task new to the panel that is OverQuota already (submitted elsewhere) is news too
    expect(mergeTasks(second.byId, [over(3), over(2), over(1)]).changes.map(c => c.task.id)).toEqual([3]);
    // back under the quota, and OverQuota again: news again
    const raised = mergeTasks(second.byId, [over(2), capped(1)]);
    expect(raised.changes).toEqual([]);
    expect(mergeTasks(raised.byId, [over(2), over(1)]).changes.map(c => c.task.id)).toEqual([1]);
  });

  it('says it can never start and why, once, as a warning', () => {
    const c = { task: over(5), from: 'pending', to: 'pending', overQuota: true };
    expect(worthNotifying(c)).toBe(true);
    expect(describeChange(c)).toEqual({
      level: 'warning',
      message: 'Task 5 (big) can never start under the current quota: needs 4 GPUs, user bob may hold at most 2'
    });
    const bare = { task: over(6, ''), from: 'pending', to: 'pending', overQuota: true };
    expect(describeChange(bare).message).toBe('Task 6 (big) can never start under the current quota');
    const other = { task: over(7, 'needs 4 GPUs; user bob may hold at most 2.'), from: 'pending', to: 'pending', overQuota: true };
    expect(describeChange(other).message).toBe('Task 7 (big) can never start under the current quota: needs 4 GPUs; user bob may hold at most 2');
  });
});

describe('describeChange', () => {
  it('levels and messages', () => {
    expect(describeChange({ task: task(1, 'succeeded'), from: 'running', to: 'succeeded' })).toEqual({
      level: 'success',
      message: 'Task 1 (t1) succeeded'
    });
    expect(describeChange({ task: task(1, 'failed', { exit_code: 3 }), from: 'running', to: 'failed' }).message).toBe(
      'Task 1 (t1) failed: exit 3'
    );
    expect(describeChange({ task: task(1, 'failed', { reason: 'OOM' }), from: 'running', to: 'failed' }).level).toBe('error');
    expect(describeChange({ task: task(1, 'pending', { reason: 'preempted' }), from: 'running', to: 'pending' })).toEqual({
      level: 'warning',
      message: 'Task 1 (t1) is back in the queue: preempted'
    });
    expect(describeChange({ task: task(1, 'running'), from: 'pending', to: 'running' }).level).toBe('info');
    expect(describeChange({ task: task(1, 'cancelled'), from: 'running', to: 'cancelled' }).level).toBe('warning');
  });
});

describe('worthNotifying', () => {
  it('skips the transitional states', () => {
    const to = (s: string) => worthNotifying({ task: task(1, s), from: 'pending', to: s });
    expect(['starting', 'cancelling'].map(to)).toEqual([false, false]);
    expect(['running', 'succeeded', 'failed', 'cancelled', 'lost', 'pending'].every(to)).toBe(true);
  });
});

describe('formatting', () => {
  it('durations', () => {
    expect(formatDuration(0)).toBe('0s');
    expect(formatDuration(42.9)).toBe('42s');
    expect(formatDuration(185)).toBe('3m 05s');
    expect(formatDuration(3720)).toBe('1h 02m');
    expect(formatDuration(2 * 86400 + 3 * 3600)).toBe('2d 03h');
    expect(formatDuration(-1)).toBe('-');
    expect(formatDuration(null)).toBe('-');
    expect(formatDuration(NaN)).toBe('-');
  });

  it('runtime and elapsed', () => {
    expect(runtimeOf(task(1, 'pending'), 2000)).toBeNull();
    expect(runtimeOf(task(1, 'running', { started_at: 1100 }), 1160)).toBe(60);
    expect(runtimeOf(task(1, 'succeeded', { started_at: 1100, finished_at: 1130 }), 5000)).toBe(30);
    expect(elapsedOf(task(1, 'running'), 1090)).toBe(90);
    expect(elapsedOf(task(1, 'failed', { finished_at: 1010 }), 9999)).toBe(10);
    expect(elapsedOf(task(1, 'running'), 900)).toBe(0); // clock skew never goes negative
  });

  it('resources from placement or spec', () => {
    const placed = task(1, 'running', { placement: { nodes: [{ node: 'n1', gpus: [0, 1] }, { node: 'n2', gpus: [0, 1] }] } });
    expect(resourcesText(placed)).toBe('4 GPUs on n1, n2');
    expect(resourcesText(task(1, 'running', { placement: { nodes: [{ node: 'localhost', gpus: [] }] } }))).toBe('no GPU on localhost');
    const asked = task(1, 'pending', { spec: { resources: { nodes: 1, gpus_per_node: 1 } } });
    expect(resourcesText(asked)).toBe('1 GPU, 1 node');
    expect(resourcesText(task(1, 'pending'))).toBe('');
  });
});

describe('polling and resubmit', () => {
  it('backs off on failures, slower when idle', () => {
    expect(nextDelay({ failures: 0, active: true })).toBe(2000);
    expect(nextDelay({ failures: 0, active: false })).toBe(10000);
    expect(nextDelay({ failures: 1, active: true })).toBe(4000);
    expect(nextDelay({ failures: 3, active: true })).toBe(16000);
    expect(nextDelay({ failures: 10, active: true })).toBe(60000);
  });

  it('resubmits the very same spec (a copy)', () => {
    const spec = { name: 'x', resources: { nodes: 1 }, code: { digest: 'abc' } };
    const t = task(1, 'failed', { spec });
    const again = resubmitSpec(t);
    expect(again).toEqual(spec);
    expect(again).not.toBe(spec);
    expect(() => resubmitSpec(task(2, 'failed'))).toThrow(/no spec/);
  });
});

describe('cluster', () => {
  it('groups nodes by switch with free GPUs (unschedulable nodes count none)', () => {
    const groups = bySwitch({
      executor: 'local',
      gpus: 12,
      gpus_used: 3,
      gpus_free: 9,
      pending: 0,
      running: 1,
      nodes: [
        { name: 'n10', gpus: 4, gpus_used: 0, gpus_free: 4, switch: 's1' },
        { name: 'n2', gpus: 4, gpus_used: 3, gpus_free: 1, switch: 's0' },
        { name: 'n1', gpus: 4, gpus_used: 0, gpus_free: 4, switch: 's0', schedulable: false }
      ]
    });
    expect(groups.map(g => [g.name, g.free, g.total, g.nodes.map(n => n.name)])).toEqual([
      ['s0', 1, 8, ['n1', 'n2']],
      ['s1', 4, 4, ['n10']]
    ]);
  });
});
