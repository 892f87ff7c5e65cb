// A job's segments (planned spans of its video, each encoded by the job's run or a helper slot):
// node colours, labels and the summary line of the strip on the job page, kept apart from
// rendering so they can be tested.
import type { components } from './generated/api';
import { formatBytes, formatFps, formatNumber } from './format';
import type { LiveMessage } from './types';

export type Segment = components['schemas']['SegmentView'];
export type SegmentStatus = components['schemas']['SegmentState'];

/** How many node colours styles.css defines (`.node-c0` .. `.node-c7`). */
export const NODE_COLOURS = 8;

/**
 * The palette slot a node name hashes to (FNV-1a, 32 bit): the same name always gets the
 * same colour, on every page load and whatever else the strip holds. Names that differ in
 * their last character only (gpu-1, gpu-2, ...) get distinct slots.
 */
export function nodeColour(name: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < name.length; i += 1) {
    hash ^= name.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % NODE_COLOURS;
}

/**
 * Colour slots for the nodes of one strip: each node its hashed slot, except where two
 * nodes' names hash to the same slot; then the later name (in name order) takes the next
 * free one, so nodes side by side stay apart. Past NODE_COLOURS nodes, colours repeat.
 */
export function nodeColours(names: Iterable<string>): Map<string, number> {
  const colours = new Map<string, number>();
  const taken = new Set<number>();
  for (const name of [...new Set(names)].sort()) {
    let slot = nodeColour(name);
    if (taken.size < NODE_COLOURS) {
      while (taken.has(slot)) slot = (slot + 1) % NODE_COLOURS;
    }
    taken.add(slot);
    colours.set(name, slot);
  }
  return colours;
}

/** The node a segment is on, by name (or id when the name is not known); null for none. */
export function segmentNode(segment: Segment): string | null {
  if (segment.nodeName) return segment.nodeName;
  return segment.nodeId != null ? `node ${segment.nodeId}` : null;
}

/** The node a segment counts for: an encoding or done one's; a queued segment waits on none. */
function workingNode(segment: Segment): string | null {
  return segment.status === 'QUEUED' ? null : segmentNode(segment);
}

/** Segments in index order (the API lists them so; a live message is not trusted to). */
export function sortedSegments(segments: readonly Segment[]): Segment[] {
  return [...segments].sort((a, b) => a.index - b.index);
}

const STATUS_WORDS: Record<SegmentStatus, string> = { QUEUED: 'queued', ENCODING: 'encoding', DONE: 'done' };

/**
 * What a cell says to a screen reader and on hover; segments count from 1 for people
 * (index 0 is "Segment 1"). E.g. "Segment 3: encoding on w2 (helper), 240 frames, 1.5 MiB, 25 fps".
 */
export function segmentLabel(segment: Segment): string {
  let text = `Segment ${segment.index + 1}: ${STATUS_WORDS[segment.status] ?? segment.status.toLowerCase()}`;
  if (segment.status === 'QUEUED') return text;
  const node = segmentNode(segment);
  if (node) text += ` on ${node}`;
  if (segment.helper) text += ' (helper)';
  const parts = [`${formatNumber(segment.frames)} ${segment.frames === 1 ? 'frame' : 'frames'}`];
  if (segment.bytes > 0) parts.push(formatBytes(segment.bytes));
  if (segment.fps > 0) parts.push(formatFps(segment.fps));
  return `${text}, ${parts.join(', ')}`;
}

const plural = (count: number, word: string) => `${formatNumber(count)} ${count === 1 ? word : `${word}s`}`;

/** "12 of 16 segments done · 2 encoding on 2 nodes". */
export function segmentSummary(segments: readonly Segment[]): string {
  const done = segments.filter((segment) => segment.status === 'DONE').length;
  const encoding = segments.filter((segment) => segment.status === 'ENCODING');
  let text = `${formatNumber(done)} of ${plural(segments.length, 'segment')} done`;
  if (encoding.length > 0) {
    text += ` · ${formatNumber(encoding.length)} encoding`;
    const nodes = new Set(encoding.map(segmentNode).filter((node) => node !== null)).size;
    if (nodes > 0) text += ` on ${plural(nodes, 'node')}`;
  }
  return text;
}

export interface NodeShare {
  node: string;
  colour: number;
  done: number;
  encoding: number;
  /** Of those, how many a helper slot on the node took. */
  helper: number;
}

/** The legend: each node that encodes or encoded a segment, in the order it first appears on the strip. */
export function nodeShares(segments: readonly Segment[]): NodeShare[] {
  const ordered = sortedSegments(segments);
  const colours = nodeColours(ordered.map(workingNode).filter((node) => node !== null));
  const shares = new Map<string, NodeShare>();
  for (const segment of ordered) {
    const node = workingNode(segment);
    if (node === null) continue;
    let share = shares.get(node);
    if (!share) {
      share = { node, colour: colours.get(node) ?? nodeColour(node), done: 0, encoding: 0, helper: 0 };
      shares.set(node, share);
    }
    if (segment.status === 'DONE') share.done += 1;
    else share.encoding += 1;
    if (segment.helper) share.helper += 1;
  }
  return [...shares.values()];
}

/** "5 done, 1 encoding (2 as helper)". */
export function shareText(share: NodeShare): string {
  const parts: string[] = [];
  if (share.done > 0) parts.push(`${formatNumber(share.done)} done`);
  if (share.encoding > 0) parts.push(`${formatNumber(share.encoding)} encoding`);
  let text = parts.join(', ');
  if (share.helper > 0) text += ` (${formatNumber(share.helper)} as helper)`;
  return text;
}

export interface SegmentCell {
  segment: Segment;
  label: string;
  /** Palette slot of the cell's node; null for a queued segment or one without a node (grey). */
  colour: number | null;
}

/** One cell per segment, in index order, each with its label and node colour. */
export function segmentCells(segments: readonly Segment[]): SegmentCell[] {
  const ordered = sortedSegments(segments);
  const colours = nodeColours(ordered.map(workingNode).filter((node) => node !== null));
  return ordered.map((segment) => {
    const node = workingNode(segment);
    return { segment, label: segmentLabel(segment), colour: node === null ? null : (colours.get(node) ?? null) };
  });
}

/**
 * A live message that carries the job's segments replaces them (they come whole, as
 * GET /jobs/{id} lists them); any other message leaves them as they are.
 */
export function withLiveSegments<T extends { segments: Segment[] }>(job: T, message: Pick<LiveMessage, 'segments'>): T {
  const segments: unknown = message.segments;
  if (!Array.isArray(segments)) return job;
  return { ...job, segments: segments as Segment[] };
}
