import { describe, expect, it } from 'vitest';
import { parseRoute, routeHref } from '../src/router';

describe('hash routes', () => {
  it('splits the path and query of a hash', () => {
    expect(parseRoute('').segments).toEqual([]);
    expect(parseRoute('#/').segments).toEqual([]);
    const route = parseRoute('#/jobs/12?status=FAILED,PAUSED&q=a%20b');
    expect(route.segments).toEqual(['jobs', '12']);
    expect(route.query.get('status')).toBe('FAILED,PAUSED');
    expect(route.query.get('q')).toBe('a b');
  });

  it('builds hrefs without empty values', () => {
    expect(routeHref('/jobs', { status: 'FAILED', q: '', page: null, libraryId: 3 })).toBe('#/jobs?status=FAILED&libraryId=3');
    expect(routeHref('settings')).toBe('#/settings');
  });
});
