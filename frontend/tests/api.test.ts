import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ApiClient, ApiError, REFRESH_WINDOW_MS, jobQueryString, jwtExpiry, memoryTokenStore, parseExpiry } from '../src/api';
import { DEFAULT_STREAM_RULES } from '../src/streamRules';

interface Recorded {
  method: string;
  url: string;
  authorization: string | undefined;
  contentType: string | undefined;
  body: string;
}

type Handler = (req: IncomingMessage, body: string, res: ServerResponse) => void;

let server: Server;
let baseUrl: string;
let requests: Recorded[] = [];
let handler: Handler;

function json(res: ServerResponse, status: number, value: unknown) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(value));
}

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      requests.push({
        method: req.method ?? '',
        url: req.url ?? '',
        authorization: req.headers.authorization,
        contentType: req.headers['content-type'],
        body,
      });
      handler(req, body, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  requests = [];
  handler = (_req, _body, res) => json(res, 200, { ok: true });
});

const NOW = Date.parse('2024-05-01T12:00:00Z');
const HOUR = 3_600_000;

function client(token: string | null = 'tok-1', expiresAt: number | null = NOW + HOUR) {
  const store = memoryTokenStore(token, expiresAt);
  let unauthorized = 0;
  const api = new ApiClient({ baseUrl, store, now: () => NOW, onUnauthorized: () => (unauthorized += 1) });
  return { api, store, unauthorized: () => unauthorized };
}

