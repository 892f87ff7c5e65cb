// The REST client: bearer token, refresh before expiry, 401 -> login, error bodies -> ApiError.
import type { EncoderCatalog } from './encoders';
import { auditParams, NO_FILTER, type AuditFilter } from './audit';
import type {
  ApiKey,
  AuditPage,
  CreatedApiKey,
  KeyScope,
  ClusterNode,
  CodecShare,
  Dashboard,
  FailureBreakdown,
  Health,
  RecheckReport,
  InsightStats,
  Job,
  JobAction,
  JobDetail,
  JobPlan,
  JobPage,
  JobQuery,
  Library,
  LibraryInput,
  Forecast,
  HealthDepth,
  FileHealth,
  HealthRun,
  LibraryHealth,
  LibraryHealthQuery,
  NewCopyResult,
  License,
  LoginResponse,
  Me,
  NodeChanged,
  NodePerformance,
  NotificationTarget,
  NotificationTargetInput,
  NotificationTestResult,
  Connection,
  ConnectionInput,
  QueueStats,
  Savings,
  ScanReport,
  Settings,
  SettingsUpdate,
  Affected,
  ArrSettings,
  NewUser,
  Schedule,
  ScheduleView,
  User,
  UserRole,
} from './types';

/** Refresh the token when it expires within this window. */
export const REFRESH_WINDOW_MS = 10 * 60 * 1000;

export const TOKEN_KEY = 'token';
export const EXPIRES_KEY = 'tokenExpiresAt';

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;

  constructor(status: number, code: string, message: string) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

/** The message to show a user for anything a call may throw. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message;
  return String(error);
}

export interface TokenStore {
  token(): string | null;
  /** Expiry in ms since the epoch, when known. */
  expiresAt(): number | null;
  save(token: string, expiresAt: number | null): void;
  clear(): void;
}

/** Accepts an ISO 8601 string or a Unix time (seconds or milliseconds). */
export function parseExpiry(value: unknown): number | null {
  if (typeof value === 'number' && Number.isFinite(value)) return value < 1e12 ? value * 1000 : value;
  if (typeof value === 'string' && value.trim() !== '') {
    if (/^\d+$/.test(value)) return parseExpiry(Number(value));
    const ms = Date.parse(value);
    return Number.isNaN(ms) ? null : ms;
  }
  return null;
}

/** The `exp` claim of a JWT in ms, when the payload can be read. */
export function jwtExpiry(token: string): number | null {
  const payload = token.split('.')[1];
  if (!payload) return null;
  try {
    const json = atob(payload.replace(/-/g, '+').replace(/_/g, '/').padEnd(Math.ceil(payload.length / 4) * 4, '='));
    const exp = (JSON.parse(json) as { exp?: unknown }).exp;
    return typeof exp === 'number' ? exp * 1000 : null;
  } catch {
    return null;
  }
}

/** The token lives in localStorage under `token` (spec); its expiry next to it. */
export function browserTokenStore(storage: Storage = localStorage): TokenStore {
  return {
    token: () => storage.getItem(TOKEN_KEY),
    expiresAt: () => {
      const token = storage.getItem(TOKEN_KEY);
      if (!token) return null;
      return parseExpiry(storage.getItem(EXPIRES_KEY)) ?? jwtExpiry(token);
    },
    save: (token, expiresAt) => {
      storage.setItem(TOKEN_KEY, token);
      if (expiresAt == null) storage.removeItem(EXPIRES_KEY);
      else storage.setItem(EXPIRES_KEY, new Date(expiresAt).toISOString());
    },
    clear: () => {
      storage.removeItem(TOKEN_KEY);
      storage.removeItem(EXPIRES_KEY);
    },
  };
}

export function memoryTokenStore(token: string | null = null, expiresAt: number | null = null): TokenStore {
  let current = token;
  let expiry = expiresAt;
  return {
    token: () => current,
    expiresAt: () => expiry,
    save: (next, at) => {
      current = next;
      expiry = at;
    },
    clear: () => {
      current = null;
      expiry = null;
    },
  };
}

