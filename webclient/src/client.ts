// The connection's owner: signs in and out, reconnects, binds sessions and sends the
// user's actions. Every view calls these functions and reads the store; none touches the
// socket itself.
import { notifications } from "@mantine/notifications";

import { forgetToken, storeToken, storedToken } from "./auth";
import { Connection, ProtocolError, type CloseInfo } from "./connection";
import type {
  ChatHistorySummary, ConversationHit, OnDisconnect, Push, Reply, Requests, RequestType,
  Session, SessionType, StreamEvent, TenantUser,
} from "./protocol";
import { onDocumentPush } from "./documents";
import { loadInbox, onInboxPush } from "./inbox";
import {
  addPending, applyEvent, dropPending, get, mergeLines, NO_TRANSCRIPT, pendingAnswered,
  putProcesses, resetSession, set, track, viewedProcess,
} from "./store";

/** Chat lines loaded per page: the newest when a chat is shown or after `events-gap`, then
 * each *Load earlier* (`beforeSeq`). */
export const HISTORY_LINES = 200;
/** Closed sessions per page of the session list (*Show more* reads the next). */
export const SESSION_PAGE = 50;
/** The most sessions one `session-list` page holds (the server's cap). */
const SESSION_PAGE_MAX = 200;
/** Hits one search of the session list shows at most. */
export const SEARCH_HITS = 20;
/** Engines whose views are drawn from their state: re-read when a turn of theirs ends. */
const DRAWN_ENGINES = new Set(["marvin", "vogon", "zaphod"]);
/** Reconnect back-off: the first retry, doubled each time up to the cap (milliseconds). */
const RETRY_FIRST_MS = 500;
const RETRY_MAX_MS = 10_000;

let connection: Connection | null = null;
let retryMs = RETRY_FIRST_MS;
let retryTimer: ReturnType<typeof setTimeout> | undefined;

export function signIn(token: string): void {
  storeToken(token);
  set({ authError: null });
  connect();
}

export function signOut(reason: string | null = null): void {
  clearTimeout(retryTimer);
  connection?.close();
  connection = null;
  forgetToken();
  resetSession();
  set({ connection: "signed-out", authError: reason, welcome: null, sessions: [],
    moreSessions: null, inbox: {}, pendingSummary: null, documents: {}, uploads: [] });
}

function connect(): void {
  const token = storedToken();
  if (!token) {
    set({ connection: "signed-out" });
    return;
  }
  if (get().connection === "signed-out") set({ connection: "connecting" });
  connection = new Connection(token, { onPush, onClose: (info) => void onClose(token, info) });
}

async function onClose(token: string, info: CloseInfo): Promise<void> {
  connection = null;
  if (info.code === 1008 && info.reason === "token revoked") {
    signOut("This token was revoked. Sign in with a new one (vancetope admin token create).");
    return;
  }
  // A socket can also end without a close frame (1006: the network, a proxy); if the next
  // handshake is refused, the REST probe tells whether it was the token.
  if (await refused(token)) {
    signOut(info.opened
      ? "The server no longer accepts this token: it was revoked. Sign in with a new one."
      : "The server refused this token (unknown or revoked). Check that you pasted all of it.");
    return;
  }
  set({ connection: "reconnecting" });
  clearTimeout(retryTimer);
  retryTimer = setTimeout(connect, retryMs);
  retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
}

/** A browser hides a refused handshake's HTTP status; ask a REST route with the same
 * token whether it is the token (401) or the network. */
async function refused(token: string): Promise<boolean> {
  try {
    const answer = await fetch("/sessions?limit=1", { headers: { Authorization: `Bearer ${token}` } });
    return answer.status === 401;
  } catch {
    return false;
  }
}

function onPush(frame: Push): void {
  switch (frame.type) {
    case "welcome":
      retryMs = RETRY_FIRST_MS;
      set({ connection: "open", welcome: frame.data });
      void afterWelcome();
      break;
    case "event":
      onEvent(frame.data);
      break;
    case "events-gap":
      if (frame.data.sessionId === get().sessionId) {
        const first = frame.data.firstAvailable;
        set((s) => ({
          lastSeq: first > 0 ? first - 1 : 0,
          transcripts: Object.fromEntries(Object.entries(s.transcripts)
            .map(([id, t]) => [id, { ...t, streaming: "", liveTools: [] }])),
        }));
        // Missed task-node / vogon-phase / council events: the committed state again.
        void Promise.all([...Object.keys(get().transcripts).map(loadHistory), loadProcesses()]);
      }
      break;
    case "inbox-pending-summary":
    case "inbox-item-added":
    case "inbox-item-updated":
      onInboxPush(frame);
      break;
    case "document-updated":
    case "document-deleted":
      onDocumentPush(frame);
      break;
    case "error":
      notifications.show({ color: "red", title: frame.data.code, message: frame.data.message });
      break;
  }
}

