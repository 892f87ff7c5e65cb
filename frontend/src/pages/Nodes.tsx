import { Alert, Badge, Loading } from '../components';
import { formatBytes, formatNumber, formatPercent, formatRelative } from '../format';
import { useResource } from '../hooks';
import { api } from '../session';

export function Nodes() {
  const nodes = useResource(() => api.nodes(), [], { pollMs: 10_000 });
  const list = nodes.data;
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
      {!list ? (
        nodes.loading && <Loading what="nodes" />
      ) : list.length === 0 ? (
        <p class="card muted">No nodes have registered.</p>
      ) : (
        <div class="table-wrap">
          <table class="table stack">
            <caption class="sr-only">Nodes of the cluster</caption>
            <thead>
              <tr>
                <th scope="col">Node</th>
                <th scope="col">Status</th>
                <th scope="col">GPU</th>
                <th scope="col">Encoders</th>
                <th scope="col">Load</th>
                <th scope="col">Memory</th>
                <th scope="col">Jobs</th>
                <th scope="col">Last seen</th>
              </tr>
            </thead>
            <tbody>
              {list.map((node) => {
                const memoryPercent = node.memoryTotal > 0 ? (node.memoryUsed / node.memoryTotal) * 100 : null;
                return (
                  <tr key={node.id}>
                    <td data-label="Node">
                      <strong>{node.name}</strong>
                      <div class="muted small">
                        {node.role === 'main' ? 'Main' : 'Linked'} · <code>{node.address}</code>
                      </div>
                    </td>
                    <td data-label="Status">
                      <Badge value={node.status} />
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
                    <td data-label="Last seen" title={node.lastSeenAt ?? undefined}>
                      {formatRelative(node.lastSeenAt)}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}