export function jobQueryString(query: JobQuery): string {
  const params = new URLSearchParams();
  if (query.page != null) params.set('page', String(query.page));
  if (query.pageSize != null) params.set('pageSize', String(query.pageSize));
  if (query.status && query.status.length > 0) params.set('status', query.status.join(','));
  if (query.libraryId != null) params.set('libraryId', String(query.libraryId));
  if (query.node) params.set('node', query.node);
  if (query.q && query.q.trim() !== '') params.set('q', query.q.trim());
  if (query.sort) params.set('sort', query.sort);
  if (query.order) params.set('order', query.order);
  const text = params.toString();
  return text ? `?${text}` : '';
}

async function readError(response: Response): Promise<ApiError> {
  const fallback = `${response.status} ${response.statusText || 'error'}`.trim();
  let text = '';
  try {
    text = await response.text();
  } catch {
    // The body could not be read; the status line will do.
  }
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } };
    const code = typeof body.error?.code === 'string' ? body.error.code : 'http_error';
    const message = typeof body.error?.message === 'string' && body.error.message ? body.error.message : fallback;
    return new ApiError(response.status, code, message);
  } catch {
    const plain = text.trim();
    const message = plain && plain.length <= 300 && !plain.startsWith('<') ? plain : fallback;
    return new ApiError(response.status, 'http_error', message);
  }
}

export interface ApiOptions {
  /** Prefix for every path; empty in the browser (same origin). */
  baseUrl?: string;
  store: TokenStore;
  fetch?: typeof fetch;
  /** Called after a 401 on an authenticated call; the token is already cleared. */
  onUnauthorized?: () => void;
  now?: () => number;
}

interface RequestOptions {
  /** Send the bearer token and treat 401 as "session over". Default true. */
  auth?: boolean;
}

export class ApiClient {
  private readonly baseUrl: string;
  private readonly store: TokenStore;
  private readonly fetchImpl: typeof fetch;
  private readonly now: () => number;
  private refreshing: Promise<void> | null = null;
  onUnauthorized: () => void;

  constructor(options: ApiOptions) {
    this.baseUrl = options.baseUrl ?? '';
    this.store = options.store;
    this.fetchImpl = options.fetch ?? ((input, init) => fetch(input, init));
    this.now = options.now ?? Date.now;
    this.onUnauthorized = options.onUnauthorized ?? (() => {});
  }

  isLoggedIn(): boolean {
    return this.store.token() != null;
  }

  token(): string | null {
    return this.store.token();
  }

  async request<T>(method: string, path: string, body?: unknown, options: RequestOptions = {}): Promise<T> {
    const auth = options.auth ?? true;
    if (auth) await this.refreshIfNeeded();
    return this.send<T>(method, path, body, auth);
  }

