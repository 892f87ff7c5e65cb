import { useState } from 'preact/hooks';
import { errorMessage } from '../api';
import { Alert, Badge, Loading } from '../components';
import { codecLabel } from '../encoders';
import { formatRelative } from '../format';
import { ForecastPanel } from './Forecast';
import { HealthPanel } from './library/Health';
import { LibraryForm } from './library/LibraryForm';
import { useResource, useRole } from '../hooks';
import { routeHref } from '../router';
import { allows, api } from '../session';
import type { Library } from '../types';

type Editing = { mode: 'create' } | { mode: 'edit'; library: Library } | null;

export function Libraries() {
  const libraries = useResource(() => api.libraries(), []);
  const catalog = useResource(() => api.encoders(), []);
  const [editing, setEditing] = useState<Editing>(null);
  const [error, setError] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [busyId, setBusyId] = useState<number | null>(null);
  const [forecastId, setForecastId] = useState<number | null>(null);
  // Whose health panel is open: it takes the whole width of the list (its table needs it).
  const [healthId, setHealthId] = useState<number | null>(null);
  const role = useRole();

  const saved = (library: Library) => {
    libraries.setData((current) => {
      const list = current ?? [];
      return list.some((item) => item.id === library.id)
        ? list.map((item) => (item.id === library.id ? library : item))
        : [...list, library];
    });
    setNotice(`Saved library “${library.name}”.`);
    setEditing(null);
  };

  const scan = async (library: Library) => {
    setBusyId(library.id);
    setError(null);
    try {
      const { queued } = await api.scanLibrary(library.id);
      setNotice(`Scan of “${library.name}” queued ${queued} file${queued === 1 ? '' : 's'}.`);
      void libraries.reload();
    } catch (err) {
      setError(errorMessage(err));
    } finally {
      setBusyId(null);
    }
  };

  const remove = async (library: Library) => {
    if (!confirm(`Delete the library “${library.name}”? Its media files stay where they are.`)) return;
    setBusyId(library.id);
    setError(null);
    try {
      await api.deleteLibrary(library.id);
      libraries.setData((current) => (current ?? []).filter((item) => item.id !== library.id));
      setNotice(`Deleted library “${library.name}”.`);
    } catch (err) {
      setError(errorMessage(err));
    } finally {
      setBusyId(null);
    }
  };

  return (
    <div class="page">
      <header class="page-head">
        <h1>Libraries</h1>
        {editing === null && allows(role, 'admin') && (
          <button type="button" class="button button-primary" onClick={() => setEditing({ mode: 'create' })}>
            Add library
          </button>
        )}
      </header>
      <Alert message={libraries.error} />
      <Alert message={catalog.error} />
      <Alert message={error} onClose={() => setError(null)} />
      <Alert kind="ok" message={notice} onClose={() => setNotice(null)} />

      {editing !== null &&
        (catalog.data ? (
          <LibraryForm
            key={editing.mode === 'edit' ? editing.library.id : 'new'}
            library={editing.mode === 'edit' ? editing.library : null}
            catalog={catalog.data}
            onSaved={saved}
            onCancel={() => setEditing(null)}
          />
        ) : (
          catalog.loading && <Loading what="encoders" />
        ))}

      {!libraries.data ? (
        libraries.loading && <Loading what="libraries" />
      ) : libraries.data.length === 0 ? (
        <p class="card muted">No libraries yet. Add one to start finding files to re-encode.</p>
      ) : (
        <ul class="library-list">
          {libraries.data.map((library) => (
            <li key={library.id} class={healthId === library.id ? 'card library-wide' : 'card'}>
              <div class="card-head">
                <h2>{library.name}</h2>
                <span>
                  {!library.enabled && <Badge value="disabled" />} {library.watch && <span class="badge badge-info">Watching</span>}
                </span>
              </div>
              <ul class="paths" aria-label={`Paths of ${library.name}`}>
                {library.paths.map((path) => (
                  <li key={path}>
                    <code class="break">{path}</code>
                  </li>
                ))}
              </ul>
              <dl class="inline-facts">
                <div>
                  <dt>Target</dt>
                  <dd>{codecLabel(catalog.data, library.targetCodec)}</dd>
                </div>
                <div>
                  <dt>Encoder</dt>
                  <dd>{library.encoder}</dd>
                </div>
                <div>
                  <dt>Quality</dt>
                  <dd>
                    {library.rateControl === 'twoPass'
                      ? `Two passes, ${library.targetBitrateKbps ?? '?'} kbit/s`
                      : library.qualityMode === 'vmaf'
                        ? `VMAF ${library.targetVmaf}, at most ${library.maxSizePercent} % of the source`
                        : `CRF ${library.quality}`}
                  </dd>
                </div>
                <div>
                  <dt>Preset</dt>
                  <dd>{library.preset || '—'}</dd>
                </div>
                <div>
                  <dt>Last scan</dt>
                  <dd>{formatRelative(library.lastScanAt)}</dd>
                </div>
              </dl>
              <div class="actions">
                {allows(role, 'operator') && (
                  <button type="button" class="button" disabled={busyId === library.id} onClick={() => void scan(library)}>
                    Scan now
                  </button>
                )}
                <a class="button" href={routeHref('/jobs', { libraryId: library.id })}>
                  Jobs
                </a>
                <button
                  type="button"
                  class="button"
                  aria-expanded={forecastId === library.id}
                  onClick={() => setForecastId(forecastId === library.id ? null : library.id)}
                >
                  Forecast
                </button>
                <button
                  type="button"
                  class="button"
                  aria-expanded={healthId === library.id}
                  onClick={() => setHealthId(healthId === library.id ? null : library.id)}
                >
                  Health
                </button>
                {allows(role, 'admin') && (
                  <>
                    <button type="button" class="button" onClick={() => setEditing({ mode: 'edit', library })}>
                      Edit
                    </button>
                    <button
                      type="button"
                      class="button button-danger"
                      disabled={busyId === library.id}
                      onClick={() => void remove(library)}
                    >
                      Delete
                    </button>
                  </>
                )}
              </div>
              {forecastId === library.id && <ForecastPanel library={library} />}
              {healthId === library.id && <HealthPanel library={library} />}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}
