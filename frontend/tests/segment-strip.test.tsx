// @vitest-environment happy-dom
// The segment strip on its own, and on the job page: from GET /jobs/{id}, then from live messages.
import { render } from 'preact';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { SegmentStrip } from '../src/components';
import { nodeColour } from '../src/segments';
import type { Segment } from '../src/segments';
import type { JobDetail } from '../src/types';
import { FakeWebSocket } from './fake-websocket';
import { job } from './fixtures';


function segment(index: number, change: Partial<Segment> = {}): Segment {
  return { index, from: index * 100, to: (index + 1) * 100, status: 'QUEUED', nodeId: null, nodeName: null, helper: false, frames: 0, bytes: 0, fps: 0, ...change };
}

const planned: Segment[] = [
  segment(0, { status: 'DONE', nodeId: 1, nodeName: 'w1', frames: 240, bytes: 2048, fps: 48 }),
  segment(1, { status: 'ENCODING', nodeId: 2, nodeName: 'w2', helper: true, frames: 24, fps: 4.2 }),
  segment(2, { status: 'ENCODING', nodeId: 1, nodeName: 'w1', frames: 12, fps: 30 }),
  segment(3),
];

function detail(id: number, segments: Segment[]): JobDetail {
  return {
    ...job(id, {
      status: 'ENCODING',
      stage: 'ENCODING',
      progress: 30,
      fps: 30,
      node: 'w1',
      etaSeconds: 60,
      startedAt: '2024-05-01T10:01:00Z',
      updatedAt: '2024-05-01T10:01:00Z',
    }),
    events: [{ id: 1, at: '2024-05-01T10:01:00Z', kind: 'started', fromStatus: 'QUEUED', toStatus: 'ENCODING', nodeName: 'w1', detail: null }],
    segments,
  };
}

const container = () => document.getElementById('root')!;
const text = () => container().textContent ?? '';
const cells = () => [...container().querySelectorAll<HTMLElement>('.segment-strip li')];
const segmentsCard = () => container().querySelector<HTMLElement>('section[aria-labelledby="segments-title"]');

beforeEach(() => {
  document.body.innerHTML = '<div id="root"></div>';
});

afterEach(() => {
  render(null, container());
  vi.unstubAllGlobals();
  localStorage.clear();
});

describe('SegmentStrip', () => {
  it('draws one cell per segment in order, coloured by node, with labels, a legend and a summary', () => {
    render(<SegmentStrip segments={[planned[3], planned[1], planned[0], planned[2]]} />, container());
    expect(text()).toContain('1 of 4 segments done · 2 encoding on 2 nodes');

    const strip = container().querySelector('ol.segment-strip')!;
    expect(strip.getAttribute('aria-label')).toBe('Segments in order');
    const items = cells();
    expect(items.map((cell) => cell.textContent)).toEqual([
      'Segment 1: done on w1, 240 frames, 2.0 KiB, 48 fps',
      'Segment 2: encoding on w2 (helper), 24 frames, 4.2 fps',
      'Segment 3: encoding on w1, 12 frames, 30 fps',
      'Segment 4: queued',
    ]);
    expect(items[1].getAttribute('title')).toBe('Segment 2: encoding on w2 (helper), 24 frames, 4.2 fps');
    expect(items[0].classList.contains('segment-done')).toBe(true);
    expect(items[1].classList.contains('segment-encoding')).toBe(true);
    expect(items[1].classList.contains('segment-helper')).toBe(true);
    expect(items[3].classList.contains('segment-queued')).toBe(true);
    // The same node, the same colour; w1 and w2 apart; a queued cell has none.
    const colour = (cell: HTMLElement) => [...cell.classList].find((name) => name.startsWith('node-c')) ?? null;
    expect(colour(items[0])).toBe(`node-c${nodeColour('w1')}`);
    expect(colour(items[2])).toBe(colour(items[0]));
    expect(colour(items[1])).toBe(`node-c${nodeColour('w2')}`);
    expect(colour(items[1])).not.toBe(colour(items[0]));
    expect(colour(items[3])).toBeNull();

    const legend = container().querySelector<HTMLElement>('[aria-label="Segments by node"]')!;
    const entries = [...legend.querySelectorAll('li')].map((entry) => entry.textContent?.trim());
    expect(entries).toEqual(['w1: 1 done, 1 encoding', 'w2: 1 encoding (1 as helper)', 'Queued: 1', 'Encoded by a helper slot']);
    expect(legend.querySelector('.swatch')!.classList.contains(`node-c${nodeColour('w1')}`)).toBe(true);
  });

  it('draws nothing without segments', () => {
    render(<SegmentStrip segments={[]} />, container());
    expect(container().innerHTML).toBe('');
  });
});

