// @vitest-environment happy-dom
// The pages wired together in a DOM: a stubbed fetch answers the API, a fake WebSocket plays
// the live feed. Assertions are about behaviour (what a user can see and do), not markup.
import { render } from 'preact';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DEFAULT_STREAM_RULES } from '../src/streamRules';
import type { ClusterNode, Dashboard, Library } from '../src/types';
import { catalog } from './catalog';
import { MOVIES, job } from './fixtures';
import { FakeWebSocket } from './fake-websocket';


const encoding = job(1, { fileName: 'movie.mkv', status: 'ENCODING', stage: 'ENCODING', progress: 42, fps: 30, node: 'gpu-1', etaSeconds: 600, actions: ['pause', 'cancel'] });
const failed = job(2, { fileName: 'broken.avi', status: 'FAILED', failureReason: 'file validation failed', actions: ['retry'] });
const skipped = job(3, {
  fileName: 'tiny.mkv',
  status: 'SKIPPED',
  skipReason: 'output would not be smaller (projected at 130 % of the source)',
  actions: ['force'],
});
const nodes: ClusterNode[] = [
  {
    id: 1,
    name: 'gpu-1',
    role: 'main',
    address: '10.0.0.2',
    status: 'ONLINE',
    statusReason: null,
    gpu: 'NVIDIA RTX 4000',
    load1: 2,
    cores: 8,
    loadRatio: 0.25,
    memoryUsed: 4 * 1024 ** 3,
    memoryTotal: 16 * 1024 ** 3,
    activeJobs: 1,
    maxJobs: 2,
    encoders: ['libx265', 'hevc_nvenc', 'libsvtav1'],
    decoders: ['nvidia'],
    overloaded: false,
    lastSeenAt: new Date().toISOString(),
    identity: null,
    hasCredential: false,
    revoked: false,
    libraries: [],
    sharedStorage: null,
    transfer: false,
    workDirFreeBytes: null,
    window: {
      timeZone: 'Europe/Berlin',
      windows: [{ days: ['mon', 'tue'], start: '22:00', end: '07:00' }],
      onClose: 'pause',
      open: false,
      followsDefault: true,
    },
  },
];
const library: Library = {
  ...MOVIES,
  id: 1,
  paths: ['/media/movies'],
  streamRules: { ...DEFAULT_STREAM_RULES },
  healthSchedule: 'off',
  healthAction: 'notify',
  createdAt: '2024-05-01T00:00:00Z',
  updatedAt: '2024-05-01T00:00:00Z',
  lastScanAt: null,
};
const queue = {
  pending: 1,
  queued: 4,
  analyzing: 0,
  encoding: 1,
  paused: 0,
  completed: 12,
  failed: 1,
  skipped: 2,
  cancelled: 0,
  stalled: 0,
  activeWorkers: 1,
  throughputPerHour: 2,
  estimatedCompletionHours: 2.5,
};
const dashboard: Dashboard = {
  health: { overall: 'WARNING', checks: [{ name: 'memory', level: 'WARNING', value: 88, message: 'Memory at 88 %' }] },
  system: {
    cpu: { load1: 2, cores: 8, loadRatio: 0.25 },
    memory: { used: 14, total: 16, percent: 88, trend: [{ at: 'a', percent: 80 }, { at: 'b', percent: 88 }] },
    disks: [{ path: '/media', total: 100, used: 95, free: 5, usedPercent: 95, atRisk: true }],
    gpus: [],
  },
  queue,
  activeJobs: [encoding],
  nodes,
};

type Responder = (method: string, path: string, body: unknown) => { status: number; body?: unknown } | undefined;
let calls: string[] = [];
let override: Responder | null = null;

function respond(method: string, path: string): { status: number; body?: unknown } {
  const url = path.split('?')[0];
  if (method === 'GET' && url === '/api/jobs') return { status: 200, body: { items: [encoding, failed, skipped], total: 3, page: 1, pageSize: 50 } };
  if (method === 'POST' && url === '/api/jobs/1/pause') return { status: 200, body: { ...encoding, status: 'PAUSED', stage: null, actions: ['resume', 'cancel'] } };
  if (method === 'GET' && url === '/api/jobs/2') {
    return {
      status: 200,
      body: { ...failed, events: [{ id: 1, at: '2024-05-01T10:05:00Z', kind: 'failed', fromStatus: 'ENCODING', toStatus: 'FAILED', nodeName: 'gpu-1', detail: 'exit code 1' }] },
    };
  }
  if (url === '/api/system/dashboard') return { status: 200, body: dashboard };
  if (url === '/api/health/recheck') {
    // The last run found the library path gone; a run on demand finds it back.
    const gone = method === 'GET';
    return {
      status: 200,
      body: {
        overall: gone ? 'WARNING' : 'HEALTHY',
        checks: [
          gone
            ? { kind: 'libraryPath', subject: '/media', level: 'WARNING', message: 'cannot read /media: No such file or directory (os error 2)' }
            : { kind: 'libraryPath', subject: '/media', level: 'HEALTHY', message: '/media is readable' },
        ],
        checkedAt: '2024-05-01T10:00:00Z',
        nextAt: '2024-05-01T11:00:00Z',
        changed: !gone,
      },
    };
  }
  if (url === '/api/queue/stats') return { status: 200, body: queue };
  if (url === '/api/nodes') return { status: 200, body: nodes };
  if (url === '/api/encoders') return { status: 200, body: catalog(nodes.flatMap((node) => node.encoders)) };
  if (method === 'GET' && url === '/api/libraries') return { status: 200, body: [library] };
  if (method === 'POST' && url === '/api/libraries/1/scan') return { status: 200, body: { found: 9, queued: 7, removed: 0 } };
  if (url === '/api/insights/stats') {
    return {
      status: 200,
      body: {
        history: [{ date: '2024-05-01', completed: 3, savedBytes: 3 * 1024 ** 3, averageFps: 40 }],
        totals: { completed: 3, savedBytes: 3 * 1024 ** 3, averageFps: 40 },
        failedJobs: [{ jobId: 2, fileName: 'broken.avi', reason: 'file validation failed', node: 'gpu-1', date: '2024-05-01T10:05:00Z' }],
        storage: { totalSavedBytes: 3 * 1024 ** 3, filesProcessed: 3, averageSavingsPercent: 45 },
        encodingTime: { cpuSeconds: 7200, wallSeconds: 3600, efficiency: 2 },
        vmaf: [{ libraryId: 1, libraryName: 'Movies', jobs: 2, meanVmaf: 95.5, lowestP5: 91, meanQuality: 25 }],
      },
    };
  }
  if (url === '/api/insights/savings') {
    return { status: 200, body: { days: [{ date: '2024-05-01', savedBytes: 1024, cumulativeBytes: 1024 }, { date: '2024-05-02', savedBytes: 2048, cumulativeBytes: 3072 }] } };
  }
  if (url === '/api/insights/nodes') return { status: 200, body: [{ node: 'gpu-1', jobs: 3, successRate: 0.75, savedBytes: 1024, throughputPerHour: 1.5 }] };
  if (url === '/api/insights/failures') {
    const reasons = (counts: [string, string, number][]) => counts.map(([code, reason, count]) => ({ code, reason, count }));
    return {
      status: 200,
      body: {
        days: 30,
        total: 4,
        categories: [
          { category: 'corrupted_file', label: 'Corrupted file', count: 3, share: 0.75, reasons: reasons([['file_validation_failed', 'file validation failed', 3]]) },
          { category: 'disk_space', label: 'Disk space', count: 0, share: 0, reasons: reasons([['insufficient_disk_space', 'insufficient disk space', 0]]) },
          {
            category: 'transcoder_errors',
            label: 'Transcoder errors',
            count: 1,
            share: 0.25,
            reasons: reasons([
              ['transcoder_crashed', 'transcoder process crashed', 0],
              ['out_of_memory', 'out of memory', 1],
            ]),
          },
        ],
      },
    };
  }
  if (url === '/api/insights/codecs') return { status: 200, body: [{ codec: 'h264', count: 3, share: 0.75 }, { codec: 'hevc', count: 1, share: 0.25 }] };
  if (url === '/api/settings') return { status: 200, body: { jobTimeoutHours: 12, keepOriginals: false, enrollmentOpen: true } };
  if (method === 'GET' && url === '/api/api-keys') {
    return { status: 200, body: [{ id: 4, name: 'sonarr', scope: 'integration', readOnly: false, prefix: 'ck_AbCdEf', username: 'ada', createdAt: '2024-05-01T10:00:00Z', lastUsedAt: null }] };
  }
  if (method === 'POST' && url === '/api/api-keys') {
    return { status: 201, body: { id: 5, name: 'grafana', scope: 'read', readOnly: true, prefix: 'ck_XyZ123', key: 'ck_XyZ123secretsecretsecret', createdAt: '2024-05-01T10:00:00Z' } };
  }
  if (method === 'GET' && url === '/api/notifications') {
    return {
      status: 200,
      body: [
        {
          id: 3,
          name: 'phone',
          kind: 'ntfy',
          url: 'https://ntfy.sh/films',
          events: ['job.completed', 'job.failed'],
          hasSecret: false,
          headers: {},
          enabled: true,
          createdAt: '2024-05-01T10:00:00Z',
          lastDeliveredAt: null,
          lastError: 'answered 503 Service Unavailable',
          lastErrorAt: '2024-05-01T10:01:00Z',
          waiting: 2,
        },
      ],
    };
  }
  if (method === 'POST' && url === '/api/notifications/3/test') return { status: 200, body: { delivered: false, error: 'answered 503 Service Unavailable' } };
  if (method === 'POST' && url === '/api/notifications') {
    return {
      status: 201,
      body: { id: 4, name: 'g', kind: 'gotify', url: 'https://g', events: [], hasSecret: true, headers: {}, enabled: true, createdAt: '2024-05-01T10:00:00Z', lastDeliveredAt: null, lastError: null, lastErrorAt: null, waiting: 0 },
    };
  }
  if (url === '/api/audit') {
    return {
      status: 200,
      body: {
        items: [
          { id: 2, at: '2024-05-01T10:06:00Z', username: 'bob', role: 'viewer', method: 'POST', route: '/queue/pause-all', path: '/api/queue/pause-all', status: 403 },
          { id: 1, at: '2024-05-01T10:05:00Z', username: 'ada', role: 'operator', method: 'POST', route: '/jobs/{id}/cancel', path: '/api/jobs/7/cancel', status: 200 },
        ],
        total: 2,
        page: 1,
        pageSize: 50,
      },
    };
  }
  if (method === 'GET' && url === '/api/connections') {
    return {
      status: 200,
      body: [
        {
          id: 9,
          name: 'plex',
          kind: 'plex',
          url: 'http://plex:32400',
          hasApiKey: true,
          pathMappings: [{ from: '/media/films', to: '/data/films' }],
          enabled: true,
          createdAt: '2024-05-01T10:00:00Z',
          lastDeliveredAt: '2024-05-01T10:02:00Z',
          lastError: null,
          lastErrorAt: null,
          waiting: 0,
        },
      ],
    };
  }
  if (method === 'POST' && url === '/api/connections/9/test') return { status: 200, body: { delivered: true, error: null } };
  if (method === 'POST' && url === '/api/connections') {
    return {
      status: 201,
      body: { id: 10, name: 's', kind: 'sonarr', url: 'http://s', hasApiKey: true, pathMappings: [], enabled: true, createdAt: '2024-05-01T10:00:00Z', lastDeliveredAt: null, lastError: null, lastErrorAt: null, waiting: 0 },
    };
  }
  if (method === 'GET' && url === '/api/users') {
    return {
      status: 200,
      body: [
        { id: 1, username: 'ada', role: 'admin', createdAt: '2024-05-01T10:00:00Z' },
        { id: 2, username: 'bob', role: 'viewer', createdAt: '2024-05-02T10:00:00Z' },
      ],
    };
  }
  if (method === 'GET' && url === '/api/schedule') return { status: 200, body: { timeZone: 'UTC', windows: [], onClose: 'pause', open: true, followsDefault: false } };
  if (method === 'GET' && url === '/api/settings/arr') return { status: 200, body: { pathMappings: [{ from: '/tv', to: '/media/tv' }] } };
  if (url === '/api/license') return { status: 200, body: { tier: 'SUPPORTER', licensee: 'Ada', expiresAt: '2099-01-01T00:00:00Z', maxNodes: 3, maxConcurrentJobs: 5 } };
  return { status: 404, body: { error: { code: 'not_found', message: `no route ${method} ${url}` } } };
}

