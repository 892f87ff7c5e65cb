// A GET /encoders answer for the tests: the encoders a node that is up runs are `available`.
import type { EncoderCatalog, EncoderInfo } from '../src/encoders';

const hevc = { min: 0, max: 51, default: 28 };
const av1 = { min: 0, max: 63, default: 35 };

// The encoders that run two passes, with the bitrate's bounds (the server's `domain::encoding`).
const twoPass = { minKbps: 50, maxKbps: 200000 };

function encoder(name: EncoderInfo['name'], hardware: EncoderInfo['hardware'], presets: string[], defaultPreset: string | null, quality: typeof hevc) {
  const twoPassed = name === 'libx265' || name === 'hevc_nvenc';
  return { name, label: `${name} (${hardware})`, hardware, presets, defaultPreset, quality, twoPass: twoPassed ? twoPass : null };
}

export function catalog(available: readonly string[]): EncoderCatalog {
  const withNodes = (e: ReturnType<typeof encoder>): EncoderInfo => ({
    ...e,
    available: available.includes(e.name),
    nodes: available.includes(e.name) ? ['gpu-1'] : [],
    unavailableReason: available.includes(e.name) ? null : `no node runs it: it needs ${e.hardware}`,
  });
  return {
    defaultCodec: 'hevc',
    codecs: [
      {
        codec: 'hevc',
        label: 'HEVC (H.265)',
        defaultEncoder: 'libx265',
        encoders: [
          encoder('libx265', 'cpu', ['ultrafast', 'fast', 'medium', 'slow', 'veryslow'], 'medium', hevc),
          encoder('hevc_nvenc', 'nvidia', ['p1', 'p5', 'p7'], 'p5', hevc),
          encoder('hevc_qsv', 'intel_qsv', ['fast', 'medium', 'slow'], 'medium', hevc),
          encoder('hevc_vaapi', 'vaapi', [], null, hevc),
        ].map(withNodes),
      },
      {
        codec: 'av1',
        label: 'AV1',
        defaultEncoder: 'libsvtav1',
        encoders: [encoder('libsvtav1', 'cpu', ['4', '8', '12'], '8', av1), encoder('libaom-av1', 'cpu', ['4', '6', '8'], '6', av1)].map(withNodes),
      },
    ],
  };
}
