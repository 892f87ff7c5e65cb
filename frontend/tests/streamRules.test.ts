import { describe, expect, it } from 'vitest';
import {
  DEFAULT_STREAM_RULES,
  draftOf,
  languageName,
  listWords,
  parseLines,
  parseWords,
  rulesOf,
  summarizeRules,
  STREAM_RULE_FIELDS,
} from '../src/streamRules';
import { fieldFor } from '../src/forms';
import type { StreamRules } from '../src/types';

const rules = (change: Partial<StreamRules>): StreamRules => ({ ...DEFAULT_STREAM_RULES, ...change });

describe('summarizeRules', () => {
  it('says the default keeps every track', () => {
    expect(summarizeRules(DEFAULT_STREAM_RULES)).toBe('Keeps every audio and subtitle track as it is.');
  });

  it('names each rule that changes something', () => {
    const cases: [Partial<StreamRules>, string][] = [
      [{ audioLanguages: ['eng', 'deu'] }, 'Keeps English and German audio.'],
      [{ audioLanguages: ['eng'], dropUndetermined: true }, 'Keeps English audio, drops tracks without a language.'],
      [{ subtitleLanguages: ['eng'], dropUndetermined: true }, 'Keeps English subtitles, drops tracks without a language.'],
      [{ dropCommentary: true }, 'Drops commentary and described tracks.'],
      [{ audioCodec: 'aac' }, 'Converts DTS, TrueHD, FLAC and PCM to AAC (128 kb/s per channel).'],
      [{ audioCodec: 'opus' }, 'Converts DTS, TrueHD, FLAC and PCM to Opus (96 kb/s per channel).'],
      [{ audioCodec: 'eac3', audioTranscode: ['dts'], audioBitrateKbps: 160 }, 'Converts DTS to E-AC-3 (160 kb/s per channel).'],
      [
        { audioCodec: 'aac', audioTranscode: ['truehd', 'mlp'], keepOriginalAudio: true },
        'Converts TrueHD and mlp to AAC (128 kb/s per channel) and keeps each original beside it.',
      ],
      [{ audioCodec: 'aac', audioTranscode: [] }, 'Converts no audio to AAC (no codec listed).'],
      [{ addStereo: true }, 'Adds a stereo track.'],
      [{ subtitleLanguages: ['eng', 'fra', 'xyz'] }, 'Keeps English, French and xyz subtitles.'],
      [{ dropImageSubtitles: true }, 'Drops image subtitles (PGS, VobSub, DVB).'],
      [{ maxHeight: 720 }, 'Keeps every audio and subtitle track, scales above 720p down.'],
      [{ container: 'mkv' }, 'Keeps every audio and subtitle track, writes Matroska (.mkv).'],
      [{ container: 'mp4' }, 'Keeps every audio and subtitle track, writes MP4 (.mp4).'],
      [{ minSizeMb: 500 }, 'Keeps every audio and subtitle track, skips files under 500 MB.'],
      [{ minBitrateKbps: 2000 }, 'Keeps every audio and subtitle track, skips files under 2000 kb/s (scaled to 1080p).'],
      [{ skipPaths: ['Extras/**', '**/*sample*'] }, 'Keeps every audio and subtitle track, skips files matching Extras/** and **/*sample*.'],
    ];
    for (const [change, text] of cases) expect(summarizeRules(rules(change)), JSON.stringify(change)).toBe(text);
  });

  it('says nothing of rules that change nothing', () => {
    // Undetermined tracks only drop with a language list; bitrate and originals only with a conversion.
    expect(summarizeRules(rules({ dropUndetermined: true, audioBitrateKbps: 64, keepOriginalAudio: true, audioTranscode: ['ac3'] }))).toBe(
      'Keeps every audio and subtitle track as it is.',
    );
  });

  it('puts every rule in one sentence', () => {
    const all = rules({
      audioLanguages: ['eng', 'deu'],
      dropCommentary: true,
      audioCodec: 'aac',
      addStereo: true,
      subtitleLanguages: ['eng'],
      maxHeight: 720,
      minSizeMb: 500,
    });
    expect(summarizeRules(all)).toBe(
      'Keeps English and German audio, drops commentary and described tracks, converts DTS, TrueHD, FLAC and PCM to AAC (128 kb/s per channel), adds a stereo track, keeps English subtitles, scales above 720p down, skips files under 500 MB.',
    );
  });
});

describe('language names and lists', () => {
  it('names common ISO 639-2 codes, both forms, and shows unknown ones as they are', () => {
    expect(['eng', 'deu', 'ger', 'fre', 'fra', 'JPN', 'qaa'].map(languageName)).toEqual([
      'English',
      'German',
      'German',
      'French',
      'French',
      'Japanese',
      'qaa',
    ]);
  });

  it('joins words as a sentence does', () => {
    expect([[], ['a'], ['a', 'b'], ['a', 'b', 'c']].map(listWords)).toEqual(['', 'a', 'a and b', 'a, b and c']);
  });
});

describe('the form draft', () => {
  it('goes to the rules and back unchanged', () => {
    const full = rules({
      audioLanguages: ['eng', 'deu'],
      audioCodec: 'opus',
      audioBitrateKbps: 80,
      maxHeight: 1080,
      minSizeMb: 0,
      minBitrateKbps: 1500,
      skipPaths: ['Extras/**', 'My Films/*.avi'],
    });
    expect(rulesOf(draftOf(full))).toEqual(full);
    expect(rulesOf(draftOf(null))).toEqual(DEFAULT_STREAM_RULES);
  });

  it('reads lists of codes by commas or spaces, lower-cased, and globs one per line', () => {
    expect(parseWords(' ENG, deu  fra,,')).toEqual(['eng', 'deu', 'fra']);
    expect(parseLines('Extras/**\n\n  My Films/*.avi \n')).toEqual(['Extras/**', 'My Films/*.avi']);
  });

  it('keeps an empty number unset and sends any other as typed, for the server to judge', () => {
    const draft = { ...draftOf(null), maxHeight: '100', minSizeMb: ' ' };
    expect(rulesOf(draft)).toMatchObject({ maxHeight: 100, minSizeMb: null });
  });

  it('places the server’s messages beside the rule they name', () => {
    const rules = STREAM_RULE_FIELDS.map((field) => ({ field }));
    expect(fieldFor('streamRules.maxHeight: must be 144 to 4320, not 100', rules)).toBe('streamRules.maxHeight');
    expect(fieldFor('streamRules.audioLanguages[1]: "en" is not an ISO 639-2 code', rules)).toBe('streamRules.audioLanguages');
    expect(fieldFor('streamRules.skipPaths[0]: "/abs" must be relative', rules)).toBe('streamRules.skipPaths');
  });
});