describe('ApiClient against a real HTTP server', () => {
  it('sends the bearer token and parses JSON', async () => {
    handler = (_req, _body, res) => json(res, 200, { items: [], total: 0, page: 2, pageSize: 25 });
    const { api } = client();
    const page = await api.jobs({ page: 2, pageSize: 25, status: ['QUEUED', 'ENCODING'], q: ' matrix ' });
    expect(page).toEqual({ items: [], total: 0, page: 2, pageSize: 25 });
    expect(requests).toHaveLength(1);
    expect(requests[0]).toMatchObject({
      method: 'GET',
      url: '/api/jobs?page=2&pageSize=25&status=QUEUED%2CENCODING&q=matrix',
      authorization: 'Bearer tok-1',
    });
  });

  it('creates a library without `enabled` (the server refuses it there), disabling it after when asked', async () => {
    const library = { id: 4, name: 'Films', paths: ['/media'], targetCodec: 'hevc', encoder: 'libx265', quality: 28, preset: 'medium', watch: true };
    handler = (req, _body, res) => json(res, req.method === 'POST' ? 201 : 200, { ...library, enabled: req.method === 'POST' });
    const { api } = client();
    const input = {
      name: 'Films',
      paths: ['/media'],
      targetCodec: 'hevc' as const,
      encoder: 'libx265',
      quality: 28,
      preset: 'medium',
      qualityMode: 'crf' as const,
      targetVmaf: 95,
      maxSizePercent: 80,
      keepDolbyVision: false,
      keepModifiedTime: false,
      rateControl: 'crf' as const,
      targetBitrateKbps: null,
      streamRules: DEFAULT_STREAM_RULES,
      healthSchedule: 'weekly' as const,
      healthAction: 'notify' as const,
      watch: true,
    };

    expect((await api.createLibrary({ ...input, enabled: true })).enabled).toBe(true);
    expect(requests).toHaveLength(1);
    expect(requests[0].method).toBe('POST');
    expect(JSON.parse(requests[0].body)).toEqual(input);

    requests = [];
    expect((await api.createLibrary({ ...input, enabled: false })).enabled).toBe(false);
    expect(requests.map((r) => `${r.method} ${r.url} ${r.body}`)).toEqual([
      `POST /api/libraries ${JSON.stringify(input)}`,
      'PUT /api/libraries/4 {"enabled":false}',
    ]);
  });

  it('sends JSON bodies with a content type', async () => {
    const { api } = client();
    await api.saveSettings({ jobTimeoutHours: 6, keepOriginals: true });
    expect(requests[0]).toMatchObject({ method: 'PUT', url: '/api/settings', contentType: 'application/json' });
    expect(JSON.parse(requests[0].body)).toEqual({ jobTimeoutHours: 6, keepOriginals: true });
  });

  it('posts job actions to the action path', async () => {
    const { api } = client();
    await api.jobAction(12, 'retry');
    await api.pauseAll();
    expect(requests.map((r) => `${r.method} ${r.url}`)).toEqual(['POST /api/jobs/12/retry', 'POST /api/queue/pause-all']);
  });

  it('clears the token and calls onUnauthorized on a 401', async () => {
    handler = (_req, _body, res) => json(res, 401, { error: { code: 'unauthorized', message: 'Token expired' } });
    const { api, store, unauthorized } = client();
    const error = await api.nodes().catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ApiError);
    expect(error).toMatchObject({ status: 401, code: 'unauthorized', message: 'Token expired' });
    expect(unauthorized()).toBe(1);
    expect(store.token()).toBeNull();
    expect(api.isLoggedIn()).toBe(false);
  });

  it('parses the error body of other failures and keeps the session', async () => {
    handler = (_req, _body, res) =>
      json(res, 409, { error: { code: 'invalid_transition', message: 'A COMPLETED job cannot be paused' } });
    const { api, store, unauthorized } = client();
    await expect(api.jobAction(3, 'pause')).rejects.toMatchObject({
      name: 'ApiError',
      status: 409,
      code: 'invalid_transition',
      message: 'A COMPLETED job cannot be paused',
    });
    expect(unauthorized()).toBe(0);
    expect(store.token()).toBe('tok-1');
  });

  it('falls back to the body text or status line when the error is not the JSON shape', async () => {
    handler = (_req, _body, res) => {
      res.writeHead(502, 'Bad Gateway', { 'Content-Type': 'text/plain' });
      res.end('upstream is down');
    };
    const { api } = client();
    await expect(api.health()).rejects.toMatchObject({ status: 502, code: 'http_error', message: 'upstream is down' });

    handler = (_req, _body, res) => {
      res.writeHead(500, 'Internal Server Error', { 'Content-Type': 'text/html' });
      res.end('<html><body>oops</body></html>');
    };
    await expect(api.health()).rejects.toMatchObject({ status: 500, message: '500 Internal Server Error' });
  });

  it('returns undefined for an empty success body (DELETE)', async () => {
    handler = (_req, _body, res) => {
      res.writeHead(204);
      res.end();
    };
    const { api } = client();
    await expect(api.deleteLibrary(4)).resolves.toBeUndefined();
    expect(requests[0]).toMatchObject({ method: 'DELETE', url: '/api/libraries/4' });
  });

  it('reports an unreachable server as a network error', async () => {
    const api = new ApiClient({ baseUrl: 'http://127.0.0.1:1', store: memoryTokenStore('t', null) });
    await expect(api.nodes()).rejects.toMatchObject({ status: 0, code: 'network_error' });
  });

  it('logs in without a token header and stores the new token and expiry', async () => {
    handler = (_req, _body, res) => json(res, 200, { token: 'fresh', expiresAt: '2024-05-02T12:00:00Z' });
    const { api, store } = client(null, null);
    await api.login('admin', 'secret');
    expect(requests[0]).toMatchObject({ method: 'POST', url: '/api/auth/login', authorization: undefined });
    expect(JSON.parse(requests[0].body)).toEqual({ username: 'admin', password: 'secret' });
    expect(store.token()).toBe('fresh');
    expect(store.expiresAt()).toBe(Date.parse('2024-05-02T12:00:00Z'));
  });

  it('shows a failed login message without the session-expired handling', async () => {
    handler = (_req, _body, res) => json(res, 401, { error: { code: 'invalid_credentials', message: 'Wrong username or password' } });
    const { api, unauthorized } = client(null, null);
    await expect(api.login('admin', 'nope')).rejects.toThrow('Wrong username or password');
    expect(unauthorized()).toBe(0);
  });

  it('refreshes the token first when it expires within 10 minutes', async () => {
    handler = (req, _body, res) => {
      if (req.url === '/api/auth/refresh') json(res, 200, { token: 'tok-2', expiresAt: new Date(NOW + 24 * HOUR).toISOString() });
      else json(res, 200, []);
    };
    const { api, store } = client('tok-1', NOW + REFRESH_WINDOW_MS - 1000);
    await api.nodes();
    expect(requests.map((r) => `${r.method} ${r.url} ${r.authorization}`)).toEqual([
      'POST /api/auth/refresh Bearer tok-1',
      'GET /api/nodes Bearer tok-2',
    ]);
    expect(store.expiresAt()).toBe(NOW + 24 * HOUR);
  });

  it('does not refresh a token that is valid for longer than 10 minutes', async () => {
    const { api } = client('tok-1', NOW + REFRESH_WINDOW_MS + 1000);
    await api.nodes();
    expect(requests.map((r) => r.url)).toEqual(['/api/nodes']);
  });

  it('shares one refresh between concurrent calls', async () => {
    handler = (req, _body, res) => {
      if (req.url === '/api/auth/refresh') setTimeout(() => json(res, 200, { token: 'tok-2', expiresAt: NOW + 24 * HOUR }), 20);
      else json(res, 200, {});
    };
    const { api } = client('tok-1', NOW + 60_000);
    await Promise.all([api.nodes(), api.libraries(), api.settings()]);
    expect(requests.filter((r) => r.url === '/api/auth/refresh')).toHaveLength(1);
    expect(requests.filter((r) => r.url !== '/api/auth/refresh').every((r) => r.authorization === 'Bearer tok-2')).toBe(true);
  });

  it('keeps going with the current token when a refresh fails for another reason', async () => {
    handler = (req, _body, res) => {
      if (req.url === '/api/auth/refresh') json(res, 503, { error: { code: 'unavailable', message: 'busy' } });
      else json(res, 200, []);
    };
    const { api, store } = client('tok-1', NOW + 60_000);
    await expect(api.nodes()).resolves.toEqual([]);
    expect(requests.at(-1)?.authorization).toBe('Bearer tok-1');
    expect(store.token()).toBe('tok-1');
  });

  it('ends the session when the refresh itself is rejected', async () => {
    handler = (_req, _body, res) => json(res, 401, { error: { code: 'unauthorized', message: 'expired' } });
    const { api, unauthorized } = client('tok-1', NOW - 1000);
    await expect(api.nodes()).rejects.toMatchObject({ status: 401 });
    expect(unauthorized()).toBe(1);
    expect(requests.map((r) => r.url)).toEqual(['/api/auth/refresh']);
  });

  it('logs out on the server with the token, and drops the token at once', async () => {
    handler = (_req, _body, res) => {
      res.writeHead(204);
      res.end();
    };
    const { api, store } = client('tok-1');
    api.logout();
    expect(store.token()).toBeNull();
    await expect.poll(() => requests.length).toBe(1);
    expect(requests[0]).toMatchObject({ method: 'POST', url: '/api/auth/logout', authorization: 'Bearer tok-1' });
  });

  it('sends no logout without a token', async () => {
    const { api } = client(null, null);
    api.logout();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(requests).toEqual([]);
  });
});

