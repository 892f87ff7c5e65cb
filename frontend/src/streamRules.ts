// A library's stream rules (issue 37) as the library form edits them, and the summary in words
// that it shows as the user types. The rules' meanings and bounds are the server's
// (src/domain/stream_rules.rs, docs/configuration.md "Stream rules"); the server checks every
// bound and its message is shown beside the field it names, so the form checks nothing itself.
import type { AudioCodec, ContainerRule, StreamRules } from './types';

/** The server's defaults: every stream copied, the container kept, no file left alone. */
export const DEFAULT_STREAM_RULES: StreamRules = {
  audioLanguages: [],
  dropUndetermined: false,
  dropCommentary: false,
  audioCodec: 'copy',
  audioTranscode: ['dts', 'truehd', 'flac', 'pcm'],
  audioBitrateKbps: null,
  keepOriginalAudio: false,
  addStereo: false,
  subtitleLanguages: [],
  dropImageSubtitles: false,
  maxHeight: null,
  container: 'keep',
  minSizeMb: null,
  minBitrateKbps: null,
  skipPaths: [],
};

/** English names of the common ISO 639-2 codes (both the B and T forms where they differ). */
const LANGUAGES: Record<string, string> = {
  ara: 'Arabic',
  bul: 'Bulgarian',
  cat: 'Catalan',
  ces: 'Czech',
  cze: 'Czech',
  chi: 'Chinese',
  zho: 'Chinese',
  dan: 'Danish',
  deu: 'German',
  ger: 'German',
  dut: 'Dutch',
  nld: 'Dutch',
  ell: 'Greek',
  gre: 'Greek',
  eng: 'English',
  est: 'Estonian',
  fin: 'Finnish',
  fra: 'French',
  fre: 'French',
  heb: 'Hebrew',
  hin: 'Hindi',
  hrv: 'Croatian',
  hun: 'Hungarian',
  ice: 'Icelandic',
  isl: 'Icelandic',
  ind: 'Indonesian',
  ita: 'Italian',
  jpn: 'Japanese',
  kor: 'Korean',
  lav: 'Latvian',
  lit: 'Lithuanian',
  may: 'Malay',
  msa: 'Malay',
  nob: 'Norwegian Bokmål',
  nor: 'Norwegian',
  per: 'Persian',
  fas: 'Persian',
  pol: 'Polish',
  por: 'Portuguese',
  rum: 'Romanian',
  ron: 'Romanian',
  rus: 'Russian',
  slk: 'Slovak',
  slo: 'Slovak',
  slv: 'Slovenian',
  spa: 'Spanish',
  srp: 'Serbian',
  swe: 'Swedish',
  tam: 'Tamil',
  tel: 'Telugu',
  tha: 'Thai',
  tur: 'Turkish',
  ukr: 'Ukrainian',
  vie: 'Vietnamese',
};

/** The English name of an ISO 639-2 code; an unknown code as it is. */
export function languageName(code: string): string {
  return LANGUAGES[code.toLowerCase()] ?? code;
}

/** How audio codecs are usually written; an unknown FFmpeg name as it is. */
const AUDIO_CODECS: Record<string, string> = {
  aac: 'AAC',
  ac3: 'AC-3',
  alac: 'ALAC',
  dts: 'DTS',
  eac3: 'E-AC-3',
  flac: 'FLAC',
  mp2: 'MP2',
  mp3: 'MP3',
  opus: 'Opus',
  pcm: 'PCM',
  truehd: 'TrueHD',
  vorbis: 'Vorbis',
  wmav2: 'WMA',
};

export function audioCodecName(codec: string): string {
  return AUDIO_CODECS[codec.toLowerCase()] ?? codec;
}

/** "A", "A and B", "A, B and C". */
export function listWords(items: readonly string[]): string {
  if (items.length <= 1) return items.join('');
  return `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]}`;
}

/** Bitrate per channel converted audio gets when the library sets none (the server's rule). */
export function defaultAudioKbps(codec: AudioCodec): number {
  return codec === 'opus' ? 96 : 128;
}

const CONTAINERS: Record<ContainerRule, string> = { keep: 'the source’s container', mkv: 'Matroska (.mkv)', mp4: 'MP4 (.mp4)' };

/**
 * The rules in words, one clause per rule that changes something, e.g. "Keeps English and
 * German audio, drops commentary, converts DTS to AAC (128 kb/s per channel), scales above
 * 720p down." Rules that change nothing (a bitrate while audio is copied) say nothing.
 */
