// Server validation messages placed beside the field they name; the rest above the form.
import { describe, expect, it } from 'vitest';
import { ApiError } from '../src/api';
import { fieldFor, formErrors } from '../src/forms';
import { mappingRowOf } from '../src/widgets/MappingRows';

const connection = [
  { field: 'name' },
  { field: 'extra', mentions: /pathMappings|folder/i },
  { field: 'secret', mentions: /api key|token|apiKey/i },
  { field: 'url', mentions: /\burl\b/i },
];

describe('fieldFor', () => {
  it('finds the field a message starts with', () => {
    expect(fieldFor('name must be 1 to 100 characters', connection)).toBe('name');
    expect(fieldFor('timeZone "Mars/Base" is not an IANA time zone name', [{ field: 'windows' }, { field: 'timeZone' }])).toBe('timeZone');
    expect(fieldFor('password: too short', [{ field: 'username' }, { field: 'password' }])).toBe('password');
  });

  it('finds a field named inside the message, as a whole word only', () => {
    expect(fieldFor('windows[3].start "25:00" is not a time HH:MM', [{ field: 'timeZone' }, { field: 'windows' }])).toBe('windows');
    // "to" is not found inside "token".
    expect(fieldFor('a Gotify target needs its application token', [{ field: 'to' }])).toBeNull();
  });

  it('falls back to what else points at a field', () => {
    expect(fieldFor("a connection's URL starts with http:// or https://", connection)).toBe('url');
    expect(fieldFor("a connection needs the product's API key (Plex: its token)", connection)).toBe('secret');
    expect(fieldFor('pathMappings[1]: from and to must be absolute folders, not "tv" -> "/tv"', connection)).toBe('extra');
    expect(fieldFor('something else entirely', connection)).toBeNull();
  });
});

describe('formErrors', () => {
  it('puts a validation answer beside its field', () => {
    const error = new ApiError(422, 'validation_failed', 'name must be 1 to 100 characters');
    expect(formErrors(error, connection)).toEqual({ fields: { name: 'name must be 1 to 100 characters' }, form: null });
  });

  it('puts a name taken (409) beside the field it names', () => {
    const rules = [{ field: 'username', mentions: /^user .* exists$/ }, { field: 'password' }];
    expect(formErrors(new ApiError(409, 'conflict', 'user "bob" exists'), rules).fields).toEqual({ username: 'user "bob" exists' });
  });

  it('keeps refusals, network errors and unplaced messages above the form', () => {
    expect(formErrors(new ApiError(403, 'forbidden', 'name is not yours'), connection)).toEqual({ fields: {}, form: 'name is not yours' });
    expect(formErrors(new ApiError(0, 'network_error', 'Cannot reach the condense server.'), connection).form).toBe('Cannot reach the condense server.');
    expect(formErrors(new ApiError(422, 'validation_failed', 'nothing known'), connection)).toEqual({ fields: {}, form: 'nothing known' });
    expect(formErrors(new Error('boom'), connection).form).toBe('boom');
  });

  it('says which mapping row a message is about', () => {
    expect(mappingRowOf('pathMappings[2]: from and to must be absolute folders')).toBe(2);
    expect(mappingRowOf('name must be 1 to 100 characters')).toBeNull();
    expect(mappingRowOf(undefined)).toBeNull();
  });
});
