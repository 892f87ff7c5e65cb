// Where a completed job's time went: the phases its `completed` event records (wall and
// CPU time of each, measured by the service itself; docs/ARCHITECTURE.md, "Phase times").
import { DASH, formatDuration, titleCase } from './format';
import type { JobEvent } from './types';

/** One phase as the server records it. `node`: the linked node it ran on, for the phases a
 * node that took the file by transfer reported; absent, the node that verified and replaced. */
export interface PhaseTime {
  phase: string;
  wallMs: number;
  cpuMs: number;
  node?: string | null;
}

export interface JobTimes {
  phases: PhaseTime[];
  /** The video's tail: how long one session still encoded once another had no span left. */
  aloneMs: number | null;
}

function isPhase(value: unknown): value is PhaseTime {
  if (value === null || typeof value !== 'object') return false;
  const p = value as Record<string, unknown>;
  const ms = (v: unknown) => typeof v === 'number' && Number.isFinite(v) && v >= 0;
  return typeof p.phase === 'string' && ms(p.wallMs) && ms(p.cpuMs) && (p.node == null || typeof p.node === 'string');
}

/** The phases of the job's last completion, in order; null when it has none (not completed,
 * or completed by a server that did not record them). Entries that are not phases are left out. */
export function timesOf(events: readonly JobEvent[]): JobTimes | null {
  const completed = [...events].reverse().find((e) => e.kind === 'completed');
  const detail = completed?.detail;
  if (detail === null || typeof detail !== 'object' || Array.isArray(detail)) return null;
  const fields = detail as Record<string, unknown>;
  if (!Array.isArray(fields.phases)) return null;
  const phases = fields.phases.filter(isPhase);
  if (phases.length === 0) return null;
  const alone = fields.aloneMs;
  return { phases, aloneMs: typeof alone === 'number' && Number.isFinite(alone) ? alone : null };
}

const LABELS: Record<string, string> = {
  start: 'Start (lock, probe)',
  search: 'Quality search',
  'first pass': 'First pass',
  spans: 'Span cuts',
  measure: 'VMAF measure',
};

export function phaseLabel(phase: string): string {
  return LABELS[phase] ?? titleCase(phase);
}

/** Milliseconds as "0.24 s" under a minute (phases are often short), else as a duration. */
export function formatMs(ms: number | null | undefined): string {
  if (ms == null || !Number.isFinite(ms) || ms < 0) return DASH;
  return ms < 60_000 ? `${(ms / 1000).toFixed(2)} s` : formatDuration(ms / 1000);
}

/** A transfer waits on the link: nobody measures its CPU time (the server records 0). */
export function cpuOf(p: PhaseTime): string {
  return p.cpuMs === 0 && (p.phase === 'download' || p.phase === 'upload') ? DASH : formatMs(p.cpuMs);
}
