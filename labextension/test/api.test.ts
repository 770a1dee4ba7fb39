import { ApiError } from '../src/api';

describe('ApiError.detail', () => {
  it('says a refusal once, and adds the fields the message does not name', () => {
    const msg = 'resources: over quota: needs 2 GPUs; user alice may hold at most 1 (1 over)';
    const same = new ApiError(422, msg, [{ field: 'resources', message: 'over quota: needs 2 GPUs; user alice may hold at most 1 (1 over)' }]);
    expect(same.detail).toBe(msg);
    const more = new ApiError(422, 'invalid spec', [{ field: 'resources.time', message: 'not a duration' }]);
    expect(more.detail).toBe('invalid spec\nresources.time: not a duration');
  });
});
