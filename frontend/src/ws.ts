// The live connection to /ws: JSON job messages, automatic reconnect with backoff, re-sync.
import type { LiveMessage } from './types';

/**
 * Close code of a client that fell behind the feed twice (the server's `CLOSE_TOO_SLOW`):
 * reconnect with a backoff that grows while it keeps happening, then re-sync.
 */
export const FELL_BEHIND_CLOSE_CODE = 4008;

export type ConnectionState = 'connecting' | 'connected' | 'reconnecting' | 'offline';

export const BACKOFF_BASE_MS = 1_000;
export const BACKOFF_MAX_MS = 30_000;
/** Each delay is drawn from [base * (1 - JITTER), base], so clients that dropped together spread out. */
export const BACKOFF_JITTER = 0.2;

/** Delay before reconnect attempt `attempt` (0-based): 1 s, 2 s, 4 s, ... capped at 30 s, minus jitter. */
export function backoffDelay(attempt: number, random: () => number = Math.random): number {
  const exponent = Math.max(0, Math.min(attempt, 30));
  const base = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** exponent);
  const r = Math.min(Math.max(random(), 0), 1);
  return Math.round(base * (1 - BACKOFF_JITTER * r));
}

/** ws: or wss: by the page's protocol, same host, token as query parameter. */
export function liveUrl(location: { protocol: string; host: string }, token: string): string {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  return `${scheme}//${location.host}/ws?token=${encodeURIComponent(token)}`;
}

/** Parse a text frame; anything that is not a job message (no numeric jobId or no type) is null. */
export function parseLiveMessage(data: unknown): LiveMessage | null {
  if (typeof data !== 'string') return null;
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const message = value as Record<string, unknown>;
  if (typeof message.type !== 'string') return null;
  if (typeof message.jobId === 'string' && /^\d+$/.test(message.jobId)) message.jobId = Number(message.jobId);
  if (typeof message.jobId !== 'number') return null;
  return message as unknown as LiveMessage;
}

/** Whether a text frame is the server's `{"type":"resync"}`: drop live state, a snapshot follows. */
export function isResyncMessage(data: unknown): boolean {
  if (typeof data !== 'string' || !data.includes('resync')) return false;
  try {
    const value: unknown = JSON.parse(data);
    return typeof value === 'object' && value !== null && (value as { type?: unknown }).type === 'resync';
  } catch {
    return false;
  }
}

/** The close code a close event carries, if any. */
function closeCode(event: unknown): number | null {
  const code = typeof event === 'object' && event !== null ? (event as { code?: unknown }).code : undefined;
  return typeof code === 'number' ? code : null;
}

/** The part of the browser WebSocket the connection uses (a fake in tests). */
export interface SocketLike {
  onopen: ((event: unknown) => void) | null;
  onclose: ((event: unknown) => void) | null;
  onerror: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  close(code?: number, reason?: string): void;
}

export interface LiveOptions {
  /** The URL to connect to, or null when there is no token (then it stays offline). */
  url: () => string | null;
  createSocket?: (url: string) => SocketLike;
  random?: () => number;
  isOnline?: () => boolean;
  setTimer?: (callback: () => void, ms: number) => unknown;
  clearTimer?: (handle: unknown) => void;
}

type Listener<T> = (value: T) => void;

export class LiveConnection {
  private readonly options: Required<LiveOptions>;
  private socket: SocketLike | null = null;
  private timer: unknown = null;
  private attempt = 0;
  /** Closes for falling behind in a row: each waits longer before reconnecting. */
  private fellBehind = 0;
  private running = false;
  /** Set once a connection dropped or failed; the next open then asks pages to re-sync. */
  private missedUpdates = false;
  private currentState: ConnectionState = 'offline';
  /** When the next attempt is due (ms since epoch), while reconnecting. */
  retryAt: number | null = null;

  private readonly messageListeners = new Set<Listener<LiveMessage>>();
  private readonly stateListeners = new Set<Listener<ConnectionState>>();
  private readonly resyncListeners = new Set<Listener<void>>();

  constructor(options: LiveOptions) {
    this.options = {
      createSocket: (url) => new WebSocket(url) as unknown as SocketLike,
      random: Math.random,
      isOnline: () => typeof navigator === 'undefined' || navigator.onLine !== false,
      setTimer: (callback, ms) => setTimeout(callback, ms),
      clearTimer: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
      ...options,
    };
  }

