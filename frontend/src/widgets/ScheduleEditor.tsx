// An encoding schedule edited as a week grid: drag across hours to open them (or, starting on
// an open hour, to close them), a time zone and what a closing window does; used for the
// default schedule (Settings) and each node's own (Nodes). A viewer sees the grid, unpainted.
import { Fragment } from 'preact';
import { useRef, useState } from 'preact/hooks';
import { Alert, FieldError } from '../components';
import { TextField } from './Fields';
import { formatWindows, titleCase } from '../format';
import type { FieldRule } from '../forms';
import { useSave } from '../hooks';
import type { OnClose, Schedule, ScheduleView } from '../types';
import { DAYS, HOURS, gridFromWindows, openHours, paint, windowsFromGrid, type Cell, type WeekGrid } from '../weekgrid';

const SCHEDULE_RULES: readonly FieldRule[] = [
  { field: 'timeZone', mentions: /time zone/i },
  { field: 'windows', mentions: /window/i },
];

/** The cell under a pointer, from the cell buttons' data attributes. */
function cellAt(x: number, y: number): Cell | null {
  const element = document.elementFromPoint(x, y)?.closest<HTMLElement>('[data-day]');
  if (!element) return null;
  return { day: Number(element.dataset.day), hour: Number(element.dataset.hour) };
}