  private async send<T>(method: string, path: string, body: unknown, auth: boolean): Promise<T> {
    const headers: Record<string, string> = { Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const token = this.store.token();
    if (auth && token) headers.Authorization = `Bearer ${token}`;
    let response: Response;
    try {
      response = await this.fetchImpl(this.baseUrl + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch {
      throw new ApiError(0, 'network_error', 'Cannot reach the condense server. Check your connection.');
    }
    if (!response.ok) {
      const error = await readError(response);
      if (response.status === 401 && auth) {
        this.store.clear();
        this.onUnauthorized();
      }
      throw error;
    }
    const text = await response.text();
    if (text === '') return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new ApiError(response.status, 'invalid_response', 'The server sent a response that is not JSON.');
    }
  }

  /** Refresh the token when it expires within ten minutes; concurrent callers share one refresh. */
  async refreshIfNeeded(): Promise<void> {
    const token = this.store.token();
    const expiresAt = this.store.expiresAt();
    if (!token || expiresAt == null || expiresAt - this.now() > REFRESH_WINDOW_MS) return;
    if (!this.refreshing) {
      this.refreshing = this.refresh()
        .then(
          () => undefined,
          (error: unknown) => {
            // A failed refresh is not fatal while the current token still works;
            // only a rejected token (401, already handled by send) ends the session.
            if (error instanceof ApiError && error.status === 401) throw error;
          },
        )
        .finally(() => {
          this.refreshing = null;
        });
    }
    return this.refreshing;
  }

  async login(username: string, password: string): Promise<LoginResponse> {
    const result = await this.send<LoginResponse>('POST', '/api/auth/login', { username, password }, false);
    this.store.save(result.token, parseExpiry(result.expiresAt) ?? jwtExpiry(result.token));
    return result;
  }

  async refresh(): Promise<LoginResponse> {
    const result = await this.send<LoginResponse>('POST', '/api/auth/refresh', undefined, true);
    this.store.save(result.token, parseExpiry(result.expiresAt) ?? jwtExpiry(result.token));
    return result;
  }

  /**
   * Ends the session: the server revokes every token of this user (so a copy left anywhere
   * dies too), and the local copy goes at once, whatever the server answers.
   */
  logout(): void {
    if (this.store.token() != null) {
      // `send` reads the token before its first await, so before the clear below.
      this.send('POST', '/api/auth/logout', undefined, true).catch(() => undefined);
    }
    this.store.clear();
  }

  /** Who is signed in, and the role the dashboard shows and hides by. */
  me(): Promise<Me> {
    return this.request('GET', '/api/auth/me');
  }
  /** Changes the caller's own password; every token of theirs is revoked (sign in again). */
  changePassword(currentPassword: string, newPassword: string): Promise<void> {
    return this.request('PUT', '/api/auth/password', { currentPassword, newPassword });
  }

  // Jobs and queue
  jobs(query: JobQuery = {}): Promise<JobPage> {
    return this.request('GET', `/api/jobs${jobQueryString(query)}`);
  }
  job(id: number): Promise<JobDetail> {
    return this.request('GET', `/api/jobs/${id}`);
  }
  /** What each stream of the file becomes; 404/409 until the file is analysed. */
  jobPlan(id: number): Promise<JobPlan> {
    return this.request('GET', `/api/jobs/${id}/plan`);
  }
  jobAction(id: number, action: JobAction): Promise<Job> {
    return this.request('POST', `/api/jobs/${id}/${action}`);
  }
  /** -10 to 10: QUEUED jobs run highest first, then oldest. */
  setPriority(id: number, priority: number): Promise<Job> {
    return this.request('POST', `/api/jobs/${id}/priority`, { priority });
  }
  pauseAll(): Promise<Affected> {
    return this.request('POST', '/api/queue/pause-all');
  }
  resumeAll(): Promise<Affected> {
    return this.request('POST', '/api/queue/resume-all');
  }
  queueStats(): Promise<QueueStats> {
    return this.request('GET', '/api/queue/stats');
  }

  // System and nodes
  dashboard(): Promise<Dashboard> {
    return this.request('GET', '/api/system/dashboard');
  }
  health(): Promise<Health> {
    return this.request('GET', '/api/system/dashboard/health');
  }
  /** The node's own health checks as last run. */
  lastRecheck(): Promise<RecheckReport> {
    return this.request('GET', '/api/health/recheck');
  }
  /** Runs the node's own health checks now (operator or admin). */
  recheckHealth(): Promise<RecheckReport> {
    return this.request('POST', '/api/health/recheck');
  }
  nodes(): Promise<ClusterNode[]> {
    return this.request('GET', '/api/nodes');
  }
  /** Revokes a linked node: its link closes, its jobs are requeued, its credential refused. */
  revokeNode(id: number): Promise<NodeChanged> {
    return this.request('POST', `/api/nodes/${id}/revoke`);
  }
  /** Removes a linked node that is not linked, so its name can enroll again. */
  removeNode(id: number): Promise<NodeChanged> {
    return this.request('DELETE', `/api/nodes/${id}`);
  }

  // Libraries
  encoders(): Promise<EncoderCatalog> {
    return this.request('GET', '/api/encoders');
  }
  libraries(): Promise<Library[]> {
    return this.request('GET', '/api/libraries');
  }
  library(id: number): Promise<Library> {
    return this.request('GET', `/api/libraries/${id}`);
  }
  /** POST /libraries refuses `enabled` (a new library is enabled); a disabled one is switched off after. */
  async createLibrary(input: LibraryInput): Promise<Library> {
    const { enabled, ...fields } = input;
    const created = await this.request<Library>('POST', '/api/libraries', fields);
    return enabled === false ? this.updateLibrary(created.id, { enabled: false }) : created;
  }
  updateLibrary(id: number, input: Partial<LibraryInput>): Promise<Library> {
    return this.request('PUT', `/api/libraries/${id}`, input);
  }
  deleteLibrary(id: number): Promise<void> {
    return this.request('DELETE', `/api/libraries/${id}`);
  }
  scanLibrary(id: number): Promise<ScanReport> {
    return this.request('POST', `/api/libraries/${id}/scan`);
  }
  startForecast(id: number): Promise<Forecast> {
    return this.request('POST', `/api/libraries/${id}/forecast`);
  }
  forecast(id: number): Promise<Forecast> {
    return this.request('GET', `/api/libraries/${id}/forecast`);
  }
  cancelForecast(id: number): Promise<void> {
    return this.request('DELETE', `/api/libraries/${id}/forecast`);
  }

  /** The latest health run and a page of findings, damaged and unreadable files first. */
  libraryHealth(id: number, query: LibraryHealthQuery = {}): Promise<LibraryHealth> {
    const params = new URLSearchParams();
    if (query.page != null) params.set('page', String(query.page));
    if (query.pageSize != null) params.set('pageSize', String(query.pageSize));
    if (query.verdict) params.set('verdict', query.verdict);
    const text = params.toString();
    return this.request('GET', `/api/libraries/${id}/health${text ? `?${text}` : ''}`);
  }
  /** `all`: also the files unchanged since a check found them ok. */
  startLibraryHealth(id: number, depth: HealthDepth, all: boolean): Promise<HealthRun> {
    return this.request('POST', `/api/libraries/${id}/health`, { depth, all });
  }
  cancelLibraryHealth(id: number): Promise<void> {
    return this.request('DELETE', `/api/libraries/${id}/health`);
  }
  /** Checks one file again in the background (at its last depth unless given); answers the result as it was. */
  recheckLibraryFile(id: number, fileId: number, depth?: HealthDepth): Promise<FileHealth> {
    return this.request('POST', `/api/libraries/${id}/health/files/${fileId}/recheck`, depth ? { depth } : {});
  }
  ignoreLibraryFile(id: number, fileId: number, ignored: boolean): Promise<FileHealth> {
    return this.request('POST', `/api/libraries/${id}/health/files/${fileId}/ignore`, { ignored });
  }
  /** Asks the Sonarr or Radarr that holds the file to delete it and search again: not to be undone. */
  newCopyOfLibraryFile(id: number, fileId: number): Promise<NewCopyResult> {
    return this.request('POST', `/api/libraries/${id}/health/files/${fileId}/regrab`, { confirm: true });
  }

  // Insights
  insightStats(): Promise<InsightStats> {
    return this.request('GET', '/api/insights/stats');
  }
  savings(days = 30): Promise<Savings> {
    return this.request('GET', `/api/insights/savings?days=${days}`);
  }
  nodePerformance(): Promise<NodePerformance[]> {
    return this.request('GET', '/api/insights/nodes');
  }
  codecs(): Promise<CodecShare[]> {
    return this.request('GET', '/api/insights/codecs');
  }
  failures(days = 30): Promise<FailureBreakdown> {
    return this.request('GET', `/api/insights/failures?days=${days}`);
  }

  // Settings and licence
  settings(): Promise<Settings> {
    return this.request('GET', '/api/settings');
  }
  saveSettings(settings: SettingsUpdate): Promise<Settings> {
    return this.request('PUT', '/api/settings', settings);
  }
  license(): Promise<License> {
    return this.request('GET', '/api/license');
  }
  setLicense(key: string): Promise<License> {
    return this.request('PUT', '/api/license', { key });
  }
  apiKeys(): Promise<ApiKey[]> {
    return this.request('GET', '/api/api-keys');
  }
  createApiKey(name: string, scope: KeyScope): Promise<CreatedApiKey> {
    return this.request('POST', '/api/api-keys', { name, scope });
  }
  revokeApiKey(id: number): Promise<void> {
    return this.request('DELETE', `/api/api-keys/${id}`);
  }
  notificationTargets(): Promise<NotificationTarget[]> {
    return this.request('GET', '/api/notifications');
  }
  createNotificationTarget(target: NotificationTargetInput): Promise<NotificationTarget> {
    return this.request('POST', '/api/notifications', target);
  }
  /** Leaving `secret` out keeps the stored one (unless the URL moves to another host); "" removes it. */
  updateNotificationTarget(id: number, target: NotificationTargetInput): Promise<NotificationTarget> {
    return this.request('PUT', `/api/notifications/${id}`, target);
  }
  deleteNotificationTarget(id: number): Promise<void> {
    return this.request('DELETE', `/api/notifications/${id}`);
  }
  testNotificationTarget(id: number): Promise<NotificationTestResult> {
    return this.request('POST', `/api/notifications/${id}/test`);
  }
  connections(): Promise<Connection[]> {
    return this.request('GET', '/api/connections');
  }
  createConnection(connection: ConnectionInput): Promise<Connection> {
    return this.request('POST', '/api/connections', connection);
  }
  /** Leaving `apiKey` out keeps the stored one (unless the URL moves to another host). */
  updateConnection(id: number, connection: ConnectionInput): Promise<Connection> {
    return this.request('PUT', `/api/connections/${id}`, connection);
  }
  deleteConnection(id: number): Promise<void> {
    return this.request('DELETE', `/api/connections/${id}`);
  }
  testConnection(id: number): Promise<NotificationTestResult> {
    return this.request('POST', `/api/connections/${id}/test`);
  }
  /** The audit log, newest first (administrators only), of the entries `filter` keeps. */
  audit(page = 1, pageSize = 50, filter: AuditFilter = NO_FILTER): Promise<AuditPage> {
    const only = auditParams(filter);
    return this.request('GET', `/api/audit?page=${page}&pageSize=${pageSize}${only === '' ? '' : `&${only}`}`);
  }

  // Users (administrators only)
  users(): Promise<User[]> {
    return this.request('GET', '/api/users');
  }
  createUser(user: NewUser): Promise<User> {
    return this.request('POST', '/api/users', user);
  }
  /** The user's tokens are revoked: they sign in again with the new role. */
  setUserRole(username: string, role: UserRole): Promise<void> {
    return this.request('PUT', `/api/users/${encodeURIComponent(username)}/role`, { role });
  }
  setUserPassword(username: string, password: string): Promise<void> {
    return this.request('PUT', `/api/users/${encodeURIComponent(username)}/password`, { password });
  }
  deleteUser(username: string): Promise<void> {
    return this.request('DELETE', `/api/users/${encodeURIComponent(username)}`);
  }

  // Encoding windows
  defaultSchedule(): Promise<ScheduleView> {
    return this.request('GET', '/api/schedule');
  }
  setDefaultSchedule(schedule: Schedule): Promise<ScheduleView> {
    return this.request('PUT', '/api/schedule', schedule);
  }
  nodeSchedule(id: number): Promise<ScheduleView> {
    return this.request('GET', `/api/nodes/${id}/schedule`);
  }
  setNodeSchedule(id: number, schedule: Schedule): Promise<ScheduleView> {
    return this.request('PUT', `/api/nodes/${id}/schedule`, schedule);
  }
  /** The node follows the default schedule again. */
  clearNodeSchedule(id: number): Promise<ScheduleView> {
    return this.request('DELETE', `/api/nodes/${id}/schedule`);
  }

  // *arr path mappings (administrators only)
  arrSettings(): Promise<ArrSettings> {
    return this.request('GET', '/api/settings/arr');
  }
  setArrSettings(settings: ArrSettings): Promise<ArrSettings> {
    return this.request('PUT', '/api/settings/arr', settings);
  }
}
