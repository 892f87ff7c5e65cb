// Which field of a form a server's validation message is about. The server answers 422 with
// one message that names the field it refused ("name must be 1 to 100 characters",
// "pathMappings[0]: from and to must be absolute folders", "a connection's URL starts with
// http://"); the forms show it beside that field, and anything they cannot place above the
// form.
import { ApiError, errorMessage } from './api';

/** A field of a form and what, besides its own name, a message about it may say. */
export interface FieldRule {
  field: string;
  /** Further words that point at the field ("URL", "token"), matched case-insensitively. */
  mentions?: RegExp;
}

/** The escaped name as a whole word, so that `to` is not found inside `token`. */
function nameAt(name: string): RegExp {
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(^|[^A-Za-z0-9_])${escaped}($|[^A-Za-z0-9_])`);
}

/**
 * The field `message` is about: the first rule whose field name the message begins with (or
 * names as a word, `windows[2].start` naming `windows`), else the first whose mentions match;
 * null when none does.
 */
export function fieldFor(message: string, rules: readonly FieldRule[]): string | null {
  const text = message.trim();
  for (const { field } of rules) {
    if (text.startsWith(`${field} `) || text.startsWith(`${field}:`) || text.startsWith(`${field}[`) || text.startsWith(`${field}.`)) return field;
  }
  for (const { field } of rules) {
    if (nameAt(field).test(text)) return field;
  }
  for (const { field, mentions } of rules) {
    if (mentions?.test(text)) return field;
  }
  return null;
}

/** What a failed save shows: the message beside its field, or above the form. */
export interface FormErrors {
  /** The message for a field, by field name. */
  fields: Record<string, string>;
  /** A message that belongs to no field (a conflict, a network error). */
  form: string | null;
}

export const NO_ERRORS: FormErrors = { fields: {}, form: null };

/**
 * Splits what a save threw: a validation answer (422, 400 from a bad value, 409 for a name
 * taken) goes to the field it names; everything else (403, the network, a message naming no
 * field) is the form's.
 */
export function formErrors(error: unknown, rules: readonly FieldRule[]): FormErrors {
  const message = errorMessage(error);
  const validation = error instanceof ApiError && [400, 409, 422].includes(error.status);
  const field = validation ? fieldFor(message, rules) : null;
  return field ? { fields: { [field]: message }, form: null } : { fields: {}, form: message };
}
