import { describe, expect, it } from 'vitest';
import { availableEncoders, defaultInput, fitSettings, preferredEncoder, qualityError, validateLibrary } from '../src/encoders';
import type { LibraryInput } from '../src/types';
import { catalog } from './catalog';
import { MOVIES } from './fixtures';

const served = catalog(['libx265', 'hevc_nvenc', 'libsvtav1']);

describe('availableEncoders', () => {
  it('offers the encoders a node that is up runs for the chosen codec, in the server’s order', () => {
    expect(availableEncoders(served, 'hevc')).toEqual(['libx265', 'hevc_nvenc']);
    expect(availableEncoders(served, 'av1')).toEqual(['libsvtav1']);
    expect(availableEncoders(catalog([]), 'hevc')).toEqual([]);
  });

  it('prefers the codec’s default encoder, else the first one that runs', () => {
    expect(preferredEncoder(served, 'hevc')).toBe('libx265');
    expect(preferredEncoder(catalog(['hevc_nvenc', 'hevc_qsv']), 'hevc')).toBe('hevc_nvenc');
    expect(preferredEncoder(catalog([]), 'av1')).toBe('');
  });
});

describe('defaults', () => {
  it('start a new library with the server’s defaults', () => {
    expect(defaultInput(served)).toMatchObject({ targetCodec: 'hevc', encoder: 'libx265', quality: 28, preset: 'medium' });
    expect(defaultInput(catalog(['hevc_nvenc']))).toMatchObject({ encoder: 'hevc_nvenc', quality: 28, preset: 'p5' });
  });

  it('keep the quality and preset an encoder takes and replace the others with its defaults', () => {
    expect(fitSettings(served, 'hevc', 'hevc_nvenc', { quality: 20, preset: 'slow' })).toEqual({ quality: 20, preset: 'p5' });
    expect(fitSettings(served, 'hevc', 'libx265', { quality: 20, preset: 'slow' })).toEqual({ quality: 20, preset: 'slow' });
    expect(fitSettings(served, 'hevc', 'libx265', { quality: 60, preset: '8' })).toEqual({ quality: 28, preset: 'medium' });
    expect(fitSettings(served, 'av1', 'libsvtav1', { quality: 60, preset: 'medium' })).toEqual({ quality: 60, preset: '8' });
    expect(fitSettings(served, 'hevc', 'hevc_vaapi', { quality: 20, preset: 'medium' })).toEqual({ quality: 20, preset: '' });
  });
});

describe('quality range', () => {
  it('follows the encoder’s scale', () => {
    const x265 = served.codecs[0].encoders[0];
    const svt = served.codecs[1].encoders[0];
    expect(qualityError(x265, 0)).toBeNull();
    expect(qualityError(x265, 51)).toBeNull();
    expect(qualityError(x265, 52)).toMatch(/0 to 51/);
    expect(qualityError(svt, 63)).toBeNull();
    expect(qualityError(svt, 64)).toMatch(/0 to 63/);
    expect(qualityError(svt, -1)).not.toBeNull();
    expect(qualityError(x265, 22.5)).not.toBeNull();
    expect(qualityError(x265, Number.NaN)).not.toBeNull();
  });
});

describe('validateLibrary', () => {
  const valid: LibraryInput = { ...MOVIES, paths: ['/media/movies', ''] };

  it('asks two passes for a bitrate in bounds, an encoder that runs them and the CRF mode', () => {
    expect(validateLibrary({ ...valid, rateControl: 'twoPass', targetBitrateKbps: 2500 }, served, ['hevc_nvenc'])).toEqual({});
    for (const kbps of [null, 49, 200001, 12.5]) {
      const errors = validateLibrary({ ...valid, rateControl: 'twoPass', targetBitrateKbps: kbps }, served, ['hevc_nvenc']);
      expect(errors.targetBitrateKbps).toMatch(/50 to 200000/);
    }
    const vmaf = validateLibrary({ ...valid, rateControl: 'twoPass', targetBitrateKbps: 900, qualityMode: 'vmaf' }, served, [
      'hevc_nvenc',
    ]);
    expect(vmaf.rateControl).toMatch(/VMAF/);
    const av1 = { ...valid, targetCodec: 'av1' as const, encoder: 'libsvtav1', preset: '8', rateControl: 'twoPass' as const };
    expect(validateLibrary({ ...av1, targetBitrateKbps: 900 }, served, ['libsvtav1']).rateControl).toMatch(/no two passes/);
    // A bitrate kept while CRF is chosen is not judged.
    expect(validateLibrary({ ...valid, targetBitrateKbps: 5 }, served, ['hevc_nvenc'])).toEqual({});
  });

  it('checks the target VMAF and the largest output only in vmaf mode', () => {
    const odd = { ...valid, targetVmaf: 100, maxSizePercent: 5 };
    expect(validateLibrary(odd, served, ['hevc_nvenc'])).toEqual({});
    const errors = validateLibrary({ ...odd, qualityMode: 'vmaf' }, served, ['hevc_nvenc']);
    expect(errors.targetVmaf).toMatch(/80 to 99/);
    expect(errors.maxSizePercent).toMatch(/10 to 100/);
    expect(validateLibrary({ ...valid, qualityMode: 'vmaf', targetVmaf: 93.5 }, served, ['hevc_nvenc'])).toEqual({});
  });

  it('accepts a complete library', () => {
    expect(validateLibrary(valid, served, ['libx265', 'hevc_nvenc'])).toEqual({});
    expect(validateLibrary({ ...valid, encoder: 'hevc_vaapi', preset: '' }, served, ['hevc_vaapi'])).toEqual({});
  });

  it('reports each missing or wrong field', () => {
    const errors = validateLibrary({ ...valid, name: ' ', paths: ['relative/path'], quality: 70, preset: 'medium' }, served, ['hevc_nvenc']);
    expect(Object.keys(errors).sort()).toEqual(['name', 'paths', 'preset', 'quality']);
    expect(validateLibrary({ ...valid, targetCodec: 'av1' }, served, ['libsvtav1']).encoder).toMatch(/AV1/);
    expect(validateLibrary({ ...valid, paths: [''] }, served, ['hevc_nvenc']).paths).toMatch(/at least one/);
  });

  it('rejects an encoder no node that is up runs', () => {
    expect(validateLibrary(valid, served, ['libx265']).encoder).toMatch(/No node/);
  });
});
