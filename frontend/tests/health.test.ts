// A library's health check in words (src/health.ts): the run, the counts, a finding, the
// question before a new copy, and when a re-check is over.
import { describe, expect, it } from 'vitest';
import {
  countsText,
  errorCountText,
  fileNameOf,
  findingText,
  formatMediaTime,
  newCopyQuestion,
  recheckOutcome,
  runPercent,
  runSummary,
  sourcesText,
} from '../src/health';
import type { FileHealth, HealthRun } from '../src/types';

const NOW = Date.parse('2026-03-01T12:00:00Z');

function run(change: Partial<HealthRun> = {}): HealthRun {
  return {
    depth: 'quick',
    all: false,
    scheduled: false,
    status: 'DONE',
    filesTotal: 4,
    filesDone: 4,
    startedAt: '2026-03-01T11:50:00Z',
    finishedAt: '2026-03-01T11:55:00Z',
    ...change,
  };
}

function file(change: Partial<FileHealth> = {}): FileHealth {
  return {
    id: 7,
    path: '/media/tv/Show/S01/e1.mkv',
    size: 1000,
    depth: 'quick',
    verdict: 'damaged',
    firstErrorSeconds: 3.24,
    message: 'error while decoding MB 3 4',
    errorCount: 7,
    checkedAt: '2026-03-01T11:54:00Z',
    ignored: false,
    newCopyFrom: [],
    ...change,
  };
}

describe('health in words', () => {
  it('says where a run stands', () => {
    expect(runSummary(null, NOW)).toBe('Never checked.');
    expect(runSummary(run(), NOW)).toBe('Quick check of 4 files finished 5 min ago.');
    expect(runSummary(run({ status: 'RUNNING', filesDone: 3, finishedAt: null }), NOW)).toBe('Quick check running: 3 of 4 files checked.');
    expect(runSummary(run({ status: 'RUNNING', filesTotal: 0, filesDone: 0, finishedAt: null }), NOW)).toBe(
      'Quick check running: finding the files…',
    );
    expect(runSummary(run({ depth: 'thorough', all: true, status: 'CANCELLED', filesDone: 2 }), NOW)).toBe(
      'Thorough check (every file) cancelled after 2 of 4 files, 5 min ago.',
    );
    expect(runSummary(run({ scheduled: true, filesTotal: 1, filesDone: 1 }), NOW)).toBe('Scheduled quick check of 1 file finished 5 min ago.');
    expect(runSummary(run({ status: 'INTERRUPTED', filesDone: 1 }), NOW)).toBe(
      'Quick check interrupted by a stop of the server after 1 of 4 files, 5 min ago.',
    );
  });

  it('measures progress, 0 while the files are still being found', () => {
    expect(runPercent({ filesDone: 0, filesTotal: 0 })).toBe(0);
    expect(runPercent({ filesDone: 1, filesTotal: 3 })).toBe(33.3);
    expect(runPercent({ filesDone: 4, filesTotal: 4 })).toBe(100);
    expect(runPercent({ filesDone: 5, filesTotal: 4 })).toBe(100);
  });

  it('says what a check found in a file, with the time of the first error', () => {
    expect(formatMediaTime(3.24)).toBe('0:03.2');
    expect(formatMediaTime(59.96)).toBe('1:00.0');
    expect(formatMediaTime(3725)).toBe('1:02:05.0');
    expect(formatMediaTime(null)).toBe('?');
    expect(findingText(file())).toBe('at 0:03.2: error while decoding MB 3 4');
    expect(findingText(file({ firstErrorSeconds: null }))).toBe('error while decoding MB 3 4');
    expect(findingText(file({ verdict: 'unreadable', firstErrorSeconds: null, message: 'Invalid data found when processing input' }))).toBe(
      'Invalid data found when processing input',
    );
    expect(findingText(file({ verdict: 'unreadable', message: null }))).toBe('The file cannot be read as media.');
    expect(findingText(file({ verdict: 'ok', message: null }))).toBe('No error found.');
    expect(errorCountText(1)).toBe('1 error');
    expect(errorCountText(1200)).toBe('1,200 errors');
    expect(countsText({ ok: 2, damaged: 1, unreadable: 0 })).toBe('2 ok, 1 damaged, 0 unreadable');
    expect(fileNameOf('/media/a b/c.mkv')).toBe('c.mkv');
    expect(fileNameOf('c.mkv')).toBe('c.mkv');
  });

  it('names who deletes what before a new copy is asked for', () => {
    const sonarr = { id: 1, name: 'tv', kind: 'sonarr' as const };
    const radarr = { id: 2, name: 'films', kind: 'radarr' as const };
    expect(sourcesText([sonarr])).toBe('Sonarr “tv”');
    expect(sourcesText([sonarr, radarr])).toBe('Sonarr “tv” or Radarr “films”');
    const question = newCopyQuestion(file({ newCopyFrom: [sonarr] }));
    expect(question).toBe(
      'Get a new copy of “e1.mkv”? Sonarr “tv” will delete its record of the file, and the file itself, then search for a new copy. ' +
        'condense deletes nothing itself. This cannot be undone.',
    );
  });

  it('knows a re-check is over once the result is newer, or the file is no finding any more', () => {
    const before = file();
    expect(recheckOutcome(before, [before], true)).toEqual({ done: false });
    expect(recheckOutcome(before, [file({ checkedAt: '2026-03-01T11:59:00Z' })], true)).toEqual({
      done: true,
      ok: false,
      text: 'Checked again: still damaged.',
    });
    expect(recheckOutcome(before, [file({ checkedAt: '2026-03-01T11:59:00Z', verdict: 'ok' })], false)).toEqual({
      done: true,
      ok: true,
      text: 'Checked again: ok.',
    });
    expect(recheckOutcome(before, [file({ id: 8 })], true)).toEqual({ done: true, ok: true, text: 'Checked again: ok.' });
    // Another page of findings: where the file is now is not known yet.
    expect(recheckOutcome(before, [file({ id: 8 })], false)).toEqual({ done: false });
  });
});
