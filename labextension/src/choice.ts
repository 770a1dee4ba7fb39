/** What "Submit this notebook" asks, and the request it makes of the server extension (pure). */

import type { CaptureRequest } from './api';

export const RUNTIMES = ['plain', 'torchrun', 'deepspeed', 'horovod', 'mpi', 'byteps'];

export interface SubmitChoice {
  name: string;
  gpus: number;
  nodes: number;
  time: string;
  runtime: string;
  packages: boolean;
}

/** The dialog's first values: the notebook's name, no GPU, one node, 30 minutes, plain, pinned packages. */
export function defaultChoice(path: string): SubmitChoice {
  const base = (path.split('/').pop() ?? path).replace(/\.ipynb$/, '');
  return { name: base, gpus: 0, nodes: 1, time: '30m', runtime: 'plain', packages: true };
}

/** The body of POST /tacc/api/capture and /tacc/api/submit for a choice (empty name and time: defaults). */
export function captureRequest(path: string, choice: SubmitChoice, kernelId?: string): CaptureRequest {
  return {
    path,
    name: choice.name.trim() || undefined,
    resources: { gpus: choice.gpus, nodes: choice.nodes, time: choice.time.trim() || undefined },
    runtime: choice.runtime,
    packages: choice.packages,
    kernel_id: kernelId
  };
}
