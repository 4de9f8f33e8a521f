// The client's whole state, in one zustand store. Components read it with `useStore`;
// only client.ts (the connection's owner) writes it, through the functions here, which
// are pure updates of the state from the server's frames (and the user's focus).
import { create } from "zustand";
import type {
  ChatLine, Council, DocumentView, InboxItem, PendingSummary, Process, ProcessStatus, Session, StreamEvent,
  TaskNode, TaskTree, VogonPhase, Welcome,
} from "./protocol";

export type ConnectionStatus = "signed-out" | "connecting" | "open" | "reconnecting";
export type Tab = "chat" | "inbox" | "workers" | "documents" | "schedules" | "usage"
  | "webhooks";

/** A tool call seen live (`tool-call-started` / `-completed`) and not yet committed as a
 * `tool` chat line; the committed line replaces it. */
export interface LiveToolCall {
  toolCallId: string;
  toolName: string;
  params: unknown;
  status: "running" | "success" | "error";
}

/** A line the user sent that its process has not committed yet: shown at once, `sent` once
 * `process-steer` answered (then `messageId` names it), gone when its `user` line commits;
 * `error` when the request was refused or the turn answered it with an `error` line. */
export interface PendingLine {
  /** The idempotency key, so sending again stores it once. */
  key: string;
  content: string;
  messageId: string | null;
  error: string | null;
}

/** One process's chat as this tab holds it: the chat process's always, a worker's once it
 * was focused (then kept live from its events). */
export interface Transcript {
  lines: ChatLine[];
  /** The user's lines not committed yet, oldest first. */
  pending: PendingLine[];
  /** Tokens of the reply being streamed, until its chat line commits. */
  streaming: string;
  liveTools: LiveToolCall[];
  /** The oldest page read was full: earlier lines may exist (`chat-history beforeSeq`). */
  hasEarlier: boolean;
}

export const NO_TRANSCRIPT: Transcript = {
  lines: [], pending: [], streaming: "", liveTools: [], hasEarlier: false,
};

export interface WorkerCard extends Process {
  /** The statuses this client has seen the process in, oldest first. */
  trail: ProcessStatus[];
  lastEvent: string | null;
  /** Drawn from events since the last full read (`null`: from `engineView`): marvin's
   * tree (`task-tree`, `task-node`), zaphod's newest `council-updated`, vogon's newest
   * `vogon-phase`. */
  tree: TaskTree | null;
  council: Council | null;
  phase: VogonPhase | null;
}

/** A file being sent to the upload route (documents.ts): its progress, then the server's
 * refusal if any. A file the server took leaves `uploads` for `documents`. */
export interface Upload {
  key: string;
  projectId: string;
  name: string;
  size: number;
  /** The part sent so far, 0..1. */
  sent: number;
  error: { code: string; message: string } | null;
}

export interface State {
  connection: ConnectionStatus;
  /** Why the user is signed out or what failed last; shown on the sign-in form. */
  authError: string | null;
  welcome: Welcome | null;
  /** The session list: every session not CLOSED, then the closed ones loaded so far. */
  sessions: Session[];
  /** The cursor of the next page of closed sessions (`null`: all are loaded). */
  moreSessions: string | null;
  /** Why the session list could not be loaded (a `session-list` the server refused, e.g.
   * an older server during an upgrade); `null` once a load succeeds. */
  sessionsError: string | null;
  sessionId: string | null;
  chatProcessId: string | null;
  /** The last event `seq` seen of the bound session: what a resume asks after. */
  lastSeq: number;
  contextDrift: boolean;
  /** Chats by process id (the chat process's, and the workers' focused so far). */
  transcripts: Record<string, Transcript>;
  /** The worker the middle pane shows and the composer addresses; `null`: the chat
   * process (Arthur). Client state only: the server keeps no focus. */
  focus: string | null;
  /** The chat process's lines committed while a worker was focused. */
  unread: number;
  processes: Record<string, WorkerCard>;
  /** The middle pane's tab (a worker's *Open* and an Inbox link switch it). */
  tab: Tab;
  /** The user's Inbox items by id (inbox.ts loads them on welcome; pushes merge). */
  inbox: Record<string, InboxItem>;
  inboxSelected: string | null;
  /** The last `inbox-pending-summary` (right after each welcome). */
  pendingSummary: PendingSummary | null;
  /** Knowledge documents by id, of the projects the Documents view showed (documents.ts:
   * `document-list`, then the pushes). */
  documents: Record<string, DocumentView>;
  /** This tab's uploads in flight or refused, oldest first. */
  uploads: Upload[];
  /** The chat line a search hit opened (`session-search`): scrolled to and marked. */
  found: { processId: string; seq: number } | null;
  /** The inspector panel: a process's turns, or one turn of it (`turnId`); `null`: closed. */
  inspecting: { processId: string; turnId: string | null } | null;
}

