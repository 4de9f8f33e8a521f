import {
  Alert, Badge, Button, Collapse, Divider, Group, Loader, SegmentedControl, Select, Stack, Table,
  Textarea, TextInput, Title,
} from "@mantine/core";
import { useDebouncedValue, useDisclosure } from "@mantine/hooks";
import { lazy, Suspense, useEffect, useState, type ReactNode } from "react";

import { findUsers } from "../../client";
import {
  answerItem, answerUndecided, archiveItem, delegateItem, dismissItem, revokeAutoAnswer,
  type ItemResult,
} from "../../inbox";
import type { InboxItem, TenantUser } from "../../protocol";
import { Markdown } from "../Markdown";
import { AnswerView } from "./Answer";
import { Approval, Decision, Feedback, Output } from "./Asks";
import { Ordering } from "./Ordering";

/** The form library (@rjsf/core and its lodash) is a third of the bundle: loaded when a
 * STRUCTURE_EDIT item is first opened. */
const StructureEdit = lazy(() => import("./StructureEdit").then((m) => ({ default: m.StructureEdit })));

export const CRITICALITY_COLOR = { LOW: "gray", NORMAL: "blue", CRITICAL: "red" } as const;
export const STATUS_COLOR = {
  PENDING: "yellow", ANSWERED: "green", DISMISSED: "gray", ARCHIVED: "dark",
} as const;

function AnswerSummary({ item, me }: { item: InboxItem; me: string | undefined }) {
  const answer = item.answer;
  if (!answer) return null;
  const auto = item.resolvedBy === "AUTO_DEFAULT";
  const by = answer.answeredBy === me ? "you" : answer.answeredBy;
  return (
    <Alert color={auto ? "violet" : answer.outcome === "DECIDED" ? "green" : "orange"}
      data-testid="item-answer"
      title={auto ? "Answered automatically with its default (LOW)" : `Answered by ${by}`}>
      <AnswerView type={item.type} answer={answer} item={item} />
    </Alert>
  );
}

/** "I lack information" / "I cannot decide", with the reason the asking process gets. */
function Undecided({ item, run }: { item: InboxItem; run: (r: Promise<ItemResult>) => void }) {
  const [open, { toggle }] = useDisclosure(false);
  const [outcome, setOutcome] = useState<"INSUFFICIENT_INFO" | "UNDECIDABLE">("INSUFFICIENT_INFO");
  const [reason, setReason] = useState("");
  return (
    <Stack gap="xs">
      <Group><Button variant="subtle" size="compact-sm" onClick={toggle} aria-expanded={open}>
        Can't answer?</Button></Group>
      <Collapse expanded={open}>
        <Stack gap="xs">
          <SegmentedControl value={outcome} onChange={(v) => setOutcome(v as typeof outcome)}
            data={[{ value: "INSUFFICIENT_INFO", label: "I lack information" },
              { value: "UNDECIDABLE", label: "I cannot decide" }]} />
          <Textarea label="Reason" value={reason} onChange={(e) => setReason(e.currentTarget.value)} />
          <Group><Button variant="light" disabled={!reason.trim()}
            onClick={() => run(answerUndecided(item.id, outcome, reason))}>Send reason</Button></Group>
        </Stack>
      </Collapse>
    </Stack>
  );
}

/** Users of the tenant matching what is typed (`user-list`, asked as the user types). */
function useTenantUsers(open: boolean, search: string, me: string | undefined): TenantUser[] {
  const [query] = useDebouncedValue(search, 200);
  const [users, setUsers] = useState<TenantUser[]>([]);
  useEffect(() => {
    if (!open) return;
    let current = true;
    void findUsers(query).then((found) => { if (current) setUsers(found.filter((u) => u.id !== me)); });
    return () => { current = false; };
  }, [open, query, me]);
  return users;
}

/** Hand the item to another user of the tenant, picked from a searchable list. */
function Delegate({ item, me, run }: {
  item: InboxItem; me: string | undefined; run: (r: Promise<ItemResult>) => void;
}) {
  const [open, { toggle }] = useDisclosure(false);
  const [user, setUser] = useState<string | null>(null);
  const [search, setSearch] = useState("");
  const [note, setNote] = useState("");
  const [picked, setPicked] = useState<TenantUser | null>(null);
  const label = (u: TenantUser) => u.name === u.id ? u.id : `${u.name} (${u.id})`;
  // Once a user is picked the search box shows their label: that is no new search.
  const users = useTenantUsers(open, picked && search === label(picked) ? "" : search, me);
  const shown = picked && !users.some((u) => u.id === picked.id) ? [picked, ...users] : users;
  const options = shown.map((u) => ({ value: u.id, label: label(u) }));
  return (
    <Stack gap="xs">
      <Group><Button variant="subtle" size="compact-sm" onClick={toggle} aria-expanded={open}>
        Delegate…</Button></Group>
      <Collapse expanded={open}>
        <Group align="end">
          <Select label="Delegate to" placeholder="Search the tenant's users" searchable
            data={options} value={user} searchValue={search}
            onChange={(id) => { setUser(id); setPicked(shown.find((u) => u.id === id) ?? null); }}
            onSearchChange={setSearch} nothingFoundMessage="No user of this tenant matches"
            filter={({ options: shown }) => shown} />
          <TextInput label="Note" value={note} onChange={(e) => setNote(e.currentTarget.value)}
            style={{ flex: 1 }} />
          <Button variant="light" disabled={!user}
            onClick={() => user && run(delegateItem(item.id, user, note))}>Delegate</Button>
        </Group>
      </Collapse>
    </Stack>
  );
}

