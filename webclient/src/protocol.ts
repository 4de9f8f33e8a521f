// The frames and records the client reads, as docs/protocol.md describes them. Only
// the fields the client uses are typed; the server sends more.

export interface Frame {
  type: string;
  id?: string;
  replyTo?: string | null;
  data: any; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export type SessionStatus = "OPEN" | "SUSPENDED" | "CLOSED";
export type SessionType = "INTERACTIVE" | "AUTONOMOUS";
export type OnDisconnect = "SUSPEND" | "KEEP_OPEN" | "CLOSE";
export type ProcessStatus =
  | "INIT" | "RUNNING" | "IDLE" | "BLOCKED" | "PAUSED" | "SUSPENDED" | "CLOSED";

export interface Session {
  id: string;
  type: SessionType;
  status: SessionStatus;
  title: string | null;
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
}

export type NodeStatus = "PENDING" | "RUNNING" | "DONE" | "FAILED" | "SKIPPED";

/** A node of marvin's task tree (docs/protocol.md, after the events table). */
export interface TaskNode {
  id: string;
  kind: "PLAN" | "WORKER" | "USER_INPUT" | "AGGREGATE";
  parent: string | null;
  goal: string;
  status: NodeStatus;
  attempts?: number;
  recipe?: string | null;
  childProcessId?: string | null;
  result?: { summary?: string } | null;
  error?: string | null;
  children: string[];
}

export interface TaskTree {
  root: string;
  nodes: Record<string, TaskNode>;
}

/** A `council-updated` event's data: a zaphod council as it stands. */
export interface Council {
  pattern: string;
  round: number;
  rounds: number;
  sequential: boolean;
  phase: string;
  heads: { name: string; round: number; status: string; processId: string | null }[];
  missingHeads: string[];
}

/** A process's `engineView`, by engine (docs/schemas/view.<engine>.json). */
export type EngineView = MarvinView | VogonView | ZaphodView;

export interface MarvinView {
  engine: "marvin";
  tree: TaskTree;
}

/** vogon's phases as committed (a newer `vogon-phase` event is laid over it). */
export interface VogonView {
  engine: "vogon";
  phases: { name: string; checkpoint: "APPROVAL" | "DECISION" | "FEEDBACK" | null }[];
  index: number;
  iteration: number;
  step: string;
  current: string;
  outcome: string | null;
  waiting: { id: string; title: string } | null;
  history: { phase: string; iteration: number; gate: "passed" | "failed" }[];
}

export interface Synthesis {
  consensus: string;
  differences: string[];
  conclusion: string;
  missingHeads: string[];
}

export interface ZaphodView {
  engine: "zaphod";
  council: Council;
  synthesis: Synthesis | null;
}

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

/** A user of the tenant as `user-list` shows them. */
export interface TenantUser {
  id: string;
  name: string;
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
  createdAt: string;
}

/** One `event` frame's data: a session stream event. */
export interface StreamEvent {
  seq: number;
  sessionId: string;
  processId: string;
  type: string;
  data: any; // eslint-disable-line @typescript-eslint/no-explicit-any
  at: string;
}

export interface BoundSession {
  session: Session;
  chatProcessId: string | null;
  lastSeq: number;
  contextDrift?: boolean;
}

export interface Welcome {
  serverVersion: string;
  tenantId: string;
  userId: string;
  llm: string;
}

export type ItemType =
  | "APPROVAL" | "DECISION" | "FEEDBACK" | "ORDERING" | "STRUCTURE_EDIT"
  | "OUTPUT_TEXT" | "OUTPUT_IMAGE" | "OUTPUT_DOCUMENT";
export type Criticality = "LOW" | "NORMAL" | "CRITICAL";
export type ItemStatus = "PENDING" | "ANSWERED" | "DISMISSED" | "ARCHIVED";
export type Outcome = "DECIDED" | "INSUFFICIENT_INFO" | "UNDECIDABLE";

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

export interface PendingSummary {
  totalPending: number;
  byCriticality: Partial<Record<Criticality, number>>;
  oldestPendingAt?: string | null;
}