const unbound = {
  sessionId: null, chatProcessId: null, lastSeq: 0, contextDrift: false, transcripts: {},
  focus: null, unread: 0, processes: {}, found: null, inspecting: null,
} satisfies Partial<State>;

export const useStore = create<State>(() => ({
  connection: "signed-out",
  authError: null,
  welcome: null,
  sessions: [],
  moreSessions: null,
  sessionsError: null,
  tab: "chat",
  inbox: {},
  inboxSelected: null,
  pendingSummary: null,
  documents: {},
  uploads: [],
  ...unbound,
}));

export const set = useStore.setState;
export const get = useStore.getState;

export function resetSession(): void {
  set({ ...unbound });
}

/** The process the middle pane shows: the focused worker, else the chat process. */
export function viewedProcess(s: State): string | null {
  return s.focus ?? s.chatProcessId;
}

function withTranscript(s: State, processId: string,
  change: (t: Transcript) => Partial<Transcript>): Record<string, Transcript> {
  const t = s.transcripts[processId] ?? NO_TRANSCRIPT;
  return { ...s.transcripts, [processId]: { ...t, ...change(t) } };
}

/** Start holding a process's chat (empty until its history loads). */
export function track(processId: string): void {
  set((s) => s.transcripts[processId] ? {} : { transcripts: withTranscript(s, processId, () => ({})) });
}

/** Merge chat lines of a process by id, ordered by their chat `seq` (history and live
 * events overlap). `page` is set for a `chat-history` page: whether it was the oldest one
 * read so far and full, i.e. earlier lines may exist. */
export function mergeLines(processId: string, lines: ChatLine[],
  page?: { oldest: boolean; full: boolean }): void {
  set((s) => ({
    transcripts: withTranscript(s, processId, (t) => {
      const byId = new Map(t.lines.map((l) => [l.id, l]));
      for (const line of lines) byId.set(line.id, line);
      const merged = [...byId.values()].sort((a, b) => a.seq - b.seq);
      const committed = new Set(merged.map((l) => l.meta.toolCallId).filter(Boolean));
      return {
        lines: merged, liveTools: t.liveTools.filter((c) => !committed.has(c.toolCallId)),
        pending: settled(t.pending, merged),
        hasEarlier: page?.oldest ? page.full : t.hasEarlier,
      };
    }),
  }));
}

/** Pending lines after the committed ones: those whose `user` line committed are gone, one
 * answered by an `error` line instead (a failed turn, a dead letter) is marked failed. */
function settled(pending: PendingLine[], lines: ChatLine[]): PendingLine[] {
  if (pending.length === 0) return pending;
  const committed = new Set<string>();
  const failed = new Map<string, string>();
  for (const line of lines) {
    const about = line.sourceMessageId ?? line.meta.deadLetter;
    if (line.role === "user" && line.sourceMessageId) committed.add(line.sourceMessageId);
    else if (line.role === "error" && typeof about === "string") failed.set(about, line.content);
  }
  return pending.flatMap((p) => {
    if (!p.messageId) return [p];
    if (committed.has(p.messageId)) return [];
    const error = failed.get(p.messageId);
    return error === undefined ? [p] : [{ ...p, error }];
  });
}

/** Show a line the user is sending to a process (`messageId` null until it is stored). */
export function addPending(processId: string, key: string, content: string): void {
  set((s) => ({ transcripts: withTranscript(s, processId, (t) => ({
    pending: [...t.pending.filter((p) => p.key !== key),
      { key, content, messageId: null, error: null }],
  })) }));
}

/** The pending line `key` was stored as `messageId`, or (`error`) refused. */
export function pendingAnswered(processId: string, key: string,
  answer: { messageId: string } | { error: string }): void {
  set((s) => ({ transcripts: withTranscript(s, processId, (t) => ({
    pending: settled(t.pending.map((p) => p.key !== key ? p
      : "error" in answer ? { ...p, error: answer.error }
      : { ...p, messageId: answer.messageId, error: null }), t.lines),
  })) }));
}

/** Forget a pending line (the user discarded a failed one). */
export function dropPending(processId: string, key: string): void {
  set((s) => ({ transcripts: withTranscript(s, processId, (t) => ({
    pending: t.pending.filter((p) => p.key !== key),
  })) }));
}

/** Merge processes read with a request. A reply may be older than a status event that
 * overtook it, so it never takes a card out of CLOSED (a terminal status). `fresh` (a
 * full read after binding, a reconnect or `events-gap`) drops what events drew, so the
 * engine views start again from the committed `engineView`. */
