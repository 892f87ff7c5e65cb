import { describe, expect, it } from 'vitest';
import { applyLiveMessage, filtersFromQuery, jobFromLive, mergeLive, parseStatuses, progressColour, transferText, type LiveUpdate } from '../src/jobs';
import type { Job } from '../src/types';

function job(id: number, change: Partial<Job> = {}): Job {
  return { ...jobFromLive({ type: 'snapshot', jobId: id, fileName: `file-${id}.mkv` }, '2024-05-01T00:00:00Z'), ...change };
}

describe('progressColour', () => {
  it('is green strictly above 5 fps', () => {
    expect(progressColour({ fps: 5.01, stalled: false })).toBe('green');
    expect(progressColour({ fps: 120, stalled: false })).toBe('green');
  });

  it('is yellow from 1 to 5 fps inclusive', () => {
    expect(progressColour({ fps: 5, stalled: false })).toBe('yellow');
    expect(progressColour({ fps: 3, stalled: false })).toBe('yellow');
    expect(progressColour({ fps: 1, stalled: false })).toBe('yellow');
  });

  it('is neutral below 1 fps or without a speed', () => {
    expect(progressColour({ fps: 0.99, stalled: false })).toBe('neutral');
    expect(progressColour({ fps: 0, stalled: false })).toBe('neutral');
    expect(progressColour({ fps: null, stalled: false })).toBe('neutral');
  });

  it('is red when stalled, whatever the last speed was', () => {
    expect(progressColour({ fps: 60, stalled: true })).toBe('red');
    expect(progressColour({ fps: 3, stalled: true })).toBe('red');
    expect(progressColour({ fps: null, stalled: true })).toBe('red');
  });
});

describe('applyLiveMessage', () => {
  const list = [job(1, { status: 'ENCODING', progress: 10, fps: 30, node: 'a' }), job(2, { status: 'QUEUED' })];

  it('updates the fields a progress message carries and keeps the rest', () => {
    const next = applyLiveMessage(list, { type: 'progress', jobId: 1, progress: 42.5, fps: 3.2, etaSeconds: 600 });
    expect(next).not.toBe(list);
    expect(next[0]).toMatchObject({ id: 1, progress: 42.5, fps: 3.2, etaSeconds: 600, node: 'a', status: 'ENCODING' });
    expect(next[1]).toBe(list[1]);
    expect(list[0].progress).toBe(10); // the input is not mutated
  });

  it('applies explicit nulls (stage cleared) but not missing fields', () => {
    const withStage = [job(1, { status: 'ENCODING', stage: 'ENCODING', node: 'a' })];
    const next = applyLiveMessage(withStage, { type: 'progress', jobId: 1, progress: 50, stage: null });
    expect(next[0].stage).toBeNull();
    expect(next[0].node).toBe('a');
  });

  it('changes status and, for a finished job, clears ETA, stage and stalled', () => {
    const running = [job(1, { status: 'ENCODING', stage: 'TRANSFERRING', etaSeconds: 5, stalled: true, progress: 99 })];
    const next = applyLiveMessage(running, { type: 'status', jobId: 1, status: 'COMPLETED' });
    expect(next[0]).toMatchObject({ status: 'COMPLETED', stage: null, etaSeconds: null, stalled: false, progress: 100 });
  });

  it('removes a job whose new status leaves the filtered list', () => {
    const next = applyLiveMessage(list, { type: 'status', jobId: 1, status: 'FAILED', progress: 10 }, { statuses: ['ANALYZING', 'ENCODING'] });
    expect(next.map((j) => j.id)).toEqual([2]);
  });

  it('inserts an unknown job at the top only when asked', () => {
    const message: LiveUpdate = { type: 'snapshot', jobId: 9, progress: 3, status: 'ENCODING', fileName: 'new.mkv', fps: 24, node: 'b' };
    expect(applyLiveMessage(list, message)).toBe(list);
    const next = applyLiveMessage(list, message, { insert: true });
    expect(next.map((j) => j.id)).toEqual([9, 1, 2]);
    expect(next[0]).toMatchObject({ fileName: 'new.mkv', progress: 3, status: 'ENCODING', fps: 24, node: 'b', stalled: false });
  });

  it('does not insert a job whose status is outside the filter, and honours the limit', () => {
    const finished: LiveUpdate = { type: 'status', jobId: 9, progress: 100, status: 'COMPLETED' };
    expect(applyLiveMessage(list, finished, { insert: true, statuses: ['ENCODING'] })).toBe(list);
    const next = applyLiveMessage(list, { type: 'progress', jobId: 9, progress: 1, status: 'ENCODING' }, { insert: true, limit: 2 });
    expect(next.map((j) => j.id)).toEqual([9, 1]);
  });

  it('names an inserted job without a file name by its id', () => {
    const next = applyLiveMessage([], { type: 'progress', jobId: 7, progress: 1, status: 'ANALYZING' }, { insert: true });
    expect(next[0].fileName).toBe('Job 7');
  });

  it('ignores messages of other types', () => {
    expect(applyLiveMessage(list, { type: 'hello', jobId: 1, progress: 99, status: 'FAILED' }, { insert: true })).toBe(list);
  });

  it('takes the actions the server allows in the new status from a status message', () => {
    const paused = mergeLive(list[0], { type: 'status', jobId: 1, status: 'PAUSED', actions: ['resume', 'cancel'] });
    expect(paused.actions).toEqual(['resume', 'cancel']);
    expect(mergeLive(paused, { type: 'progress', jobId: 1, progress: 11 }).actions).toEqual(['resume', 'cancel']);
  });

  it('mergeLive sets stalled from a message', () => {
    expect(mergeLive(list[0], { type: 'progress', jobId: 1, stalled: true }).stalled).toBe(true);
  });
});

