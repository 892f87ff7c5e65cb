// A library's health check (issue 38) in words: the latest run, the counts by verdict, one
// file's finding, and the question "get a new copy" asks first. Pure; the panel that shows
// them is pages/library/Health.tsx.
import { formatNumber, formatRelative, titleCase } from './format';
import type { FileHealth, HealthAction, HealthCounts, HealthDepth, HealthRun, HealthSchedule, NewCopySource } from './types';

export const DEPTH_CHOICES: readonly { value: HealthDepth; label: string }[] = [
  { value: 'quick', label: 'Quick: every header and packet' },
  { value: 'thorough', label: 'Thorough: every frame decoded' },
];

export const SCHEDULE_CHOICES: readonly { value: HealthSchedule; label: string }[] = [
  { value: 'off', label: 'Off' },
  { value: 'weekly', label: 'Weekly' },
  { value: 'monthly', label: 'Monthly' },
];

export const ACTION_CHOICES: readonly { value: HealthAction; label: string }[] = [
  { value: 'notify', label: 'Notify' },
  { value: 'regrab', label: 'Notify and get a new copy from Sonarr or Radarr' },
];

/** The last part of a path: what a list of files names each by. */
export function fileNameOf(path: string): string {
  const trimmed = path.replace(/\/+$/, '');
  const name = trimmed.slice(trimmed.lastIndexOf('/') + 1);
  return name === '' ? path : name;
}

/** Seconds into a file as a player shows them: 3.24 -> "0:03.2", 3725 -> "1:02:05.0". */
export function formatMediaTime(seconds: number | null | undefined): string {
  if (seconds == null || !Number.isFinite(seconds) || seconds < 0) return '?';
  const tenths = Math.round(seconds * 10);
  const hours = Math.floor(tenths / 36000);
  const minutes = Math.floor((tenths % 36000) / 600);
  const secs = ((tenths % 600) / 10).toFixed(1).padStart(4, '0');
  return hours > 0 ? `${hours}:${String(minutes).padStart(2, '0')}:${secs}` : `${minutes}:${secs}`;
}

/** What the last check found in words: "at 0:03.2: error while decoding MB 3 4" (damaged), why it cannot be read (unreadable). */
export function findingText(file: Pick<FileHealth, 'verdict' | 'firstErrorSeconds' | 'message'>): string {
  switch (file.verdict) {
    case 'ok':
      return 'No error found.';
    case 'damaged': {
      const message = file.message?.trim() || 'an error';
      return file.firstErrorSeconds == null ? message : `at ${formatMediaTime(file.firstErrorSeconds)}: ${message}`;
    }
    default:
      return file.message?.trim() || 'The file cannot be read as media.';
  }
}

export function errorCountText(count: number): string {
  return `${formatNumber(count)} error${count === 1 ? '' : 's'}`;
}

/** "2 ok, 1 damaged, 1 unreadable". */
export function countsText(counts: HealthCounts): string {
  return `${formatNumber(counts.ok)} ok, ${formatNumber(counts.damaged)} damaged, ${formatNumber(counts.unreadable)} unreadable`;
}

/** Files the checks found damaged or unreadable, ignored ones included. */
export function findingsOf(counts: HealthCounts): number {
  return counts.damaged + counts.unreadable;
}

/** How far a run is, 0 to 100 (0 while its files are still being found). */
export function runPercent(run: Pick<HealthRun, 'filesDone' | 'filesTotal'>): number {
  if (run.filesTotal <= 0) return 0;
  return Math.max(0, Math.min(100, Math.round((run.filesDone / run.filesTotal) * 1000) / 10));
}

function files(count: number): string {
  return `${formatNumber(count)} file${count === 1 ? '' : 's'}`;
}

/**
 * The latest run in one sentence: "Quick check running: 3 of 4 files checked.", "Scheduled
 * quick check of 4 files finished 5 min ago.", "Thorough check (every file) cancelled after 2
 * of 4 files, 3 min ago."
 */
export function runSummary(run: HealthRun | null | undefined, now: number = Date.now()): string {
  if (!run) return 'Never checked.';
  const what = run.scheduled ? `Scheduled ${run.depth} check` : `${titleCase(run.depth)} check`;
  const scope = run.all ? ' (every file)' : '';
  const when = formatRelative(run.finishedAt ?? run.startedAt, now);
  switch (run.status) {
    case 'RUNNING':
      return run.filesTotal === 0
        ? `${what}${scope} running: finding the files…`
        : `${what}${scope} running: ${formatNumber(run.filesDone)} of ${files(run.filesTotal)} checked.`;
    case 'DONE':
      return `${what}${scope} of ${files(run.filesTotal)} finished ${when}.`;
    case 'CANCELLED':
      return `${what}${scope} cancelled after ${formatNumber(run.filesDone)} of ${files(run.filesTotal)}, ${when}.`;
    default:
      return `${what}${scope} interrupted by a stop of the server after ${formatNumber(run.filesDone)} of ${files(run.filesTotal)}, ${when}.`;
  }
}

/** "Sonarr “tv”", "Sonarr “tv” or Radarr “films”". */
export function sourcesText(sources: readonly NewCopySource[]): string {
  const named = sources.map((source) => `${source.kind === 'sonarr' ? 'Sonarr' : source.kind === 'radarr' ? 'Radarr' : source.kind} “${source.name}”`);
  if (named.length <= 1) return named[0] ?? 'no Sonarr or Radarr';
  return `${named.slice(0, -1).join(', ')} or ${named[named.length - 1]}`;
}

/** What "get a new copy" asks before anything is sent: who deletes what, and that it cannot be undone. */
export function newCopyQuestion(file: Pick<FileHealth, 'path' | 'newCopyFrom'>): string {
  return (
    `Get a new copy of “${fileNameOf(file.path)}”? ${sourcesText(file.newCopyFrom)} will delete its record of the file, ` +
    'and the file itself, then search for a new copy. condense deletes nothing itself. This cannot be undone.'
  );
}

/** How a re-check that was asked for ended, once the file's result is read again. */
export type RecheckOutcome = { done: false } | { done: true; text: string; ok: boolean };

/**
 * Whether a re-check asked for when the file's result was `before` has happened, from the
 * results read since (`files`, a page of them; `everyFinding`: the page holds every damaged
 * and unreadable file): the result checked later (its verdict then), or gone from a page
 * that holds every finding (no longer damaged: ok). Not on a page that holds only some: not
 * known yet.
 */
export function recheckOutcome(
  before: Pick<FileHealth, 'id' | 'checkedAt'>,
  files: readonly FileHealth[],
  everyFinding: boolean,
): RecheckOutcome {
  const now = files.find((file) => file.id === before.id);
  if (!now) return everyFinding ? { done: true, ok: true, text: 'Checked again: ok.' } : { done: false };
  if (Date.parse(now.checkedAt) <= Date.parse(before.checkedAt)) return { done: false };
  if (now.verdict === 'ok') return { done: true, ok: true, text: 'Checked again: ok.' };
  return { done: true, ok: false, text: `Checked again: still ${now.verdict}.` };
}