  get state(): ConnectionState {
    return this.currentState;
  }

  onMessage(listener: Listener<LiveMessage>): () => void {
    this.messageListeners.add(listener);
    return () => this.messageListeners.delete(listener);
  }

  onState(listener: Listener<ConnectionState>): () => void {
    this.stateListeners.add(listener);
    return () => this.stateListeners.delete(listener);
  }

  /**
   * Called after a reconnect, and when the server says `resync` (this client fell behind):
   * live messages were missed, so drop live state and re-fetch; the `snapshot` messages
   * that follow a resync arrive through onMessage as usual.
   */
  onResync(listener: Listener<void>): () => void {
    this.resyncListeners.add(listener);
    return () => this.resyncListeners.delete(listener);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.attempt = 0;
    this.fellBehind = 0;
    this.missedUpdates = false;
    this.connect();
  }

  stop(): void {
    this.running = false;
    this.cancelTimer();
    this.closeSocket();
    this.setState('offline');
  }

  /** Wire to the browser's online/offline events. */
  setOnline(online: boolean): void {
    if (!this.running) return;
    if (!online) {
      this.cancelTimer();
      this.closeSocket();
      this.missedUpdates = true;
      this.setState('offline');
    } else if (this.socket === null) {
      this.cancelTimer();
      this.attempt = 0;
      this.connect();
    }
  }

  private connect(): void {
    this.retryAt = null;
    if (!this.running) return;
    if (!this.options.isOnline()) {
      this.missedUpdates = true;
      this.setState('offline');
      return;
    }
    const url = this.options.url();
    if (url === null) {
      this.setState('offline');
      return;
    }
    this.setState(this.missedUpdates ? 'reconnecting' : 'connecting');
    let socket: SocketLike;
    try {
      socket = this.options.createSocket(url);
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.socket = socket;
    socket.onopen = () => {
      if (this.socket !== socket) return;
      this.attempt = 0;
      this.setState('connected');
      if (this.missedUpdates) {
        this.missedUpdates = false;
        for (const listener of this.resyncListeners) listener();
      }
    };
    socket.onmessage = (event) => {
      if (this.socket !== socket) return;
      if (isResyncMessage(event.data)) {
        for (const listener of this.resyncListeners) listener();
        return;
      }
      const message = parseLiveMessage(event.data);
      if (!message) return;
      for (const listener of this.messageListeners) listener(message);
    };
    socket.onerror = () => {
      // A close event always follows; reconnecting is handled there.
    };
    socket.onclose = (event) => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.missedUpdates = true;
      if (closeCode(event) === FELL_BEHIND_CLOSE_CODE) {
        // Reconnecting at once would likely fall behind again: back off, longer each time.
        this.attempt = this.fellBehind;
        this.fellBehind += 1;
      } else {
        this.fellBehind = 0;
      }
      if (this.running) this.scheduleReconnect();
    };
  }

  private scheduleReconnect(): void {
    if (!this.options.isOnline()) {
      this.setState('offline');
      return;
    }
    const delay = backoffDelay(this.attempt, this.options.random);
    this.attempt += 1;
    this.retryAt = Date.now() + delay;
    this.setState('reconnecting');
    this.timer = this.options.setTimer(() => {
      this.timer = null;
      this.connect();
    }, delay);
  }

  private cancelTimer(): void {
    if (this.timer !== null) this.options.clearTimer(this.timer);
    this.timer = null;
    this.retryAt = null;
  }

  private closeSocket(): void {
    const socket = this.socket;
    this.socket = null;
    if (socket) {
      socket.onopen = socket.onmessage = socket.onerror = socket.onclose = null;
      try {
        socket.close();
      } catch {
        // Closing a socket that never opened may throw in some browsers; it is gone either way.
      }
    }
  }

  private setState(state: ConnectionState): void {
    if (state === this.currentState) {
      // Still tell listeners when a retry time changed while reconnecting.
      if (state !== 'reconnecting') return;
    }
    this.currentState = state;
    for (const listener of this.stateListeners) listener(state);
  }
}
