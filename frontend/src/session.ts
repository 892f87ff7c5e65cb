// The browser's single API client and live connection, and who is logged in.
import { ApiClient, browserTokenStore } from './api';
import { LiveConnection, liveUrl } from './ws';

/** expired: the server rejected the token (401), as opposed to signing out. */
type Listener = (loggedIn: boolean, expired: boolean) => void;
const authListeners = new Set<Listener>();

function notify(loggedIn: boolean, expired = false): void {
  for (const listener of authListeners) listener(loggedIn, expired);
}

export const api = new ApiClient({
  store: browserTokenStore(),
  onUnauthorized: () => {
    live.stop();
    notify(false, true);
  },
});

export const live = new LiveConnection({
  url: () => {
    const token = api.token();
    return token ? liveUrl(window.location, token) : null;
  },
});

window.addEventListener('online', () => live.setOnline(true));
window.addEventListener('offline', () => live.setOnline(false));

export function onAuthChange(listener: Listener): () => void {
  authListeners.add(listener);
  return () => authListeners.delete(listener);
}

export async function login(username: string, password: string): Promise<void> {
  await api.login(username, password);
  notify(true);
}

export function logout(): void {
  api.logout();
  live.stop();
  notify(false);
}
