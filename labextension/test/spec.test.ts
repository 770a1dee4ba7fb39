import { bytesText, limitText, shortDigest, specSummary, toYaml } from '../src/spec';

const spec = {
  name: 'lab-ticks',
  code: { kind: 'snapshot', digest: 'a'.repeat(64), size: 20480 },
  entrypoint: { argv: ['python', 'ticks.py', '--steps=3'] },
  workdir: '.',
  environment: { python: '3.11', requirements: ['numpy==2.1.0', 'torch==2.13.0'], variables: {}, modules: [] },
  resources: { nodes: 2, gpus_per_node: 4, gpu_type: null, tasks_per_node: 4, cpus_per_task: 1, memory: 16384, time_limit: 5400 },
  qos: { class: 'normal', preemptible: false, priority: 0 },
  runtime: { kind: 'torchrun', options: {} },
  outputs: []
};

describe('specSummary', () => {
  it('the fields a user reads, in words', () => {
    expect(specSummary(spec)).toEqual([
      { label: 'Command', value: 'python ticks.py --steps=3' },
      { label: 'Resources', value: '8 GPUs, 2 nodes, 4 tasks per node, 16 GiB memory' },
      { label: 'Time limit', value: '1 h 30 min' },
      { label: 'Runtime', value: 'torchrun' },
      { label: 'Code', value: 'snapshot, 20 KiB' },
      { label: 'Environment', value: 'Python 3.11, 2 packages' },
      { label: 'QoS', value: 'normal' }
    ]);
    expect(specSummary({ entrypoint: { shell: ['cd x', 'make'] } })).toEqual([{ label: 'Command', value: 'cd x; make' }]);
    expect(specSummary({})).toEqual([]);
  });

  it('times and sizes', () => {
    expect(limitText(1800)).toBe('30 min');
    expect(limitText(7200)).toBe('2 h');
    expect(limitText(20)).toBe('20 s');
    expect(bytesText(512)).toBe('512 B');
    expect(bytesText(5 * 1024 * 1024)).toBe('5.0 MiB');
  });
});

describe('shortDigest', () => {
  it('keeps the head and the tail of a long digest', () => {
    expect(shortDigest('0123456789abcdef'.repeat(4))).toBe('01234567…cdef');
    expect(shortDigest('sha256:' + 'f'.repeat(64))).toBe('ffffffff…ffff');
    expect(shortDigest('d1')).toBe('d1');
  });
});

describe('toYaml', () => {
  it('block style, plain scalars where they read back the same, quoted otherwise', () => {
    expect(toYaml(spec.resources)).toBe(
      'nodes: 2\ngpus_per_node: 4\ngpu_type: null\ntasks_per_node: 4\ncpus_per_task: 1\nmemory: 16384\ntime_limit: 5400\n'
    );
    expect(toYaml({ entrypoint: { argv: ['python', 'a b.py', '--x=1'] }, env: {}, outputs: [] })).toBe(
      'entrypoint:\n  argv:\n    - python\n    - a b.py\n    - --x=1\nenv: {}\noutputs: []\n'
    );
    expect(toYaml({ a: 'yes', b: '3.11', c: '', d: 'x: y', e: 'line\nnext', f: '#x', g: true })).toBe(
      'a: "yes"\nb: "3.11"\nc: ""\nd: "x: y"\ne: "line\\nnext"\nf: "#x"\ng: true\n'
    );
    expect(toYaml({ nodes: [{ node: 'n1', gpus: [0, 1] }] })).toBe('nodes:\n  - node: n1\n    gpus:\n      - 0\n      - 1\n');
  });
});