function onEvent(event: StreamEvent): void {
  const known = event.processId in get().processes;
  applyEvent(event);
  // A spawned process is committed by the time it leaves INIT (not yet when its parent
  // announces it): read it whole then, and any process this tab has not seen yet.
  if (event.type === "status-changed" && (!known || event.data.from === "INIT")) {
    void refreshProcess(event.processId);
  } else if (event.type === "status-changed" && event.data.to !== "RUNNING"
      && DRAWN_ENGINES.has(get().processes[event.processId]?.engine ?? "")) {
    // A turn of an engine with a view ended: its state (and view) is committed now.
    void refreshProcess(event.processId);
  }
  // The chat process closes only with its session (closed here, in another tab or by
  // onDisconnect): show the session's new status.
  if (event.type === "status-changed" && event.data.to === "CLOSED"
      && event.processId === get().chatProcessId) {
    void refreshSessions();
  }
}

async function afterWelcome(): Promise<void> {
  void loadInbox();
  await refreshSessions();
  const { sessionId, lastSeq } = get();
  // A session closed meanwhile (or bound elsewhere) cannot resume: show the list instead
  // of a transcript that no longer updates.
  if (sessionId && !(await bind("session-resume", { sessionId, lastSeq }, "resume"))) {
    resetSession();
  }
}

/** Run a request; a refused one gives `undefined` and is shown as a notification, unless
 * `quiet` (for reads the client makes on its own). */
export async function request<T extends RequestType>(
  type: T, data: Requests[T], quiet = false,
): Promise<Reply<T> | undefined> {
  if (!connection) {
    notifications.show({ color: "yellow", message: "Not connected; reconnecting…" });
    return undefined;
  }
  try {
    return await connection.request(type, data);
  } catch (e) {
    if (e instanceof ProtocolError && e.code !== "disconnected" && !quiet) {
      notifications.show({ color: "red", title: e.code, message: e.message });
    }
    return undefined;
  }
}

/** Run a request and hand a refusal back instead of showing it: for views that show the
 * error next to what was refused (e.g. an Inbox answer the server found invalid). */
export async function tryRequest<T extends RequestType>(
  type: T, data: Requests[T],
): Promise<{ ok: true; value: Reply<T> } | { ok: false; code: string; message: string }> {
  if (!connection) return { ok: false, code: "disconnected", message: "Not connected; reconnecting…" };
  try {
    return { ok: true, value: await connection.request(type, data) };
  } catch (e) {
    if (e instanceof ProtocolError) return { ok: false, code: e.code, message: e.message };
    throw e;
  }
}

/** A `session-list` page, or `undefined` when it was refused: the refusal is kept in
 * `sessionsError` (the list shows it where it would show the sessions). */
async function sessionPage(data: Requests["session-list"]): Promise<Reply<"session-list"> | undefined> {
  const answer = await tryRequest("session-list", data);
  if (answer.ok) return answer.value;
  if (answer.code !== "disconnected") set({ sessionsError: `${answer.message} (${answer.code})` });
  return undefined;
}

/** Every session of the user of `status` (OPEN or SUSPENDED: the server caps how many a
 * user keeps not CLOSED), newest first; `undefined` when a page was refused. */
async function everySession(status: "OPEN" | "SUSPENDED"): Promise<Session[] | undefined> {
  const found: Session[] = [];
  let cursor: string | null = null;
  do {
    const answer: Reply<"session-list"> | undefined = await sessionPage(
      { status, limit: SESSION_PAGE_MAX, ...(cursor ? { cursor } : {}) });
    if (!answer) return undefined;
    found.push(...answer.sessions);
    cursor = answer.nextCursor ?? null;
  } while (cursor);
  return found;
}

/** The session list, replacing what was loaded: every session not CLOSED, newest first,
 * then the newest page of closed ones; *Show more* (`showMoreSessions`) reads the next. A
 * user with thousands of closed sessions loads one page of them. */
export async function refreshSessions(): Promise<void> {
  const [open, suspended, closed] = await Promise.all([
    everySession("OPEN"), everySession("SUSPENDED"),
    sessionPage({ status: "CLOSED", limit: SESSION_PAGE })]);
  if (!open || !suspended || !closed) return;
  const active = [...open, ...suspended].sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  set({ sessions: [...active, ...closed.sessions], moreSessions: closed.nextCursor ?? null,
    sessionsError: null });
}

/** The next page of the user's closed sessions, after those the list shows. */
export async function showMoreSessions(): Promise<void> {
  const cursor = get().moreSessions;
  if (!cursor) return;
  const answer = await request("session-list", { status: "CLOSED", limit: SESSION_PAGE, cursor });
  if (!answer) return;
  set((s) => {
    const shown = new Set(s.sessions.map((x) => x.id));
    return { sessions: [...s.sessions, ...answer.sessions.filter((x) => !shown.has(x.id))],
      moreSessions: answer.nextCursor ?? null };
  });
}