const container = () => document.getElementById('root')!;
const text = () => container().textContent ?? '';
/** Lets Preact render what the events before it changed, as it would between a person's key strokes. */
const settle = () => new Promise((resolve) => setTimeout(resolve, 0));

/** `value`, or a throw that makes vi.waitFor try again. */
function need<T>(value: T | null | undefined): T {
  if (value == null) throw new Error('not there yet');
  return value;
}
const byLabel = (label: string) => container().querySelector<HTMLElement>(`[aria-label="${label}"]`);

async function show(hash: string) {
  window.location.hash = hash;
  window.dispatchEvent(new HashChangeEvent('hashchange'));
}

beforeEach(async () => {
  calls = [];
  override = null;
  FakeWebSocket.instances = [];
  vi.stubGlobal('WebSocket', FakeWebSocket);
  vi.stubGlobal('fetch', async (input: string, init: RequestInit = {}) => {
    const method = init.method ?? 'GET';
    calls.push(`${method} ${input}`);
    const body = init.body ? JSON.parse(String(init.body)) : undefined;
    const answer = override?.(method, input, body) ?? respond(method, input);
    return new Response(answer.body === undefined ? null : JSON.stringify(answer.body), {
      status: answer.status,
      headers: { 'Content-Type': 'application/json' },
    });
  });
  localStorage.setItem('token', 'tok');
  localStorage.setItem('tokenExpiresAt', new Date(Date.now() + 86_400_000).toISOString());
  document.body.innerHTML = '<div id="root"></div>';
});

afterEach(() => {
  render(null, container());
  vi.unstubAllGlobals();
  localStorage.clear();
});

async function mount(hash: string) {
  await show(hash);
  const { App } = await import('../src/app');
  render(<App />, container());
}

