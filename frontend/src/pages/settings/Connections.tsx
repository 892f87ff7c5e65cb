// Settings > Connections: the media stack told of replaced files (Plex, Jellyfin, Emby,
// Sonarr, Radarr), each with its path mappings, last refresh or error, a test; edited in
// place through the shared outlet editor.
import { FieldError } from '../../components';
import { api } from '../../session';
import type { Connection, ConnectionInput, ConnectionKind, PathMapping } from '../../types';
import { filledMappings, mappingRowOf, MappingRows } from '../../widgets/MappingRows';
import { OutletSection, type ExtraEditorProps, type OutletConfig } from '../../widgets/OutletSection';

/** What each product wants as its URL and key, for the form's hints. */
export const CONNECTION_KINDS: { kind: ConnectionKind; label: string; url: string; secret: string }[] = [
  { kind: 'plex', label: 'Plex', url: 'http://plex:32400', secret: 'X-Plex-Token' },
  { kind: 'jellyfin', label: 'Jellyfin', url: 'http://jellyfin:8096', secret: 'API key (Dashboard > API Keys)' },
  { kind: 'emby', label: 'Emby', url: 'http://emby:8096/emby', secret: 'API key (Settings > API Keys)' },
  { kind: 'sonarr', label: 'Sonarr', url: 'http://sonarr:8989', secret: 'API key (Settings > General)' },
  { kind: 'radarr', label: 'Radarr', url: 'http://radarr:7878', secret: 'API key (Settings > General)' },
];

const LABELS = {
  from: 'Folder as condense sees it',
  to: 'Same folder as the product sees it',
  fromPlaceholder: '/media/tv',
  toPlaceholder: '/tv',
};

function MappingsEditor({ value, onChange, idPrefix, error }: ExtraEditorProps<PathMapping[]>) {
  return (
    <fieldset class="field">
      <legend>Path mappings</legend>
      <MappingRows rows={value} onChange={onChange} labels={LABELS} idPrefix={idPrefix} invalidRow={mappingRowOf(error)} />
      <FieldError id={`${idPrefix}-mappings-error`} message={error} />
    </fieldset>
  );
}

const config: OutletConfig<Connection, ConnectionKind, PathMapping[], ConnectionInput> = {
  slug: 'connections',
  title: 'Connections',
  intro:
    "After a replace (or a change of container, by the new name) each connection is told, so it shows the new file: Plex scans the file's folder, Jellyfin and Emby are told the path, Sonarr and Radarr rescan the series or movie. Path mappings turn condense's folders into the product's.",
  noun: 'connection',
  kindLabel: 'Product',
  kinds: CONNECTION_KINDS,
  secretLabel: 'API key',
  secretRequired: true,
  secretRemovable: false,
  hasSecret: (connection) => connection.hasApiKey,
  secretCleared: (connection) => connection.apiKeyCleared,
  lastLabel: 'Last refresh',
  extraLabel: 'Path mappings',
  showExtra: (connection) => (connection.pathMappings.length === 0 ? 'None' : connection.pathMappings.map((m) => `${m.from} → ${m.to}`).join(', ')),
  extraOf: (connection) => (connection.pathMappings.length === 0 ? [{ from: '', to: '' }] : connection.pathMappings),
  emptyExtra: () => [{ from: '', to: '' }],
  extraReady: () => true,
  ExtraEditor: MappingsEditor,
  body: (draft, id) => {
    const base = { name: draft.name.trim(), kind: draft.kind, url: draft.url.trim() };
    const pathMappings = filledMappings(draft.extra);
    if (id === null) return { ...base, apiKey: draft.secret, pathMappings };
    // Left out, the stored key is kept.
    return { ...base, enabled: draft.enabled, pathMappings, ...(draft.secret === '' ? {} : { apiKey: draft.secret }) };
  },
  rules: [
    { field: 'name' },
    { field: 'extra', mentions: /pathMappings|folder/i },
    { field: 'secret', mentions: /api key|token|apiKey/i },
    { field: 'url', mentions: /\burl\b/i },
  ],
  list: () => api.connections(),
  create: (body) => api.createConnection(body),
  update: (id, body) => api.updateConnection(id, body),
  remove: (id) => api.deleteConnection(id),
  test: (id) => api.testConnection(id),
  testWords: (name, result) => (result.delivered ? `“${name}” answered.` : `“${name}” did not answer: ${result.error ?? ''}`),
};

export function ConnectionsSection({ editable }: { editable: boolean }) {
  return <OutletSection config={config} editable={editable} />;
}