export async function createSession(
  title: string, type: SessionType, onDisconnect: OnDisconnect,
): Promise<void> {
  resetSession();
  await bind("session-create", { title, type, onDisconnect }, "new");  // "" is untitled
}

/** Bind another session; its history, processes and events follow. */
export async function openSession(sessionId: string): Promise<void> {
  if (sessionId === get().sessionId) return;
  resetSession();
  await bind("session-resume", { sessionId, lastSeq: 0 }, "open");
}

/** The user's own sessions holding every word of `query` (`session-search`); `undefined`
 * when refused (shown as a notification). */
export async function searchSessions(query: string): Promise<ConversationHit[] | undefined> {
  return (await request("session-search", { query, limit: SEARCH_HITS }))?.hits;
}

/** Open a search hit's session on its chat, the hit's line loaded (earlier pages read as
 * needed), scrolled to and marked (`found`); a title hit just opens the session. */
export async function openHit(hit: ConversationHit): Promise<void> {
  await openSession(hit.sessionId);
  focusProcess(null);
  const { processId, seq } = hit;
  if (processId == null || seq == null || processId !== get().chatProcessId) return;
  for (;;) {
    const t = get().transcripts[processId];
    if (!t || !t.hasEarlier || (t.lines[0]?.seq ?? 0) <= seq) break;
    const before = t.lines.length;
    await loadEarlier(processId);
    if ((get().transcripts[processId]?.lines.length ?? 0) === before) break;
  }
  set({ found: { processId, seq } });
}

/** session-create or session-resume, then the chat history and the process list. A
 * browser has no machine, working directory or client tools, so it sends no fingerprint:
 * it opens any of the user's sessions, also one a terminal started (whose client tools
 * stay with that terminal's machine, docs/protocol.md "Fingerprint"). */
async function bind(
  type: "session-create" | "session-resume", data: Requests[typeof type],
  how: "new" | "open" | "resume",
): Promise<boolean> {
  const answer = await request(type, data);
  if (!answer) return false;
  const chat = answer.chatProcessId;
  set((s) => ({
    sessionId: answer.session.id, chatProcessId: chat,
    transcripts: chat && !s.transcripts[chat] ? { ...s.transcripts, [chat]: NO_TRANSCRIPT }
      : s.transcripts,
    contextDrift: Boolean(answer.contextDrift),
    // The events after the asked lastSeq follow this reply. Opening a session replays its
    // whole log: skip what the history below already holds by starting at its end.
    ...(how === "open" ? { lastSeq: answer.lastSeq } : {}),
  }));
  // Every chat this tab holds (a reconnect keeps the focused worker's too).
  await Promise.all([...Object.keys(get().transcripts).map(loadHistory), loadProcesses(),
    refreshSessions()]);
  return true;
}

/** The newest page of a process's chat, merged into what the tab holds. */
async function loadHistory(processId: string): Promise<void> {
  const answer = await request("chat-history",
    { processId, limit: HISTORY_LINES });
  if (!answer) return;
  const held = get().transcripts[processId]?.lines ?? [];
  const oldest = held.length === 0 || (answer.messages[0]?.seq ?? Infinity) <= held[0].seq;
  mergeLines(processId, answer.messages, { oldest, full: answer.messages.length === HISTORY_LINES });
}

/** The page before the oldest line held (*Load earlier*). */
export async function loadEarlier(processId: string): Promise<void> {
  const first = get().transcripts[processId]?.lines[0];
  if (!first) return;
  const answer = await request("chat-history",
    { processId, beforeSeq: first.seq, limit: HISTORY_LINES });
  if (answer) {
    mergeLines(processId, answer.messages,
      { oldest: true, full: answer.messages.length === HISTORY_LINES });
  }
}

async function loadProcesses(): Promise<void> {
  const answer = await request("process-list", { all: true });
  if (answer) putProcesses(answer.processes, true);
}

/** Show a worker's own chat in the middle pane and address it (`null`: back to the chat
 * process, whose unread count starts again). Client state only. */
export function focusProcess(processId: string | null): void {
  if (processId === null || processId === get().chatProcessId) {
    set({ focus: null, unread: 0, tab: "chat" });
    return;
  }
  track(processId);
  set({ focus: processId, tab: "chat" });
  void loadHistory(processId);
}

/** Start a process in the bound session (think-engines §8) and focus it. */
export async function createProcess(
  how: { recipe: string } | { engine: string }, goal: string, name: string,
  params?: Record<string, unknown>, template?: string,
): Promise<boolean> {
  const answer = await request("process-create",
    { ...how, goal, ...(name ? { name } : {}), ...(params ? { params } : {}),
      ...(template ? { template } : {}) });
  if (!answer) return false;
  putProcesses([answer.process]);
  focusProcess(answer.process.id);
  return true;
}

