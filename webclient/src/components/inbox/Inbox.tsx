import {
  Badge, Button, Chip, Grid, Group, ScrollArea, Stack, Text, UnstyledButton, useMatches,
} from "@mantine/core";
import { useEffect, useMemo, useRef, useState } from "react";

import {
  askNotificationPermission, type InboxFilter, loadInboxPage, refreshItem, refreshSummary,
} from "../../inbox";
import type { Criticality, ItemStatus } from "../../protocol";
import { set, useStore } from "../../store";
import { CRITICALITY_COLOR, ItemView, STATUS_COLOR } from "./ItemView";

const STATUSES: ItemStatus[] = ["PENDING", "ANSWERED", "DISMISSED", "ARCHIVED"];
const CRITICALITIES: Criticality[] = ["CRITICAL", "NORMAL", "LOW"];

/** The PENDING items of the user, for the tab's badge: the server's count (the pending
 * summary), not only the loaded ones. */
export function usePendingCount(): number {
  return useStore((s) => s.pendingSummary?.totalPending ?? 0);
}

function NotifyButton() {
  const [permission, setPermission] = useState(
    "Notification" in window ? Notification.permission : "denied");
  if (permission !== "default") return null;
  return (
    <Button size="compact-sm" variant="light" w="fit-content"
      title="A browser notification for each new item while this tab is hidden"
      onClick={() => void askNotificationPermission().then(setPermission)}>
      Notify me in the background
    </Button>
  );
}

/** The Inbox: filters by status, criticality and tag, applied by the server and paged
 * (*Load more*), the items newest first, and the selected item's renderer. The counts are
 * the server's PENDING counts (`inbox-summary`); tags show no count, since only the
 * loaded items' tags are known. Items delegated away leave the list. Narrower than `md`
 * (a phone), where the item would be drawn below the whole list, off screen, the item
 * replaces the list, with *Back to the Inbox*; the list stays mounted (hidden), keeping
 * its scroll position. */
