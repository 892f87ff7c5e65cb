// Which encoders a library may use, and the quality range of its codec.
import type { ClusterNode, Codec, LibraryInput } from './types';

export const CODECS: readonly Codec[] = ['hevc', 'av1'];

export const CODEC_LABELS: Record<Codec, string> = { hevc: 'HEVC (H.265)', av1: 'AV1' };

/** Encoders that produce each codec, in the order they are offered. */
export const CODEC_ENCODERS: Record<Codec, readonly string[]> = {
  hevc: ['libx265', 'hevc_nvenc', 'hevc_qsv', 'hevc_vaapi'],
  av1: ['libsvtav1', 'libaom-av1'],
};

export const ENCODER_LABELS: Record<string, string> = {
  libx265: 'libx265 (CPU)',
  hevc_nvenc: 'hevc_nvenc (NVIDIA)',
  hevc_qsv: 'hevc_qsv (Intel Quick Sync)',
  hevc_vaapi: 'hevc_vaapi (VAAPI: AMD, Intel)',
  libsvtav1: 'libsvtav1 (CPU)',
  'libaom-av1': 'libaom-av1 (CPU)',
};

/** CRF range: 0-51 for HEVC, 0-63 for AV1. */
export const QUALITY_MAX: Record<Codec, number> = { hevc: 51, av1: 63 };
export const DEFAULT_QUALITY: Record<Codec, number> = { hevc: 22, av1: 30 };

/** Suggested presets per encoder; the first of each list is not necessarily the default. */
export const ENCODER_PRESETS: Record<string, readonly string[]> = {
  libx265: ['ultrafast', 'superfast', 'veryfast', 'faster', 'fast', 'medium', 'slow', 'slower', 'veryslow'],
  hevc_nvenc: ['p1', 'p2', 'p3', 'p4', 'p5', 'p6', 'p7'],
  hevc_qsv: ['veryfast', 'faster', 'fast', 'medium', 'slow', 'slower', 'veryslow'],
  hevc_vaapi: [],
  libsvtav1: ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12', '13'],
  'libaom-av1': ['0', '1', '2', '3', '4', '5', '6', '7', '8'],
};

export const DEFAULT_PRESET: Record<string, string> = {
  libx265: 'medium',
  hevc_nvenc: 'p5',
  hevc_qsv: 'medium',
  hevc_vaapi: '',
  libsvtav1: '8',
  'libaom-av1': '6',
};

/** Encoders for `codec` that at least one node reports, in CODEC_ENCODERS order. */
export function availableEncoders(codec: Codec, nodes: Pick<ClusterNode, 'encoders'>[]): string[] {
  const reported = new Set(nodes.flatMap((node) => node.encoders ?? []));
  return CODEC_ENCODERS[codec].filter((encoder) => reported.has(encoder));
}

export function qualityError(codec: Codec, quality: number): string | null {
  const max = QUALITY_MAX[codec];
  if (!Number.isInteger(quality) || quality < 0 || quality > max) {
    return `Quality (CRF) must be a whole number from 0 to ${max} for ${CODEC_LABELS[codec]}.`;
  }
  return null;
}

export type LibraryErrors = Partial<Record<'name' | 'paths' | 'encoder' | 'quality', string>>;

/** Field errors of a library form; empty when it can be sent. */
export function validateLibrary(input: LibraryInput, offered: readonly string[]): LibraryErrors {
  const errors: LibraryErrors = {};
  if (input.name.trim() === '') errors.name = 'Give the library a name.';
  const paths = input.paths.map((path) => path.trim()).filter((path) => path !== '');
  if (paths.length === 0) errors.paths = 'Add at least one media path.';
  else if (paths.some((path) => !path.startsWith('/') && !/^[A-Za-z]:[\\/]/.test(path) && !path.startsWith('\\\\'))) {
    errors.paths = 'Media paths must be absolute (the same mount path on every node).';
  }
  if (!CODEC_ENCODERS[input.targetCodec].includes(input.encoder)) {
    errors.encoder = `Choose an encoder that produces ${CODEC_LABELS[input.targetCodec]}.`;
  } else if (!offered.includes(input.encoder)) {
    errors.encoder = 'No node reports this encoder.';
  }
  const quality = qualityError(input.targetCodec, input.quality);
  if (quality) errors.quality = quality;
  return errors;
}
