import { describe, expect, it } from 'vitest';
import { availableEncoders, qualityError, validateLibrary } from '../src/encoders';
import type { LibraryInput } from '../src/types';

const nodes = [
  { encoders: ['libx265', 'h264_nvenc', 'libsvtav1'] },
  { encoders: ['hevc_nvenc', 'libx265', 'aac'] },
];

describe('availableEncoders', () => {
  it('offers only encoders some node reports that produce the chosen codec, in a fixed order', () => {
    expect(availableEncoders('hevc', nodes)).toEqual(['libx265', 'hevc_nvenc']);
    expect(availableEncoders('av1', nodes)).toEqual(['libsvtav1']);
  });

  it('offers nothing without nodes or encoders', () => {
    expect(availableEncoders('hevc', [])).toEqual([]);
    expect(availableEncoders('av1', [{ encoders: ['libx265'] }])).toEqual([]);
  });
});

describe('quality range', () => {
  it('accepts CRF 0-51 for HEVC and 0-63 for AV1', () => {
    expect(qualityError('hevc', 0)).toBeNull();
    expect(qualityError('hevc', 51)).toBeNull();
    expect(qualityError('hevc', 52)).toMatch(/0 to 51/);
    expect(qualityError('av1', 63)).toBeNull();
    expect(qualityError('av1', 64)).toMatch(/0 to 63/);
    expect(qualityError('av1', -1)).not.toBeNull();
    expect(qualityError('hevc', 22.5)).not.toBeNull();
    expect(qualityError('hevc', Number.NaN)).not.toBeNull();
  });
});

describe('validateLibrary', () => {
  const valid: LibraryInput = {
    name: 'Movies',
    paths: ['/media/movies', ''],
    targetCodec: 'hevc',
    encoder: 'hevc_nvenc',
    quality: 22,
    preset: 'p5',
    watch: true,
    enabled: true,
  };

  it('accepts a complete library', () => {
    expect(validateLibrary(valid, ['libx265', 'hevc_nvenc'])).toEqual({});
  });

  it('reports each missing or wrong field', () => {
    const errors = validateLibrary(
      { ...valid, name: ' ', paths: ['relative/path'], targetCodec: 'av1', encoder: 'hevc_nvenc', quality: 70 },
      ['libsvtav1'],
    );
    expect(Object.keys(errors).sort()).toEqual(['encoder', 'name', 'paths', 'quality']);
    expect(validateLibrary({ ...valid, paths: [''] }, ['hevc_nvenc']).paths).toMatch(/at least one/);
  });

  it('rejects an encoder no node reports', () => {
    expect(validateLibrary(valid, ['libx265']).encoder).toMatch(/No node/);
  });
});
