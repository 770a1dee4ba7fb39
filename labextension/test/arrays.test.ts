import {
  ArrayInfo,
  PipelineInfo,
  aggregateStatus,
  arrayFromTasks,
  countsText,
  groupChanges,
  groupRows,
  paramsText,
  progress,
  rowOf,
  stepWaits
} from '../src/arrays';
import { task } from './fixtures';

const array = (id: number, extra: Partial<ArrayInfo> = {}): ArrayInfo => ({
  id,
  owner: 'alice',
  name: 'sweep',
  size: 4,
  created_at: 2000,
  status: 'running',
  counts: { succeeded: 1, running: 1, pending: 2 },
  running: 1,
  waiting: 2,
  done: 1,
  failed: 0,
  reason: '1 of 4 running, 2 waiting: Priority',
  ...extra
});

const pipeline = (id: number, extra: Partial<PipelineInfo> = {}): PipelineInfo => ({
  id,
  owner: 'alice',
  name: 'prep-train',
  created_at: 3000,
  status: 'running',
  steps: [
    { name: 'prepare', needs: [], task_id: 20, status: 'running' },
    { name: 'train', needs: ['prepare'], task_id: 21, status: 'pending', reason: 'waits for task 20 (prepare) to succeed' }
  ],
  ...extra
});

describe('groupRows', () => {
  it('makes one row per array and per pipeline, and leaves their tasks out', () => {
    const tasks = [
      task(21, 'pending', { pipeline_id: 5, submitted_at: 3000 }),
      task(20, 'running', { pipeline_id: 5, submitted_at: 3000 }),
      ...[10, 11, 12, 13].map((id, i) => task(id, i === 0 ? 'succeeded' : 'pending', { array_id: 7, array_index: i, submitted_at: 2000 })),
      task(3, 'succeeded', { submitted_at: 1000 })
    ];
    const rows = groupRows(tasks, [array(7)], [pipeline(5)]);
    expect(rows.map(r => r.key)).toEqual(['p5', 'a7', 't3']);
    expect(rowOf(tasks[0], rows)).toBe('p5');
    expect(rowOf(tasks[3], rows)).toBe('a7');
    expect(rowOf(tasks[6], rows)).toBe('t3');
  });

  it('builds an array row from the elements when the service did not list the array', () => {
    const tasks = [task(10, 'succeeded', { array_id: 9, array_index: 0 }), task(11, 'failed', { array_id: 9, array_index: 1 })];
    const rows = groupRows(tasks, [], []);
    expect(rows).toHaveLength(1);
    const row = rows[0];
    expect(row.kind).toBe('array');
    if (row.kind === 'array') {
      expect(row.array).toMatchObject({ id: 9, size: 2, done: 1, failed: 1, status: 'failed', partial: true });
    }
  });

  it('puts an array that is a pipeline step inside its pipeline', () => {
    const rows = groupRows([], [array(7, { pipeline_id: 5 })], [pipeline(5)]);
    expect(rows.map(r => r.key)).toEqual(['p5']);
  });
});

describe('progress and counts', () => {
  it('orders the parts done, failed, cancelled, running, waiting and leaves empty ones out', () => {
    const a = array(1, { counts: { succeeded: 2, failed: 1, cancelled: 1, pending: 3 }, done: 2, failed: 1, running: 0, waiting: 3 });
    expect(progress(a).map(p => [p.kind, p.count])).toEqual([
      ['done', 2],
      ['failed', 1],
      ['cancelled', 1],
      ['waiting', 3]
    ]);
    expect(countsText(a)).toBe('2 done · 0 running · 3 waiting · 1 failed · 1 cancelled');
  });

  it('aggregates as the service does', () => {
    expect(aggregateStatus({ running: 1, failed: 3 })).toBe('running');
    expect(aggregateStatus({ pending: 1, succeeded: 3 })).toBe('pending');
    expect(aggregateStatus({ succeeded: 3 })).toBe('succeeded');
    expect(aggregateStatus({ succeeded: 2, lost: 1 })).toBe('failed');
    expect(aggregateStatus({ succeeded: 2, cancelled: 1 })).toBe('cancelled');
    expect(arrayFromTasks(3, [task(1, 'starting', { array_id: 3 })]).running).toBe(1);
  });

  it('writes parameters from the answer or the spec, text as it is', () => {
    expect(paramsText(task(1, 'pending', { params: { lr: 0.001, bs: 32, opt: 'adam; rm -rf /' } }))).toBe('lr=0.001 bs=32 opt=adam; rm -rf /');
    expect(paramsText(task(1, 'pending', { spec: { array_element: { index: 0, size: 2, params: { value: 'a' } } } }))).toBe('value=a');
    expect(paramsText(task(1, 'pending'))).toBe('');
  });
});

