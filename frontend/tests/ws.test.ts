import { describe, expect, it } from 'vitest';
import {
  BACKOFF_MAX_MS,
  FELL_BEHIND_CLOSE_CODE,
  LiveConnection,
  backoffDelay,
  isResyncMessage,
  liveUrl,
  parseLiveMessage,
  type ConnectionState,
  type SocketLike,
} from '../src/ws';
import type { LiveMessage } from '../src/types';

describe('backoffDelay', () => {
  it('doubles from 1 s up to a 30 s cap without jitter', () => {
    const schedule = Array.from({ length: 8 }, (_, attempt) => backoffDelay(attempt, () => 0));
    expect(schedule).toEqual([1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
  });

  it('takes at most 20 % off each step as jitter', () => {
    const schedule = Array.from({ length: 7 }, (_, attempt) => backoffDelay(attempt, () => 1));
    expect(schedule).toEqual([800, 1600, 3200, 6400, 12800, 24000, 24000]);
  });

  it('stays within [0.8 x base, base] for any random value and never exceeds the cap', () => {
    for (let attempt = 0; attempt < 40; attempt += 1) {
      const base = Math.min(BACKOFF_MAX_MS, 1000 * 2 ** attempt);
      for (const r of [0, 0.1, 0.5, 0.99, 1]) {
        const delay = backoffDelay(attempt, () => r);
        expect(delay).toBeGreaterThanOrEqual(base * 0.8);
        expect(delay).toBeLessThanOrEqual(base);
      }
    }
  });
});

describe('liveUrl and parseLiveMessage', () => {
  it('uses ws: or wss: by the page protocol, with the token as a query parameter', () => {
    expect(liveUrl({ protocol: 'http:', host: 'nas.local:4210' }, 'a.b.c')).toBe('ws://nas.local:4210/ws?token=a.b.c');
    expect(liveUrl({ protocol: 'https:', host: 'media.example.org' }, 'x+y/z')).toBe('wss://media.example.org/ws?token=x%2By%2Fz');
  });

  it('parses job messages and rejects anything else', () => {
    expect(parseLiveMessage('{"type":"progress","jobId":4,"progress":12,"status":"ENCODING"}')).toEqual({
      type: 'progress',
      jobId: 4,
      progress: 12,
      status: 'ENCODING',
    });
    expect(parseLiveMessage('{"type":"status","jobId":"17","status":"FAILED"}')?.jobId).toBe(17);
    expect(parseLiveMessage('not json')).toBeNull();
    expect(parseLiveMessage('{"jobId":4}')).toBeNull();
    expect(parseLiveMessage('{"type":"progress"}')).toBeNull();
    expect(parseLiveMessage(new ArrayBuffer(4))).toBeNull();
    expect(parseLiveMessage('{"type":"resync"}')).toBeNull();
  });

  it('recognizes the resync message and nothing else as one', () => {
    expect(isResyncMessage('{"type":"resync"}')).toBe(true);
    expect(isResyncMessage('{"type":"status","jobId":1,"fileName":"resync.mkv"}')).toBe(false);
    expect(isResyncMessage('resync')).toBe(false);
    expect(isResyncMessage(new ArrayBuffer(4))).toBe(false);
  });
});

class FakeSocket implements SocketLike {
  onopen: SocketLike['onopen'] = null;
  onclose: SocketLike['onclose'] = null;
  onerror: SocketLike['onerror'] = null;
  onmessage: SocketLike['onmessage'] = null;
  closed = false;
  constructor(readonly url: string) {}
  open() {
    this.onopen?.({});
  }
  receive(data: unknown) {
    this.onmessage?.({ data });
  }
  drop(code?: number) {
    this.onclose?.(code === undefined ? {} : { code });
  }
  close() {
    this.closed = true;
  }
}

function harness(options: { online?: () => boolean; token?: () => string | null } = {}) {
  const sockets: FakeSocket[] = [];
  const timers: { callback: () => void; ms: number; cleared: boolean }[] = [];
  const states: ConnectionState[] = [];
  const messages: LiveMessage[] = [];
  let resyncs = 0;
  const connection = new LiveConnection({
    url: () => {
      const token = options.token ? options.token() : 'tok';
      return token ? `ws://host/ws?token=${token}` : null;
    },
    createSocket: (url) => {
      const socket = new FakeSocket(url);
      sockets.push(socket);
      return socket;
    },
    random: () => 0,
    isOnline: options.online ?? (() => true),
    setTimer: (callback, ms) => {
      const timer = { callback, ms, cleared: false };
      timers.push(timer);
      return timer;
    },
    clearTimer: (handle) => {
      (handle as { cleared: boolean }).cleared = true;
    },
  });
  connection.onState((state) => states.push(state));
  connection.onMessage((message) => messages.push(message));
  connection.onResync(() => {
    resyncs += 1;
  });
  const fire = () => {
    const timer = timers.filter((t) => !t.cleared).at(-1);
    if (!timer) throw new Error('no pending timer');
    timer.cleared = true;
    timer.callback();
  };
  return { connection, sockets, timers, states, messages, fire, resyncs: () => resyncs };
}

describe('LiveConnection', () => {
  it('connects, reports its state and dispatches parsed messages', () => {
    const h = harness();
    h.connection.start();
    expect(h.sockets[0].url).toBe('ws://host/ws?token=tok');
    expect(h.connection.state).toBe('connecting');
    h.sockets[0].open();
    expect(h.connection.state).toBe('connected');
    h.sockets[0].receive('{"type":"snapshot","jobId":1,"progress":5,"status":"ENCODING"}');
    h.sockets[0].receive('garbage');
    expect(h.messages).toEqual([{ type: 'snapshot', jobId: 1, progress: 5, status: 'ENCODING' }]);
    expect(h.resyncs()).toBe(0); // the first connection needs no re-sync
  });

  it('reconnects with the backoff schedule and re-syncs once it is back', () => {
    const h = harness();
    h.connection.start();
    h.sockets[0].open();
    h.sockets[0].drop();
    expect(h.connection.state).toBe('reconnecting');
    expect(h.timers.map((t) => t.ms)).toEqual([1000]);

    // Three failed attempts: 2 s, 4 s, 8 s.
    for (let i = 1; i <= 3; i += 1) {
      h.fire();
      expect(h.sockets).toHaveLength(i + 1);
      h.sockets[i].drop();
    }
    expect(h.timers.map((t) => t.ms)).toEqual([1000, 2000, 4000, 8000]);

    h.fire();
    h.sockets[4].open();
    expect(h.connection.state).toBe('connected');
    expect(h.resyncs()).toBe(1);

    // A later drop starts again from 1 s.
    h.sockets[4].drop();
    expect(h.timers.at(-1)?.ms).toBe(1000);
  });

  it('re-syncs after a first connection that only succeeded on retry', () => {
    const h = harness();
    h.connection.start();
    h.sockets[0].drop();
    h.fire();
    h.sockets[1].open();
    expect(h.resyncs()).toBe(1);
  });

  it('stops for good: no reconnect after stop, state offline', () => {
    const h = harness();
    h.connection.start();
    h.sockets[0].open();
    h.connection.stop();
    expect(h.sockets[0].closed).toBe(true);
    expect(h.connection.state).toBe('offline');
    h.sockets[0].drop();
    expect(h.timers).toHaveLength(0);
  });

  it('waits while the browser is offline and reconnects at once when it is back', () => {
    let online = false;
    const h = harness({ online: () => online });
    h.connection.start();
    expect(h.connection.state).toBe('offline');
    expect(h.sockets).toHaveLength(0);
    online = true;
    h.connection.setOnline(true);
    expect(h.sockets).toHaveLength(1);
    h.sockets[0].open();
    expect(h.connection.state).toBe('connected');
    expect(h.resyncs()).toBe(1);
  });

  it('stays offline without a token', () => {
    const h = harness({ token: () => null });
    h.connection.start();
    expect(h.sockets).toHaveLength(0);
    expect(h.connection.state).toBe('offline');
  });

  it('uses the current token on each reconnect', () => {
    let token = 'first';
    const h = harness({ token: () => token });
    h.connection.start();
    h.sockets[0].open();
    token = 'second';
    h.sockets[0].drop();
    h.fire();
    expect(h.sockets[1].url).toBe('ws://host/ws?token=second');
  });

  it('on a resync message drops live state (re-syncs) and then applies the snapshot that follows', () => {
    const h = harness();
    h.connection.start();
    h.sockets[0].open();
    h.sockets[0].receive('{"type":"status","jobId":1,"progress":5,"status":"ENCODING"}');
    h.sockets[0].receive('{"type":"resync"}');
    expect(h.resyncs()).toBe(1);
    h.sockets[0].receive('{"type":"snapshot","jobId":2,"progress":7,"status":"ENCODING"}');
    expect(h.messages.map((m) => [m.type, m.jobId])).toEqual([
      ['status', 1],
      ['snapshot', 2],
    ]);
    expect(h.connection.state).toBe('connected');
    expect(h.sockets[0].closed).toBe(false);
  });

  it('reconnects after the fell-behind close code with a growing backoff, then re-syncs', () => {
    const h = harness();
    h.connection.start();
    h.sockets[0].open();
    // Closed for falling behind three times in a row: 1 s, 2 s, 4 s, each re-syncing.
    for (let i = 0; i < 3; i += 1) {
      h.sockets[i].drop(FELL_BEHIND_CLOSE_CODE);
      expect(h.connection.state).toBe('reconnecting');
      expect(h.timers.at(-1)?.ms).toBe(1000 * 2 ** i);
      h.fire();
      h.sockets[i + 1].open();
      expect(h.resyncs()).toBe(i + 1);
    }
    // Any other close starts again from 1 s, and so does the next fall behind after it.
    h.sockets[3].drop(1006);
    expect(h.timers.at(-1)?.ms).toBe(1000);
    h.fire();
    h.sockets[4].open();
    h.sockets[4].drop(FELL_BEHIND_CLOSE_CODE);
    expect(h.timers.at(-1)?.ms).toBe(1000);
  });
});
