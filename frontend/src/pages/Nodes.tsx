// The Nodes page: each node's state, load, encoders, the libraries it reaches (where they lie,
// by transfer, or not at all) and encoding window; an administrator
// edits a node's own schedule, revokes a linked node and removes one that is gone.
import { Fragment } from 'preact';
import { useState } from 'preact/hooks';
import { Alert, Badge, Loading } from '../components';
import { Table } from '../widgets/Table';
import { formatBytes, formatNumber, formatPercent, formatRelative, formatWindows } from '../format';
import { useAction, useResource, useRole } from '../hooks';
import { allows, api } from '../session';
import type { ClusterNode } from '../types';
import { ScheduleEditor } from '../widgets/ScheduleEditor';

export function Nodes() {
  const nodes = useResource(() => api.nodes(), [], { pollMs: 10_000 });
  const list = nodes.data;
  const action = useAction();
  const role = useRole();
  const [notice, setNotice] = useState<string | null>(null);
  const [scheduling, setScheduling] = useState<number | null>(null);

  const revoke = async (node: ClusterNode) => {
    if (!confirm(`Revoke ${node.name}? Its link closes now, its running jobs go back to the queue, and it is refused until it is removed.`)) return;
    setNotice(null);
    const result = await action.run(() => api.revokeNode(node.id));
    if (result) {
      setNotice(`${node.name} revoked; ${result.requeued} job(s) back in the queue.`);
      await nodes.reload();
    }
  };
  const remove = async (node: ClusterNode) => {
    if (!confirm(`Remove ${node.name}? Its name can then enroll again with CLUSTER_TOKEN.`)) return;
    setNotice(null);
    const result = await action.run(() => api.removeNode(node.id));
    if (result) {
      setNotice(`${node.name} removed.`);
      await nodes.reload();
    }
  };
  return (
    <div class="page">
      <header class="page-head">
        <h1>Nodes</h1>
        {list && (
          <span class="muted">
            {list.filter((node) => node.status === 'ONLINE').length} online · {list.length} total
          </span>
        )}
      </header>
      <Alert message={nodes.error} />
      <Alert message={action.error} />
      <Alert kind="ok" message={notice} />
      {!list ? (
        nodes.loading && <Loading what="nodes" />
      ) : list.length === 0 ? (
        <p class="card muted">No nodes have registered.</p>
      ) : (
        <Table caption="Nodes of the cluster" columns={['Node', 'Status', 'GPU', 'Encoders', 'Load', 'Memory', 'Jobs', 'Libraries', 'Window', 'Last seen']} actions>
          {list.map((node) => {
            const memoryPercent = node.memoryTotal > 0 ? (node.memoryUsed / node.memoryTotal) * 100 : null;
            return (
              <Fragment key={node.id}>
                <tr>
                  <td data-label="Node">
                    <strong>{node.name}</strong>
                    <div class="muted small">
                      {node.role === 'main' ? 'Main' : 'Linked'} · <code>{node.address}</code>
                    </div>
                  </td>
                  <td data-label="Status">
                    <Badge value={node.status} />
                    {node.revoked && <span class="badge badge-bad">Revoked</span>}
                    {node.overloaded && <span class="badge badge-warn">Overloaded</span>}
                    {node.statusReason && <div class="muted small">{node.statusReason}</div>}
                  </td>
                  <td data-label="GPU">{node.gpu ?? <span class="muted">CPU only</span>}</td>
                  <td data-label="Encoders">
                    {node.encoders.length === 0 ? (
                      <span class="muted">none</span>
                    ) : (
                      <ul class="tags" aria-label={`Encoders of ${node.name}`}>
                        {node.encoders.map((encoder) => (
                          <li key={encoder}>
                            <code>{encoder}</code>
                          </li>
                        ))}
                      </ul>
                    )}
                    {node.decoders.length > 0 && (
                      <div class="muted small" aria-label={`Hardware decoding of ${node.name}`}>
                        Decodes on {node.decoders.join(', ')}
                      </div>
                    )}
                  </td>
                  <td data-label="Load">
                    {formatNumber(node.load1, 2)} / {node.cores} cores
                    <div class={`small ${node.loadRatio > 2 ? 'text-bad' : node.loadRatio >= 1.5 ? 'text-warn' : 'muted'}`}>
                      ratio {formatNumber(node.loadRatio, 2)}
                    </div>
                  </td>
                  <td data-label="Memory">
                    {formatBytes(node.memoryUsed)} / {formatBytes(node.memoryTotal)}
                    <div class="muted small">{formatPercent(memoryPercent)}</div>
                  </td>
                  <td data-label="Jobs">
                    {node.activeJobs} / {node.maxJobs}
                  </td>
                  <td data-label="Libraries">
                    {node.libraries.length === 0 ? (
                      <span class="muted">none</span>
                    ) : (
                      <ul class="reach small" aria-label={`Libraries of ${node.name}`}>
                        {node.libraries.map((library) => {
                          const reach = libraryReach(library.sees, node.transfer);
                          return (
                            <li key={library.libraryId}>
                              {library.name}: <span class={reach === 'sees' ? undefined : reach === 'by transfer' ? 'text-warn' : 'text-bad'}>{reach}</span>
                            </li>
                          );
                        })}
                      </ul>
                    )}
                    {node.role === 'linked' && (
                      <div class="muted small" aria-label={`Storage of ${node.name}`}>
                        Shared storage: {node.sharedStorage ?? 'not reported'}
                        {node.workDirFreeBytes != null && ` · WORK_DIR ${formatBytes(node.workDirFreeBytes)} free`}
                      </div>
                    )}
                  </td>
                  <td data-label="Window">
                    {node.window ? (
                      <>
                        <span class={`badge ${node.window.open ? 'badge-ok' : 'badge-warn'}`}>{node.window.open ? 'Open' : 'Closed'}</span>
                        <div class="small">{formatWindows(node.window.windows)}</div>
                        <div class="muted small">
                          {node.window.windows.length > 0 && `${node.window.timeZone} · `}
                          {node.window.followsDefault ? 'default' : 'own schedule'}
                          {node.window.windows.length > 0 && ` · on close: ${node.window.onClose === 'pause' ? 'pause at a segment' : 'finish'}`}
                        </div>
                      </>
                    ) : (
                      <span class="muted">unknown</span>
                    )}
                  </td>
                  <td data-label="Last seen" title={node.lastSeenAt ?? undefined}>
                    {formatRelative(node.lastSeenAt)}
                  </td>
                  <td data-label="Actions">
                    <div class="actions">
                      {node.window && (
                        <button
                          type="button"
                          class="button"
                          aria-expanded={scheduling === node.id}
                          aria-label={`${allows(role, 'admin') ? 'Edit' : 'Show'} the schedule of ${node.name}`}
                          onClick={() => setScheduling(scheduling === node.id ? null : node.id)}
                        >
                          Schedule
                        </button>
                      )}
                      {node.role === 'linked' && allows(role, 'admin') && (
                        <>
                          {!node.revoked && (
                            <button type="button" class="button button-danger" disabled={action.busy} onClick={() => void revoke(node)} aria-label={`Revoke ${node.name}`}>
                              Revoke
                            </button>
                          )}
                          {node.status === 'OFFLINE' && (
                            <button type="button" class="button" disabled={action.busy} onClick={() => void remove(node)} aria-label={`Remove ${node.name}`}>
                              Remove
                            </button>
                          )}
                        </>
                      )}
                    </div>
                  </td>
                </tr>
                {scheduling === node.id && node.window && (
                  <tr class="row-editor">
                    <td colSpan={11} class="cell-editor">
                      <h3 class="form-title">Encoding windows of {node.name}</h3>
                      <ScheduleEditor
                        label={`Schedule of ${node.name}`}
                        schedule={node.window}
                        editable={allows(role, 'admin')}
                        onSave={async (body) => {
                          const saved = await api.setNodeSchedule(node.id, body);
                          await nodes.reload();
                          return saved;
                        }}
                        onFollowDefault={async () => {
                          const saved = await api.clearNodeSchedule(node.id);
                          await nodes.reload();
                          return saved;
                        }}
                      />
                    </td>
                  </tr>
                )}
              </Fragment>
            );
          })}
        </Table>
      )}
    </div>
  );
}

/** How a node reaches a library: it sees its folders, takes its files by transfer (issue
 * 39), cannot reach it, or has not reported on it yet. */
export function libraryReach(sees: boolean | null | undefined, transfer: boolean): 'sees' | 'by transfer' | 'not visible' | 'not reported yet' {
  if (sees === true) return 'sees';
  if (sees == null) return 'not reported yet';
  return transfer ? 'by transfer' : 'not visible';
}