export function ScheduleEditor({
  label,
  schedule,
  editable,
  onSave,
  onFollowDefault,
}: {
  /** Names the grid for assistive technology and the tests: "Default schedule", "Schedule of gpu-1". */
  label: string;
  schedule: ScheduleView;
  editable: boolean;
  onSave: (schedule: Schedule) => Promise<ScheduleView>;
  /** A node's: drop its own schedule and follow the default. */
  onFollowDefault?: () => Promise<ScheduleView>;
}) {
  const [shown, setShown] = useState(schedule);
  const initial = gridFromWindows(shown.windows);
  const [grid, setGridState] = useState<WeekGrid>(initial.grid);
  // The grid as last painted, ahead of the render: a drag's events and key presses follow
  // each other faster than Preact renders.
  const latest = useRef(grid);
  const setGrid = (next: WeekGrid) => {
    latest.current = next;
    setGridState(next);
  };
  const [rounded, setRounded] = useState(initial.rounded);
  const [timeZone, setTimeZone] = useState(shown.timeZone);
  const [onClose, setOnClose] = useState<OnClose>(shown.onClose);
  const [notice, setNotice] = useState<string | null>(null);
  const { busy, errors, save } = useSave(SCHEDULE_RULES);
  const drag = useRef<{ from: Cell; value: boolean; base: WeekGrid } | null>(null);
  const id = label.toLowerCase().replace(/[^a-z0-9]+/g, '-');

  const reset = (view: ScheduleView) => {
    setShown(view);
    const next = gridFromWindows(view.windows);
    setGrid(next.grid);
    setRounded(next.rounded);
    setTimeZone(view.timeZone);
    setOnClose(view.onClose);
  };

  const start = (event: PointerEvent, cell: Cell) => {
    if (!editable || event.button !== 0) return;
    event.preventDefault();
    // Touch captures the pointer on the first cell; release it so the drag reaches the others.
    (event.currentTarget as Element).releasePointerCapture?.(event.pointerId);
    const base = latest.current;
    const value = !base[cell.day][cell.hour];
    drag.current = { from: cell, value, base };
    setGrid(paint(base, cell, cell, value));
    setNotice(null);
    const end = () => {
      drag.current = null;
      window.removeEventListener('pointerup', end);
      window.removeEventListener('pointercancel', end);
    };
    window.addEventListener('pointerup', end);
    window.addEventListener('pointercancel', end);
  };
  const move = (event: PointerEvent) => {
    const current = drag.current;
    if (!current) return;
    const cell = cellAt(event.clientX, event.clientY);
    if (cell) setGrid(paint(current.base, current.from, cell, current.value));
  };
  // Keyboard (Enter, Space) toggles one hour; a pointer paints in `start` instead.
  const toggle = (event: MouseEvent, cell: Cell) => {
    if (!editable || event.detail !== 0) return;
    const current = latest.current;
    setGrid(paint(current, cell, cell, !current[cell.day][cell.hour]));
  };

  const windows = windowsFromGrid(grid);
  const submit = async (event: Event) => {
    event.preventDefault();
    setNotice(null);
    const saved = await save(() => onSave({ timeZone: timeZone.trim() as Schedule['timeZone'], windows, onClose }));
    if (saved) {
      reset(saved);
      setNotice('Schedule saved.');
    }
  };
  const followDefault = async () => {
    if (!onFollowDefault) return;
    setNotice(null);
    const saved = await save(onFollowDefault);
    if (saved) {
      reset(saved);
      setNotice('It follows the default schedule now.');
    }
  };

  return (
    <form class="form schedule-editor" onSubmit={(e) => void submit(e)} aria-label={label} noValidate>
      <p class="small" role="status">
        <span class={`badge ${shown.open ? 'badge-ok' : 'badge-warn'}`}>{shown.open ? 'Open now' : 'Closed now'}</span>{' '}
        {shown.followsDefault ? 'Follows the default schedule.' : ''} {shown.windows.length === 0 ? 'No windows: always open.' : formatWindows(shown.windows)}
      </p>
      <Alert message={errors.form} />
      <Alert kind="ok" message={notice} />
      <div
        class={`week-grid${editable ? ' week-grid-editable' : ''}`}
        role="group"
        aria-label={`${label}: hours open for encoding`}
        aria-describedby={errors.fields.windows ? `${id}-windows-error` : undefined}
        onPointerMove={move}
      >
        <span class="week-grid-corner" aria-hidden="true" />
        {Array.from({ length: HOURS }, (_, hour) => (
          <span key={hour} class="week-grid-hour" aria-hidden="true">
            {hour % 3 === 0 ? hour : ''}
          </span>
        ))}
        {DAYS.map((day, d) => (
          <Fragment key={day}>
            <span class="week-grid-day">
              {titleCase(day)}
            </span>
            {grid[d].map((open, hour) => (
              <button
                key={`${day}-${hour}`}
                type="button"
                class={`week-grid-cell${open ? ' week-grid-open' : ''}`}
                data-day={d}
                data-hour={hour}
                aria-pressed={open}
                aria-label={`${titleCase(day)} ${String(hour).padStart(2, '0')}:00`}
                disabled={!editable}
                onPointerDown={(e) => start(e, { day: d, hour })}
                onClick={(e) => toggle(e, { day: d, hour })}
              />
            ))}
          </Fragment>
        ))}
      </div>
      <FieldError id={`${id}-windows-error`} message={errors.fields.windows} />
      <p class="muted small" aria-live="polite">
        {windows.length === 0 ? 'Nothing painted: always open.' : `${openHours(grid)} hours a week: ${formatWindows(windows)}.`}
        {rounded && ' Some windows start or end within an hour: the grid shows whole hours, and saving from it rounds them.'}
      </p>
      {editable && (
        <>
          <div class="form-row">
            <TextField label="Time zone" value={timeZone} placeholder="Europe/Berlin" onValue={setTimeZone} errorId={`${id}-zone-error`} error={errors.fields.timeZone} />
            <label class="field">
              <span>When a window closes</span>
              <select value={onClose} onChange={(e) => setOnClose(e.currentTarget.value as OnClose)}>
                <option value="pause">Pause running encodes at a segment</option>
                <option value="finish">Let running encodes finish</option>
              </select>
            </label>
          </div>
          <div class="actions">
            <button type="submit" class="button button-primary" disabled={busy}>
              {busy ? 'Saving…' : 'Save schedule'}
            </button>
            <button type="button" class="button" onClick={() => setGrid(paint(latest.current, { day: 0, hour: 0 }, { day: 6, hour: 23 }, false))}>
              Clear the grid
            </button>
            {onFollowDefault && !shown.followsDefault && (
              <button type="button" class="button" disabled={busy} onClick={() => void followDefault()}>
                Follow the default
              </button>
            )}
          </div>
        </>
      )}
    </form>
  );
}
