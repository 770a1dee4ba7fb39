import { Task } from '../src/model';

/** A task as the service lists it, with whatever fields a test needs on top. */
export const task = (id: number, status: string, extra: Partial<Task> = {}): Task => ({
  id,
  owner: 'alice',
  name: `t${id}`,
  status,
  digest: `d${id}`,
  submitted_at: 1000,
  ...extra
});