describe('pipelines', () => {
  it('says which needs a waiting step still waits for', () => {
    const p = pipeline(5);
    expect(stepWaits(p.steps[1], p.steps)).toBe('waits for prepare');
    const done = [{ ...p.steps[0], status: 'succeeded' }, p.steps[1]];
    expect(stepWaits(done[1], done)).toBe('waits for task 20 (prepare) to succeed');
    expect(stepWaits(done[0], done)).toBe('');
  });
});

describe('groupChanges', () => {
  it('reports an array or a pipeline that ended, not on the first load', () => {
    const first = groupChanges(null, [array(7)], [pipeline(5)]);
    expect(first.changes).toEqual([]);
    const ended = array(7, { status: 'succeeded', counts: { succeeded: 4 }, done: 4, running: 0, waiting: 0 });
    const next = groupChanges(first.seen, [ended], [pipeline(5, { status: 'failed' })]);
    expect(next.changes.map(c => [c.kind, c.id, c.from, c.to])).toEqual([
      ['array', 7, 'running', 'succeeded'],
      ['pipeline', 5, 'running', 'failed']
    ]);
    expect(next.changes[0].summary).toBe('4 done · 0 running · 0 waiting · 0 failed');
    expect(groupChanges(next.seen, [ended], []).changes).toEqual([]);
  });
});

describe('TasksModel with arrays', () => {
  const { TaccApi } = jest.requireActual('../src/api');
  const { TasksModel } = jest.requireActual('../src/tasks');

  function serve(rounds: { tasks: any[]; arrays?: any[] | 404 }[]) {
    const state = { round: 0 };
    const calls: string[] = [];
    const api = new TaccApi(async (path: string) => {
      calls.push(path);
      const r = rounds[Math.min(state.round, rounds.length - 1)];
      if (path.startsWith('tacc/api/tasks?')) {
        return new Response(JSON.stringify({ tasks: r.tasks, total: r.tasks.length }));
      }
      if (path.startsWith('tacc/api/arrays') || path.startsWith('tacc/api/pipelines')) {
        if (r.arrays === 404) {
          return new Response('{"message": "not found"}', { status: 404 });
        }
        return new Response(JSON.stringify(path.startsWith('tacc/api/arrays') ? { arrays: r.arrays ?? [] } : { pipelines: [] }));
      }
      return new Response('{}');
    });
    return { api, calls, state };
  }

  it('signals no element change one by one, and the array once it ended', async () => {
    const els = (s: string[]) => s.map((st, i) => task(10 + i, st, { array_id: 10, array_index: i }));
    const { api, state } = serve([
      { tasks: [...els(['running', 'pending']), task(3, 'running')], arrays: [array(10, { status: 'running' })] },
      { tasks: [...els(['succeeded', 'succeeded']), task(3, 'succeeded')], arrays: [array(10, { status: 'succeeded', done: 2 })] }
    ]);
    const model = new TasksModel(api);
    model.poll.dispose();
    const tasks: string[] = [];
    const groups: string[] = [];
    model.stateChanged.connect((_: unknown, cs: any[]) => cs.forEach(c => tasks.push(`${c.task.id}:${c.to}`)));
    model.groupChanged.connect((_: unknown, cs: any[]) => cs.forEach(c => groups.push(`${c.kind}${c.id}:${c.from}->${c.to}`)));
    await model.refresh();
    state.round = 1;
    await model.refresh();
    expect(tasks).toEqual(['3:succeeded']);
    expect(groups).toEqual(['array10:running->succeeded']);
    model.dispose();
  });

  it('asks for the tasks 200 at a time, and makes array rows from the tasks when the service has no /api/arrays', async () => {
    const { api, calls } = serve([{ tasks: [task(10, 'running', { array_id: 10, array_index: 0 })], arrays: 404 }]);
    const model = new TasksModel(api);
    model.poll.dispose();
    await model.refresh();
    expect(calls.find(c => c.startsWith('tacc/api/tasks?'))).toContain('limit=200');
    expect(model.arrays).toEqual([]);
    const rows = groupRows(model.tasks, model.arrays, model.pipelines);
    expect(rows.map((r: any) => r.key)).toEqual(['a10']);
    await model.refresh(); // not asked again for a while
    expect(calls.filter(c => c.startsWith('tacc/api/arrays'))).toHaveLength(1);
    model.dispose();
  });
});
