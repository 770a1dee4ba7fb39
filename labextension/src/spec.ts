/**
 * A task's spec for people, pure: a summary of the fields that matter (command, resources,
 * runtime, code, environment, QoS), the digest shortened for a narrow panel, and the whole
 * spec as YAML (block style, strings quoted only where YAML would read them otherwise).
 */

export interface SpecField {
  label: string;
  value: string;
}

const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

/** `90 min`, `2 h`, `1 h 30 min` for a time limit in seconds. */
export function limitText(seconds: number): string {
  const m = Math.round(seconds / 60);
  if (m < 60) {
    return m >= 1 ? `${m} min` : `${Math.round(seconds)} s`;
  }
  const h = Math.floor(m / 60);
  return m % 60 ? `${h} h ${m % 60} min` : `${h} h`;
}

/** The important fields of a spec, in the order a user reads them; fields the spec lacks are left out. */
export function specSummary(spec: Record<string, any>): SpecField[] {
  const out: SpecField[] = [];
  const add = (label: string, value: string | null | undefined) => {
    if (value) {
      out.push({ label, value });
    }
  };
  const ep = spec.entrypoint ?? {};
  add('Command', Array.isArray(ep.argv) ? ep.argv.join(' ') : Array.isArray(ep.shell) ? ep.shell.join('; ') : null);
  const r = spec.resources ?? {};
  if (typeof r.nodes === 'number') {
    const gpn = typeof r.gpus_per_node === 'number' ? r.gpus_per_node : 0;
    const parts = [`${plural(gpn * r.nodes, 'GPU')}${r.gpu_type ? ` (${r.gpu_type})` : ''}`, plural(r.nodes, 'node')];
    if (typeof r.tasks_per_node === 'number' && r.tasks_per_node > 1) {
      parts.push(`${r.tasks_per_node} tasks per node`);
    }
    if (typeof r.memory === 'number') {
      parts.push(`${r.memory >= 1024 && r.memory % 1024 === 0 ? `${r.memory / 1024} GiB` : `${r.memory} MiB`} memory`);
    }
    add('Resources', parts.join(', '));
  }
  add('Time limit', typeof r.time_limit === 'number' ? limitText(r.time_limit) : null);
  add('Partition', r.partition);
  add('Runtime', spec.runtime?.kind);
  const code = spec.code ?? {};
  if (code.kind === 'git') {
    add('Code', `git ${code.url} @ ${String(code.commit).slice(0, 12)}`);
  } else if (code.kind === 'snapshot') {
    add('Code', `snapshot, ${typeof code.size === 'number' ? bytesText(code.size) : 'size unknown'}`);
  } else if (code.kind) {
    add('Code', `${code.kind}${code.path ? ` ${code.path}` : ''}`);
  }
  const env = spec.environment ?? {};
  const envParts = [
    env.python ? `Python ${env.python}` : '',
    Array.isArray(env.requirements) && env.requirements.length ? plural(env.requirements.length, 'package') : '',
    env.conda ? 'conda' : ''
  ].filter(Boolean);
  add('Environment', envParts.join(', '));
  const qos = spec.qos ?? {};
  const qosParts = [qos.class, qos.preemptible ? 'preemptible' : '', qos.priority ? `priority ${qos.priority}` : ''].filter(Boolean);
  add('QoS', qosParts.join(', '));
  add('Outputs', Array.isArray(spec.outputs) && spec.outputs.length ? spec.outputs.join(', ') : null);
  return out;
}

export function bytesText(n: number): string {
  if (n < 1024) {
    return `${n} B`;
  }
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

/** `3f2a9c1d…77e0` for a long digest (8 + 4 characters: fits a narrow panel); a short one as it is. */
export function shortDigest(digest: string): string {
  const d = digest.replace(/^sha256:/, '');
  return d.length > 20 ? `${d.slice(0, 8)}…${d.slice(-4)}` : d;
}

const PLAIN = /^(?:[A-Za-z0-9_./]|-(?=\S)(?!--))[A-Za-z0-9_./ ${}=+,@%-]*$/;
const RESERVED = /^(true|false|yes|no|on|off|y|n|null|~|[-+]?(\d[\d_]*(\.\d*)?([eE][-+]?\d+)?|\.\d+|\.inf|\.nan|0x[0-9a-fA-F]+|0o[0-7]+))$/i;

/** A YAML scalar: plain where it reads back as the same string, else double-quoted (JSON's quoting is YAML's). */
function scalar(v: unknown): string {
  if (v === null || v === undefined) {
    return 'null';
  }
  if (typeof v === 'number' || typeof v === 'boolean') {
    return String(v);
  }
  const s = String(v);
  if (s === '' || !PLAIN.test(s) || RESERVED.test(s) || s.endsWith(' ') || s.includes(': ') || s.includes(' #')) {
    return JSON.stringify(s);
  }
  return s;
}

/** The value as block-style YAML (keys in their order; empty lists and maps written `[]` and `{}`). */
export function toYaml(value: unknown, indent = ''): string {
  const lines: string[] = [];
  const walk = (v: unknown, pad: string, out: string[]) => {
    if (Array.isArray(v)) {
      for (const item of v) {
        if (item !== null && typeof item === 'object' && Object.keys(item).length) {
          const inner: string[] = [];
          walk(item, pad + '  ', inner);
          out.push(`${pad}- ${inner[0].trimStart()}`, ...inner.slice(1));
        } else {
          out.push(`${pad}- ${leaf(item)}`);
        }
      }
      return;
    }
    for (const [k, item] of Object.entries(v as Record<string, unknown>)) {
      const key = scalar(k);
      if (item !== null && typeof item === 'object' && Object.keys(item).length) {
        out.push(`${pad}${key}:`);
        walk(item, pad + '  ', out);
      } else {
        out.push(`${pad}${key}: ${leaf(item)}`);
      }
    }
  };
  const leaf = (v: unknown) => (Array.isArray(v) ? '[]' : v !== null && typeof v === 'object' ? '{}' : scalar(v));
  if (value !== null && typeof value === 'object' && Object.keys(value).length) {
    walk(value, indent, lines);
  } else {
    lines.push(indent + leaf(value));
  }
  return lines.join('\n') + '\n';
}
