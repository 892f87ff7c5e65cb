// Settings > Sonarr and Radarr webhook: the folders as Sonarr or Radarr see them, mapped to
// where condense sees the same files, so an import becomes a job at once.
import { useEffect, useState } from 'preact/hooks';
import { Alert, FieldError, Loading } from '../../components';
import { useResource, useSave } from '../../hooks';
import { api } from '../../session';
import type { PathMapping } from '../../types';
import { filledMappings, mappingRowOf, MappingRows } from '../../widgets/MappingRows';

const LABELS = {
  from: 'Folder as Sonarr or Radarr sees it',
  to: 'Same folder as condense sees it',
  fromPlaceholder: '/tv',
  toPlaceholder: '/media/tv',
};

export function PathMappingsSection() {
  const settings = useResource(() => api.arrSettings(), []);
  const [rows, setRows] = useState<PathMapping[]>([{ from: '', to: '' }]);
  const [notice, setNotice] = useState<string | null>(null);
  const { busy, errors, save } = useSave([{ field: 'pathMappings', mentions: /folder/i }]);

  useEffect(() => {
    if (settings.data) setRows(settings.data.pathMappings.length > 0 ? settings.data.pathMappings : [{ from: '', to: '' }]);
  }, [settings.data]);

  const submit = async (event: Event) => {
    event.preventDefault();
    setNotice(null);
    const saved = await save(() => api.setArrSettings({ pathMappings: filledMappings(rows) }));
    if (saved) {
      settings.setData(saved);
      setNotice(saved.pathMappings.length === 0 ? 'No mappings: paths are taken as Sonarr and Radarr send them.' : 'Path mappings saved.');
    }
  };

  return (
    <section class="card" aria-labelledby="arr-title">
      <h2 id="arr-title">Sonarr and Radarr path mappings</h2>
      <p class="muted small">
        Sonarr and Radarr call <code>/integrations/arr</code> after an import (Settings &gt; Connect &gt; Webhook, with an Integration key). When they
        see your media under other folders than condense, map each; the longest matching folder applies.
      </p>
      <Alert message={settings.error} />
      {!settings.data ? (
        settings.loading && <Loading what="the path mappings" />
      ) : (
        <form class="form" onSubmit={(e) => void submit(e)} aria-label="Sonarr and Radarr path mappings" noValidate>
          <Alert message={errors.form} />
          <Alert kind="ok" message={notice} />
          <MappingRows rows={rows} onChange={setRows} labels={LABELS} idPrefix="arr" invalidRow={mappingRowOf(errors.fields.pathMappings)} />
          <FieldError id="arr-mappings-error" message={errors.fields.pathMappings} />
          <button type="submit" class="button button-primary" disabled={busy}>
            {busy ? 'Saving…' : 'Save mappings'}
          </button>
        </form>
      )}
    </section>
  );
}
