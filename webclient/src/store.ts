// The client's whole state, in one zustand store. Components read it with `useStore`;
// only client.ts (the connection's owner) writes it, through the functions here, which
// are pure updates of the state from the server's frames.
import { create } from "zustand";
import type {
  ChatLine, InboxItem, PendingSummary, Process, ProcessStatus, Session, StreamEvent, Welcome,
} from "./protocol";

export type ConnectionStatus = "signed-out" | "connecting" | "open" | "reconnecting";

/** A tool call seen live (`tool-call-started` / `-completed`) and not yet committed as a
 * `tool` chat line; the committed line replaces it. */
export interface LiveToolCall {
  toolCallId: string;
  toolName: string;
  params: unknown;
  status: "running" | "success" | "error";
}

export interface WorkerCard extends Process {
  /** The statuses this client has seen the process in, oldest first. */
  trail: ProcessStatus[];
  lastEvent: string | null;
}

export interface State {
  connection: ConnectionStatus;
  /** Why the user is signed out or what failed last; shown on the sign-in form. */
  authError: string | null;
  welcome: Welcome | null;
  sessions: Session[];
  sessionId: string | null;
  chatProcessId: string | null;
  /** The last event `seq` seen of the bound session: what a resume asks after. */
  lastSeq: number;
  contextDrift: boolean;
  lines: ChatLine[];
  /** Tokens of the chat process's reply being streamed, until its chat line commits. */
  streaming: string;
  liveTools: LiveToolCall[];
  processes: Record<string, WorkerCard>;
  /** The user's Inbox items by id (inbox.ts loads them on welcome; pushes merge). */
  inbox: Record<string, InboxItem>;
  /** The last `inbox-pending-summary` (right after each welcome). */
  pendingSummary: PendingSummary | null;
}

const unbound = {
  sessionId: null, chatProcessId: null, lastSeq: 0, contextDrift: false, lines: [],
  streaming: "", liveTools: [], processes: {},
} satisfies Partial<State>;

export const useStore = create<State>(() => ({
  connection: "signed-out",
  authError: null,
  welcome: null,
  sessions: [],
  inbox: {},
  pendingSummary: null,
  ...unbound,
}));

export const set = useStore.setState;
export const get = useStore.getState;

export function resetSession(): void {
  set({ ...unbound });
}

/** Merge chat lines by id, ordered by their chat `seq` (history and live events overlap). */
export function mergeLines(lines: ChatLine[]): void {
  set((s) => {
    const byId = new Map(s.lines.map((l) => [l.id, l]));
    for (const line of lines) byId.set(line.id, line);
    const merged = [...byId.values()].sort((a, b) => a.seq - b.seq);
    const committed = new Set(merged.map((l) => l.meta.toolCallId).filter(Boolean));
    return { lines: merged, liveTools: s.liveTools.filter((t) => !committed.has(t.toolCallId)) };
  });
}

/** Merge processes read with a request. A reply may be older than a status event that
 * overtook it, so it never takes a card out of CLOSED (a terminal status). */
export function putProcesses(processes: Process[]): void {
  set((s) => {
    const next = { ...s.processes };
    for (const read of processes) {
      const old = next[read.id];
      const p = old?.status === "CLOSED" ? { ...read, status: old.status } : read;
      const trail = old ? old.trail : [];
      next[p.id] = {
        ...old, ...p, lastEvent: old?.lastEvent ?? null,
        trail: trail[trail.length - 1] === p.status ? trail : [...trail, p.status],
      };
    }
    return { processes: next };
  });
}

function describe(event: StreamEvent): string | null {
  const d = event.data;
  switch (event.type) {
    case "status-changed": return `status ${d.from} → ${d.to}`;
    case "task-tree": return "planned its task tree";
    case "task-node": return `step ${d.node.id} (${d.node.kind.toLowerCase()}) ${d.node.status}`;
    case "process-spawned": return `started ${d.name ?? d.childProcessId}`;
    case "vogon-phase": return `phase ${d.phase} ${d.step ?? ""}`.trim();
    case "council-updated": return `council round ${d.round}/${d.rounds} ${d.phase}`;
    case "tool-call-started": return `calling ${d.toolName}`;
    case "chat-message": return `${d.role}: ${String(d.content).slice(0, 120)}`;
    default: return null;
  }
}

/** Apply one `event` frame of the bound session. */
export function applyEvent(event: StreamEvent): void {
  const s = get();
  if (event.sessionId !== s.sessionId) return;
  if (event.seq <= s.lastSeq) return; // replayed twice across a reconnect
  const d = event.data;
  const toChat = event.processId === s.chatProcessId;
  const update: Partial<State> = { lastSeq: event.seq };
  const card = s.processes[event.processId];
  const said = describe(event);
  if (card && !toChat && said && event.type !== "token") {
    update.processes = { ...s.processes, [card.id]: { ...card, lastEvent: said } };
  }
  switch (event.type) {
    case "token":
      if (toChat) update.streaming = s.streaming + d.text;
      break;
    case "turn-restarted":
      if (toChat) Object.assign(update, { streaming: "", liveTools: [] });
      break;
    case "chat-message":
      if (toChat) {
        set(update);
        mergeLines([d as ChatLine]);
        if (d.role === "assistant" || d.role === "error") set({ streaming: "" });
        return;
      }
      break;
    case "status-changed": {
      const base = (update.processes ?? s.processes)[event.processId];
      if (base) {
        const trail = base.trail[base.trail.length - 1] === d.to ? base.trail : [...base.trail, d.to];
        update.processes = {
          ...(update.processes ?? s.processes),
          [base.id]: { ...base, status: d.to, trail },
        };
      }
      if (toChat && d.to !== "RUNNING") update.streaming = "";
      break;
    }
    case "tool-call-started":
      if (toChat) {
        update.liveTools = [...s.liveTools, {
          toolCallId: d.toolCallId, toolName: d.toolName, params: d.params, status: "running",
        }];
      }
      break;
    case "tool-call-completed":
      if (toChat) {
        update.liveTools = s.liveTools.map((t) =>
          t.toolCallId === d.toolCallId ? { ...t, status: d.status } : t);
      }
      break;
    case "process-spawned":
      if (!s.processes[d.childProcessId]) {
        update.processes = {
          ...(update.processes ?? s.processes),
          [d.childProcessId]: {
            id: d.childProcessId, sessionId: event.sessionId, parentProcessId: event.processId,
            name: d.name ?? null, goal: d.goal ?? "", engine: d.engine ?? "",
            recipeName: d.recipe ?? null, status: "INIT", trail: ["INIT"], lastEvent: null,
          },
        };
      }
      break;
  }
  set(update);
}

/** Merge Inbox items by id; `replace` starts from none (a fresh `inbox-list`). */
export function mergeItems(items: InboxItem[], replace = false): void {
  set((s) => {
    const next = replace ? {} : { ...s.inbox };
    for (const item of items) next[item.id] = item;
    return { inbox: next };
  });
}
