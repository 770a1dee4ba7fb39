import { RequestFn, TaccApi } from '../src/api';
import { StateChange, Task } from '../src/model';
import { TasksModel } from '../src/tasks';

import { task } from './fixtures';

function fakeApi(lists: Task[][], specs: Record<number, Record<string, any>> = {}) {
  const calls: string[] = [];
  let i = 0;
  const request: RequestFn = async path => {
    calls.push(path);
    const one = /tasks\/(\d+)$/.exec(path);
    if (one) {
      const id = Number(one[1]);
      return new Response(JSON.stringify({ ...task(id, 'pending'), spec: specs[id] ?? null }));
    }
    const tasks = lists[Math.min(i++, lists.length - 1)];
    return new Response(JSON.stringify({ tasks, total: tasks.length }));
  };
  return { api: new TaccApi(request), calls };
}

describe('TasksModel', () => {
  it('signals state changes between refreshes, not on the first load', async () => {
    const { api } = fakeApi([
      [task(2, 'pending'), task(1, 'running')],
      [task(2, 'running'), task(1, 'succeeded')]
    ]);
    const model = new TasksModel(api);
    model.poll.dispose(); // driven by hand here
    const seen: StateChange[][] = [];
    model.stateChanged.connect((_, changes) => seen.push(changes));
    await model.refresh();
    expect(seen).toEqual([]);
    await model.refresh();
    expect(seen.map(cs => cs.map(c => `${c.task.id}:${c.from}->${c.to}`))).toEqual([['2:pending->running', '1:running->succeeded']]);
    model.dispose();
  });

  it('fetches the spec of a task that is not placed yet, once, and keeps the error of a failed refresh', async () => {
    const { api, calls } = fakeApi([[task(3, 'pending')]], { 3: { resources: { nodes: 2, gpus_per_node: 4 } } });
    const model = new TasksModel(api);
    model.poll.dispose();
    await model.refresh();
    await new Promise(r => setTimeout(r, 0));
    await model.refresh();
    await new Promise(r => setTimeout(r, 0));
    expect(calls.filter(c => c === 'tacc/api/tasks/3')).toHaveLength(1);
    expect(model.withSpec(model.tasks[0]).spec).toEqual({ resources: { nodes: 2, gpus_per_node: 4 } });

    const broken = new TasksModel(new TaccApi(async () => new Response('{"message": "service down"}', { status: 502 })));
    broken.poll.dispose();
    await expect(broken.refresh()).rejects.toThrow('service down');
    expect(broken.error).toBe('service down');
    model.dispose();
    broken.dispose();
  });
});
