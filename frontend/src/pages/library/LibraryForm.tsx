// The library form (create and edit): paths, target codec and encoder from GET /encoders,
// quality or two passes, and the stream rules (StreamRules.tsx). What the form finds itself
// shows beside the field; so does what the server refuses (forms.ts).
import type { ComponentChildren } from 'preact';
import { useState } from 'preact/hooks';
import { Alert } from '../../components';
import {
  availableEncoders,
  codecInfo,
  codecLabel,
  defaultInput,
  encoderInfo,
  fitSettings,
  preferredEncoder,
  validateLibrary,
  type EncoderCatalog,
  type LibraryErrors,
} from '../../encoders';
import type { FieldRule } from '../../forms';
import { ACTION_CHOICES, SCHEDULE_CHOICES } from '../../health';
import { useSave } from '../../hooks';
import { api } from '../../session';
import { draftOf, rulesOf, STREAM_RULE_FIELDS, type RulesDraft } from '../../streamRules';
import type { Codec, Library, LibraryInput } from '../../types';
import { StreamRulesFields } from './StreamRules';

function initialInput(library: Library | null, catalog: EncoderCatalog): LibraryInput {
  if (library) {
    const {
      name,
      paths,
      targetCodec,
      encoder,
      quality,
      preset,
      qualityMode,
      targetVmaf,
      maxSizePercent,
      keepDolbyVision,
      keepModifiedTime,
      rateControl,
      targetBitrateKbps,
      streamRules,
      healthSchedule,
      healthAction,
      watch,
      enabled,
    } = library;
    return {
      name,
      paths: paths.length > 0 ? [...paths] : [''],
      targetCodec,
      encoder,
      quality,
      preset,
      qualityMode,
      targetVmaf,
      maxSizePercent,
      keepDolbyVision,
      keepModifiedTime,
      rateControl,
      targetBitrateKbps: targetBitrateKbps ?? null,
      streamRules,
      healthSchedule,
      healthAction,
      watch,
      enabled,
    };
  }
  return defaultInput(catalog);
}

/** The fields a server validation message may name (it begins with the field's name). */
const LIBRARY_RULES: readonly FieldRule[] = [
  'name',
  'paths',
  'encoder',
  'quality',
  'preset',
  'targetVmaf',
  'maxSizePercent',
  'rateControl',
  'targetBitrateKbps',
  'healthSchedule',
  'healthAction',
  ...STREAM_RULE_FIELDS,
].map((field) => ({ field }));