describe('job page segments', () => {
  let answers: Record<string, JobDetail>;

  beforeEach(() => {
    FakeWebSocket.instances = [];
    answers = { '/api/jobs/7': detail(7, planned), '/api/jobs/8': detail(8, []) };
    vi.stubGlobal('WebSocket', FakeWebSocket);
    vi.stubGlobal('fetch', async (input: string) => {
      const body = answers[input.split('?')[0]];
      return new Response(JSON.stringify(body ?? { error: { code: 'not_found', message: 'no route' } }), {
        status: body ? 200 : 404,
        headers: { 'Content-Type': 'application/json' },
      });
    });
    localStorage.setItem('token', 'tok');
    localStorage.setItem('tokenExpiresAt', new Date(Date.now() + 86_400_000).toISOString());
  });

  async function mount(hash: string) {
    window.location.hash = hash;
    window.dispatchEvent(new HashChangeEvent('hashchange'));
    const { App } = await import('../src/app');
    render(<App />, container());
  }

  it('shows a Segments card above the history, and follows live segments', async () => {
    await mount('#/jobs/7');
    await vi.waitFor(() => expect(segmentsCard()).not.toBeNull());
    const card = segmentsCard()!;
    expect(card.querySelector('h2')?.textContent).toBe('Segments');
    const history = container().querySelector('section[aria-labelledby="events-title"]')!;
    expect(card.compareDocumentPosition(history) & Node.DOCUMENT_POSITION_FOLLOWING).toBeTruthy();
    expect(card.textContent).toContain('1 of 4 segments done · 2 encoding on 2 nodes');
    expect(cells()).toHaveLength(4);

    const socket = FakeWebSocket.instances[0];
    socket.onopen?.({});
    // A message without segments moves the progress and leaves the strip alone.
    socket.send({ type: 'progress', jobId: 7, progress: 55, status: 'ENCODING', fps: 31 });
    await vi.waitFor(() => expect(container().querySelector('[role="progressbar"]')?.getAttribute('aria-valuenow')).toBe('55'));
    expect(segmentsCard()!.textContent).toContain('1 of 4 segments done');
    // Another job's segments are not this job's.
    socket.send({ type: 'progress', jobId: 9, progress: 1, status: 'ENCODING', segments: [segment(0, { status: 'DONE', nodeName: 'x' })] });
    // A message with segments replaces them.
    socket.send({
      type: 'progress',
      jobId: 7,
      progress: 80,
      status: 'ENCODING',
      segments: [
        planned[0],
        { ...planned[1], status: 'DONE', frames: 240 },
        { ...planned[2], status: 'DONE', frames: 240 },
        segment(3, { status: 'ENCODING', nodeId: 3, nodeName: 'w3', helper: true, frames: 5, fps: 12 }),
      ],
    });
    await vi.waitFor(() => expect(segmentsCard()!.textContent).toContain('3 of 4 segments done · 1 encoding on 1 node'));
    expect(cells()[3].textContent).toBe('Segment 4: encoding on w3 (helper), 5 frames, 12 fps');
    expect(text()).not.toContain('on x');
  });

  it('shows no Segments card for a video encoded as one span', async () => {
    await mount('#/jobs/8');
    await vi.waitFor(() => expect(text()).toContain('Started'));
    expect(segmentsCard()).toBeNull();
    expect(text()).not.toContain('Segments');
  });
});
