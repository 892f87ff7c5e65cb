import { describe, expect, it } from 'vitest';
import { ApiError } from '../src/api';
import {
  channelsText,
  codecText,
  fateCounts,
  fateTone,
  formatBitrate,
  languageText,
  planNotMadeYet,
  streamLabel,
  streamNotes,
  videoSizeText,
} from '../src/streamPlan';
import type { PlannedStream, StreamPlan } from '../src/types';

const stream = (change: Partial<PlannedStream>): PlannedStream => ({
  sourceIndex: 1,
  fate: 'copy',
  kind: 'audio',
  codec: 'aac',
  language: 'eng',
  title: null,
  dispositions: [],
  channels: null,
  bitRate: null,
  rule: 'no rule applies',
  ...change,
});

const PLAN: StreamPlan = {
  streams: [
    stream({ sourceIndex: 0, fate: 'encode', kind: 'video', codec: 'hevc', language: null }),
    stream({ sourceIndex: 1, fate: 'convert', codec: 'aac', channels: 6, bitRate: 768_000 }),
    stream({ sourceIndex: 1, fate: 'add', codec: 'aac', channels: 2, bitRate: 256_000 }),
    stream({ sourceIndex: 2, fate: 'drop', codec: 'ac3', title: 'Director’s commentary', dispositions: ['comment'] }),
    stream({ sourceIndex: 3, fate: 'copy', kind: 'subtitle', codec: 'subrip' }),
  ],
  container: 'mkv',
  videoSize: { width: 1280, height: 720 },
  notes: [],
};

describe('the stream plan in words', () => {
  it('labels streams by their source index, an added one by where it comes from', () => {
    expect(PLAN.streams.map(streamLabel)).toEqual(['#0', '#1', 'new, from #1', '#2', '#3']);
  });

  it('gives each fate its tone', () => {
    expect(PLAN.streams.map((s) => fateTone(s.fate))).toEqual(['info', 'warn', 'ok', 'bad', 'muted']);
  });

  it('describes the codec with channels and bitrate', () => {
    expect(PLAN.streams.map(codecText)).toEqual(['hevc', 'aac, 5.1, 768 kb/s', 'aac, stereo, 256 kb/s', 'ac3', 'subrip']);
    expect([1, 2, 3, 6, 8].map(channelsText)).toEqual(['mono', 'stereo', '3 channels', '5.1', '7.1']);
    expect([128_000, 9_999_000, 12_345_678].map(formatBitrate)).toEqual(['128 kb/s', '9999 kb/s', '12.3 Mb/s']);
  });

  it('names languages, untagged ones as a dash', () => {
    expect(['eng', 'qaa', 'und', null, undefined].map(languageText)).toEqual(['English (eng)', 'qaa', '—', '—', '—']);
  });

  it('shows a title and dispositions', () => {
    expect(PLAN.streams.map(streamNotes)).toEqual(['', '', '', '“Director’s commentary”; comment', '']);
  });

  it('sums up the output', () => {
    expect(videoSizeText(PLAN)).toBe('1280 × 720 (scaled)');
    expect(videoSizeText({ ...PLAN, videoSize: null })).toBe('as the source');
    expect(fateCounts(PLAN)).toBe('1 encoded, 1 copied, 1 converted, 1 added, 1 dropped');
  });

  it('takes 404 and 409 as "not analysed yet", anything else as an error', () => {
    expect(planNotMadeYet(new ApiError(409, 'conflict', 'not analysed'))).toBe(true);
    expect(planNotMadeYet(new ApiError(404, 'not_found', 'no plan'))).toBe(true);
    expect(planNotMadeYet(new ApiError(500, 'internal', 'boom'))).toBe(false);
    expect(planNotMadeYet(new Error('network'))).toBe(false);
  });
});
