// Display formatting. Every function accepts null/undefined and answers a dash for it.

export const DASH = '—';

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];

/** 1536 -> "1.5 KiB"; binary units; one decimal below 10, none above 100. Negative values keep their sign. */
export function formatBytes(bytes: number | null | undefined): string {
  if (bytes == null || !Number.isFinite(bytes)) return DASH;
  const sign = bytes < 0 ? '-' : '';
  let value = Math.abs(bytes);
  let unit = 0;
  while (value >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  if (unit === 0) return `${sign}${Math.round(value)} B`;
  const digits = value >= 100 ? 0 : 1;
  // Rounding may land on 1024.0 of the smaller unit; move up instead.
  let text = value.toFixed(digits);
  if (Number(text) >= 1024 && unit < BYTE_UNITS.length - 1) {
    unit += 1;
    text = (value / 1024).toFixed(1);
  }
  return `${sign}${text} ${BYTE_UNITS[unit]}`;
}

/** Bytes per second -> "1.5 MiB/s" (the units of `formatBytes`). */
export function formatRate(bytesPerSecond: number | null | undefined): string {
  if (bytesPerSecond == null || !Number.isFinite(bytesPerSecond) || bytesPerSecond < 0) return DASH;
  return `${formatBytes(bytesPerSecond)}/s`;
}

/** Seconds -> "45s", "3m 05s", "2h 04m", "3d 4h". */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds == null || !Number.isFinite(seconds) || seconds < 0) return DASH;
  const total = Math.round(seconds);
  const days = Math.floor(total / 86400);
  const hours = Math.floor((total % 86400) / 3600);
  const minutes = Math.floor((total % 3600) / 60);
  const secs = total % 60;
  const pad = (n: number) => String(n).padStart(2, '0');
  if (days > 0) return `${days}d ${hours}h`;
  if (hours > 0) return `${hours}h ${pad(minutes)}m`;
  if (minutes > 0) return `${minutes}m ${pad(secs)}s`;
  return `${secs}s`;
}

/** Remaining time of a job; "< 1s" rather than "0s" while it still runs. */
export function formatEta(seconds: number | null | undefined): string {
  if (seconds == null || !Number.isFinite(seconds) || seconds < 0) return DASH;
  if (seconds < 1) return '< 1s';
  return formatDuration(seconds);
}

/** Hours (e.g. estimated completion of the queue) -> a duration. */
export function formatHours(hours: number | null | undefined): string {
  if (hours == null || !Number.isFinite(hours) || hours < 0) return DASH;
  return formatDuration(hours * 3600);
}

/** A value already in percent (0..100) -> "42%" or "42.5%" with digits. */
export function formatPercent(percent: number | null | undefined, digits = 0): string {
  if (percent == null || !Number.isFinite(percent)) return DASH;
  return `${percent.toFixed(digits)}%`;
}

/** A fraction (0..1) -> "42%". */
export function formatFraction(fraction: number | null | undefined, digits = 0): string {
  if (fraction == null || !Number.isFinite(fraction)) return DASH;
  return formatPercent(fraction * 100, digits);
}

export function formatNumber(value: number | null | undefined, digits = 0): string {
  if (value == null || !Number.isFinite(value)) return DASH;
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

export function formatFps(fps: number | null | undefined): string {
  if (fps == null || !Number.isFinite(fps)) return DASH;
  return `${fps.toFixed(fps < 10 ? 1 : 0)} fps`;
}

export function formatDateTime(iso: string | null | undefined): string {
  if (!iso) return DASH;
  const at = new Date(iso);
  if (Number.isNaN(at.getTime())) return DASH;
  return at.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

/** "just now", "5 min ago", "3 h ago", "2 d ago" relative to now (ms since epoch). */
export function formatRelative(iso: string | null | undefined, now: number = Date.now()): string {
  if (!iso) return 'never';
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return DASH;
  const seconds = Math.round((now - at) / 1000);
  if (seconds < 0) return 'just now';
  if (seconds < 60) return seconds < 10 ? 'just now' : `${seconds} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return `${Math.floor(seconds / 86400)} d ago`;
}

/** "2024-05-01" -> "May 1" for chart axes; anything unparsable is returned unchanged. */
export function formatShortDate(date: string): string {
  const match = /^(\d{4})-(\d{2})-(\d{2})/.exec(date);
  if (!match) return date;
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  return `${months[Number(match[2]) - 1] ?? match[2]} ${Number(match[3])}`;
}

/** ENCODING -> "Encoding". */
export function titleCase(value: string | null | undefined): string {
  if (!value) return DASH;
  return value.charAt(0).toUpperCase() + value.slice(1).toLowerCase();
}

/** Efficiency = CPU time / wall time; the spec reads it (for 3 nodes) as >2.5 excellent, 1.5-2.5 good, <1.5 poor. */
export function efficiencyReading(efficiency: number | null | undefined): 'excellent' | 'good' | 'poor' | null {
  if (efficiency == null || !Number.isFinite(efficiency)) return null;
  if (efficiency > 2.5) return 'excellent';
  if (efficiency >= 1.5) return 'good';
  return 'poor';
}

/** An encoding window's days and times, as people read them: "Mon, Tue 22:00–07:00". */
export function formatWindows(windows: { days: string[]; start: string; end: string }[]): string {
  if (windows.length === 0) return 'Always';
  return windows.map((w) => `${w.days.map((d) => titleCase(d)).join(', ')} ${w.start}–${w.end}`).join('; ');
}

/** A job event's detail for people: its text, or an object's fields as `name: value`, the
 *  list of what a retry changed (`changes`) first. Nested objects are left out: the API's
 *  JSON has them for whoever needs them. */
export function formatEventDetail(detail: unknown): string {
  if (detail === null || detail === undefined) return '';
  if (typeof detail !== 'object') return String(detail);
  if (Array.isArray(detail)) return detail.map(formatEventDetail).filter(Boolean).join('; ');
  const fields = detail as Record<string, unknown>;
  const parts: string[] = [];
  if (Array.isArray(fields.changes) && fields.changes.length > 0) {
    parts.push(fields.changes.map(String).join('; '));
  }
  for (const [name, value] of Object.entries(fields)) {
    // `aloneMs` goes with the phases, which the job's page shows in a table of their own.
    if (name === 'changes' || name === 'aloneMs' || value === null || value === undefined || typeof value === 'object') continue;
    parts.push(`${name}: ${String(value)}`);
  }
  return parts.join(', ');
}