describe('dashboard pages', () => {
  it('lists jobs with the actions each status offers, and applies live progress', async () => {
    await mount('#/jobs');
    await vi.waitFor(() => expect(text()).toContain('movie.mkv'));
    expect(calls[0]).toBe('GET /api/jobs?page=1&pageSize=50&sort=createdAt&order=desc');
    expect(byLabel('Pause movie.mkv')).not.toBeNull();
    expect(byLabel('Cancel movie.mkv')).not.toBeNull();
    expect(byLabel('Resume movie.mkv')).toBeNull();
    expect(byLabel('Retry broken.avi')).not.toBeNull();
    expect(byLabel('Pause broken.avi')).toBeNull();
    expect(text()).toContain('file validation failed');
    // A skipped job says why, and offers to encode it anyway.
    expect(text()).toContain('output would not be smaller (projected at 130 % of the source)');
    expect(byLabel('Force re-encode tiny.mkv')).not.toBeNull();

    const bar = byLabel('Progress of movie.mkv')!;
    expect(bar.getAttribute('role')).toBe('progressbar');
    expect(bar.getAttribute('aria-valuenow')).toBe('42');
    expect(bar.className).toContain('progress-green');

    const socket = FakeWebSocket.instances[0];
    expect(socket.url).toMatch(/\/ws\?token=tok$/);
    socket.onopen?.({});
    await vi.waitFor(() => expect(byLabel('Live updates: connected')).not.toBeNull());
    socket.send({ type: 'progress', jobId: 1, progress: 77, status: 'ENCODING', fps: 3 });
    await vi.waitFor(() => expect(byLabel('Progress of movie.mkv')!.getAttribute('aria-valuenow')).toBe('77'));
    expect(byLabel('Progress of movie.mkv')!.className).toContain('progress-yellow');
    socket.send({ type: 'progress', jobId: 1, progress: 77, status: 'ENCODING', stalled: true });
    await vi.waitFor(() => expect(byLabel('Progress of movie.mkv')!.className).toContain('progress-red'));
  });

  it('pauses a job and then offers resume', async () => {
    await mount('#/jobs');
    await vi.waitFor(() => expect(byLabel('Pause movie.mkv')).not.toBeNull());
    byLabel('Pause movie.mkv')!.click();
    await vi.waitFor(() => expect(byLabel('Resume movie.mkv')).not.toBeNull());
    expect(calls).toContain('POST /api/jobs/1/pause');
    expect(byLabel('Pause movie.mkv')).toBeNull();
  });

  it('shows the error message of a failed action', async () => {
    override = (method, path) =>
      method === 'POST' && path === '/api/jobs/1/pause'
        ? { status: 409, body: { error: { code: 'invalid_transition', message: 'Job already finished' } } }
        : undefined;
    await mount('#/jobs');
    await vi.waitFor(() => expect(byLabel('Pause movie.mkv')).not.toBeNull());
    byLabel('Pause movie.mkv')!.click();
    await vi.waitFor(() => expect(container().querySelector('[role="alert"]')?.textContent).toContain('Job already finished'));
  });

  it('re-fetches the page after the live connection comes back', async () => {
    const timers = vi.spyOn(globalThis, 'setTimeout');
    await mount('#/jobs');
    await vi.waitFor(() => expect(text()).toContain('movie.mkv'));
    const first = FakeWebSocket.instances[0];
    first.onopen?.({});
    first.onclose?.({});
    await vi.waitFor(() => expect(byLabel('Live updates: reconnecting')).not.toBeNull());
    // Run the scheduled reconnect (the 0.8-1 s backoff timer) now.
    const reconnect = timers.mock.calls.find(([, ms]) => typeof ms === 'number' && ms >= 800 && ms <= 1000);
    expect(reconnect).toBeDefined();
    (reconnect![0] as () => void)();
    const jobCalls = calls.filter((call) => call.startsWith('GET /api/jobs')).length;
    FakeWebSocket.instances[1].onopen?.({});
    await vi.waitFor(() => expect(calls.filter((call) => call.startsWith('GET /api/jobs')).length).toBe(jobCalls + 1));
    timers.mockRestore();
  });

  it('shows the overview with health, queue, performance and active jobs', async () => {
    await mount('#/');
    await vi.waitFor(() => expect(text()).toContain('System health'));
    expect(text()).toContain('Memory at 88 %');
    expect(text()).toContain('Throughput');
    expect(text()).toContain('2h 30m'); // estimated completion
    expect(text()).toContain('Above 90 % used');
    expect(byLabel('Progress of movie.mkv')?.getAttribute('aria-valuenow')).toBe('42');
    // It leads with the space saved: so far (insights), and no forecast yet (the library has none).
    await vi.waitFor(() => expect(container().querySelector('[aria-labelledby="savings-title"]')?.textContent).toContain('3.0 GiB'));
    expect(container().querySelector('[aria-labelledby="savings-title"]')?.textContent).toContain('forecast a library');

    const socket = FakeWebSocket.instances[0];
    socket.onopen?.({});
    socket.send({ type: 'snapshot', jobId: 5, progress: 10, status: 'ENCODING', fileName: 'new.mkv', fps: 12 });
    await vi.waitFor(() => expect(byLabel('Progress of new.mkv')).not.toBeNull());
    socket.send({ type: 'status', jobId: 1, progress: 100, status: 'COMPLETED' });
    await vi.waitFor(() => expect(byLabel('Progress of movie.mkv')).toBeNull());
  });

  it('shows the node checks that fail and re-checks them on demand', async () => {
    await mount('#/');
    const health = () => container().querySelector('[aria-labelledby="health-title"]')?.textContent ?? '';
    await vi.waitFor(() => expect(health()).toContain('cannot read /media'));
    const button = [...container().querySelectorAll('button')].find((b) => b.textContent === 'Re-check now')!;
    button.click();
    await vi.waitFor(() => expect(health()).toContain('Every library path readable'));
    expect(calls).toContain('POST /api/health/recheck');
    expect(health()).not.toContain('cannot read /media');
  });

  it('shows what the quality search chose and what the output measured', async () => {
    const searched = job(5, {
      fileName: 'searched.mkv',
      status: 'COMPLETED',
      chosenQuality: 23,
      predictedSize: 450_000,
      outputSize: 448_000,
      vmaf: 95.44,
      vmafP5: 94.1,
      actions: ['force'],
    });
    override = (method, path) =>
      method === 'GET' && path.split('?')[0] === '/api/jobs/5' ? { status: 200, body: { ...searched, events: [] } } : undefined;
    await mount('#/jobs/5');
    await vi.waitFor(() => expect(text()).toContain('Chosen CRF'));
    expect(text()).toContain('VMAF95.44 (5th percentile 94.10)');
    expect(text()).toContain('Predicted size');
  });

  it("shows where a completed job's time went, the phases a linked node reported in its name", async () => {
    const done = job(9, { fileName: 'moved.mkv', status: 'COMPLETED', node: 'blind', outputSize: 500 });
    const phases = [
      { phase: 'download', wallMs: 1500, cpuMs: 0, node: 'blind' },
      { phase: 'validation', wallMs: 1020, cpuMs: 1670, node: 'blind' },
      { phase: 'video', wallMs: 61_500, cpuMs: 120_000, node: 'blind' },
      { phase: 'upload', wallMs: 480, cpuMs: 0, node: 'blind' },
      { phase: 'verification', wallMs: 1320, cpuMs: 2150 },
      'not a phase',
    ];
    const completed = {
      id: 40,
      at: '2024-05-01T10:05:00Z',
      kind: 'completed',
      fromStatus: 'ENCODING',
      toStatus: 'COMPLETED',
      nodeName: 'blind',
      detail: { outputSize: 500, phases, aloneMs: 240 },
    };
    override = (method, path) =>
      method === 'GET' && path.split('?')[0] === '/api/jobs/9'
        ? { status: 200, body: { ...done, events: [completed] } }
        : undefined;
    await mount('#/jobs/9');
    const card = await vi.waitFor(() => {
      const found = [...document.querySelectorAll('section')].find((s) => s.textContent?.startsWith('Where the time went'));
      expect(found).toBeDefined();
      return found!;
    });
    const rows = [...card.querySelectorAll('tbody tr')].map((r) => [...r.querySelectorAll('td')].map((c) => c.textContent));
    expect(rows).toEqual([
      ['Download', 'blind', '1.50 s', '—', '2%'],
      ['Validation', 'blind', '1.02 s', '1.67 s', '2%'],
      ['Video', 'blind', '1m 02s', '2m 00s', '93%'],
      ['Upload', 'blind', '0.48 s', '—', '1%'],
      ['Verification', 'main node', '1.32 s', '2.15 s', '2%'],
    ]);
    expect(card.querySelector('tfoot')?.textContent).toContain('1m 06s');
    expect(card.textContent).toContain('The video\'s last 0.24 s ran in one session');
    // The history's detail does not repeat them.
    expect(text()).toContain('outputSize: 500');
    expect(text()).not.toContain('aloneMs');
  });

  it('shows which way a transferring job moves its file, how much of it and how fast, in the list and on its page', async () => {
    const moving = job(7, {
      fileName: 'far.mkv',
      status: 'ENCODING',
      stage: 'TRANSFERRING',
      progress: 30,
      node: 'laptop',
      transfer: { direction: 'download', bytes: 3145728, total: 10485760, rateBytesPerSecond: 1048576 },
    });
    override = (method, path) => {
      const url = path.split('?')[0];
      if (method !== 'GET') return undefined;
      if (url === '/api/jobs') return { status: 200, body: { items: [moving, failed], total: 2, page: 1, pageSize: 50 } };
      if (url === '/api/jobs/7') return { status: 200, body: { ...moving, events: [] } };
      return undefined;
    };
    await mount('#/jobs');
    await vi.waitFor(() => expect(text()).toContain('Downloading 3.0 MiB of 10.0 MiB · 1.0 MiB/s'));
    // The upload, as the feed reports it; a job that moves nothing says nothing of it.
    const socket = FakeWebSocket.instances[0];
    socket.onopen?.({});
    const upload = { direction: 'upload', bytes: 1024, total: 4096, rateBytesPerSecond: 2048 } as const;
    socket.send({ type: 'progress', jobId: 7, progress: 25, status: 'ENCODING', stage: 'TRANSFERRING', transfer: upload });
    await vi.waitFor(() => expect(text()).toContain('Uploading 1.0 KiB of 4.0 KiB · 2.0 KiB/s'));
    expect(text()).not.toContain('Downloading');
    socket.send({ type: 'status', jobId: 7, progress: 100, status: 'COMPLETED', stage: null });
    await vi.waitFor(() => expect(text()).not.toContain('Uploading'));
  });

  it("shows a transferring job's download on its page", async () => {
    const moving = job(7, {
      fileName: 'far.mkv',
      status: 'ENCODING',
      stage: 'TRANSFERRING',
      transfer: { direction: 'download', bytes: 3145728, total: 10485760, rateBytesPerSecond: 1048576 },
    });
    override = (method, path) =>
      method === 'GET' && path.split('?')[0] === '/api/jobs/7' ? { status: 200, body: { ...moving, events: [] } } : undefined;
    await mount('#/jobs/7');
    await vi.waitFor(() => expect(text()).toContain('Downloading 3.0 MiB of 10.0 MiB · 1.0 MiB/s'));
  });

  it('shows the download beside the encode of a copy read as it arrives, until the download ends', async () => {
    const encoding = job(7, {
      fileName: 'far.mkv',
      status: 'ENCODING',
      stage: 'ENCODING',
      progress: 12,
      node: 'laptop',
      transfer: { direction: 'download', bytes: 3145728, total: 10485760, rateBytesPerSecond: 1048576 },
    });
    override = (method, path) => {
      const url = path.split('?')[0];
      if (method !== 'GET') return undefined;
      if (url === '/api/jobs') return { status: 200, body: { items: [encoding], total: 1, page: 1, pageSize: 50 } };
      return undefined;
    };
    await mount('#/jobs');
    await vi.waitFor(() => expect(text()).toContain('Downloading 3.0 MiB of 10.0 MiB · 1.0 MiB/s'));
    expect(text()).toContain('12.0%');
    // The encode's progress once the download is done carries no transfer.
    const socket = FakeWebSocket.instances[0];
    socket.onopen?.({});
    socket.send({ type: 'progress', jobId: 7, progress: 40, status: 'ENCODING', stage: 'ENCODING' });
    await vi.waitFor(() => expect(text()).toContain('40.0%'));
    expect(text()).not.toContain('Downloading');
  });

  it('shows which pass a two-pass encode is in', async () => {
    const running = job(6, { fileName: 'two-pass.mkv', status: 'ENCODING', stage: 'ENCODING', progress: 40, encodePass: 1 });
    override = (method, path) =>
      method === 'GET' && path.split('?')[0] === '/api/jobs/6' ? { status: 200, body: { ...running, events: [] } } : undefined;
    await mount('#/jobs/6');
    await vi.waitFor(() => expect(text()).toContain('Pass1 of 2 (statistics)'));
  });

  it('shows a job with its event history', async () => {
    await mount('#/jobs/2');
    await vi.waitFor(() => expect(text()).toContain('exit code 1'));
    expect(text()).toContain('Encoding → Failed');
    expect(byLabel('Retry broken.avi')).not.toBeNull();
  });

  it('offers the encoders, presets and quality range /encoders serves for the chosen codec', async () => {
    await mount('#/libraries');
    await vi.waitFor(() => expect(text()).toContain('Movies'));
    const add = [...container().querySelectorAll('button')].find((b) => b.textContent === 'Add library')!;
    add.click();
    await vi.waitFor(() => expect(container().querySelector('form.form')).not.toBeNull());
    expect(calls).toContain('GET /api/encoders');
    const selects = () => [...container().querySelectorAll<HTMLSelectElement>('form.form select')];
    const options = (select: number) => [...selects()[select].options].map((o) => o.value);
    const quality = () => container().querySelector<HTMLInputElement>('form.form input[type="number"]')!;
    const choose = (select: number, value: string) => {
      selects()[select].value = value;
      selects()[select].dispatchEvent(new Event('change', { bubbles: true }));
    };
    // The server's defaults for a new HEVC library.
    await vi.waitFor(() => expect(options(1)).toEqual(['libx265', 'hevc_nvenc']));
    // The encoders not offered, each with why.
    const notOffered = () =>
      [...container().querySelectorAll('ul[aria-label="Encoders not offered"] li')].map((li) => li.textContent);
    expect(notOffered()).toEqual(['hevc_qsv: no node runs it: it needs intel_qsv', 'hevc_vaapi: no node runs it: it needs vaapi']);
    expect([selects()[1].value, quality().value, selects()[2].value]).toEqual(['libx265', '28', 'medium']);
    expect(options(2)).toEqual(catalog([]).codecs[0].encoders[0].presets);
    choose(1, 'hevc_nvenc');
    await vi.waitFor(() => expect(selects()[2].value).toBe('p5'));
    expect(options(2)).toEqual(['p1', 'p5', 'p7']);
    // Keeping Dolby Vision is an HEVC choice: offered there, gone (and cleared) for AV1.
    const keepDolbyVision = () =>
      [...container().querySelectorAll<HTMLLabelElement>('form.form label.check-field')]
        .find((l) => l.textContent?.includes('Keep Dolby Vision'))
        ?.querySelector('input');
    expect(keepDolbyVision()?.checked).toBe(false);
    keepDolbyVision()!.click();
    await vi.waitFor(() => expect(keepDolbyVision()?.checked).toBe(true));
    choose(0, 'av1');
    await vi.waitFor(() => expect(options(1)).toEqual(['libsvtav1']));
    expect([selects()[2].value, quality().max]).toEqual(['8', '63']);
    expect(text()).toContain('CRF 0–63');
    expect(keepDolbyVision()).toBeUndefined();
    expect(notOffered()).toEqual(['libaom-av1: no node runs it: it needs cpu']);
    choose(0, 'hevc');
    await vi.waitFor(() => expect(keepDolbyVision()?.checked).toBe(false));
  });

  it('sends the choice to keep modification times with the library', async () => {
    let sent: { keepModifiedTime?: boolean } | undefined;
    override = (method, path, body) => {
      if (method === 'POST' && path === '/api/libraries') {
        sent = body as { keepModifiedTime?: boolean };
        return { status: 201, body: { ...library, ...(body as object), id: 2 } };
      }
      return undefined;
    };
    await mount('#/libraries');
    await vi.waitFor(() => expect(text()).toContain('Movies'));
    [...container().querySelectorAll('button')].find((b) => b.textContent === 'Add library')!.click();
    await vi.waitFor(() => expect(container().querySelector('form.form')).not.toBeNull());
    const form = container().querySelector<HTMLFormElement>('form.form')!;
    const field = (label: string) =>
      [...form.querySelectorAll<HTMLLabelElement>('label')].find((l) => l.textContent?.includes(label));
    const keepTime = field("Keep each file's modification time")!.querySelector('input')!;
    expect(keepTime.checked).toBe(false);
    keepTime.click();
    await vi.waitFor(() => expect(keepTime.checked).toBe(true));
    const name = field('Name')!.querySelector('input')!;
    name.value = 'Shows';
    name.dispatchEvent(new Event('input', { bubbles: true }));
    const path = form.querySelector<HTMLInputElement>('input[aria-label="Media path 1"]')!;
    path.value = '/media/shows';
    path.dispatchEvent(new Event('input', { bubbles: true }));
    // Preact renders the typed values before the form reads them on submit.
    await new Promise((resolve) => setTimeout(resolve, 0));
    [...form.querySelectorAll('button')].find((b) => b.textContent === 'Create library')!.click();
    await vi.waitFor(() => expect(sent, form.textContent ?? '').toBeDefined());
    expect(sent?.keepModifiedTime).toBe(true);
  });

  it("sets a library's scheduled health check and what it does about a damaged file, and shows the server's refusal beside it", async () => {
    const sent: Record<string, unknown>[] = [];
    override = (method, path, body) => {
      if (method !== 'PUT' || path !== '/api/libraries/1') return undefined;
      sent.push(body as Record<string, unknown>);
      if (sent.length === 1) return { status: 422, body: { error: { code: 'validation_failed', message: 'healthSchedule must be off, weekly or monthly, not "daily"' } } };
      return { status: 200, body: { ...library, ...(body as object) } };
    };
    await mount('#/libraries');
    await vi.waitFor(() => expect(text()).toContain('Movies'));
    [...container().querySelectorAll('button')].find((b) => b.textContent === 'Edit')!.click();
    const form = await vi.waitFor(() => need(container().querySelector<HTMLFormElement>('form.form')));
    const select = (label: string) =>
      [...form.querySelectorAll<HTMLLabelElement>('label')].find((l) => l.textContent?.startsWith(label))!.querySelector('select')!;
    const schedule = select('Scheduled health check');
    const action = select('After a scheduled check');
    expect([schedule.value, action.value]).toEqual(['off', 'notify']);
    expect([...schedule.options].map((o) => o.value)).toEqual(['off', 'weekly', 'monthly']);
    schedule.value = 'monthly';
    schedule.dispatchEvent(new Event('change', { bubbles: true }));
    action.value = 'regrab';
    action.dispatchEvent(new Event('change', { bubbles: true }));
    await settle();
    [...form.querySelectorAll('button')].find((b) => b.textContent === 'Save changes')!.click();
    await vi.waitFor(() => expect(schedule.getAttribute('aria-invalid')).toBe('true'));
    expect(schedule.closest('label')!.textContent).toContain('healthSchedule must be off, weekly or monthly');
    expect(sent[0]).toMatchObject({ healthSchedule: 'monthly', healthAction: 'regrab' });
    [...form.querySelectorAll('button')].find((b) => b.textContent === 'Save changes')!.click();
    await vi.waitFor(() => expect(text()).toContain('Saved library'));
    expect(sent).toHaveLength(2);
  });

  it("shows the server's refusal of a library path beside the paths", async () => {
    override = (method, path) =>
      method === 'POST' && path === '/api/libraries'
        ? { status: 422, body: { error: { code: 'validation_failed', message: 'paths[0] "/media/nope" does not exist' } } }
        : undefined;
    await mount('#/libraries');
    await vi.waitFor(() => expect(text()).toContain('Movies'));
    [...container().querySelectorAll('button')].find((b) => b.textContent === 'Add library')!.click();
    const form = await vi.waitFor(() => need(container().querySelector<HTMLFormElement>('form.form')));
    const name = [...form.querySelectorAll<HTMLLabelElement>('label')].find((l) => l.textContent?.includes('Name'))!.querySelector('input')!;
    name.value = 'Shows';
    name.dispatchEvent(new Event('input', { bubbles: true }));
    const path = form.querySelector<HTMLInputElement>('input[aria-label="Media path 1"]')!;
    path.value = '/media/nope';
    path.dispatchEvent(new Event('input', { bubbles: true }));
    await settle();
    [...form.querySelectorAll('button')].find((b) => b.textContent === 'Create library')!.click();
    await vi.waitFor(() => expect(path.getAttribute('aria-invalid')).toBe('true'));
    const paths = form.querySelector('fieldset')!;
    expect(paths.textContent).toContain('paths[0] "/media/nope" does not exist');
    expect(form.querySelector('[role="alert"].alert')).toBeNull();
  });

  it('scans a library and reports how many files were queued', async () => {
    await mount('#/libraries');
    await vi.waitFor(() => expect(text()).toContain('Movies'));
    [...container().querySelectorAll('button')].find((b) => b.textContent === 'Scan now')!.click();
    await vi.waitFor(() => expect(text()).toContain('queued 7 files'));
  });

  it('shows the forecast of a library, and starts one again', async () => {
    const file = (jobId: number, change: Record<string, unknown>) => ({
      jobId,
      fileName: `f${jobId}.mkv`,
      currentSize: 1000,
      predictedSize: null,
      predictedSeconds: null,
      quality: null,
      vmaf: null,
      skipReason: null,
      error: null,
      ...change,
    });
    const forecast = {
      libraryId: 1,
      status: 'DONE',
      filesTotal: 2,
      filesDone: 2,
      startedAt: '2024-05-01T10:00:00Z',
      finishedAt: '2024-05-01T10:05:00Z',
      slots: 2,
      totals: {
        files: 2, encoded: 1, currentSize: 1000, predictedSize: 400, savedBytes: 600, savedPercent: 30,
        skipped: 1, failed: 0, predictedSeconds: 120, predictedWallSeconds: 60,
      },
      files: [
        file(1, { predictedSize: 400, predictedSeconds: 120, quality: 23, vmaf: 95.4 }),
        file(2, { skipReason: 'video is already hevc' }),
      ],
    };
    override = (method, path) => {
      if (path.split('?')[0] !== '/api/libraries/1/forecast') return undefined;
      return method === 'GET' ? { status: 200, body: forecast } : { status: 202, body: { ...forecast, status: 'RUNNING' } };
    };
    await mount('#/libraries');
    await vi.waitFor(() => expect(text()).toContain('Movies'));
    [...container().querySelectorAll('button')].find((b) => b.textContent === 'Forecast')!.click();
    await vi.waitFor(() => expect(text()).toContain('2 of 2 files'));
    expect(text()).toContain('Skipped: video is already hevc');
    expect(text()).toContain('95.4');
    expect(container().querySelectorAll('rect.chart-bar')).toHaveLength(2);
    [...container().querySelectorAll('button')].find((b) => b.textContent === 'Forecast again')!.click();
    await vi.waitFor(() => expect(calls).toContain('POST /api/libraries/1/forecast'));
  });

  it("shows a library's health: the last run, the damaged files with their error, and what an operator may do", async () => {
    const finding = (id: number, change: Record<string, unknown>) => ({
      id,
      path: `/media/movies/f${id}.mkv`,
      size: 2048,
      depth: 'quick',
      verdict: 'damaged',
      firstErrorSeconds: 12.5,
      message: 'packet timestamps go backwards',
      errorCount: 3,
      checkedAt: '2024-05-01T10:04:00Z',
      ignored: false,
      newCopyFrom: [],
      ...change,
    });
    const sent: string[] = [];
    let asked = '';
    vi.stubGlobal('confirm', (question: string) => {
      asked = question;
      return true;
    });
    override = (method, path, body) => {
      if (!path.startsWith('/api/libraries/1/health')) return undefined;
      sent.push(`${method} ${path} ${JSON.stringify(body ?? null)}`);
      if (method === 'POST' && path.endsWith('/files/2/regrab')) {
        return { status: 503, body: { error: { code: 'unavailable', message: 'sonarr could not be asked for a new copy (connection refused)' } } };
      }
      if (method === 'POST' && path.endsWith('/files/1/ignore')) return { status: 200, body: finding(1, { ignored: true }) };
      return {
        status: 200,
        body: {
          libraryId: 1,
          run: { depth: 'quick', all: false, scheduled: false, status: 'DONE', filesTotal: 3, filesDone: 3, startedAt: '2024-05-01T10:00:00Z', finishedAt: '2024-05-01T10:05:00Z' },
          counts: { ok: 1, damaged: 1, unreadable: 1 },
          files: [
            finding(1, { node: 'w1' }),
            finding(2, { verdict: 'unreadable', firstErrorSeconds: null, message: 'not media', errorCount: 0, newCopyFrom: [{ id: 4, name: 'tv', kind: 'sonarr' }] }),
            finding(3, { verdict: 'ok', message: null, firstErrorSeconds: null, errorCount: 0 }),
          ],
          total: 3,
          page: 1,
          pageSize: 100,
        },
      };
    };
    await mount('#/libraries');
    await vi.waitFor(() => expect(text()).toContain('Movies'));
    [...container().querySelectorAll('button')].find((b) => b.textContent === 'Health')!.click();
    const panel = await vi.waitFor(() => need(byLabel('Health of Movies')));
    await vi.waitFor(() => expect(panel.textContent).toContain('Quick check of 3 files finished'));
    expect(sent[0]).toBe('GET /api/libraries/1/health?page=1&pageSize=100 null');
    expect(panel.textContent).toContain('at 0:12.5: packet timestamps go backwards');
    expect(panel.textContent).toContain('3 errors');
    // Which node checked it, where the result says.
    expect(panel.textContent).toContain(', on w1');
    expect(panel.textContent).toContain('not media');
    // The ok file is no finding; only the file a Sonarr may hold offers a new copy.
    expect(panel.textContent).not.toContain('f3.mkv');
    expect(byLabel('Get a new copy of f1.mkv')).toBeNull();
    byLabel('Get a new copy of f2.mkv')!.click();
    await vi.waitFor(() => expect(byLabel('Result for f2.mkv')?.textContent).toContain('connection refused'));
    expect(asked).toContain('Sonarr “tv” will delete its record of the file');
    expect(sent).toContain('POST /api/libraries/1/health/files/2/regrab {"confirm":true}');

    byLabel('Check f1.mkv again')!.click();
    await vi.waitFor(() => expect(byLabel('Result for f1.mkv')?.textContent).toBe('Checking again…'));
    expect(sent).toContain('POST /api/libraries/1/health/files/1/recheck {}');
    byLabel('Ignore f1.mkv')!.click();
    await vi.waitFor(() => expect(sent).toContain('POST /api/libraries/1/health/files/1/ignore {"ignored":true}'));

    [...panel.querySelectorAll('button')].find((b) => b.textContent === 'Start check')!.click();
    await vi.waitFor(() => expect(sent).toContain('POST /api/libraries/1/health {"depth":"quick","all":false}'));
  });

  it("shows a viewer a library's health without its actions", async () => {
    override = (_method, path) => {
      if (path === '/api/auth/me') return { status: 200, body: { username: 'bob', role: 'viewer', apiKey: false } };
      if (!path.startsWith('/api/libraries/1/health')) return undefined;
      return {
        status: 200,
        body: {
          libraryId: 1,
          run: { depth: 'thorough', all: true, scheduled: false, status: 'RUNNING', filesTotal: 4, filesDone: 1, startedAt: '2024-05-01T10:00:00Z', finishedAt: null },
          counts: { ok: 0, damaged: 1, unreadable: 0 },
          files: [{ id: 1, path: '/media/movies/a.mkv', size: 1, depth: 'thorough', verdict: 'damaged', firstErrorSeconds: 1, message: 'bad', errorCount: 1, checkedAt: '2024-05-01T10:01:00Z', ignored: false, newCopyFrom: [{ id: 4, name: 'films', kind: 'radarr' }] }],
          total: 1,
          page: 1,
          pageSize: 100,
        },
      };
    };
    await mount('#/libraries');
    await vi.waitFor(() => expect(text()).toContain('Movies'));
    await vi.waitFor(() => expect(text()).not.toContain('Scan now'));
    [...container().querySelectorAll('button')].find((b) => b.textContent === 'Health')!.click();
    const panel = await vi.waitFor(() => need(byLabel('Health of Movies')));
    await vi.waitFor(() => expect(panel.textContent).toContain('Thorough check (every file) running: 1 of 4 files checked.'));
    expect(byLabel('Health check of Movies')?.getAttribute('aria-valuenow')).toBe('25');
    expect(panel.textContent).toContain('at 0:01.0: bad');
    expect(panel.querySelectorAll('button')).toHaveLength(0);
    expect(panel.querySelector('form')).toBeNull();
  });

  it('renders nodes, insights and settings', async () => {
    await mount('#/nodes');
    await vi.waitFor(() => expect(text()).toContain('NVIDIA RTX 4000'));
    expect(text()).toContain('1 / 2');
    const encoders = byLabel(`Encoders of ${nodes[0].name}`)!;
    expect([...encoders.querySelectorAll('li')].map((li) => li.textContent)).toEqual(nodes[0].encoders);
    expect(byLabel(`Hardware decoding of ${nodes[0].name}`)?.textContent).toBe('Decodes on nvidia');
    // The node's encoding window: closed now, its days and times, whose it is.
    expect(text()).toContain('Closed');
    expect(text()).toContain('Mon, Tue 22:00–07:00');
    expect(text()).toContain('Europe/Berlin · default · on close: pause at a segment');

    await show('#/insights');
    await vi.waitFor(() => expect(text()).toContain('Savings, last 30 days'));
    await vi.waitFor(() => expect(container().querySelectorAll('rect.chart-bar')).toHaveLength(2));
    expect(text()).toContain('75%'); // codec share computed from counts, and success rate
    const vmaf = [...container().querySelectorAll('[aria-labelledby="vmaf-title"] tbody tr')].map((row) => row.textContent);
    expect(vmaf).toEqual(['Movies295.5091.0025.0']);
    // Failures by category: a segment per category that failed jobs, its reasons beneath.
    expect(calls).toContain('GET /api/insights/failures?days=30');
    await vi.waitFor(() => expect(container().querySelectorAll('rect.chart-segment')).toHaveLength(2));
    const failures = [...container().querySelectorAll('[aria-labelledby="failure-categories-title"] tbody tr')].map((row) => row.textContent?.trim());
    expect(failures).toEqual(['Corrupted file375%', 'file validation failed375%', 'Transcoder errors125%', 'out of memory125%']);

    await show('#/settings');
    await vi.waitFor(() => expect(text()).toContain('Ada'));
    expect(text()).toContain('Supporter');
    expect(text()).toContain('New linked nodes can enroll');
    await vi.waitFor(() => expect(text()).toContain('POST /api/jobs/7/cancel'));
    const rows = [...container().querySelectorAll('[aria-labelledby="audit-title"] tbody tr')].map((row) => row.textContent);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toContain('bob');
    expect(rows[0]).toContain('Refused: role');
    expect(rows[1]).toContain('ada');
    expect(rows[1]).toContain('Done');
    expect(calls).toContain('GET /api/audit?page=1&pageSize=500');
    const key = container().querySelector('[aria-labelledby="keys-title"] tbody tr')!.textContent ?? '';
    expect(key).toContain('Integration');
    expect(key).toContain('ada');
    expect(text()).toContain('ck_AbCdEf…');
  });

  it('creates an API key and shows it once', async () => {
    let sent: unknown = null;
    override = (method, path, body) => {
      if (method === 'POST' && path === '/api/api-keys') sent = body;
      return undefined;
    };
    await mount('#/settings');
    await vi.waitFor(() => expect(text()).toContain('sonarr'));
    const name = container().querySelector<HTMLInputElement>('[aria-labelledby="keys-title"] input:not([type])')!;
    name.value = 'grafana';
    name.dispatchEvent(new Event('input', { bubbles: true }));
    const scope = container().querySelector<HTMLSelectElement>('[aria-labelledby="keys-title"] select')!;
    scope.value = 'admin';
    scope.dispatchEvent(new Event('change', { bubbles: true }));
    await vi.waitFor(() => expect(text()).toContain('whoever finds it owns this service'));
    scope.value = 'read';
    scope.dispatchEvent(new Event('change', { bubbles: true }));
    await vi.waitFor(() => expect(text()).not.toContain('whoever finds it owns this service'));
    await vi.waitFor(() => expect(container().querySelector<HTMLButtonElement>('[aria-labelledby="keys-title"] button[type="submit"]')!.disabled).toBe(false));
    container().querySelector<HTMLButtonElement>('[aria-labelledby="keys-title"] button[type="submit"]')!.click();
    await vi.waitFor(() => expect(byLabel('New API key')).not.toBeNull());
    expect((byLabel('New API key') as HTMLInputElement).value).toBe('ck_XyZ123secretsecretsecret');
    expect(sent).toEqual({ name: 'grafana', scope: 'read' });
  });

  it('lists notification targets with what waits and their last error, and says what a test did', async () => {
    await mount('#/settings');
    await vi.waitFor(() => expect(text()).toContain('phone'));
    const row = container().querySelector('[aria-labelledby="notifications-title"] tbody tr')!.textContent ?? '';
    expect(row).toContain('ntfy');
    expect(row).toContain('job.completed, job.failed');
    expect(row).toContain('Failed: answered 503 Service Unavailable');
    byLabel('Send a test to phone')!.click();
    await vi.waitFor(() => expect(text()).toContain('“phone” did not take the test: answered 503 Service Unavailable'));
    expect(calls).toContain('POST /api/notifications/3/test');
  });

  it('adds a notification target of the chosen kind with the chosen events', async () => {
    let sent: unknown = null;
    override = (method, path, body) => {
      if (method === 'POST' && path === '/api/notifications') sent = body;
      return undefined;
    };
    await mount('#/settings');
    await vi.waitFor(() => expect(text()).toContain('phone'));
    const form = container().querySelector('[aria-labelledby="notifications-title"] form')!;
    const fill = (input: HTMLInputElement | HTMLSelectElement, value: string, event = 'input') => {
      input.value = value;
      input.dispatchEvent(new Event(event, { bubbles: true }));
    };
    const inputs = form.querySelectorAll<HTMLInputElement>('input:not([type="checkbox"])');
    fill(inputs[0], 'family');
    fill(form.querySelector('select')!, 'gotify', 'change');
    fill(inputs[1], 'https://gotify.example.org');
    fill(inputs[2], 'AppToken');
    const boxes = [...form.querySelectorAll<HTMLInputElement>('input[type="checkbox"]')];
    boxes[1].click(); // job.failed off
    boxes[2].click(); // queue.drained on
    await vi.waitFor(() => expect(form.querySelector<HTMLButtonElement>('button[type="submit"]')!.disabled).toBe(false));
    form.querySelector<HTMLButtonElement>('button[type="submit"]')!.click();
    await vi.waitFor(() => expect(sent).not.toBeNull());
    expect(sent).toEqual({ name: 'family', kind: 'gotify', url: 'https://gotify.example.org', events: ['job.completed', 'queue.drained'], secret: 'AppToken' });
  });

  it('lists connections with their mappings, tests one and adds a Sonarr with a path mapping', async () => {
    let sent: unknown = null;
    override = (method, path, body) => {
      if (method === 'POST' && path === '/api/connections') sent = body;
      return undefined;
    };
    await mount('#/settings');
    await vi.waitFor(() => expect(container().querySelector('[aria-labelledby="connections-title"] tbody tr')).not.toBeNull());
    const row = container().querySelector('[aria-labelledby="connections-title"] tbody tr')!.textContent ?? '';
    expect(row).toContain('Plex');
    expect(row).toContain('/media/films → /data/films');
    byLabel('Test plex')!.click();
    await vi.waitFor(() => expect(text()).toContain('“plex” answered.'));
    expect(calls).toContain('POST /api/connections/9/test');

    const form = container().querySelector('[aria-labelledby="connections-title"] form')!;
    const fill = (input: HTMLInputElement | HTMLSelectElement, value: string, event = 'input') => {
      input.value = value;
      input.dispatchEvent(new Event(event, { bubbles: true }));
    };
    const inputs = form.querySelectorAll<HTMLInputElement>('input');
    fill(inputs[0], 'sonarr');
    fill(form.querySelector('select')!, 'sonarr', 'change');
    fill(inputs[1], 'http://sonarr:8989');
    fill(inputs[2], 'SonKey');
    fill(inputs[3], '/media/tv');
    fill(inputs[4], '/tv');
    await vi.waitFor(() => expect(form.querySelector<HTMLButtonElement>('button[type="submit"]')!.disabled).toBe(false));
    form.querySelector<HTMLButtonElement>('button[type="submit"]')!.click();
    await vi.waitFor(() => expect(sent).not.toBeNull());
    expect(sent).toEqual({ name: 'sonarr', kind: 'sonarr', url: 'http://sonarr:8989', apiKey: 'SonKey', pathMappings: [{ from: '/media/tv', to: '/tv' }] });
  });

  it("shows which libraries each node reaches, and a linked node's storage", async () => {
    const libraries = [
      { libraryId: 1, name: 'Movies', sees: true },
      { libraryId: 2, name: 'Shows', sees: false },
      { libraryId: 3, name: 'Music videos', sees: null },
    ];
    const linked = (id: number, name: string, sharedStorage: 'auto' | 'required', transfer: boolean): ClusterNode => ({
      ...nodes[0],
      id,
      name,
      role: 'linked',
      libraries,
      sharedStorage,
      transfer,
      workDirFreeBytes: 12 * 1024 ** 3,
    });
    override = (method, path) => {
      if (method === 'GET' && path.split('?')[0] === '/api/nodes') {
        const main = { ...nodes[0], libraries: libraries.map((l) => ({ ...l, sees: true })) };
        return { status: 200, body: [main, linked(2, 'laptop', 'auto', true), linked(3, 'nas-less', 'required', false)] };
      }
      return undefined;
    };
    await mount('#/nodes');
    const reach = (name: string) => [...(byLabel(`Libraries of ${name}`)?.querySelectorAll('li') ?? [])].map((li) => li.textContent);
    await vi.waitFor(() => expect(reach('laptop')).toHaveLength(3));
    expect(reach('gpu-1')).toEqual(['Movies: sees', 'Shows: sees', 'Music videos: sees']);
    expect(reach('laptop')).toEqual(['Movies: sees', 'Shows: by transfer', 'Music videos: not reported yet']);
    expect(reach('nas-less')).toEqual(['Movies: sees', 'Shows: not visible', 'Music videos: not reported yet']);
    expect(byLabel('Storage of gpu-1')).toBeNull();
    expect(byLabel('Storage of laptop')?.textContent).toBe('Shared storage: auto · WORK_DIR 12.0 GiB free');
    expect(byLabel('Storage of nas-less')?.textContent).toContain('Shared storage: required');
  });

  it('revokes a linked node and then offers to remove it', async () => {
    let revoked = false;
    const worker: ClusterNode = { ...nodes[0], id: 2, name: 'worker-1', role: 'linked', gpu: null, identity: 'abc', hasCredential: true };
    override = (method, path) => {
      const url = path.split('?')[0];
      if (method === 'GET' && url === '/api/nodes') return { status: 200, body: [nodes[0], { ...worker, revoked, status: revoked ? 'OFFLINE' : 'ONLINE' }] };
      if (method === 'POST' && url === '/api/nodes/2/revoke') {
        revoked = true;
        return { status: 200, body: { requeued: 1 } };
      }
      return undefined;
    };
    vi.stubGlobal('confirm', () => true);
    await mount('#/nodes');
    await vi.waitFor(() => expect(text()).toContain('worker-1'));
    expect(byLabel('Revoke gpu-1')).toBeNull();
    expect(byLabel('Remove worker-1')).toBeNull();
    byLabel('Revoke worker-1')!.click();
    await vi.waitFor(() => expect(text()).toContain('worker-1 revoked; 1 job(s) back in the queue.'));
    expect(calls).toContain('POST /api/nodes/2/revoke');
    await vi.waitFor(() => expect(byLabel('Remove worker-1')).not.toBeNull());
    expect(byLabel('Revoke worker-1')).toBeNull();
    expect(text()).toContain('Revoked');
  });

  it('closes the phone menu when a link is followed, even to the page shown', async () => {
    await mount('#/jobs');
    const menu = () => container().querySelector<HTMLButtonElement>('[aria-controls="main-nav"]')!;
    await vi.waitFor(() => expect(text()).toContain('movie.mkv'));
    const link = (label: string) => [...container().querySelectorAll<HTMLAnchorElement>('#main-nav a')].find((a) => a.textContent === label)!;
    for (const label of ['Jobs', 'Nodes']) {
      menu().click();
      await vi.waitFor(() => expect(menu().getAttribute('aria-expanded')).toBe('true'));
      link(label).click();
      await vi.waitFor(() => expect(menu().getAttribute('aria-expanded')).toBe('false'));
    }
  });

  it('sends the user back to the login page on a 401', async () => {
    override = () => ({ status: 401, body: { error: { code: 'unauthorized', message: 'Token expired' } } });
    await mount('#/nodes');
    await vi.waitFor(() => expect(text()).toContain('Sign in'));
    expect(text()).toContain('Your session ended');
    expect(localStorage.getItem('token')).toBeNull();
  });

  it('shows a viewer no actions, and only their own password in the settings', async () => {
    override = (_method, path) => (path === '/api/auth/me' ? { status: 200, body: { username: 'bob', role: 'viewer', apiKey: false } } : undefined);
    await mount('#/jobs');
    await vi.waitFor(() => expect(text()).toContain('movie.mkv'));
    await vi.waitFor(() => expect(text()).not.toContain('Pause all'));
    expect(container().querySelector('[aria-label^="Pause "]')).toBeNull();
    await show('#/settings');
    await vi.waitFor(() => expect(text()).toContain('Your password'));
    expect(text()).not.toContain('Licence');
    expect(calls).not.toContain('GET /api/settings');
  });

  it('edits a notification target in place: a refused URL beside its field, the secret kept unless typed', async () => {
    const sent: unknown[] = [];
    override = (method, path, body) => {
      if (method !== 'PUT' || path !== '/api/notifications/3') return undefined;
      sent.push(body);
      if (sent.length === 1) return { status: 422, body: { error: { code: 'validation_failed', message: "a ntfy target's URL starts with http:// or https://" } } };
      return { status: 200, body: { id: 3, name: 'phone', kind: 'ntfy', url: 'https://ntfy.sh/films2', events: ['job.completed'], hasSecret: true, secretCleared: false, headers: {}, enabled: true, createdAt: '2024-05-01T10:00:00Z', waiting: 0 } };
    };
    await mount('#/settings');
    await vi.waitFor(() => expect(byLabel('Edit phone')).not.toBeNull());
    byLabel('Edit phone')!.click();
    const form = await vi.waitFor(() => need(container().querySelector<HTMLFormElement>('form[aria-label="Edit phone"]')));
    const url = [...form.querySelectorAll<HTMLInputElement>('input')].find((input) => input.value === 'https://ntfy.sh/films')!;
    url.value = 'ntfy.sh/films2';
    url.dispatchEvent(new Event('input', { bubbles: true }));
    form.querySelector<HTMLButtonElement>('button[type="submit"]')!.click();
    await vi.waitFor(() => expect(url.getAttribute('aria-invalid')).toBe('true'));
    const message = document.getElementById(url.getAttribute('aria-describedby')!)!;
    expect(message.textContent).toBe("a ntfy target's URL starts with http:// or https://");
    expect(url.closest('label')!.contains(message)).toBe(true);
    url.value = 'https://ntfy.sh/films2';
    url.dispatchEvent(new Event('input', { bubbles: true }));
    await settle();
    form.querySelector<HTMLButtonElement>('button[type="submit"]')!.click();
    await vi.waitFor(() => expect(text()).toContain('“phone” saved.'));
    // No secret typed: none is sent, so the stored one is kept.
    expect(sent[1]).toEqual({ name: 'phone', kind: 'ntfy', url: 'https://ntfy.sh/films2', events: ['job.completed', 'job.failed'], enabled: true });
  });

  it('adds a user with a taken name shown beside the field, and changes a role', async () => {
    const sent: unknown[] = [];
    override = (method, path, body) => {
      if (method === 'POST' && path === '/api/users') {
        sent.push(body);
        return sent.length === 1
          ? { status: 409, body: { error: { code: 'conflict', message: 'user "bob" exists' } } }
          : { status: 201, body: { id: 3, username: 'cy', role: 'operator', createdAt: '2024-05-03T10:00:00Z' } };
      }
      if (method === 'PUT' && path === '/api/users/bob/role') {
        sent.push(body);
        return { status: 204 };
      }
      return undefined;
    };
    await mount('#/settings');
    const role = (await vi.waitFor(() => need(byLabel('Role of bob')))) as HTMLSelectElement;
    expect(role.value).toBe('viewer');
    const form = container().querySelector<HTMLFormElement>('form[aria-label="Add a user"]')!;
    const [name, password] = [...form.querySelectorAll<HTMLInputElement>('input')];
    const fill = (input: HTMLInputElement | HTMLSelectElement, value: string, event = 'input') => {
      input.value = value;
      input.dispatchEvent(new Event(event, { bubbles: true }));
    };
    fill(name, 'bob');
    fill(password, 'correct horse battery');
    fill(form.querySelector('select')!, 'operator', 'change');
    await vi.waitFor(() => expect(form.querySelector<HTMLButtonElement>('button[type="submit"]')!.disabled).toBe(false));
    form.querySelector<HTMLButtonElement>('button[type="submit"]')!.click();
    await vi.waitFor(() => expect(name.getAttribute('aria-invalid')).toBe('true'));
    expect(document.getElementById(name.getAttribute('aria-describedby')!)!.textContent).toBe('user "bob" exists');
    fill(name, 'cy');
    await settle();
    form.querySelector<HTMLButtonElement>('button[type="submit"]')!.click();
    await vi.waitFor(() => expect(text()).toContain('cy added as operator.'));
    expect(sent[1]).toEqual({ username: 'cy', password: 'correct horse battery', role: 'operator' });

    fill(byLabel('Role of bob') as HTMLSelectElement, 'operator', 'change');
    await vi.waitFor(() => expect(text()).toContain('bob is now operator; they sign in again.'));
    expect(sent[2]).toEqual({ role: 'operator' });
  });

  it("raises a waiting job's priority from the list, and shows a finished one's number only", async () => {
    const queued = job(4, { fileName: 'later.mkv', status: 'QUEUED', priority: 2 });
    override = (method, path) => {
      const url = path.split('?')[0];
      if (method === 'GET' && url === '/api/jobs') return { status: 200, body: { items: [queued, failed], total: 2, page: 1, pageSize: 50 } };
      if (method === 'POST' && url === '/api/jobs/4/priority') return { status: 200, body: { ...queued, priority: 3 } };
      return undefined;
    };
    await mount('#/jobs');
    await vi.waitFor(() => expect(byLabel('Raise the priority of later.mkv')).not.toBeNull());
    expect(byLabel('Raise the priority of broken.avi')).toBeNull();
    byLabel('Raise the priority of later.mkv')!.click();
    await vi.waitFor(() => expect(byLabel('Priority of later.mkv')!.textContent).toContain('3'));
    expect(calls).toContain('POST /api/jobs/4/priority');
  });

  it("paints hours on the default schedule's week grid and saves them as windows", async () => {
    let sent: unknown = null;
    override = (method, path, body) => {
      if (method !== 'PUT' || path !== '/api/schedule') return undefined;
      sent = body;
      return { status: 200, body: { ...(body as object), open: false, followsDefault: false } };
    };
    await mount('#/settings');
    const grid = await vi.waitFor(() => need(byLabel('Default schedule: hours open for encoding')));
    const cell = (label: string) => grid.querySelector<HTMLButtonElement>(`[aria-label="${label}"]`)!;
    // A pointer press paints the cell it starts on; Enter or Space (a click without a pointer) toggles one.
    cell('Sat 10:00').dispatchEvent(new PointerEvent('pointerdown', { bubbles: true, button: 0 }));
    window.dispatchEvent(new PointerEvent('pointerup'));
    cell('Sat 11:00').click();
    cell('Sun 11:00').click();
    await vi.waitFor(() => expect(cell('Sun 11:00').getAttribute('aria-pressed')).toBe('true'));
    expect(text()).toContain('3 hours a week');
    const form = container().querySelector<HTMLFormElement>('form[aria-label="Default schedule"]')!;
    form.querySelector<HTMLInputElement>('input')!.value = 'Europe/Berlin';
    form.querySelector<HTMLInputElement>('input')!.dispatchEvent(new Event('input', { bubbles: true }));
    await settle();
    form.querySelector<HTMLButtonElement>('button[type="submit"]')!.click();
    await vi.waitFor(() => expect(sent).not.toBeNull());
    expect(sent).toEqual({
      timeZone: 'Europe/Berlin',
      onClose: 'pause',
      windows: [
        { days: ['sat'], start: '10:00', end: '12:00' },
        { days: ['sun'], start: '11:00', end: '12:00' },
      ],
    });
    await vi.waitFor(() => expect(text()).toContain('Schedule saved.'));
  });

  it('saves the Sonarr and Radarr path mappings', async () => {
    let sent: unknown = null;
    override = (method, path, body) => {
      if (method !== 'PUT' || path !== '/api/settings/arr') return undefined;
      sent = body;
      return { status: 200, body };
    };
    await mount('#/settings');
    const form = await vi.waitFor(() => need(container().querySelector<HTMLFormElement>('form[aria-label="Sonarr and Radarr path mappings"]')));
    await vi.waitFor(() => expect(form.querySelector<HTMLInputElement>('input')!.value).toBe('/tv'));
    [...form.querySelectorAll<HTMLButtonElement>('button')].find((b) => b.textContent === 'Add a mapping')!.click();
    await vi.waitFor(() => expect(form.querySelectorAll('input')).toHaveLength(4));
    const inputs = form.querySelectorAll<HTMLInputElement>('input');
    inputs[2].value = '/movies';
    inputs[2].dispatchEvent(new Event('input', { bubbles: true }));
    inputs[3].value = '/media/movies';
    inputs[3].dispatchEvent(new Event('input', { bubbles: true }));
    await settle();
    form.querySelector<HTMLButtonElement>('button[type="submit"]')!.click();
    await vi.waitFor(() => expect(sent).not.toBeNull());
    expect(sent).toEqual({ pathMappings: [{ from: '/tv', to: '/media/tv' }, { from: '/movies', to: '/media/movies' }] });
  });

  it("shows a viewer a node's schedule without a way to change it, and priorities as numbers", async () => {
    const queued = job(4, { fileName: 'later.mkv', status: 'QUEUED', priority: 2 });
    override = (method, path) => {
      const url = path.split('?')[0];
      if (url === '/api/auth/me') return { status: 200, body: { username: 'bob', role: 'viewer', apiKey: false } };
      if (method === 'GET' && url === '/api/jobs') return { status: 200, body: { items: [queued], total: 1, page: 1, pageSize: 50 } };
      return undefined;
    };
    await mount('#/nodes');
    await vi.waitFor(() => expect(byLabel('Show the schedule of gpu-1')).not.toBeNull());
    expect(byLabel('Edit the schedule of gpu-1')).toBeNull();
    byLabel('Show the schedule of gpu-1')!.click();
    const grid = await vi.waitFor(() => need(byLabel('Schedule of gpu-1: hours open for encoding')));
    // Mon and Tue 22:00 to 07:00 the next morning, in the node's window.
    expect(grid.querySelector<HTMLButtonElement>('[aria-label="Tue 03:00"]')!.getAttribute('aria-pressed')).toBe('true');
    expect([...grid.querySelectorAll<HTMLButtonElement>('button')].every((cell) => cell.disabled)).toBe(true);
    expect(text()).not.toContain('Save schedule');

    await show('#/jobs');
    await vi.waitFor(() => expect(text()).toContain('later.mkv'));
    expect(byLabel('Raise the priority of later.mkv')).toBeNull();
  });

  it('edits stream rules with the summary following the typing, and shows the server refusal beside its field', async () => {
    const sent: { streamRules?: Library['streamRules'] }[] = [];
    override = (method, path, body) => {
      if (method !== 'PUT' || path !== '/api/libraries/1') return undefined;
      sent.push(body as { streamRules?: Library['streamRules'] });
      const rules = (body as { streamRules: Library['streamRules'] }).streamRules;
      if (rules.maxHeight === 100) {
        return { status: 422, body: { error: { code: 'validation_failed', message: 'streamRules.maxHeight: must be 144 to 4320, not 100' } } };
      }
      return { status: 200, body: { ...library, ...(body as object) } };
    };
    await mount('#/libraries');
    await vi.waitFor(() => expect(text()).toContain('Movies'));
    [...container().querySelectorAll('button')].find((b) => b.textContent === 'Edit')!.click();
    const form = await vi.waitFor(() => need(container().querySelector<HTMLFormElement>('form.form')));
    const summary = () => need(byLabel('What the rules do')).textContent;
    expect(summary()).toBe('Keeps every audio and subtitle track as it is.');
    const input = (label: string) =>
      need([...form.querySelectorAll<HTMLLabelElement>('label')].find((l) => l.textContent?.startsWith(label))?.querySelector<HTMLInputElement>('input, select'));
    const type = (label: string, value: string) => {
      const field = input(label);
      field.value = value;
      field.dispatchEvent(new Event(field.tagName === 'SELECT' ? 'change' : 'input', { bubbles: true }));
    };
    type('Audio languages to keep', 'eng, ');
    await vi.waitFor(() => expect(summary()).toBe('Keeps English audio.'));
    // What is typed stays as typed while the next code is written.
    expect(input('Audio languages to keep').value).toBe('eng, ');
    type('Audio languages to keep', 'eng, deu');
    input('Drop commentary').click();
    type('Convert audio to', 'aac');
    await vi.waitFor(() => expect(input('Codecs converted').value).toBe('dts, truehd, flac, pcm'));
    input('Add a stereo track').click();
    type('Subtitle languages to keep', 'eng');
    type('Largest height', '100');
    type('Smaller than (MB)', '500');
    await vi.waitFor(() =>
      expect(summary()).toBe(
        'Keeps English and German audio, drops commentary and described tracks, converts DTS, TrueHD, FLAC and PCM to AAC (128 kb/s per channel), adds a stereo track, keeps English subtitles, scales above 100p down, skips files under 500 MB.',
      ),
    );
    [...form.querySelectorAll('button')].find((b) => b.textContent === 'Save changes')!.click();
    const height = input('Largest height');
    await vi.waitFor(() => expect(height.getAttribute('aria-invalid')).toBe('true'));
    expect(container().querySelector(`[id="${height.getAttribute('aria-describedby')}"]`)!.textContent).toBe(
      'streamRules.maxHeight: must be 144 to 4320, not 100',
    );
    type('Largest height', '720');
    await settle();
    [...form.querySelectorAll('button')].find((b) => b.textContent === 'Save changes')!.click();
    await vi.waitFor(() => expect(text()).toContain('Saved library'));
    expect(sent.at(-1)?.streamRules).toMatchObject({
      audioLanguages: ['eng', 'deu'],
      dropCommentary: true,
      audioCodec: 'aac',
      audioTranscode: ['dts', 'truehd', 'flac', 'pcm'],
      audioBitrateKbps: null,
      addStereo: true,
      subtitleLanguages: ['eng'],
      maxHeight: 720,
      minSizeMb: 500,
      skipPaths: [],
    });
    // Many steps, each rendered: more than the default 5 s on a loaded machine.
  }, 20_000);

  it("shows a job's stream plan, and says when it is not made yet", async () => {
    override = (method, path) =>
      method === 'GET' && path === '/api/jobs/2/plan'
        ? {
            status: 200,
            body: {
              streams: [
                { sourceIndex: 0, fate: 'encode', kind: 'video', codec: 'hevc', language: null, title: null, dispositions: ['default'], channels: null, bitRate: null, rule: 'video is encoded' },
                { sourceIndex: 1, fate: 'convert', kind: 'audio', codec: 'aac', language: 'eng', title: null, dispositions: [], channels: 6, bitRate: 768000, rule: 'audioTranscode lists dts' },
                { sourceIndex: 2, fate: 'drop', kind: 'audio', codec: 'aac', language: 'fra', title: null, dispositions: [], channels: 2, bitRate: null, rule: 'audioLanguages keeps eng, deu' },
              ],
              container: 'mkv',
              videoSize: { width: 1280, height: 720 },
              notes: ['every subtitle kept'],
            },
          }
        : undefined;
    await mount('#/jobs/2');
    const table = await vi.waitFor(() =>
      need([...container().querySelectorAll('table')].find((t) => t.caption?.textContent === 'Streams of the plan')),
    );
    const rows = [...table.querySelectorAll('tbody tr')].map((row) => [...row.querySelectorAll('td')].map((cell) => cell.textContent));
    expect(rows).toEqual([
      ['#0', 'Video', 'hevcdefault', '—', 'Encode', 'video is encoded'],
      ['#1', 'Audio', 'aac, 5.1, 768 kb/s', 'English (eng)', 'Convert', 'audioTranscode lists dts'],
      ['#2', 'Audio', 'aac, stereo', 'French (fra)', 'Drop', 'audioLanguages keeps eng, deu'],
    ]);
    expect(text()).toContain('1280 × 720 (scaled)');
    expect(text()).toContain('every subtitle kept');

    // Before analysis the server has no plan to show (409).
    render(null, container());
    override = (method, path) =>
      method === 'GET' && path === '/api/jobs/2/plan'
        ? { status: 409, body: { error: { code: 'conflict', message: 'job 2 is not analysed yet' } } }
        : undefined;
    await mount('#/jobs/2');
    await vi.waitFor(() => expect(text()).toContain('The plan is made when the file is analysed.'));
  });
});
