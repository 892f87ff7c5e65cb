// The library form's stream rules (issue 37): which audio and subtitle tracks stay, which audio
// is converted, a stereo track, a height cap, the container, and which files are left alone;
// with the rules in words above them, updated as the user types (streamRules.ts). The server
// checks the bounds; its message shows beside the field it names.
import type { ComponentChildren } from 'preact';
import { FieldError, invalidProps } from '../../components';
import { defaultAudioKbps, rulesOf, summarizeRules, type RulesDraft } from '../../streamRules';
import type { AudioCodec, ContainerRule } from '../../types';

type TextKey = { [K in keyof RulesDraft]: RulesDraft[K] extends string ? K : never }[keyof RulesDraft];
type FlagKey = { [K in keyof RulesDraft]: RulesDraft[K] extends boolean ? K : never }[keyof RulesDraft];

const AUDIO_CODECS: { value: AudioCodec; label: string }[] = [
  { value: 'copy', label: 'Nothing: copy every track' },
  { value: 'aac', label: 'AAC' },
  { value: 'opus', label: 'Opus' },
  { value: 'eac3', label: 'E-AC-3' },
];

const CONTAINERS: { value: ContainerRule; label: string }[] = [
  { value: 'keep', label: 'Keep the source’s' },
  { value: 'mkv', label: 'Matroska (.mkv)' },
  { value: 'mp4', label: 'MP4 (.mp4)' },
];

export function StreamRulesFields({
  draft,
  onChange,
  errors,
}: {
  draft: RulesDraft;
  /** Merged into the latest draft (several changes may come before the next render). */
  onChange: (change: Partial<RulesDraft>) => void;
  /** The server's messages by field, `streamRules.maxHeight` and so on. */
  errors: Record<string, string>;
}) {
  const set = onChange;
  const errorOf = (key: keyof RulesDraft) => errors[`streamRules.${key}`];
  const errorId = (key: keyof RulesDraft) => `stream-rules-${key}-error`;

  const text = (key: TextKey, label: ComponentChildren, props: Record<string, unknown> = {}) => (
    <label class="field">
      <span>{label}</span>
      <input
        value={draft[key]}
        onInput={(e) => set({ [key]: e.currentTarget.value })}
        spellcheck={false}
        autocomplete="off"
        {...props}
        {...invalidProps(errorId(key), errorOf(key))}
      />
      <FieldError id={errorId(key)} message={errorOf(key)} />
    </label>
  );
  const number = (key: TextKey, label: ComponentChildren, placeholder: string) =>
    text(key, label, { type: 'number', inputMode: 'numeric', step: 1, min: 0, placeholder });
  const flag = (key: FlagKey, label: ComponentChildren) => (
    <label class="check-field">
      <input type="checkbox" checked={draft[key]} onChange={(e) => set({ [key]: e.currentTarget.checked })} />
      <span>{label}</span>
    </label>
  );

  const converting = draft.audioCodec !== 'copy';
  return (
    <fieldset class="field stream-rules">
      <legend>Streams</legend>
      <p class="rules-summary" role="status" aria-label="What the rules do">
        {summarizeRules(rulesOf(draft))}
      </p>

      <h3 class="small">Audio</h3>
      <div class="form-row">
        {text('audioLanguages', 'Audio languages to keep', { placeholder: 'eng, deu (empty: all)' })}
        {flag('dropUndetermined', 'Drop tracks without a language (where languages are listed)')}
        {flag('dropCommentary', 'Drop commentary and described tracks')}
      </div>
      <div class="form-row">
        <label class="field">
          <span>Convert audio to</span>
          <select
            value={draft.audioCodec}
            onChange={(e) => set({ audioCodec: e.currentTarget.value as AudioCodec })}
            {...invalidProps(errorId('audioCodec'), errorOf('audioCodec'))}
          >
            {AUDIO_CODECS.map(({ value, label }) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
          <FieldError id={errorId('audioCodec')} message={errorOf('audioCodec')} />
        </label>
        {converting && text('audioTranscode', 'Codecs converted', { placeholder: 'dts, truehd, flac, pcm' })}
        {converting &&
          number('audioBitrateKbps', 'Bitrate per channel (kb/s, 16–512)', `${defaultAudioKbps(draft.audioCodec)} (default)`)}
      </div>
      <div class="form-row">
        {converting && flag('keepOriginalAudio', 'Keep the original beside the converted track')}
        {flag('addStereo', 'Add a stereo track where a language has only surround')}
      </div>

      <h3 class="small">Subtitles</h3>
      <div class="form-row">
        {text('subtitleLanguages', 'Subtitle languages to keep', { placeholder: 'eng (empty: all)' })}
        {flag('dropImageSubtitles', 'Drop image subtitles (PGS, VobSub, DVB)')}
      </div>

      <h3 class="small">Video and container</h3>
      <div class="form-row">
        {number('maxHeight', 'Largest height (pixels, 144–4320)', 'keep the size')}
        <label class="field">
          <span>Container</span>
          <select
            value={draft.container}
            onChange={(e) => set({ container: e.currentTarget.value as ContainerRule })}
            {...invalidProps(errorId('container'), errorOf('container'))}
          >
            {CONTAINERS.map(({ value, label }) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
          <FieldError id={errorId('container')} message={errorOf('container')} />
        </label>
      </div>

      <h3 class="small">Files left alone</h3>
      <div class="form-row">
        {number('minSizeMb', 'Smaller than (MB)', 'none')}
        {number('minBitrateKbps', 'Bitrate below (kb/s at 1080p)', 'none')}
        <label class="field">
          <span>Paths matching (one pattern per line, relative to the library)</span>
          <textarea
            rows={2}
            value={draft.skipPaths}
            placeholder={'Extras/**\n**/*sample*'}
            spellcheck={false}
            onInput={(e) => set({ skipPaths: e.currentTarget.value })}
            {...invalidProps(errorId('skipPaths'), errorOf('skipPaths'))}
          />
          <FieldError id={errorId('skipPaths')} message={errorOf('skipPaths')} />
        </label>
      </div>
      <p class="muted small">
        A file never loses all its audio: when no track matches the languages, every track is kept and the job’s plan says
        why. Files left alone are SKIPPED at analysis with the rule named.
      </p>
    </fieldset>
  );
}
