// Records the unit tests share: a job as the API lists it, a library's settings as its form sends them.
import { defaultInput } from '../src/encoders';
import type { Job, LibraryInput } from '../src/types';
import { catalog } from './catalog';

/** Job `id`, queued, with every field set; `change` sets what a test is about. */
export function job(id: number, change: Partial<Job> = {}): Job {
  return {
    id,
    fileName: `file-${id}.mkv`,
    filePath: `/media/file-${id}.mkv`,
    libraryId: 1,
    status: 'QUEUED',
    stage: null,
    progress: 0,
    fps: 0,
    node: null,
    etaSeconds: null,
    retryCount: 0,
    failureReason: null,
    failureCode: null,
    skipReason: null,
    chosenQuality: null,
    predictedSize: null,
    vmaf: null,
    vmafP5: null,
    stalled: false,
    sourceCodec: 'h264',
    targetCodec: 'hevc',
    sourceSize: 1000,
    outputSize: null,
    savedBytes: 0,
    createdAt: '2024-05-01T10:00:00Z',
    startedAt: null,
    completedAt: null,
    updatedAt: '2024-05-01T10:00:00Z',
    actions: [],
    priority: 0,
    ...change,
  };
}

/** A library on NVENC at CRF 22, otherwise as the form's defaults make it. */
export const MOVIES: LibraryInput = {
  ...defaultInput(catalog(['hevc_nvenc'])),
  name: 'Movies',
  paths: ['/media/movies'],
  quality: 22,
};
