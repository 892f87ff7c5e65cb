// The browser's single API client and live connection, and who is logged in.
import { ApiClient, browserTokenStore } from './api';
import type { Me } from './types';
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

/** The role the signed-in user acts with; null until known (the dashboard then shows
 * everything, and the server still refuses what the role does not allow). */
export type Role = Me['role'];
let role: Role | null = null;
const roleListeners = new Set<(role: Role | null) => void>();

function setRole(next: Role | null): void {
  role = next;
  for (const listener of roleListeners) listener(next);
}

export function currentRole(): Role | null {
  return role;
}

export function onRoleChange(listener: (role: Role | null) => void): () => void {
  roleListeners.add(listener);
  return () => roleListeners.delete(listener);
}

/** Asks the server who is signed in (GET /auth/me); a failure leaves the role unknown. */
export async function loadRole(): Promise<void> {
  try {
    setRole((await api.me()).role);
  } catch {
    // Unknown: nothing is hidden, and the server answers for itself.
    setRole(null);
  }
}

const RANK: Record<Role, number> = { viewer: 0, operator: 1, admin: 2 };

/** Whether `role` may do what needs `needed`; an unknown role may (the server decides). */
export function allows(role: Role | null, needed: Role): boolean {
  return role === null || RANK[role] >= RANK[needed];
}

export function onAuthChange(listener: Listener): () => void {
  authListeners.add(listener);
  return () => authListeners.delete(listener);
}

export async function login(username: string, password: string): Promise<void> {
  await api.login(username, password);
  await loadRole();
  notify(true);
}

export function logout(): void {
  api.logout();
  live.stop();
  setRole(null);
  notify(false);
}