describe('job list filters', () => {
  it('parses status lists and drops unknown names', () => {
    expect(parseStatuses('QUEUED,ENCODING,bogus')).toEqual(['QUEUED', 'ENCODING']);
    expect(parseStatuses(null)).toEqual([]);
  });

  it('reads the query with defaults for missing or invalid values', () => {
    expect(filtersFromQuery(new URLSearchParams(''))).toEqual({ status: [], libraryId: null, q: '', page: 1, pageSize: 50 });
    expect(filtersFromQuery(new URLSearchParams('status=FAILED&libraryId=3&q=matrix&page=4&pageSize=25'))).toEqual({
      status: ['FAILED'],
      libraryId: 3,
      q: 'matrix',
      page: 4,
      pageSize: 25,
    });
    expect(filtersFromQuery(new URLSearchParams('page=-2&pageSize=7&libraryId=x'))).toMatchObject({ page: 1, pageSize: 50, libraryId: null });
  });
});

describe('a job moving its file', () => {
  it('says which way, the bytes moved of the total in human sizes, and the rate', () => {
    expect(transferText({ direction: 'download', bytes: 1572864, total: 5242880, rateBytesPerSecond: 512000 })).toBe(
      'Downloading 1.5 MiB of 5.0 MiB · 500 KiB/s',
    );
    expect(transferText({ direction: 'upload', bytes: 512, total: 2048, rateBytesPerSecond: 1024 })).toBe('Uploading 512 B of 2.0 KiB · 1.0 KiB/s');
  });

  it('keeps the transfer a live message carries, and drops it with the first message without one', () => {
    const moving = { direction: 'upload', bytes: 10, total: 40, rateBytesPerSecond: 5 } as const;
    const [a] = applyLiveMessage([job(1, { status: 'ENCODING' })], { type: 'progress', jobId: 1, stage: 'TRANSFERRING', transfer: moving });
    expect(a.transfer).toEqual(moving);
    const encoding = mergeLive(a, { type: 'progress', jobId: 1, stage: 'ENCODING', progress: 3 });
    expect(encoding.transfer ?? null).toBeNull();
  });
});