export function summarizeRules(rules: StreamRules): string {
  const tracks: string[] = [];
  const audioLanguages = rules.audioLanguages ?? [];
  if (audioLanguages.length > 0) tracks.push(`keeps ${listWords(audioLanguages.map(languageName))} audio`);
  if (rules.dropCommentary) tracks.push('drops commentary and described tracks');
  if (rules.audioCodec !== 'copy') {
    const target = audioCodecName(rules.audioCodec);
    const kbps = rules.audioBitrateKbps ?? defaultAudioKbps(rules.audioCodec);
    const sources = rules.audioTranscode ?? [];
    if (sources.length === 0) {
      tracks.push(`converts no audio to ${target} (no codec listed)`);
    } else {
      const original = rules.keepOriginalAudio ? ' and keeps each original beside it' : '';
      tracks.push(`converts ${listWords(sources.map(audioCodecName))} to ${target} (${kbps} kb/s per channel)${original}`);
    }
  }
  if (rules.addStereo) tracks.push('adds a stereo track');
  const subtitleLanguages = rules.subtitleLanguages ?? [];
  if (subtitleLanguages.length > 0) tracks.push(`keeps ${listWords(subtitleLanguages.map(languageName))} subtitles`);
  // Untagged tracks are kept beside a language list unless asked (audio and subtitles alike).
  if (rules.dropUndetermined && (audioLanguages.length > 0 || subtitleLanguages.length > 0)) tracks.push('drops tracks without a language');
  if (rules.dropImageSubtitles) tracks.push('drops image subtitles (PGS, VobSub, DVB)');

  const rest: string[] = [];
  if (rules.maxHeight != null) rest.push(`scales above ${rules.maxHeight}p down`);
  if (rules.container !== 'keep') rest.push(`writes ${CONTAINERS[rules.container]}`);
  if (rules.minSizeMb != null) rest.push(`skips files under ${rules.minSizeMb} MB`);
  if (rules.minBitrateKbps != null) rest.push(`skips files under ${rules.minBitrateKbps} kb/s (scaled to 1080p)`);
  const skipPaths = rules.skipPaths ?? [];
  if (skipPaths.length > 0) rest.push(`skips files matching ${listWords(skipPaths)}`);

  if (tracks.length === 0 && rest.length === 0) return 'Keeps every audio and subtitle track as it is.';
  const clauses = tracks.length > 0 ? [...tracks, ...rest] : ['keeps every audio and subtitle track', ...rest];
  const sentence = clauses.join(', ');
  return `${sentence.charAt(0).toUpperCase()}${sentence.slice(1)}.`;
}

/** The rules as the form holds them: lists and numbers as the text typed. */
export interface RulesDraft {
  audioLanguages: string;
  dropUndetermined: boolean;
  dropCommentary: boolean;
  audioCodec: AudioCodec;
  audioTranscode: string;
  audioBitrateKbps: string;
  keepOriginalAudio: boolean;
  addStereo: boolean;
  subtitleLanguages: string;
  dropImageSubtitles: boolean;
  maxHeight: string;
  container: ContainerRule;
  minSizeMb: string;
  minBitrateKbps: string;
  skipPaths: string;
}

const numberText = (value: number | null | undefined): string => (value == null ? '' : String(value));

export function draftOf(rules: StreamRules | null | undefined): RulesDraft {
  const r = { ...DEFAULT_STREAM_RULES, ...rules };
  return {
    audioLanguages: (r.audioLanguages ?? []).join(', '),
    dropUndetermined: r.dropUndetermined,
    dropCommentary: r.dropCommentary,
    audioCodec: r.audioCodec,
    audioTranscode: (r.audioTranscode ?? []).join(', '),
    audioBitrateKbps: numberText(r.audioBitrateKbps),
    keepOriginalAudio: r.keepOriginalAudio,
    addStereo: r.addStereo,
    subtitleLanguages: (r.subtitleLanguages ?? []).join(', '),
    dropImageSubtitles: r.dropImageSubtitles,
    maxHeight: numberText(r.maxHeight),
    container: r.container,
    minSizeMb: numberText(r.minSizeMb),
    minBitrateKbps: numberText(r.minBitrateKbps),
    skipPaths: (r.skipPaths ?? []).join('\n'),
  };
}

/** Codes or codec names separated by commas or spaces, lower-cased (the server's spelling). */
export function parseWords(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((word) => word.trim().toLowerCase())
    .filter((word) => word !== '');
}

/** One glob pattern per line; blank lines ignored (patterns may hold spaces). */
export function parseLines(text: string): string[] {
  return text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
}

/** A number field: empty is "not set" (null); anything else goes to the server as typed. */
export function parseNumber(text: string): number | null {
  const trimmed = text.trim();
  return trimmed === '' ? null : Number(trimmed);
}

export function rulesOf(draft: RulesDraft): StreamRules {
  return {
    audioLanguages: parseWords(draft.audioLanguages),
    dropUndetermined: draft.dropUndetermined,
    dropCommentary: draft.dropCommentary,
    audioCodec: draft.audioCodec,
    audioTranscode: parseWords(draft.audioTranscode),
    audioBitrateKbps: parseNumber(draft.audioBitrateKbps),
    keepOriginalAudio: draft.keepOriginalAudio,
    addStereo: draft.addStereo,
    subtitleLanguages: parseWords(draft.subtitleLanguages),
    dropImageSubtitles: draft.dropImageSubtitles,
    maxHeight: parseNumber(draft.maxHeight),
    container: draft.container,
    minSizeMb: parseNumber(draft.minSizeMb),
    minBitrateKbps: parseNumber(draft.minBitrateKbps),
    skipPaths: parseLines(draft.skipPaths),
  };
}

/** The fields a server message about the rules names ("streamRules.maxHeight: must be ..."). */
export const STREAM_RULE_FIELDS = [
  'audioLanguages',
  'dropUndetermined',
  'dropCommentary',
  'audioCodec',
  'audioTranscode',
  'audioBitrateKbps',
  'keepOriginalAudio',
  'addStereo',
  'subtitleLanguages',
  'dropImageSubtitles',
  'maxHeight',
  'container',
  'minSizeMb',
  'minBitrateKbps',
  'skipPaths',
].map((name) => `streamRules.${name}`);