export function LibraryForm({
  library,
  catalog,
  onSaved,
  onCancel,
}: {
  library: Library | null;
  catalog: EncoderCatalog;
  onSaved: (library: Library) => void;
  onCancel: () => void;
}) {
  const [input, setInput] = useState<LibraryInput>(() => initialInput(library, catalog));
  const [clientErrors, setErrors] = useState<LibraryErrors>({});
  // Lists and numbers as typed, so that "eng, " stays while the next code is written.
  const [rules, setRules] = useState<RulesDraft>(() => draftOf(library?.streamRules));
  const { busy, errors: saveErrors, save } = useSave(LIBRARY_RULES);
  const error = saveErrors.form;
  // What the form finds itself first; what the server refused beside the field it names.
  const errors: LibraryErrors = { ...saveErrors.fields, ...clientErrors };
  const offered = availableEncoders(catalog, input.targetCodec);
  // Keep an existing library's encoder visible even when no node runs it any more.
  const choices =
    input.encoder && !offered.includes(input.encoder) && encoderInfo(catalog, input.targetCodec, input.encoder)
      ? [...offered, input.encoder]
      : offered;
  const set = (change: Partial<LibraryInput>) => setInput((current) => ({ ...current, ...change }));
  // The codec's encoders no node that is up runs, with why (the hardware they need).
  const unavailable = (codecInfo(catalog, input.targetCodec)?.encoders ?? []).filter((encoder) => !encoder.available);

  const changeCodec = (codec: Codec) => {
    const encoders = availableEncoders(catalog, codec);
    const encoder = encoders.includes(input.encoder) ? input.encoder : preferredEncoder(catalog, codec);
    // Dolby Vision is kept in HEVC outputs only: another codec drops the choice.
    const keepDolbyVision = codec === 'hevc' && input.keepDolbyVision;
    set({ targetCodec: codec, encoder, keepDolbyVision, ...fitSettings(catalog, codec, encoder, input) });
  };

  const changeEncoder = (encoder: string) => set({ encoder, ...fitSettings(catalog, input.targetCodec, encoder, input) });

  // A number as typed: left empty it holds NaN, which validateLibrary refuses beside the field.
  const number = (key: 'quality' | 'targetVmaf' | 'maxSizePercent', label: ComponentChildren, props: Record<string, unknown>) => (
    <label class="field">
      <span>{label}</span>
      <input
        type="number"
        {...props}
        value={Number.isNaN(input[key]) ? '' : input[key]}
        aria-invalid={errors[key] ? true : undefined}
        onInput={(e) => set({ [key]: e.currentTarget.value === '' ? Number.NaN : Number(e.currentTarget.value) })}
      />
      {errors[key] && <small class="text-bad">{errors[key]}</small>}
    </label>
  );
  // One of a fixed list (health.ts); only the server refuses these, so its message is the one shown.
  const choice = <K extends 'healthSchedule' | 'healthAction'>(
    key: K,
    label: string,
    choices: readonly { value: LibraryInput[K]; label: string }[],
  ) => (
    <label class="field">
      <span>{label}</span>
      <select
        value={input[key]}
        aria-invalid={saveErrors.fields[key] ? true : undefined}
        onChange={(e) => set({ [key]: e.currentTarget.value as LibraryInput[K] })}
      >
        {choices.map((item) => (
          <option key={item.value} value={item.value}>
            {item.label}
          </option>
        ))}
      </select>
      {saveErrors.fields[key] && <small class="text-bad">{saveErrors.fields[key]}</small>}
    </label>
  );

  const submit = async (event: Event) => {
    event.preventDefault();
    const body: LibraryInput = {
      ...input,
      name: input.name.trim(),
      paths: input.paths.map((p) => p.trim()).filter((p) => p !== ''),
      streamRules: rulesOf(rules),
    };
    const found = validateLibrary(body, catalog, choices);
    setErrors(found);
    if (Object.keys(found).length > 0) return;
    const result = await save(() => (library ? api.updateLibrary(library.id, body) : api.createLibrary(body)));
    if (result) onSaved(result);
  };

  const encoder = encoderInfo(catalog, input.targetCodec, input.encoder);
  const presets = encoder?.presets ?? [];
  const quality = encoder?.quality ?? { min: 0, max: 0, default: 0 };
  const title = library ? `Edit ${library.name}` : 'New library';
  return (
    <form class="card form" onSubmit={(e) => void submit(e)} aria-labelledby="library-form-title" noValidate>
      <h2 id="library-form-title">{title}</h2>
      <Alert message={error} />
      <label class="field">
        <span>Name</span>
        <input value={input.name} onInput={(e) => set({ name: e.currentTarget.value })} aria-invalid={errors.name ? true : undefined} required />
        {errors.name && <small class="text-bad">{errors.name}</small>}
      </label>

      <fieldset class="field">
        <legend>Media paths</legend>
        {input.paths.map((path, index) => (
          <div class="path-row" key={index}>
            <input
              value={path}
              placeholder="/media/movies"
              aria-label={`Media path ${index + 1}`}
              aria-invalid={errors.paths ? true : undefined}
              onInput={(e) => {
                const paths = [...input.paths];
                paths[index] = e.currentTarget.value;
                set({ paths });
              }}
            />
            <button
              type="button"
              class="icon-button"
              aria-label={`Remove media path ${index + 1}`}
              disabled={input.paths.length === 1}
              onClick={() => set({ paths: input.paths.filter((_, i) => i !== index) })}
            >
              ×
            </button>
          </div>
        ))}
        <button type="button" class="button button-small" onClick={() => set({ paths: [...input.paths, ''] })}>
          Add path
        </button>
        {errors.paths && <small class="text-bad">{errors.paths}</small>}
      </fieldset>

      <div class="form-row">
        <label class="field">
          <span>Target codec</span>
          <select value={input.targetCodec} onChange={(e) => changeCodec(e.currentTarget.value as Codec)}>
            {catalog.codecs.map(({ codec, label }) => (
              <option key={codec} value={codec}>
                {label}
              </option>
            ))}
          </select>
        </label>
        <label class="field">
          <span>Encoder</span>
          <select
            value={input.encoder}
            disabled={choices.length === 0}
            aria-invalid={errors.encoder ? true : undefined}
            onChange={(e) => changeEncoder(e.currentTarget.value)}
          >
            {choices.length === 0 && <option value="">No node offers one</option>}
            {choices.map((name) => (
              <option key={name} value={name}>
                {encoderInfo(catalog, input.targetCodec, name)?.label ?? name}
                {offered.includes(name) ? '' : ' (no node that is up runs it)'}
              </option>
            ))}
          </select>
          {offered.length === 0 && (
            <small class="text-bad">No node that is up runs an encoder for {codecLabel(catalog, input.targetCodec)}.</small>
          )}
          {unavailable.length > 0 && (
            <ul class="muted small" aria-label="Encoders not offered">
              {unavailable.map((encoder) => (
                <li key={encoder.name}>
                  <code>{encoder.name}</code>: {encoder.unavailableReason}
                </li>
              ))}
            </ul>
          )}
          {errors.encoder && <small class="text-bad">{errors.encoder}</small>}
        </label>
        {number('quality', <>Quality (CRF {quality.min}–{quality.max})</>, { inputMode: 'numeric', min: quality.min, max: quality.max, step: 1 })}
        <label class="field">
          <span>Preset</span>
          <select
            value={input.preset}
            disabled={presets.length === 0}
            aria-invalid={errors.preset ? true : undefined}
            onChange={(e) => set({ preset: e.currentTarget.value })}
          >
            {presets.length === 0 && <option value="">none</option>}
            {presets.length > 0 && !presets.includes(input.preset) && <option value={input.preset}>{input.preset || 'choose one'}</option>}
            {presets.map((preset) => (
              <option key={preset} value={preset}>
                {preset}
                {preset === encoder?.defaultPreset ? ' (default)' : ''}
              </option>
            ))}
          </select>
          {errors.preset && <small class="text-bad">{errors.preset}</small>}
        </label>
      </div>
      <p class="muted small">Lower CRF keeps more detail and gives larger files. For HDR sources, CRF 18–22 with a slow preset.</p>

      <div class="form-row">
        <label class="field">
          <span>Quality mode</span>
          <select value={input.qualityMode} onChange={(e) => set({ qualityMode: e.currentTarget.value as LibraryInput['qualityMode'] })}>
            <option value="crf">Fixed CRF</option>
            <option value="vmaf">Target VMAF (searched per file)</option>
          </select>
        </label>
        {input.qualityMode === 'vmaf' && (
          <>
            {number('targetVmaf', 'Target VMAF (80–99)', { min: 80, max: 99, step: 0.5 })}
            {number('maxSizePercent', 'Largest output (% of the source)', { inputMode: 'numeric', min: 10, max: 100, step: 1 })}
          </>
        )}
      </div>
      <div class="form-row">
        <label class="field">
          <span>Rate control</span>
          <select
            value={input.rateControl}
            aria-invalid={errors.rateControl ? true : undefined}
            onChange={(e) => set({ rateControl: e.currentTarget.value as LibraryInput['rateControl'] })}
          >
            <option value="crf">Quality (CRF)</option>
            <option value="twoPass">Two passes to a bitrate</option>
          </select>
          {errors.rateControl && <small class="text-bad">{errors.rateControl}</small>}
        </label>
        {input.rateControl === 'twoPass' && (
          <label class="field">
            <span>Target bitrate (kbit/s)</span>
            <input
              type="number"
              inputMode="numeric"
              min={encoder?.twoPass?.minKbps}
              max={encoder?.twoPass?.maxKbps}
              step={1}
              value={input.targetBitrateKbps ?? ''}
              aria-invalid={errors.targetBitrateKbps ? true : undefined}
              onInput={(e) => set({ targetBitrateKbps: e.currentTarget.value === '' ? null : Number(e.currentTarget.value) })}
            />
            {errors.targetBitrateKbps && <small class="text-bad">{errors.targetBitrateKbps}</small>}
          </label>
        )}
      </div>
      {input.rateControl === 'twoPass' && (
        <p class="muted small">
          A first pass reads the whole video, then the encode spends the bitrate where it is needed (libx265; NVENC uses its
          multipass). A pause or restart during a pass runs that pass again.
        </p>
      )}
      {input.qualityMode === 'vmaf' && (
        <p class="muted small">
          Each file is sampled first: the highest CRF whose VMAF reaches the target is used (the CRF above is where the search
          starts), and a file whose output would be larger than the limit is skipped before anything is encoded.
        </p>
      )}

      {input.targetCodec === 'hevc' && (
        <div class="form-row">
          <label class="check-field">
            <input
              type="checkbox"
              checked={input.keepDolbyVision}
              onChange={(e) => set({ keepDolbyVision: e.currentTarget.checked })}
            />
            <span>Keep Dolby Vision</span>
          </label>
          <p class="muted small">
            Dolby Vision sources with an HDR10 base layer (profiles 7 and 8.1) stay Dolby Vision, as profile 8.1, every
            frame's RPU carried. Otherwise they become HDR10, which every HDR screen shows.
          </p>
        </div>
      )}

      <div class="form-row">
        <label class="check-field">
          <input
            type="checkbox"
            checked={input.keepModifiedTime}
            onChange={(e) => set({ keepModifiedTime: e.currentTarget.checked })}
          />
          <span>Keep each file's modification time</span>
        </label>
        <p class="muted small">
          A replaced file always keeps the original's permissions, owner and group. Keeping its time too hides the change from
          media servers that only look at times.
        </p>
      </div>

      <StreamRulesFields draft={rules} onChange={(change) => setRules((current) => ({ ...current, ...change }))} errors={saveErrors.fields} />

      <div class="form-row">
        {choice('healthSchedule', 'Scheduled health check', SCHEDULE_CHOICES)}
        {choice('healthAction', 'After a scheduled check, for each damaged file', ACTION_CHOICES)}
      </div>
      <p class="muted small">
        A quick check of the library (files unchanged since a check found them ok are skipped), inside the encoding windows, on
        idle slots only. Damaged files are not encoded; getting a new copy asks the Sonarr or Radarr connection that holds the
        file to delete it and search again.
      </p>

      <div class="form-row">
        <label class="check-field">
          <input type="checkbox" checked={input.watch} onChange={(e) => set({ watch: e.currentTarget.checked })} />
          <span>Watch for new files</span>
        </label>
        <label class="check-field">
          <input type="checkbox" checked={input.enabled} onChange={(e) => set({ enabled: e.currentTarget.checked })} />
          <span>Enabled</span>
        </label>
      </div>

      <div class="actions">
        <button type="submit" class="button button-primary" disabled={busy}>
          {busy ? 'Saving…' : library ? 'Save changes' : 'Create library'}
        </button>
        <button type="button" class="button" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}