export function putProcesses(processes: Process[], fresh = false): void {
  set((s) => {
    const next = { ...s.processes };
    for (const read of processes) {
      const old = next[read.id];
      const p = old?.status === "CLOSED" ? { ...read, status: old.status } : read;
      const trail = old ? old.trail : [];
      next[p.id] = {
        tree: null, council: null, phase: null, ...(fresh ? {} : old), ...p,
        // After a gap the last event seen may be long past: not shown as the last one.
        lastEvent: fresh ? null : old?.lastEvent ?? null,
        trail: trail[trail.length - 1] === p.status ? trail : [...trail, p.status],
      };
    }
    return { processes: next };
  });
}

/** marvin's tree as of the last full read. */
export function committedTree(p: Process): TaskTree | null {
  return p.engineView?.engine === "marvin" ? p.engineView.tree : null;
}

/** marvin's tree with one node replaced (or added under its parent). */
function withNode(tree: TaskTree | null, node: TaskNode): TaskTree | null {
  if (!tree) return null;
  const nodes = { ...tree.nodes, [node.id]: node };
  const parent = node.parent ? nodes[node.parent] : undefined;
  if (parent && !parent.children.includes(node.id)) {
    nodes[parent.id] = { ...parent, children: [...parent.children, node.id] };
  }
  return { ...tree, nodes };
}

/** A card's last event in words; not a status change, which its trail shows already. */
function describe(event: StreamEvent): string | null {
  const d = event.data;
  switch (event.type) {
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
  const pid = event.processId;
  const held = pid in s.transcripts; // a chat this tab shows or has shown
  const update: Partial<State> = { lastSeq: event.seq };
  let processes = s.processes;
  const card = processes[pid];
  const said = describe(event);
  if (card && pid !== s.chatProcessId && said && event.type !== "token") {
    processes = { ...processes, [pid]: { ...card, lastEvent: said } };
  }
  const onCard = (change: (c: WorkerCard) => Partial<WorkerCard>) => {
    const base = processes[pid];
    if (base) processes = { ...processes, [pid]: { ...base, ...change(base) } };
  };
  const transcript = (change: (t: Transcript) => Partial<Transcript>) => {
    if (held) update.transcripts = withTranscript({ ...s, ...update } as State, pid, change);
  };
  switch (event.type) {
    case "token":
      transcript((t) => ({ streaming: t.streaming + d.text }));
      break;
    case "stream-reset":
      transcript(() => ({ streaming: "" }));
      break;
    case "turn-restarted":
      transcript(() => ({ streaming: "", liveTools: [] }));
      break;
    case "chat-message":
      if (held) {
        set({ ...update, processes });
        mergeLines(pid, [d as ChatLine]);
        const after: Partial<State> = {};
        if (d.role === "assistant" || d.role === "error") {
          after.transcripts = withTranscript(get(), pid, () => ({ streaming: "" }));
        }
        // Arthur's lines while his chat is out of sight (a worker focused, another tab).
        if (pid === s.chatProcessId && (s.focus !== null || s.tab !== "chat")
            && d.role !== "user") {
          after.unread = get().unread + 1;
        }
        set(after);
        return;
      }
      break;
    case "status-changed":
      onCard((c) => ({
        status: d.to, trail: c.trail[c.trail.length - 1] === d.to ? c.trail : [...c.trail, d.to],
      }));
      if (d.to !== "RUNNING") transcript(() => ({ streaming: "" }));
      break;
    case "tool-call-started":
      transcript((t) => ({ liveTools: [...t.liveTools, {
        toolCallId: d.toolCallId, toolName: d.toolName, params: d.params, status: "running",
      }] }));
      break;
    case "tool-call-completed":
      transcript((t) => ({ liveTools: t.liveTools.map((c) =>
        c.toolCallId === d.toolCallId ? { ...c, status: d.status } : c) }));
      break;
    case "task-tree":
      onCard(() => ({ tree: d.tree as TaskTree }));
      break;
    case "task-node":
      onCard((c) => ({ tree: withNode(c.tree ?? committedTree(c), d.node as TaskNode) }));
      break;
    case "council-updated":
      onCard(() => ({ council: d as Council }));
      break;
    case "vogon-phase":
      onCard(() => ({ phase: d as VogonPhase }));
      break;
    case "process-spawned":
      if (!processes[d.childProcessId]) {
        processes = {
          ...processes,
          [d.childProcessId]: {
            id: d.childProcessId, sessionId: event.sessionId, parentProcessId: pid,
            name: d.name ?? null, goal: d.goal ?? "", engine: d.engine ?? "",
            recipeName: d.recipe ?? null, status: "INIT", trail: ["INIT"], lastEvent: null,
            tree: null, council: null, phase: null,
          },
        };
      }
      break;
  }
  set({ ...update, processes });
}

/** Merge Inbox items by id; `replace` starts from none (a fresh `inbox-list`). */
export function mergeItems(items: InboxItem[], replace = false): void {
  set((s) => {
    const next = replace ? {} : { ...s.inbox };
    for (const item of items) next[item.id] = item;
    return { inbox: next };
  });
}