function History({ item }: { item: InboxItem }) {
  return (
    <Table withTableBorder={false} fz="sm" data-testid="item-history" aria-label="History">
      <Table.Thead><Table.Tr><Table.Th>When</Table.Th><Table.Th>What</Table.Th>
        <Table.Th>By</Table.Th><Table.Th>Note</Table.Th></Table.Tr></Table.Thead>
      <Table.Tbody>
        {item.history.map((h, i) => (
          <Table.Tr key={i}>
            <Table.Td>{new Date(h.at).toLocaleString()}</Table.Td>
            <Table.Td>{h.action.toLowerCase().replace("_", " ")}
              {h.action === "DELEGATE" && h.toUser ? ` → ${h.toUser}` : ""}</Table.Td>
            <Table.Td>{h.by}</Table.Td>
            <Table.Td>{h.note ?? ""}</Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  );
}

/** One item: what it asks or shows, its renderer while PENDING, the answer once given,
 * the item commands and its history. A refused command is shown here, inline. */
export function ItemView({ item, me }: { item: InboxItem; me: string | undefined }) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const run = (pending: Promise<ItemResult>) => {
    setBusy(true);
    setError(null);
    void pending.then((r) => {
      setBusy(false);
      if (!r.ok) setError(`${r.code}: ${r.message}`);
    });
  };
  const answer = (value: object) => run(answerItem(item.id, value));
  const mine = item.assignedToUserId === me;
  const open = item.status === "PENDING" && mine;
  const ask = !item.type.startsWith("OUTPUT_");
  let renderer: ReactNode = null;
  if (!ask) renderer = <Output item={item} />;
  else if (open) {
    const p = item.payload;
    renderer = {
      APPROVAL: <Approval item={item} busy={busy} onAnswer={answer} />,
      DECISION: <Decision item={item} busy={busy} onAnswer={answer} />,
      FEEDBACK: <Feedback item={item} busy={busy} onAnswer={answer} />,
      ORDERING: <Ordering items={p.items} busy={busy}
        onSubmit={(orderedIds) => answer({ orderedIds })} />,
      STRUCTURE_EDIT: <Suspense fallback={<Loader size="sm" />}>
        <StructureEdit schema={p.schema} value={p.value} busy={busy}
          onSubmit={(value) => answer({ value })} /></Suspense>,
    }[item.type as "APPROVAL"];
  }
  return (
    <Stack gap="sm" data-testid="inbox-item" data-type={item.type} data-status={item.status}>
      <Group justify="space-between" align="start">
        <Title order={2} size="h4">{item.title}</Title>
        <Group gap={4}>
          <Badge variant="outline">{item.type.replace("_", " ")}</Badge>
          <Badge color={CRITICALITY_COLOR[item.criticality]}>{item.criticality}</Badge>
          <Badge color={STATUS_COLOR[item.status]} variant="light"
            data-testid="item-status">{item.status}</Badge>
          {item.resolvedBy === "AUTO_DEFAULT" && <Badge color="violet">auto-answered</Badge>}
        </Group>
      </Group>
      {item.tags.length > 0 && (
        <Group gap={4}>{item.tags.map((t) => <Badge key={t} size="xs" variant="dot">{t}</Badge>)}</Group>
      )}
      {item.body && item.type !== "OUTPUT_TEXT" && <Markdown text={item.body} />}
      {!mine && <Alert color="gray">Assigned to {item.assignedToUserId}.</Alert>}
      {renderer}
      {error && <Alert color="red" title="Refused" data-testid="item-error">{error}</Alert>}
      <AnswerSummary item={item} me={me} />
      {item.resolvedBy === "AUTO_DEFAULT" && item.status === "ANSWERED" && (
        <Group><Button variant="light" color="violet"
          onClick={() => run(revokeAutoAnswer(item.id))}>Revoke the automatic answer</Button></Group>
      )}
      {open && ask && <Undecided item={item} run={run} />}
      {item.status === "PENDING" && mine && <Delegate item={item} me={me} run={run} />}
      <Group>
        {open && <Button variant="default" onClick={() => run(dismissItem(item.id))}>
          {ask ? "Dismiss" : "Done"}</Button>}
        {(item.status === "ANSWERED" || item.status === "DISMISSED") && (
          <Button variant="default" onClick={() => run(archiveItem(item.id))}>Archive</Button>)}
      </Group>
      <Divider label="History" labelPosition="left" />
      <History item={item} />
    </Stack>
  );
}
