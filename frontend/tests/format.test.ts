import { describe, expect, it } from 'vitest';
import {
  efficiencyReading,
  formatBytes,
  formatDuration,
  formatEta,
  formatEventDetail,
  formatFps,
  formatFraction,
  formatHours,
  formatPercent,
  formatRelative,
  formatShortDate,
  formatWindows,
  titleCase,
} from '../src/format';

describe('formatBytes', () => {
  it('uses binary units with sensible precision', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(1023)).toBe('1023 B');
    expect(formatBytes(1024)).toBe('1.0 KiB');
    expect(formatBytes(1536)).toBe('1.5 KiB');
    expect(formatBytes(5 * 1024 ** 3)).toBe('5.0 GiB');
    expect(formatBytes(250 * 1024 ** 2)).toBe('250 MiB');
    expect(formatBytes(3.25 * 1024 ** 4)).toBe('3.3 TiB');
  });

  it('moves to the next unit instead of printing 1024', () => {
    expect(formatBytes(1024 * 1024 - 1)).toBe('1.0 MiB');
  });

  it('keeps the sign of negative savings and dashes missing values', () => {
    expect(formatBytes(-1536)).toBe('-1.5 KiB');
    expect(formatBytes(null)).toBe('—');
    expect(formatBytes(undefined)).toBe('—');
    expect(formatBytes(Number.NaN)).toBe('—');
  });
});

describe('durations and ETA', () => {
  it('formats seconds, minutes, hours and days', () => {
    expect(formatDuration(0)).toBe('0s');
    expect(formatDuration(45)).toBe('45s');
    expect(formatDuration(59.6)).toBe('1m 00s');
    expect(formatDuration(185)).toBe('3m 05s');
    expect(formatDuration(3600)).toBe('1h 00m');
    expect(formatDuration(7440)).toBe('2h 04m');
    expect(formatDuration(3 * 86400 + 4 * 3600 + 59)).toBe('3d 4h');
  });

  it('dashes unknown or negative durations', () => {
    expect(formatDuration(null)).toBe('—');
    expect(formatDuration(-5)).toBe('—');
    expect(formatEta(null)).toBe('—');
    expect(formatEta(-1)).toBe('—');
  });

  it('shows an ETA under a second as "< 1s"', () => {
    expect(formatEta(0)).toBe('< 1s');
    expect(formatEta(0.4)).toBe('< 1s');
    expect(formatEta(90)).toBe('1m 30s');
  });

  it('formats hours of queue work', () => {
    expect(formatHours(1.5)).toBe('1h 30m');
    expect(formatHours(0.25)).toBe('15m 00s');
    expect(formatHours(null)).toBe('—');
  });
});

describe('percentages', () => {
  it('formats percent values and fractions', () => {
    expect(formatPercent(42)).toBe('42%');
    expect(formatPercent(42.46, 1)).toBe('42.5%');
    expect(formatPercent(0)).toBe('0%');
    expect(formatPercent(null)).toBe('—');
    expect(formatFraction(0.875)).toBe('88%');
    expect(formatFraction(1)).toBe('100%');
    expect(formatFraction(null)).toBe('—');
  });
});

describe('other formats', () => {
  it('formats speed', () => {
    expect(formatFps(3.14)).toBe('3.1 fps');
    expect(formatFps(42.6)).toBe('43 fps');
    expect(formatFps(null)).toBe('—');
  });

  it('formats relative times', () => {
    const now = Date.parse('2024-05-01T12:00:00Z');
    expect(formatRelative('2024-05-01T11:59:55Z', now)).toBe('just now');
    expect(formatRelative('2024-05-01T11:59:30Z', now)).toBe('30 s ago');
    expect(formatRelative('2024-05-01T11:55:00Z', now)).toBe('5 min ago');
    expect(formatRelative('2024-05-01T09:00:00Z', now)).toBe('3 h ago');
    expect(formatRelative('2024-04-28T12:00:00Z', now)).toBe('3 d ago');
    expect(formatRelative(null, now)).toBe('never');
  });

  it('formats chart dates and names', () => {
    expect(formatShortDate('2024-05-01')).toBe('May 1');
    expect(formatShortDate('2024-12-31')).toBe('Dec 31');
    expect(formatShortDate('yesterday')).toBe('yesterday');
    expect(titleCase('ENCODING')).toBe('Encoding');
    expect(titleCase(null)).toBe('—');
  });

  it('reads encoding efficiency by the spec thresholds', () => {
    expect(efficiencyReading(2.51)).toBe('excellent');
    expect(efficiencyReading(2.5)).toBe('good');
    expect(efficiencyReading(1.5)).toBe('good');
    expect(efficiencyReading(1.49)).toBe('poor');
    expect(efficiencyReading(null)).toBeNull();
  });
});

describe('formatWindows', () => {
  it('names the days and times of each window, or says always', () => {
    expect(formatWindows([])).toBe('Always');
    expect(
      formatWindows([
        { days: ['mon', 'tue'], start: '22:00', end: '07:00' },
        { days: ['sat'], start: '00:00', end: '00:00' },
      ]),
    ).toBe('Mon, Tue 22:00–07:00; Sat 00:00–00:00');
  });
});

describe('formatEventDetail', () => {
  it('shows text as it is and an object as its fields, what a retry changed first', () => {
    expect(formatEventDetail(null)).toBe('');
    expect(formatEventDetail('moved to node b')).toBe('moved to node b');
    expect(
      formatEventDetail({
        rung: 1,
        retryProfile: 'software_decode',
        cautious: false,
        changes: ['preset ultrafast instead of superfast', 'one session'],
        nested: { left: 'out' },
      }),
    ).toBe('preset ultrafast instead of superfast; one session, rung: 1, retryProfile: software_decode, cautious: false');
    expect(formatEventDetail({ code: 'timeout', reason: 'no progress for 2 h' })).toBe(
      'code: timeout, reason: no progress for 2 h',
    );
  });
});
