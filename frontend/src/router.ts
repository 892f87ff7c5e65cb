// Hash routing (#/jobs/12?status=FAILED): it never collides with the API paths the server
// also answers without the /api prefix, and a reload always lands on index.html.
import { useEffect, useState } from 'preact/hooks';

export interface Route {
  /** Path segments: "#/jobs/12" -> ["jobs", "12"]; the overview is []. */
  segments: string[];
  query: URLSearchParams;
}

export function parseRoute(hash: string): Route {
  const raw = hash.replace(/^#/, '');
  const [path, search = ''] = raw.split('?', 2);
  const segments = path
    .split('/')
    .filter((part) => part !== '')
    .map((part) => decodeURIComponent(part));
  return { segments, query: new URLSearchParams(search) };
}

/** "#/jobs?status=FAILED" from a path and query values; empty values are left out. */
export function routeHref(path: string, query: Record<string, string | number | null | undefined> = {}): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== null && value !== undefined && value !== '') params.set(key, String(value));
  }
  const search = params.toString();
  return `#${path.startsWith('/') ? path : `/${path}`}${search ? `?${search}` : ''}`;
}

export function navigate(href: string, replace = false): void {
  if (replace) {
    history.replaceState(null, '', href);
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  } else {
    location.hash = href.replace(/^#/, '');
  }
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const update = () => setRoute(parseRoute(location.hash));
    window.addEventListener('hashchange', update);
    return () => window.removeEventListener('hashchange', update);
  }, []);
  return route;
}
