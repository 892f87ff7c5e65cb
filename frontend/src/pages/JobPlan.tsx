// The job page's stream plan (issue 37): every source stream with its fate and the rule that
// decided it, the output's container and video size, and the plan's notes, visible before
// anything changes. Fetched again when the job's status changes (analysis makes the plan).
import { Alert, Loading } from '../components';
import { titleCase } from '../format';
import { useResource } from '../hooks';
import { api } from '../session';
import { codecText, fateCounts, fateTone, languageText, planNotMadeYet, streamLabel, streamNotes, videoSizeText } from '../streamPlan';
import type { JobStatus } from '../types';
import { Table } from '../widgets/Table';

export function JobPlan({ id, status }: { id: number; status: JobStatus }) {
  // Not analysed yet is an answer, not an error: null.
  const plan = useResource(() => api.jobPlan(id).catch((err: unknown) => (planNotMadeYet(err) ? null : Promise.reject(err))), [id, status]);
  const data = plan.data;
  return (
    <section class="card" aria-labelledby="plan-title">
      <h2 id="plan-title">Plan</h2>
      <Alert message={plan.error} />
      {data === null ? (
        plan.loading ? <Loading what="the plan" /> : !plan.error && <p class="muted">The plan is made when the file is analysed.</p>
      ) : (
        <>
          {data.refused && <p class="text-bad">Refused: {data.refused}</p>}
          <dl class="inline-facts" aria-label="Output">
            <div>
              <dt>Container</dt>
              <dd>{data.container}</dd>
            </div>
            <div>
              <dt>Video size</dt>
              <dd>{videoSizeText(data)}</dd>
            </div>
            <div>
              <dt>Streams</dt>
              <dd>{fateCounts(data) || '—'}</dd>
            </div>
          </dl>
          <Table caption="Streams of the plan" columns={['Stream', 'Kind', 'Codec', 'Language', 'Fate', 'Rule']}>
            {data.streams.map((stream, index) => {
              const notes = streamNotes(stream);
              return (
                <tr key={`${stream.sourceIndex}-${stream.fate}-${index}`}>
                  <td data-label="Stream">{streamLabel(stream)}</td>
                  <td data-label="Kind">{titleCase(stream.kind)}</td>
                  <td data-label="Codec">
                    {codecText(stream)}
                    {notes && <div class="muted small">{notes}</div>}
                  </td>
                  <td data-label="Language">{languageText(stream.language)}</td>
                  <td data-label="Fate">
                    <span class={`badge badge-${fateTone(stream.fate)}`}>{titleCase(stream.fate)}</span>
                  </td>
                  <td data-label="Rule" class="cell-detail">
                    {stream.rule}
                  </td>
                </tr>
              );
            })}
          </Table>
          {data.notes.length > 0 && (
            <ul class="muted small" aria-label="Notes of the plan">
              {data.notes.map((note) => (
                <li key={note}>{note}</li>
              ))}
            </ul>
          )}
        </>
      )}
    </section>
  );
}
