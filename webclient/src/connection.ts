// One WebSocket to the gateway: requests with ids answered by promises, pushes handed to
// a callback. It knows nothing of sessions; client.ts decides what to do with a close.
import type { Envelope, ErrorPush, Push, Reply, RequestType, Requests } from "./protocol";

/** An `error` frame answering a request (`code` is stable, docs/protocol.md "Errors"),
 * or `disconnected` when the socket closed before the answer came. */
export class ProtocolError extends Error {
  constructor(public code: string, message: string) {
    super(message);
  }
}

export interface CloseInfo {
  code: number;
  reason: string;
  /** False when the handshake failed (e.g. 401): the browser hides the HTTP status. */
  opened: boolean;
}

export interface ConnectionHandlers {
  onPush(frame: Push): void;
  onClose(info: CloseInfo): void;
}

export function socketUrl(): string {
  const scheme = location.protocol === "https:" ? "wss" : "ws";
  return `${scheme}://${location.host}/ws`;
}

export class Connection {
  private ws: WebSocket;
  private nextId = 1;
  private pending = new Map<string, { resolve(v: unknown): void; reject(e: Error): void }>();

  /** Browsers can set no header on a WebSocket: the token travels as the subprotocol
   * `bearer.<token>` beside `vancetope`, which the server selects (never echoing the token). */
  constructor(token: string, private handlers: ConnectionHandlers) {
    this.ws = new WebSocket(socketUrl(), ["vancetope", "bearer." + token]);
    let opened = false;
    this.ws.onopen = () => {
      opened = true;
    };
    this.ws.onmessage = (message) => this.receive(JSON.parse(message.data as string) as Envelope);
    this.ws.onclose = (e) => {
      for (const { reject } of this.pending.values()) {
        reject(new ProtocolError("disconnected", "the connection closed"));
      }
      this.pending.clear();
      this.handlers.onClose({ code: e.code, reason: e.reason, opened });
    };
  }

  request<T extends RequestType>(type: T, data: Requests[T]): Promise<Reply<T>> {
    const id = String(this.nextId++);
    return new Promise<Reply<T>>((resolve, reject) => {
      if (this.ws.readyState !== WebSocket.OPEN) {
        reject(new ProtocolError("disconnected", "not connected"));
        return;
      }
      this.pending.set(id, { resolve: resolve as (v: unknown) => void, reject });
      this.ws.send(JSON.stringify({ type, id, data }));
    });
  }

  /** Close on purpose (sign-out): no close callback follows. */
  close(): void {
    this.ws.onclose = null;
    for (const { reject } of this.pending.values()) {
      reject(new ProtocolError("disconnected", "signed out"));
    }
    this.pending.clear();
    this.ws.close(1000);
  }

  /** The server sends what docs/schemas/ say (the protocol tests hold it to them): a
   * reply's data is its request's `Reply`, a frame without a waiting request a `Push`. */
  private receive(frame: Envelope): void {
    const waiting = frame.replyTo ? this.pending.get(frame.replyTo) : undefined;
    if (!waiting) {
      this.handlers.onPush(frame as Push);
      return;
    }
    this.pending.delete(frame.replyTo!);
    if (frame.type === "error") {
      const error = frame.data as unknown as ErrorPush;
      waiting.reject(new ProtocolError(error.code, error.message));
    } else {
      waiting.resolve(frame.data);
    }
  }
}
