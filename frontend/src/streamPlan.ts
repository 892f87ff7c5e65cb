// How the job page words a file's stream plan (GET /jobs/{id}/plan, issue 37): each stream's
// fate as a badge, what it is in a few words, and the output's container and size.
import { ApiError } from './api';
import { languageName } from './streamRules';
import type { PlannedStream, StreamFate, StreamPlan } from './types';

/** Badge tone per fate: what changes stands out, what is copied stays quiet. */
const FATE_TONES: Record<StreamFate, string> = {
  copy: 'muted',
  encode: 'info',
  convert: 'warn',
  drop: 'bad',
  add: 'ok',
};

export function fateTone(fate: StreamFate): string {
  return FATE_TONES[fate] ?? 'muted';
}

/** "#2", or for an added track "new, from #2". */
export function streamLabel(stream: PlannedStream): string {
  return stream.fate === 'add' ? `new, from #${stream.sourceIndex}` : `#${stream.sourceIndex}`;
}

/** Bits per second as kb/s, or Mb/s from 10 Mb/s on. */
export function formatBitrate(bitsPerSecond: number): string {
  if (bitsPerSecond >= 10_000_000) return `${(bitsPerSecond / 1_000_000).toFixed(1)} Mb/s`;
  return `${Math.round(bitsPerSecond / 1000)} kb/s`;
}

/** "stereo", "mono", "5.1"..., or "N channels". */
export function channelsText(channels: number): string {
  if (channels === 1) return 'mono';
  if (channels === 2) return 'stereo';
  if (channels === 6) return '5.1';
  if (channels === 8) return '7.1';
  return `${channels} channels`;
}

/** The stream's codec with what else the plan says of it: channels, bitrate, title, flags. */
export function codecText(stream: PlannedStream): string {
  const parts = [stream.codec];
  if (stream.channels != null) parts.push(channelsText(stream.channels));
  if (stream.bitRate != null) parts.push(formatBitrate(stream.bitRate));
  return parts.join(', ');
}

/** "English (eng)", or a dash for an untagged track. */
export function languageText(language: string | null | undefined): string {
  if (!language || language === 'und') return '—';
  const name = languageName(language);
  return name === language ? language : `${name} (${language})`;
}

/** The title and dispositions ("Commentary; comment"), or empty. */
export function streamNotes(stream: PlannedStream): string {
  return [stream.title ? `“${stream.title}”` : null, stream.dispositions.length > 0 ? stream.dispositions.join(', ') : null]
    .filter((part): part is string => part !== null)
    .join('; ');
}

export function videoSizeText(plan: StreamPlan): string {
  return plan.videoSize ? `${plan.videoSize.width} × ${plan.videoSize.height} (scaled)` : 'as the source';
}

/** How many streams end in each fate, for a one-line summary: "2 copied, 1 dropped". */
export function fateCounts(plan: StreamPlan): string {
  const words: Record<StreamFate, string> = { encode: 'encoded', copy: 'copied', convert: 'converted', drop: 'dropped', add: 'added' };
  const order: StreamFate[] = ['encode', 'copy', 'convert', 'add', 'drop'];
  return order
    .map((fate) => [fate, plan.streams.filter((s) => s.fate === fate).length] as const)
    .filter(([, n]) => n > 0)
    .map(([fate, n]) => `${n} ${words[fate]}`)
    .join(', ');
}

/** Whether a failed GET /jobs/{id}/plan means "not analysed yet" (the plan needs the probe). */
export function planNotMadeYet(error: unknown): boolean {
  return error instanceof ApiError && (error.status === 404 || error.status === 409);
}
