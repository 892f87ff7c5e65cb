// The encoding-window week grid: a schedule's windows as 7 days x 24 hours of cells, painted
// by dragging, and back to the fewest windows that say the same. Pure; the editor is
// widgets/ScheduleEditor.tsx.
import type { Day, ScheduleWindow } from './types';

export const DAYS: readonly Day[] = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];
export const HOURS = 24;

/** grid[day][hour]: open in that hour (day 0 is Monday). */
export type WeekGrid = boolean[][];

export function emptyGrid(): WeekGrid {
  return DAYS.map(() => Array.from({ length: HOURS }, () => false));
}

/** Minutes since midnight of `HH:MM`; `24:00` is 1440; null when it is not such a time. */
export function minutesOf(text: string): number | null {
  const found = /^(\d\d):(\d\d)$/.exec(text);
  if (!found) return null;
  const [h, m] = [Number(found[1]), Number(found[2])];
  if (h === 24 && m === 0) return 1440;
  return h < 24 && m < 60 ? h * 60 + m : null;
}

/**
 * The cells the windows open. A window whose end is not after its start runs overnight into
 * the next day (as the server reads it); a cell is open when any of its hour is. Also says
 * whether a window's edge fell inside an hour, so the editor can warn that painting rounds it.
 */
export function gridFromWindows(windows: readonly ScheduleWindow[]): { grid: WeekGrid; rounded: boolean } {
  const grid = emptyGrid();
  let rounded = false;
  const open = (day: number, from: number, to: number) => {
    for (let hour = Math.floor(from / 60); hour < Math.ceil(to / 60) && hour < HOURS; hour += 1) grid[(day + DAYS.length) % DAYS.length][hour] = true;
  };
  for (const window of windows) {
    const start = minutesOf(window.start);
    const end = minutesOf(window.end);
    if (start === null || end === null) continue;
    if (start % 60 !== 0 || end % 60 !== 0) rounded = true;
    for (const name of window.days) {
      const day = DAYS.indexOf(name);
      if (day < 0) continue;
      if (start < end) open(day, start, end);
      else {
        // Overnight (or, with end == start, the whole day from start to the same time next day).
        open(day, start, 1440);
        open(day + 1, 0, end);
      }
    }
  }
  return { grid, rounded };
}

const time = (hour: number) => `${String(hour).padStart(2, '0')}:00`;

/**
 * The fewest plain windows for the painted cells: each day's runs of open hours (a run to
 * midnight ends at 24:00), days with the same run sharing one window. Nothing painted: no
 * windows, which the server reads as always open.
 */
export function windowsFromGrid(grid: WeekGrid): ScheduleWindow[] {
  const byRun = new Map<string, { days: Day[]; start: string; end: string }>();
  grid.forEach((hours, day) => {
    let hour = 0;
    while (hour < HOURS) {
      if (!hours[hour]) {
        hour += 1;
        continue;
      }
      const from = hour;
      while (hour < HOURS && hours[hour]) hour += 1;
      const start = time(from);
      const end = hour === HOURS ? '24:00' : time(hour);
      const key = `${start}-${end}`;
      const run = byRun.get(key) ?? { days: [], start, end };
      run.days.push(DAYS[day]);
      byRun.set(key, run);
    }
  });
  return [...byRun.values()].sort((a, b) => a.start.localeCompare(b.start) || a.end.localeCompare(b.end));
}

export interface Cell {
  day: number;
  hour: number;
}

/** The grid with the rectangle between two cells (a drag's start and where it is now) set to `value`. */
export function paint(grid: WeekGrid, from: Cell, to: Cell, value: boolean): WeekGrid {
  const [d0, d1] = [Math.min(from.day, to.day), Math.max(from.day, to.day)];
  const [h0, h1] = [Math.min(from.hour, to.hour), Math.max(from.hour, to.hour)];
  return grid.map((hours, day) => (day < d0 || day > d1 ? hours : hours.map((open, hour) => (hour >= h0 && hour <= h1 ? value : open))));
}

/** How many hours a week the grid opens. */
export function openHours(grid: WeekGrid): number {
  return grid.reduce((sum, hours) => sum + hours.filter(Boolean).length, 0);
}