/** What `process-create` can run: the tenant's recipes (with their engines), the
 * engines, and marvin's workflow templates (`template-list`). */
export interface ProcessChoices {
  recipes: { name: string; engine: string }[]; engines: string[]; templates: string[];
}

export async function processChoices(): Promise<ProcessChoices> {
  const [recipes, engines, templates] = await Promise.all([
    request("recipe-list", {}),
    request("think-engines-list", {}),
    request("template-list", {}),
  ]);
  return { recipes: (recipes?.recipes ?? []).map((r) => ({ name: r.name, engine: r.engine })),
    engines: (engines?.engines ?? []).map((e) => e.name),
    templates: (templates?.templates ?? []).map((t) => t.name) };
}

/** Users of the tenant whose id or name contains `query` (the delegate dialog). */
export async function findUsers(query: string): Promise<TenantUser[]> {
  const answer = await request("user-list",
    { query: query || null, limit: 50 }, true);
  return answer?.users ?? [];
}

/** The summary of the process's older chat lines as committed now; null while it has
 * none (docs/protocol.md "The chat summary"), undefined when the request failed. */
export async function chatSummary(processId: string)
  : Promise<ChatHistorySummary | null | undefined> {
  const answer = await request("process-status", { processId });
  return answer && (answer.process.engineState?.chatHistorySummary ?? null);
}

async function refreshProcess(processId: string): Promise<void> {
  const answer = await request("process-status", { processId }, true);
  if (answer && answer.process.sessionId === get().sessionId) putProcesses([answer.process]);
}

/** Send a line to the process shown (the focused worker, else the chat process): shown at
 * once as pending, until its `user` line commits (docs/web-client.md). */
export function sendMessage(content: string): void {
  const target = viewedProcess(get());
  if (!target) return;
  const key = crypto.randomUUID();
  addPending(target, key, content);
  void deliver(target, key, content);
}

/** Send a failed pending line again: with the same idempotency key when the request was
 * refused (it may have been stored all the same), a new one when a turn answered it with
 * an error (the message was read; this is a new one). */
export function sendAgain(processId: string, key: string, content: string,
  stored: boolean): void {
  dropPending(processId, key);
  const next = stored ? crypto.randomUUID() : key;
  addPending(processId, next, content);
  void deliver(processId, next, content);
}

export function discardPending(processId: string, key: string): void {
  dropPending(processId, key);
}

async function deliver(target: string, key: string, content: string): Promise<void> {
  const answer = await tryRequest("process-steer",
    { targetThinkProcessId: target, content, idempotencyKey: key });
  pendingAnswered(target, key,
    answer.ok ? { messageId: answer.value.messageId } : { error: answer.message });
  // The server titles an untitled session from its first message: show the title.
  const session = get().sessions.find((s) => s.id === get().sessionId);
  if (answer.ok && session && !session.title) void refreshSessions();
}

export type Lifecycle = "pause" | "resume" | "stop" | "reset";

export async function lifecycle(processId: string, action: Lifecycle): Promise<void> {
  const answer = await request(`process-${action}`, { processId });
  if (answer) putProcesses([answer.process]);
}

/** Stop the process's reply in progress (`process-interrupt`): its worker cuts the model
 * call; what was said commits as a line marked `interrupted`. */
export async function interrupt(processId: string): Promise<void> {
  await request("process-interrupt", { processId });
}

/** Ask the model again for the process's last reply (`process-command` `regenerate`):
 * the earlier attempt stays; the new reply answers the same input. */
export async function askAgain(processId: string): Promise<void> {
  await request("process-command",
    { processId, command: "regenerate", params: {}, idempotencyKey: crypto.randomUUID() });
}

/** Give a session a title (`session-rename`); a refusal is handed back for the dialog. */
export async function renameSession(sessionId: string, title: string): Promise<string | null> {
  const answer = await tryRequest("session-rename", { sessionId, title });
  if (!answer.ok) return answer.message;
  set((s) => ({ sessions: s.sessions.map((x) => x.id === sessionId ? answer.value.session : x) }));
  return null;
}

export async function suspendSession(sessionId: string): Promise<void> {
  await request("session-suspend", { sessionId });
  if (sessionId === get().sessionId) resetSession();
  await refreshSessions();
}

export async function closeSession(sessionId: string): Promise<void> {
  await request("session-close", { sessionId });
  if (sessionId === get().sessionId) resetSession();
  await refreshSessions();
}

/** Start from the stored token, if this tab has one. */
export function start(): void {
  if (storedToken()) connect();
}
