// The frames the client sends and reads. Their types are generated from docs/schemas/ into
// protocol.gen.ts (`npm run types`); this file adds the records those schemas leave open
// (`{[k: string]: unknown}`: a session, a process, a chat line, an Inbox item) as the client
// reads them: only the fields the client uses are typed; the server sends more.
import type {
  Criticality, EventPush, InboxPendingSummaryPush, ItemStatus, MarvinView, OnDisconnect, Outcome,
  Pushes, Replies, Requests, SessionStatus, SessionType, UserEntry, VogonView, WelcomePush,
  ZaphodView,
} from "./protocol.gen";

export type * from "./protocol.gen";

/** The records a frame's data carries, by field name: where the generated shape leaves
 * such a field open, it is read as the client's record type. */
interface Records {
  session: Session;
  sessions: Session[];
  process: Process;
  processes: Process[];
  messages: ChatLine[];
  item: InboxItem;
  items: InboxItem[];
  recipes: { name: string; engine: string }[];
  engines: { name: string }[];
  templates: { name: string }[];
}

type Open = { [k: string]: unknown };
type IsOpen<X> = [X] extends [Open] ? ([Open] extends [X] ? true : false)
  : [X] extends [Open[]] ? ([Open[]] extends [X] ? true : false) : false;
type WithRecords<T> = {
  [F in keyof T]: F extends keyof Records ? IsOpen<T[F]> extends true ? Records[F] : T[F] : T[F];
};

export type RequestType = keyof Requests;
/** The data of the reply to a request of type `T`. */
export type Reply<T extends RequestType> = WithRecords<Replies[T]>;
/** A frame the server sends unasked (no `replyTo`), narrowed by its `type`. */
export type Push = { [T in keyof Pushes]: { type: T; replyTo?: null; data: WithRecords<Pushes[T]> } }[
  keyof Pushes];

export type ProcessStatus =
  | "INIT" | "RUNNING" | "IDLE" | "BLOCKED" | "PAUSED" | "SUSPENDED" | "CLOSED";

export interface Session {
  id: string;
  type: SessionType;
  status: SessionStatus;
  title: string | null;
  /** The project the session works in ("default" unless created in another). */
  projectId: string;
  chatProcessId: string | null;
  onDisconnect: OnDisconnect;
  createdAt: string;
  updatedAt: string;
}

export interface Process {
  id: string;
  sessionId: string;
  parentProcessId: string | null;
  name: string | null;
  goal: string;
  engine: string;
  recipeName: string | null;
  status: ProcessStatus;
  /** What the engine views draw of the committed state, as of the read
   * (docs/schemas/view.<engine>.json); null for an engine without a view or while there
   * is nothing to draw. */
  engineView?: EngineView | null;
  /** The engine's committed state; a chat process's `chatHistorySummary` is the one part a
   * client reads (docs/protocol.md "The chat summary"). */
  engineState?: { chatHistorySummary?: ChatHistorySummary };
}

/** The summary of a chat's lines `1…throughSeq`, which its model sees in their place;
 * written by a model: shown as text. */
export interface ChatHistorySummary {
  text: string;
  throughSeq: number;
}

/** A process's `engineView`, by engine (docs/schemas/view.<engine>.json, generated). */
export type EngineView = MarvinView | VogonView | ZaphodView;

/** A `vogon-phase` event's data. */
export interface VogonPhase {
  strategy: string;
  phase: string;
  index: number;
  iteration: number;
  step: "started" | "waiting" | "gate" | "finished";
  itemId?: string;
  title?: string;
  passed?: boolean;
  outcome?: string;
}


export type ChatRole = "user" | "assistant" | "system" | "event" | "tool" | "error";

export interface ChatLine {
  id: string;
  processId: string;
  seq: number;
  role: ChatRole;
  content: string;
  sourceMessageId: string | null;
  meta: Record<string, unknown>;
  /** The document passages a reply used (older servers send none). */
  sources?: Citation[];
  createdAt: string;
}

/** Where a passage of a project's document came from (models/knowledge.py `Citation`). */
export interface Citation {
  documentId: string;
  documentName: string;
  section: string;
  page: number | null;
  lineStart: number | null;
  lineEnd: number | null;
}

/** One `event` frame's data: a session stream event. An event's own data has no schema
 * per event type yet (docs/protocol.md's events table): the views read what they know. */
export type StreamEvent = Omit<EventPush, "data"> & {
  data: any; // eslint-disable-line @typescript-eslint/no-explicit-any
};

export type Welcome = WelcomePush;
export type PendingSummary = InboxPendingSummaryPush;
export type BoundSession = Reply<"session-create">;
/** A user of the tenant as `user-list` shows them. */
export type TenantUser = UserEntry;


export type ItemType =
  | "APPROVAL" | "DECISION" | "FEEDBACK" | "ORDERING" | "STRUCTURE_EDIT"
  | "OUTPUT_TEXT" | "OUTPUT_IMAGE" | "OUTPUT_DOCUMENT";

export interface InboxHistoryEntry {
  action: "CREATE" | "AUTO_ANSWER" | "ANSWER" | "DISMISS" | "DELEGATE" | "ARCHIVE" | "REVOKE";
  by: string;
  at: string;
  fromUser?: string | null;
  toUser?: string | null;
  note?: string | null;
}

/** An Inbox item as the user sees it (an attachment's signed link in `payload.url`). */
export interface InboxItem {
  id: string;
  type: ItemType;
  criticality: Criticality;
  tags: string[];
  title: string;
  body: string | null;
  payload: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  status: ItemStatus;
  assignedToUserId: string;
  originatorUserId: string;
  answer: { outcome: Outcome; value?: any; reason?: string | null; answeredBy: string } | null; // eslint-disable-line @typescript-eslint/no-explicit-any
  resolvedBy: "USER" | "AUTO_DEFAULT" | "AUTO_RESOLVER" | "DISMISSED" | null;
  history: InboxHistoryEntry[];
  createdAt: string;
  updatedAt: string;
}
