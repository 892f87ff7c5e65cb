// Records the unit tests share: a job as the API lists it, a library's settings as its form sends them.
import { defaultInput } from '../src/encoders';
import { jobFromLive } from '../src/jobs';
import type { Job, LibraryInput } from '../src/types';
import { catalog } from './catalog';

/**
 * Job `id`, queued, with every field set; `change` sets what a test is about. It starts as the
 * dashboard makes a job it only heard of live, plus what the API's list says of the file.
 */
export function job(id: number, change: Partial<Job> = {}): Job {
  return {
    ...jobFromLive({ type: 'status', jobId: id }, '2024-05-01T10:00:00Z'),
    fileName: `file-${id}.mkv`,
    filePath: `/media/file-${id}.mkv`,
    libraryId: 1,
    skipReason: null,
    chosenQuality: null,
    predictedSize: null,
    vmaf: null,
    vmafP5: null,
    sourceCodec: 'h264',
    sourceSize: 1000,
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