export function Inbox() {
  const me = useStore((s) => s.welcome?.userId);
  const welcome = useStore((s) => s.welcome);
  const inbox = useStore((s) => s.inbox);
  const summary = useStore((s) => s.pendingSummary);
  const [status, setStatus] = useState<ItemStatus | "ALL">("PENDING");
  const [criticalities, setCriticalities] = useState<Criticality[]>([]);
  const [tags, setTags] = useState<string[]>([]);
  const selected = useStore((s) => s.inboxSelected);
  const [cursor, setCursor] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);
  const filter: InboxFilter = useMemo(() => ({ status, criticalities, tags }),
    [status, criticalities, tags]);
  const sideBySide = useMatches({ base: false, md: true }, { getInitialValueInEffect: false });
  const back = useRef<HTMLButtonElement>(null);

  // The first page of each filter (again after each welcome, which reloads the Inbox).
  useEffect(() => {
    let current = true;
    setLoading(true);
    void loadInboxPage(filter).then((next) => { if (current) setCursor(next); })
      .finally(() => { if (current) setLoading(false); });
    void refreshSummary();
    return () => { current = false; };
  }, [filter, welcome]);
  const loadMore = () => {
    setLoading(true);
    void loadInboxPage(filter, cursor).then(setCursor).finally(() => setLoading(false));
  };

  const mine = useMemo(() => Object.values(inbox)
    .filter((i) => i.assignedToUserId === me)
    .sort((a, b) => b.createdAt.localeCompare(a.createdAt) || b.id.localeCompare(a.id)),
  [inbox, me]);
  const knownTags = [...new Set([...mine.flatMap((i) => i.tags), ...tags])].sort();
  const shown = mine.filter((i) => (status === "ALL" || i.status === status)
    && (criticalities.length === 0 || criticalities.includes(i.criticality))
    && tags.every((t) => i.tags.includes(t)));
  const item = selected ? inbox[selected] : undefined;
  const pendingBy = (c: Criticality) =>
    status === "PENDING" && tags.length === 0 && summary ? ` (${summary.byCriticality[c] ?? 0})`
      : "";

  const select = (id: string) => {
    set({ inboxSelected: id });
    void refreshItem(id); // a fresh signed URL and the newest history
  };
  const alone = !sideBySide && item !== undefined;  // the item is the view
  // Opened on its own (a row, or a checkpoint's link): its top in view, the focus on the
  // way back (the row that had it is hidden now).
  useEffect(() => {
    if (alone) {
      window.scrollTo({ top: 0 });
      back.current?.focus();
    }
  }, [alone, selected]);
  const toList = () => {
    set({ inboxSelected: null });
    // The row just left, for the keyboard, once the list is shown again.
    requestAnimationFrame(() => document.querySelector<HTMLElement>(
      `[data-testid=inbox-row][data-item-id="${CSS.escape(selected ?? "")}"]`)?.focus());
  };

  return (
    <Grid data-testid="inbox">
      <Grid.Col span={{ base: 12, md: 5 }} display={alone ? "none" : undefined}>
        <Stack gap="xs">
          <Chip.Group value={status} onChange={(v) => setStatus(v as ItemStatus | "ALL")}>
            <Group gap={4} aria-label="Status">
              {[...STATUSES, "ALL" as const].map((st) => (
                <Chip key={st} value={st} size="xs" color={st === "ALL" ? "blue" : STATUS_COLOR[st]}>
                  {st.toLowerCase()}{st === "PENDING" && summary ? ` (${summary.totalPending})` : ""}
                </Chip>))}
            </Group>
          </Chip.Group>
          <Chip.Group multiple value={criticalities}
            onChange={(chosen) => setCriticalities(chosen as Criticality[])}>
            <Group gap={4} aria-label="Criticality">
              {CRITICALITIES.map((c) => (
                <Chip key={c} value={c} size="xs" color={CRITICALITY_COLOR[c]}>
                  {c.toLowerCase()}{pendingBy(c)}</Chip>))}
            </Group>
          </Chip.Group>
          {knownTags.length > 0 && (
            <Chip.Group multiple value={tags} onChange={setTags}>
              <Group gap={4} aria-label="Tags">
                {knownTags.map((t) => (
                  <Chip key={t} value={t} size="xs" variant="outline">#{t}</Chip>))}
              </Group>
            </Chip.Group>
          )}
          <NotifyButton />
          <ScrollArea.Autosize mah="calc(100vh - 260px)">
            <Stack gap={4} role="list" aria-label="Inbox items" data-testid="inbox-list">
              {shown.length === 0 && <Text c="dimmed" size="sm">Nothing here.</Text>}
              {shown.map((i) => (
                <UnstyledButton key={i.id} role="listitem" onClick={() => select(i.id)}
                  className="inbox-row" data-selected={i.id === selected || undefined}
                  data-testid="inbox-row" data-item-id={i.id} data-type={i.type} data-criticality={i.criticality} aria-current={i.id === selected}>
                  <Stack gap={2}>
                    <Text size="sm" fw={i.status === "PENDING" ? 600 : 400}>{i.title}</Text>
                    <Group gap={4}>
                      <Badge size="xs" variant="outline">{i.type.replace("_", " ")}</Badge>
                      {i.criticality !== "NORMAL" && (
                        <Badge size="xs" color={CRITICALITY_COLOR[i.criticality]}>{i.criticality}</Badge>)}
                      <Badge size="xs" variant="light" color={STATUS_COLOR[i.status]}>{i.status}</Badge>
                      {i.resolvedBy === "AUTO_DEFAULT" && i.status === "ANSWERED" &&
                        <Badge size="xs" color="violet">auto-answered</Badge>}
                      <Text size="xs" c="dimmed">{new Date(i.createdAt).toLocaleTimeString()}</Text>
                    </Group>
                  </Stack>
                </UnstyledButton>
              ))}
            </Stack>
            {cursor && (
              <Button variant="subtle" size="compact-sm" mt={4} loading={loading}
                onClick={loadMore}>Load more</Button>)}
          </ScrollArea.Autosize>
        </Stack>
      </Grid.Col>
      <Grid.Col span={{ base: 12, md: 7 }} display={sideBySide || alone ? undefined : "none"}>
        {alone && (
          <Button ref={back} variant="subtle" size="compact-sm" mb="xs"
            leftSection={<span aria-hidden>←</span>} onClick={toList}>Back to the Inbox</Button>)}
        {item ? <ItemView key={item.id} item={item} me={me} />
          : <Text c="dimmed">Pick an item on the left.</Text>}
      </Grid.Col>
    </Grid>
  );
}
