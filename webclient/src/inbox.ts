// The Inbox's side of the connection: loading the user's items, merging the pushes, the
// toasts and browser notifications of new items, and the item commands. Views call these
// and read `inbox` / `pendingSummary` from the store.
import { notifications } from "@mantine/notifications";

import { request, tryRequest } from "./client";
import type { Criticality, InboxItem, ItemStatus, Outcome, Push, Requests } from "./protocol";
import { mergeItems, set } from "./store";

/** Items loaded per `inbox-list` page (the server's cap is 200); *Load more* reads the
 * next page of the Inbox's filter (`nextCursor`). */
export const INBOX_PAGE = 50;

/** The newest page of the user's Inbox, all but ARCHIVED, replacing what was loaded:
 * after every welcome, since the Inbox is the truth and pushes may have been missed while
 * disconnected. */
export async function loadInbox(): Promise<void> {
  const answer = await request("inbox-list", { limit: INBOX_PAGE });
  if (answer) mergeItems(answer.items, true);
}

/** What the Inbox shows: one status (or all), any of some criticalities, all of some tags.
 * The server filters (`inbox-list`), so a filter finds old items no page has loaded yet. */
export interface InboxFilter {
  status: ItemStatus | "ALL"; criticalities: Criticality[]; tags: string[];
}

function query(filter: InboxFilter): Requests["inbox-list"] {
  return {
    status: filter.status === "ALL" ? ["PENDING", "ANSWERED", "DISMISSED", "ARCHIVED"]
      : [filter.status],
    ...(filter.criticalities.length ? { criticality: filter.criticalities } : {}),
    tags: filter.tags,
    limit: INBOX_PAGE,
  };
}

/** The newest page of the items matching `filter` (merged into the loaded ones); the
 * next page is read with the returned cursor (`null`: no more). */
export async function loadInboxPage(
  filter: InboxFilter, cursor: string | null = null,
): Promise<string | null> {
  const answer = await request("inbox-list", { ...query(filter), ...(cursor ? { cursor } : {}) });
  if (!answer) return cursor;
  mergeItems(answer.items);
  return answer.nextCursor ?? null;
}

/** The user's PENDING items counted by criticality, as they are now (`inbox-summary`): the
 * counts the Inbox shows, true however few items are loaded. */
export async function refreshSummary(): Promise<void> {
  const answer = await tryRequest("inbox-summary", {});
  if (answer.ok) set({ pendingSummary: answer.value });
}

/** Show one item in the Inbox tab (a vogon checkpoint's link). */
export function openItem(itemId: string): void {
  set({ tab: "inbox", inboxSelected: itemId });
  void refreshItem(itemId);
}

/** Fetch one item again: a fresh signed URL for its attachment, its newest history. */
export async function refreshItem(itemId: string): Promise<void> {
  const answer = await request("inbox-item", { itemId });
  if (answer) mergeItems([answer.item]);
}

export function onInboxPush(
  frame: Extract<Push, { type: "inbox-pending-summary" | "inbox-item-added" | "inbox-item-updated" }>,
): void {
  if (frame.type === "inbox-pending-summary") {
    const summary = frame.data;
    set({ pendingSummary: summary });
    if (summary.totalPending > 0) {
      const critical = summary.byCriticality.CRITICAL ?? 0;
      notifications.show({
        title: "Inbox",
        message: `${summary.totalPending} pending item${summary.totalPending === 1 ? "" : "s"}`
          + (critical ? `, ${critical} critical` : ""),
      });
    }
    return;
  }
  const item = frame.data.item;
  mergeItems([item]);
  void refreshSummary();
  // A delegated item may come as -updated before its -added; announce each addition (a
  // new history step) once.
  const step = `${item.id}#${item.history.length}`;
  if (frame.type === "inbox-item-added" && !announced.has(step)) {
    announced.add(step);
    announce(item);
  }
}

/** The additions already announced (item id and history length). */
const announced = new Set<string>();

/** New items arrived since the Inbox toast was last closed: a burst (the demo posts eight
 * at once) updates one toast instead of stacking one per item. */
let unseen = 0;
const TOAST_ID = "inbox-added";
/** How long the toast stays after the burst's newest item (Mantine's default is 4 s). */
const TOAST_MS = 5000;

/** A toast while the page is open; the browser's notification as well when the tab is in
 * the background and the user allowed it (`askNotificationPermission`). */
function announce(item: InboxItem): void {
  unseen += 1;
  const toast = {
    id: TOAST_ID,
    color: item.criticality === "CRITICAL" ? "red" : "blue",
    title: unseen === 1 ? `New in your Inbox (${item.type.toLowerCase().replace("_", " ")})`
      : `${unseen} new items in your Inbox`,
    message: item.title,
    // Mantine restarts a toast's timer only when its duration changes: a new duration
    // per item keeps the toast for TOAST_MS after the newest one, so a burst that
    // arrives slowly (a loaded server) is still one toast.
    autoClose: TOAST_MS + unseen,
    onClose: () => { unseen = 0; },
  };
  if (unseen === 1) notifications.show(toast);
  else notifications.update(toast);
  if (document.hidden && "Notification" in window && Notification.permission === "granted") {
    new Notification(`Vancetope Inbox: ${item.title}`, { body: item.body ?? "", tag: item.id });
  }
}

/** Browser notifications need the user's permission, asked from a click. */
export async function askNotificationPermission(): Promise<NotificationPermission> {
  return "Notification" in window ? Notification.requestPermission() : "denied";
}

/** The outcome of an item command: the item as it is now, or the server's refusal (shown
 * next to the item, e.g. an answer that does not fit its schema: `invalid_input`). */
export type ItemResult = { ok: true } | { ok: false; code: string; message: string };

/** The item commands: each answers with the item as it is now. */
type ItemCommand = "inbox-answer" | "inbox-delegate" | "inbox-dismiss" | "inbox-archive"
  | "inbox-revoke-auto-answer";

async function command<T extends ItemCommand>(type: T, data: Requests[T]): Promise<ItemResult> {
  const answer = await tryRequest<ItemCommand>(type, data);
  if (!answer.ok) return answer;
  mergeItems([answer.value.item]);
  void refreshSummary();
  return { ok: true };
}

/** DECIDED with the type's value (`{approved}`, `{chosen, freeText?}`, `{text}`,
 * `{orderedIds}`, `{value}`). */
export function answerItem(itemId: string, value: object): Promise<ItemResult> {
  return command("inbox-answer", { itemId, outcome: "DECIDED", value });
}

/** "I lack information" (INSUFFICIENT_INFO) or "I cannot decide" (UNDECIDABLE). */
export function answerUndecided(
  itemId: string, outcome: Exclude<Outcome, "DECIDED">, reason: string,
): Promise<ItemResult> {
  return command("inbox-answer", { itemId, outcome, reason });
}

export function delegateItem(itemId: string, toUserId: string, note: string): Promise<ItemResult> {
  return command("inbox-delegate", { itemId, toUserId, note: note || null });
}

export function dismissItem(itemId: string): Promise<ItemResult> {
  return command("inbox-dismiss", { itemId });
}

export function archiveItem(itemId: string): Promise<ItemResult> {
  return command("inbox-archive", { itemId });
}

export function revokeAutoAnswer(itemId: string): Promise<ItemResult> {
  return command("inbox-revoke-auto-answer", { itemId });
}
