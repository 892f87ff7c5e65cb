// The encoder table as GET /encoders serves it (codecs, their encoders, presets, quality
// scales, defaults, and which encoders a node that is up runs), and the library form's
// rules on top of it. Nothing here repeats the server's table.
import type { Codec, CodecInfo, EncoderCatalog, EncoderInfo, LibraryInput } from './types';
import { DEFAULT_STREAM_RULES } from './streamRules';

export type { CodecInfo, EncoderCatalog, EncoderInfo, QualityRange } from './types';

export function codecInfo(catalog: EncoderCatalog, codec: Codec): CodecInfo | undefined {
  return catalog.codecs.find((entry) => entry.codec === codec);
}

export function codecLabel(catalog: EncoderCatalog | null, codec: string): string {
  return catalog?.codecs.find((entry) => entry.codec === codec)?.label ?? codec;
}

/** The encoder of this name among the codec's encoders. */
export function encoderInfo(catalog: EncoderCatalog, codec: Codec, name: string): EncoderInfo | undefined {
  return codecInfo(catalog, codec)?.encoders.find((encoder) => encoder.name === name);
}

/** Encoders for `codec` that a node that is up runs, in the server's order. */
export function availableEncoders(catalog: EncoderCatalog, codec: Codec): string[] {
  return (codecInfo(catalog, codec)?.encoders ?? []).filter((encoder) => encoder.available).map((encoder) => encoder.name);
}

/** The encoder a form for `codec` starts with: the codec's default where a node runs it, else the first that runs. */
export function preferredEncoder(catalog: EncoderCatalog, codec: Codec): string {
  const offered = availableEncoders(catalog, codec);
  const fallback = codecInfo(catalog, codec)?.defaultEncoder ?? '';
  return offered.includes(fallback) ? fallback : (offered[0] ?? '');
}

/** Settings that fit `encoder`: the current quality and preset where it takes them, else its defaults. */
export function fitSettings(
  catalog: EncoderCatalog,
  codec: Codec,
  encoder: string,
  current: Pick<LibraryInput, 'quality' | 'preset'>,
): Pick<LibraryInput, 'quality' | 'preset'> {
  const info = encoderInfo(catalog, codec, encoder);
  if (!info) return current;
  return {
    quality: qualityError(info, current.quality) === null ? current.quality : info.quality.default,
    preset: info.presets.length === 0 ? '' : info.presets.includes(current.preset) ? current.preset : (info.defaultPreset ?? ''),
  };
}

/** A new library's settings: the defaults the server would give it. */
export function defaultInput(catalog: EncoderCatalog): LibraryInput {
  const codec = catalog.defaultCodec;
  const encoder = preferredEncoder(catalog, codec);
  const info = encoderInfo(catalog, codec, encoder);
  return {
    name: '',
    paths: [''],
    targetCodec: codec,
    encoder,
    quality: info?.quality.default ?? 0,
    preset: info?.defaultPreset ?? '',
    qualityMode: 'crf',
    targetVmaf: 95,
    maxSizePercent: 80,
    keepDolbyVision: false,
    keepModifiedTime: false,
    rateControl: 'crf',
    targetBitrateKbps: null,
    streamRules: DEFAULT_STREAM_RULES,
    healthSchedule: 'off',
    healthAction: 'notify',
    watch: true,
    enabled: true,
  };
}

export function qualityError(encoder: EncoderInfo, quality: number): string | null {
  const { min, max } = encoder.quality;
  if (!Number.isInteger(quality) || quality < min || quality > max) {
    return `Quality (CRF) must be a whole number from ${min} to ${max} for ${encoder.name}.`;
  }
  return null;
}

export type LibraryErrors = Partial<
  Record<'name' | 'paths' | 'encoder' | 'quality' | 'preset' | 'targetVmaf' | 'maxSizePercent' | 'rateControl' | 'targetBitrateKbps', string>
>;

/** Field errors of a library form; empty when it can be sent. `offered`: the encoders the form lists. */
export function validateLibrary(input: LibraryInput, catalog: EncoderCatalog, offered: readonly string[]): LibraryErrors {
  const errors: LibraryErrors = {};
  if (input.name.trim() === '') errors.name = 'Give the library a name.';
  const paths = input.paths.map((path) => path.trim()).filter((path) => path !== '');
  if (paths.length === 0) errors.paths = 'Add at least one media path.';
  else if (paths.some((path) => !path.startsWith('/') && !/^[A-Za-z]:[\\/]/.test(path) && !path.startsWith('\\\\'))) {
    errors.paths = 'Media paths must be absolute (the same mount path on every node).';
  }
  const encoder = encoderInfo(catalog, input.targetCodec, input.encoder);
  if (!encoder) {
    errors.encoder = `Choose an encoder that produces ${codecLabel(catalog, input.targetCodec)}.`;
    return errors;
  }
  if (!offered.includes(input.encoder)) errors.encoder = 'No node that is up runs this encoder.';
  const quality = qualityError(encoder, input.quality);
  if (quality) errors.quality = quality;
  if (encoder.presets.length > 0 && !encoder.presets.includes(input.preset)) {
    errors.preset = `Choose one of ${encoder.name}’s presets.`;
  }
  if (input.rateControl === 'twoPass') {
    // Which encoders run two passes, and the bitrate's bounds, as GET /encoders serves them.
    const range = encoder.twoPass;
    const kbps = input.targetBitrateKbps;
    if (!range) {
      errors.rateControl = `${encoder.name} runs no two passes (libx265 and hevc_nvenc do; FFmpeg 5.1 has no two-pass SVT-AV1).`;
    } else {
      if (kbps == null || !Number.isInteger(kbps) || kbps < range.minKbps || kbps > range.maxKbps) {
        errors.targetBitrateKbps = `The target bitrate must be a whole number of kbit/s from ${range.minKbps} to ${range.maxKbps}.`;
      }
      if (input.qualityMode === 'vmaf') {
        errors.rateControl = 'Two passes target a bitrate; the VMAF mode searches a CRF. Choose one.';
      }
    }
  }
  if (input.qualityMode === 'vmaf') {
    if (!(input.targetVmaf >= 80 && input.targetVmaf <= 99)) errors.targetVmaf = 'Target VMAF must be from 80 to 99.';
    if (!Number.isInteger(input.maxSizePercent) || input.maxSizePercent < 10 || input.maxSizePercent > 100) {
      errors.maxSizePercent = 'The largest output must be a whole percent from 10 to 100.';
    }
  }
  return errors;
}