describe('request helpers', () => {
  it('builds job queries, leaving out empty values', () => {
    expect(jobQueryString({})).toBe('');
    expect(jobQueryString({ status: [], q: '  ' })).toBe('');
    expect(jobQueryString({ libraryId: 2, node: 'gpu-1', sort: 'createdAt', order: 'desc' })).toBe(
      '?libraryId=2&node=gpu-1&sort=createdAt&order=desc',
    );
  });

  it('parses expiry values in several forms', () => {
    expect(parseExpiry('2024-05-01T12:00:00Z')).toBe(NOW);
    expect(parseExpiry(NOW / 1000)).toBe(NOW);
    expect(parseExpiry(NOW)).toBe(NOW);
    expect(parseExpiry(String(NOW / 1000))).toBe(NOW);
    expect(parseExpiry('soon')).toBeNull();
    expect(parseExpiry(null)).toBeNull();
  });

  it('reads the exp claim of a JWT', () => {
    const payload = Buffer.from(JSON.stringify({ sub: 'admin', exp: NOW / 1000 })).toString('base64url');
    expect(jwtExpiry(`eyJhbGciOiJIUzI1NiJ9.${payload}.sig`)).toBe(NOW);
    expect(jwtExpiry('not-a-jwt')).toBeNull();
  });
});
