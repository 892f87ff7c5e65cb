// Rows of folder pairs (a path as one side sees it, and as the other does), edited in place:
// used by the connections' mappings and the Sonarr/Radarr webhook's mappings.
import type { PathMapping } from '../types';

export interface MappingLabels {
  from: string;
  to: string;
  fromPlaceholder: string;
  toPlaceholder: string;
}

/** The rows worth sending: both sides filled in, trimmed. */
export function filledMappings(rows: readonly PathMapping[]): PathMapping[] {
  return rows.map((row) => ({ from: row.from.trim(), to: row.to.trim() })).filter((row) => row.from !== '' && row.to !== '');
}

/** What a server message `pathMappings[2]: …` is about: the row's index, or null. */
export function mappingRowOf(message: string | undefined | null): number | null {
  const found = message ? /pathMappings\[(\d+)\]/.exec(message) : null;
  return found ? Number(found[1]) : null;
}

export function MappingRows({
  rows,
  onChange,
  labels,
  idPrefix,
  invalidRow = null,
  readOnly = false,
}: {
  rows: PathMapping[];
  /** Given an update of the rows as they are then: edits typed in a row follow each other before a render. */
  onChange: (update: (rows: PathMapping[]) => PathMapping[]) => void;
  labels: MappingLabels;
  idPrefix: string;
  /** The row a validation message is about, marked invalid. */
  invalidRow?: number | null;
  readOnly?: boolean;
}) {
  const set = (index: number, change: Partial<PathMapping>) => onChange((current) => current.map((row, i) => (i === index ? { ...row, ...change } : row)));
  return (
    <div class="mapping-rows">
      {rows.map((row, index) => (
        <div class="form-row mapping-row" key={index}>
          <label class="field">
            <span>{labels.from}</span>
            <input
              id={`${idPrefix}-from-${index}`}
              value={row.from}
              placeholder={labels.fromPlaceholder}
              readOnly={readOnly}
              aria-invalid={invalidRow === index ? true : undefined}
              onInput={(e) => set(index, { from: e.currentTarget.value })}
            />
          </label>
          <label class="field">
            <span>{labels.to}</span>
            <input
              id={`${idPrefix}-to-${index}`}
              value={row.to}
              placeholder={labels.toPlaceholder}
              readOnly={readOnly}
              aria-invalid={invalidRow === index ? true : undefined}
              onInput={(e) => set(index, { to: e.currentTarget.value })}
            />
          </label>
          {!readOnly && rows.length > 1 && (
            <button type="button" class="button button-small mapping-remove" aria-label={`Remove mapping ${index + 1}`} onClick={() => onChange((current) => current.filter((_, i) => i !== index))}>
              Remove
            </button>
          )}
        </div>
      ))}
      {!readOnly && (
        <button type="button" class="button button-small" onClick={() => onChange((current) => [...current, { from: '', to: '' }])}>
          Add a mapping
        </button>
      )}
    </div>
  );
}
