// The week grid of encoding windows: windows to cells (overnight, whole days, rounding), cells
// back to the fewest windows, and painting a dragged rectangle.
import { describe, expect, it } from 'vitest';
import { emptyGrid, gridFromWindows, minutesOf, openHours, paint, windowsFromGrid } from '../src/weekgrid';

const open = (grid: boolean[][]) => grid.flatMap((hours, day) => hours.flatMap((on, hour) => (on ? [`${day}:${hour}`] : [])));

describe('week grid', () => {
  it('reads HH:MM, 24:00 as the end of the day, and nothing else', () => {
    expect(minutesOf('00:00')).toBe(0);
    expect(minutesOf('07:30')).toBe(450);
    expect(minutesOf('24:00')).toBe(1440);
    expect(minutesOf('24:01')).toBeNull();
    expect(minutesOf('7:00')).toBeNull();
    expect(minutesOf('12:60')).toBeNull();
  });

  it('opens the hours of a plain window on each of its days', () => {
    const { grid, rounded } = gridFromWindows([{ days: ['mon', 'wed'], start: '09:00', end: '12:00' }]);
    expect(open(grid)).toEqual(['0:9', '0:10', '0:11', '2:9', '2:10', '2:11']);
    expect(rounded).toBe(false);
  });

  it('runs an overnight window into the next day, Sunday into Monday', () => {
    const { grid } = gridFromWindows([{ days: ['sun'], start: '22:00', end: '02:00' }]);
    expect(open(grid)).toEqual(['0:0', '0:1', '6:22', '6:23']);
  });

  it('reads an end equal to the start as a whole day, and 00:00 to 24:00 as one day', () => {
    expect(openHours(gridFromWindows([{ days: ['tue'], start: '06:00', end: '06:00' }]).grid)).toBe(24);
    const { grid } = gridFromWindows([{ days: ['fri'], start: '00:00', end: '24:00' }]);
    expect(open(grid)).toEqual(Array.from({ length: 24 }, (_, hour) => `4:${hour}`));
  });

  it('opens any hour a window touches and says it rounded', () => {
    const { grid, rounded } = gridFromWindows([{ days: ['mon'], start: '09:30', end: '10:15' }]);
    expect(open(grid)).toEqual(['0:9', '0:10']);
    expect(rounded).toBe(true);
  });

  it('turns painted cells into the fewest windows, days with the same hours sharing one', () => {
    let grid = paint(emptyGrid(), { day: 0, hour: 22 }, { day: 4, hour: 23 }, true);
    grid = paint(grid, { day: 5, hour: 0 }, { day: 6, hour: 23 }, true);
    expect(windowsFromGrid(grid)).toEqual([
      { days: ['sat', 'sun'], start: '00:00', end: '24:00' },
      { days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '22:00', end: '24:00' },
    ]);
  });

  it('keeps two runs on one day apart, and nothing painted is no window (always open)', () => {
    let grid = paint(emptyGrid(), { day: 2, hour: 1 }, { day: 2, hour: 3 }, true);
    grid = paint(grid, { day: 2, hour: 20 }, { day: 2, hour: 20 }, true);
    expect(windowsFromGrid(grid)).toEqual([
      { days: ['wed'], start: '01:00', end: '04:00' },
      { days: ['wed'], start: '20:00', end: '21:00' },
    ]);
    expect(windowsFromGrid(emptyGrid())).toEqual([]);
  });

  it('paints the rectangle between the drag start and the cell under the pointer, either way round', () => {
    const base = paint(emptyGrid(), { day: 0, hour: 0 }, { day: 6, hour: 23 }, true);
    const erased = paint(base, { day: 3, hour: 10 }, { day: 1, hour: 8 }, false);
    expect(openHours(erased)).toBe(168 - 3 * 3);
    expect(erased[2][9]).toBe(false);
    expect(erased[0][9]).toBe(true);
    // The grid it was given is left as it was: a drag repaints from its start each move.
    expect(openHours(base)).toBe(168);
  });

  it('gives back the windows it was given when they are whole hours', () => {
    const windows = [
      { days: ['mon' as const, 'tue' as const], start: '01:00', end: '06:00' },
      { days: ['sat' as const], start: '10:00', end: '24:00' },
    ];
    expect(windowsFromGrid(gridFromWindows(windows).grid)).toEqual(windows);
  });
});
