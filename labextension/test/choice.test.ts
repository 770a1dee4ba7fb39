import { captureRequest, defaultChoice } from '../src/choice';

describe('submit choice', () => {
  it('starts from the notebook name with no GPU, one node, 30 minutes, plain, pinned packages', () => {
    expect(defaultChoice('proj/train.ipynb')).toEqual({
      name: 'train',
      gpus: 0,
      nodes: 1,
      time: '30m',
      runtime: 'plain',
      packages: true
    });
  });

  it('maps to the server extension request (blank name and time leave the defaults)', () => {
    const choice = { ...defaultChoice('a.ipynb'), name: ' ', gpus: 2, nodes: 3, time: '', runtime: 'torchrun', packages: false };
    expect(captureRequest('a.ipynb', choice, 'k1')).toEqual({
      path: 'a.ipynb',
      name: undefined,
      resources: { gpus: 2, nodes: 3, time: undefined },
      runtime: 'torchrun',
      packages: false,
      kernel_id: 'k1'
    });
  });
});
