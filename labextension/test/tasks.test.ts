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

  it('keeps ports and usage of a running task while shown, and leaves an endpoint that answers 404 alone', async () => {
    const calls: string[] = [];
    const request: RequestFn = async path => {
      calls.push(path);
      if (path.endsWith('/ports')) {
        return new Response(JSON.stringify({ task_id: 5, ports: [{ port: 8080, declared: true, listening: true, label: null, url: '/p/' }] }));
      }
      if (path.endsWith('/usage')) {
        return new Response('{"message": "Not Found"}', { status: 404 });
      }
      const tasks = [task(5, 'running', { deadline: 9e9 }), task(4, 'succeeded')];
      return new Response(JSON.stringify({ tasks, total: 2 }));
    };
    const model = new TasksModel(new TaccApi(request));
    model.poll.dispose();
    await model.refresh();
    expect(calls.filter(c => c.includes('/tasks/5/'))).toEqual([]); // the panel is hidden: nothing shown, nothing asked
    model.setVisible(true);
    await model.refresh();
    await new Promise(r => setTimeout(r, 0));
    expect(model.run(5)?.ports?.map(p => p.port)).toEqual([8080]);
    expect(model.run(5)?.usage).toBeNull();
    expect(model.run(4)).toBeUndefined();
    expect(calls.filter(c => c.includes('/attempts'))).toEqual([]); // one run and no restarts: not asked
    await model.refresh();
    await new Promise(r => setTimeout(r, 0));
    expect(calls.filter(c => c.endsWith('/usage'))).toHaveLength(1); // 404: not asked again at once
    expect(calls.filter(c => c.endsWith('/ports'))).toHaveLength(1); // not due yet
    model.refreshRun(5, 'ports');
    await new Promise(r => setTimeout(r, 0));
    expect(calls.filter(c => c.endsWith('/ports'))).toHaveLength(2);
    model.noteTask(task(5, 'running', { deadline: 1 }));
    expect(model.tasks[0].deadline).toBe(1);
    model.dispose();
  });
});
