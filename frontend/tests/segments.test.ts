import { describe, expect, it } from 'vitest';
import {
  NODE_COLOURS,
  nodeColour,
  nodeColours,
  nodeShares,
  segmentCells,
  segmentLabel,
  segmentSummary,
  shareText,
  withLiveSegments,
  type Segment,
} from '../src/segments';

function segment(index: number, change: Partial<Segment> = {}): Segment {
  return { index, from: index * 100, to: (index + 1) * 100, status: 'QUEUED', nodeId: null, nodeName: null, helper: false, frames: 0, bytes: 0, fps: 0, ...change };
}

const done = (index: number, nodeName: string, change: Partial<Segment> = {}) =>
  segment(index, { status: 'DONE', nodeId: 1, nodeName, frames: 240, bytes: 3 * 1024 * 1024, fps: 48, ...change });
const encoding = (index: number, nodeName: string, change: Partial<Segment> = {}) =>
  segment(index, { status: 'ENCODING', nodeId: 2, nodeName, frames: 24, bytes: 0, fps: 25.1, ...change });

describe('node colours', () => {
  it('gives a node the same colour every time, within the palette', () => {
    expect(nodeColour('gpu-1')).toBe(nodeColour('gpu-1'));
        for (const name of ['', 'a', 'gpu-1', 'a much longer node name', 'ñødé']) {
      const colour = nodeColour(name);
      expect(Number.isInteger(colour)).toBe(true);
      expect(colour).toBeGreaterThanOrEqual(0);
      expect(colour).toBeLessThan(NODE_COLOURS);
    }
  });

  it('gives two nodes different colours', () => {
    expect(nodeColour('w1')).not.toBe(nodeColour('w2'));
    expect(nodeColour('gpu-1')).not.toBe(nodeColour('gpu-2'));
    // Names that differ in their last character only all get their own colour.
    const names = Array.from({ length: NODE_COLOURS }, (_, i) => `node-${i + 1}`);
    expect(new Set(names.map(nodeColour)).size).toBe(NODE_COLOURS);
  });

  it('keeps the nodes of one strip apart even when their names hash alike', () => {
    const clash = Array.from({ length: 200 }, (_, i) => `host${i}`).find((name) => name !== 'alpha' && nodeColour(name) === nodeColour('alpha'))!;
    expect(clash).toBeDefined();
    const colours = nodeColours(['alpha', clash, 'alpha']);
    expect(colours.size).toBe(2);
    expect(colours.get('alpha')).not.toBe(colours.get(clash));
    // The name first in order keeps its own colour; the same set always gives the same colours.
    const first = ['alpha', clash].sort()[0];
    expect(colours.get(first)).toBe(nodeColour(first));
    expect(nodeColours([clash, 'alpha'])).toEqual(colours);
  });
});

describe('segment labels', () => {
  it('says a queued segment waits, counting segments from 1', () => {
    expect(segmentLabel(segment(0))).toBe('Segment 1: queued');
    expect(segmentLabel(segment(4, { nodeName: 'w1' }))).toBe('Segment 5: queued');
  });

  it('says where a segment encodes, how far and how fast', () => {
    // formatFps: no decimals from 10 fps up.
    expect(segmentLabel(encoding(2, 'w2'))).toBe('Segment 3: encoding on w2, 24 frames, 25 fps');
    expect(segmentLabel(encoding(2, 'w2', { helper: true, frames: 1, fps: 0 }))).toBe('Segment 3: encoding on w2 (helper), 1 frame');
    expect(segmentLabel(encoding(0, 'w2', { nodeName: null, nodeId: 7, fps: 4.25 }))).toBe('Segment 1: encoding on node 7, 24 frames, 4.3 fps');
    expect(segmentLabel(encoding(0, 'w2', { nodeName: null, nodeId: null, frames: 0, fps: 0 }))).toBe('Segment 1: encoding, 0 frames');
  });

  it('says which node did a segment, with its frames and size', () => {
    expect(segmentLabel(done(9, 'gpu-1', { frames: 12_345 }))).toBe('Segment 10: done on gpu-1, 12,345 frames, 3.0 MiB, 48 fps');
    expect(segmentLabel(done(1, 'gpu-1', { helper: true }))).toBe('Segment 2: done on gpu-1 (helper), 240 frames, 3.0 MiB, 48 fps');
  });
});

describe('segment summary', () => {
  it('counts done and encoding segments and the nodes that encode', () => {
    const segments = [
      ...Array.from({ length: 12 }, (_, i) => done(i, i % 2 ? 'w1' : 'w2')),
      encoding(12, 'w1'),
      encoding(13, 'w3', { helper: true }),
      segment(14),
      segment(15),
    ];
    expect(segmentSummary(segments)).toBe('12 of 16 segments done · 2 encoding on 2 nodes');
    expect(segmentSummary([encoding(0, 'w1'), encoding(1, 'w1'), segment(2)])).toBe('0 of 3 segments done · 2 encoding on 1 node');
    expect(segmentSummary([done(0, 'w1'), done(1, 'w2')])).toBe('2 of 2 segments done');
    expect(segmentSummary([segment(0)])).toBe('0 of 1 segment done');
    expect(segmentSummary([encoding(0, 'w1', { nodeName: null, nodeId: null })])).toBe('0 of 1 segment done · 1 encoding');
  });
});

describe('cells and legend', () => {
  const segments = [segment(3), done(1, 'w1'), encoding(2, 'w2', { helper: true }), done(0, 'w2')];

  it('lists one cell per segment in index order, grey while queued', () => {
    const cells = segmentCells(segments);
    expect(cells.map((cell) => cell.segment.index)).toEqual([0, 1, 2, 3]);
    expect(cells[0].colour).toBe(cells[2].colour);
    expect(cells[0].colour).not.toBe(cells[1].colour);
    expect(cells[3].colour).toBeNull();
    expect(cells[2].label).toBe('Segment 3: encoding on w2 (helper), 24 frames, 25 fps');
  });

  it('counts what each node did and does, in strip order', () => {
    const shares = nodeShares(segments);
    expect(shares.map((share) => share.node)).toEqual(['w2', 'w1']);
    expect(shares[0]).toMatchObject({ done: 1, encoding: 1, helper: 1 });
    expect(shares[1]).toMatchObject({ done: 1, encoding: 0, helper: 0 });
    expect(shares[0].colour).toBe(segmentCells(segments)[0].colour);
    expect(shareText(shares[0])).toBe('1 done, 1 encoding (1 as helper)');
    expect(shareText(shares[1])).toBe('1 done');
  });
});

describe('withLiveSegments', () => {
  const job = { id: 1, segments: [segment(0), segment(1)] };

  it('replaces the segments with those a message carries', () => {
    const next = withLiveSegments(job, { segments: [done(0, 'w1'), encoding(1, 'w2')] });
    expect(next.segments.map((s) => s.status)).toEqual(['DONE', 'ENCODING']);
    expect(next).not.toBe(job);
  });

  it('keeps them when a message carries none', () => {
    expect(withLiveSegments(job, {})).toBe(job);
    expect(withLiveSegments(job, { segments: null })).toBe(job);
  });
});
