// Form fields the pages share: a labelled input with the server's error beneath it, and the
// options of a select drawn from a list.
import type { ComponentChildren, InputHTMLAttributes } from 'preact';
import { FieldError, invalidProps } from '../components';

/**
 * A labelled input. With an `errorId`, the server's `error` about it shows beneath it and the
 * input points at it (FieldError, invalidProps).
 */
export function TextField({
  label,
  onValue,
  errorId,
  error,
  ...input
}: {
  label: ComponentChildren;
  onValue: (value: string) => void;
  errorId?: string;
  error?: string | null;
} & Omit<InputHTMLAttributes<HTMLInputElement>, 'label' | 'onInput'>) {
  return (
    <label class="field">
      <span>{label}</span>
      <input {...input} onInput={(e) => onValue(e.currentTarget.value)} {...(errorId ? invalidProps(errorId, error) : {})} />
      {errorId && <FieldError id={errorId} message={error} />}
    </label>
  );
}

/** One option per item: `value` gives its value (and key), `label` what it shows. */
export function Options<T>({ items, value, label }: { items: readonly T[]; value: (item: T) => string | number; label: (item: T) => ComponentChildren }) {
  return (
    <>
      {items.map((item) => (
        <option key={value(item)} value={value(item)}>
          {label(item)}
        </option>
      ))}
    </>
  );
}
