// The live feed in tests: stands in for the browser's WebSocket; `send` plays a message from
// the server to the page.
export class FakeWebSocket {
  static instances: FakeWebSocket[] = [];
  onopen: ((event: unknown) => void) | null = null;
  onclose: ((event: unknown) => void) | null = null;
  onerror: ((event: unknown) => void) | null = null;
  onmessage: ((event: { data: unknown }) => void) | null = null;
  constructor(readonly url: string) {
    FakeWebSocket.instances.push(this);
  }
  close() {}
  send(message: Record<string, unknown>) {
    this.onmessage?.({ data: JSON.stringify(message) });
  }
}
