import {
  Badge, Button, CloseButton, Group, Modal, NavLink, ScrollArea, SegmentedControl, Select, Stack,
  Text, TextInput, Title, UnstyledButton, type ButtonProps,
} from "@mantine/core";
import { useDebouncedValue, useDisclosure } from "@mantine/hooks";
import type React from "react";
import { useEffect, useState } from "react";

import {
  closeSession, createSession, openHit, openSession, searchSessions, showMoreSessions,
  suspendSession,
} from "../client";
import type { ConversationHit, OnDisconnect, SessionType, SnippetPart } from "../protocol";
import { useStore } from "../store";
import { RenameSession } from "./RenameSession";

const STATUS_COLOR = { OPEN: "green", SUSPENDED: "yellow", CLOSED: "gray" } as const;

/** The most characters a search query may have (`session-search`). */
const QUERY_CHARS = 200;

/** The user's sessions (session-list): those not CLOSED first, then the closed ones a page
 * at a time (*Show more*), the bound one highlighted; create, open, suspend, close; a search
 * box finds sessions by the words of their titles and chats (`SearchResults` replaces the
 * list while it holds text). `onPicked` folds the menu away on a narrow screen once a
 * session is chosen. */
export function SessionList({ onPicked }: { onPicked(): void }) {
  const sessions = useStore((s) => s.sessions);
  const more = useStore((s) => s.moreSessions);
  const error = useStore((s) => s.sessionsError);
  const [loading, setLoading] = useState(false);
  const current = useStore((s) => s.sessionId);
  const bound = sessions.find((s) => s.id === current);
  const [query, setQuery] = useState("");
  const [searched] = useDebouncedValue(query.trim(), 300);
  return (
    <Stack flex={1} mih={0} gap="sm">
      <Group justify="space-between">
        <Title order={2} size="h4">Sessions</Title>
        <NewSessionButton size="xs" onCreated={onPicked}>New session</NewSessionButton>
      </Group>
      <TextInput type="search" size="xs" placeholder="Search your conversations"
        aria-label="Search your conversations" value={query} maxLength={QUERY_CHARS}
        onChange={(e) => setQuery(e.currentTarget.value)}
        rightSection={query && <CloseButton size="sm" aria-label="Clear the search"
          onClick={() => setQuery("")} />} />
      <ScrollArea style={{ flex: 1 }}>
        {searched ? <SearchResults query={searched} onPicked={onPicked} /> : (
        <nav aria-label="Sessions">
          {error ? <Text c="red" size="sm" role="alert">Your sessions could not be loaded: {error}</Text>
            : sessions.length === 0 && <Text c="dimmed" size="sm">No sessions yet.</Text>}
          {sessions.map((s) => (
            <NavLink key={s.id} component="button" active={s.id === current}
              label={s.title || "Untitled session"}
              description={`${s.type.toLowerCase()} · ${new Date(s.createdAt).toLocaleString()}`}
              rightSection={<Badge size="xs" variant="dot" color={STATUS_COLOR[s.status]}>{s.status}</Badge>}
              // NavLink's `disabled` only styles it: say so to assistive technology too.
              disabled={s.status === "CLOSED"} aria-disabled={s.status === "CLOSED"}
              onClick={() => {
                if (s.status === "CLOSED") return;
                onPicked();
                void openSession(s.id);
              }} />
          ))}
          {more && (
            <Button variant="subtle" size="compact-sm" mt={4} loading={loading}
              onClick={() => {
                setLoading(true);
                void showMoreSessions().finally(() => setLoading(false));
              }}>Show more</Button>)}
        </nav>)}
      </ScrollArea>
      {bound && <RenameSession session={bound} />}
      {bound && bound.status !== "CLOSED" && (
        <Group grow>
          <Button size="xs" variant="light" onClick={() => void suspendSession(bound.id)}>
            Suspend
          </Button>
          <Button size="xs" variant="light" color="red" onClick={() => void closeSession(bound.id)}>
            Close
          </Button>
        </Group>
      )}
    </Stack>
  );
}

/** The user's sessions holding every word of `query`: each hit its session's title, where
 * (the title, or a line of the user's or Arthur's) and when, and its snippet, the words found
 * marked. The snippet is the conversation's text: React text nodes, never HTML. A click
 * opens the session at the line. */
function SearchResults({ query, onPicked }: { query: string; onPicked(): void }) {
  const [hits, setHits] = useState<ConversationHit[] | null>(null);
  useEffect(() => {
    let current = true;
    setHits(null);
    void searchSessions(query).then((found) => { if (current) setHits(found ?? []); });
    return () => { current = false; };
  }, [query]);
  if (hits === null) return <Text c="dimmed" size="sm">Searching…</Text>;
  if (hits.length === 0) {
    return <Text c="dimmed" size="sm">No open session of yours holds every word.</Text>;
  }
  return (
    <nav aria-label="Search results">
      {hits.map((hit) => (
        <UnstyledButton key={`${hit.sessionId}:${hit.seq ?? "title"}`} className="search-hit"
          data-testid="search-hit" data-where={hit.seq == null ? "title" : hit.role}
          onClick={() => { onPicked(); void openHit(hit); }}>
          <Text size="sm" fw={500} lineClamp={1}>
            {hit.seq == null ? <Snippet parts={hit.snippet ?? []} /> : hit.title || "Untitled session"}
          </Text>
          <Text size="xs" c="dimmed">
            {hit.seq == null ? "Title" : hit.role === "user" ? "You" : "Arthur"}
            {" · "}{new Date(hit.at).toLocaleString()}
          </Text>
          {hit.seq != null && <Text size="sm" lineClamp={3}><Snippet parts={hit.snippet ?? []} /></Text>}
        </UnstyledButton>
      ))}
    </nav>
  );
}

function Snippet({ parts }: { parts: SnippetPart[] }) {
  return parts.map((part, i) => part.match
    ? <mark key={i} className="search-match">{part.text}</mark>
    : <span key={i}>{part.text}</span>);
}

/** A button that opens the *New session* dialog; `onCreated` runs once it is sent. */
export function NewSessionButton({ onCreated, children, ...button }: ButtonProps & {
  onCreated?(): void; children: React.ReactNode;
}) {
  const [creating, { open, close }] = useDisclosure();
  return (
    <>
      <Button {...button} onClick={open}>{children}</Button>
      <Modal opened={creating} onClose={close} title="New session">
        <NewSessionForm onDone={() => { close(); onCreated?.(); }} />
      </Modal>
    </>
  );
}

function NewSessionForm({ onDone }: { onDone(): void }) {
  const [title, setTitle] = useState("");
  const [type, setType] = useState<SessionType>("INTERACTIVE");
  const [onDisconnect, setOnDisconnect] = useState<OnDisconnect>("SUSPEND");
  return (
    <form onSubmit={(e) => {
      e.preventDefault();
      onDone();
      void createSession(title.trim(), type, onDisconnect);
    }}>
      <Stack>
        <TextInput label="Title" value={title} data-autofocus
          onChange={(e) => setTitle(e.currentTarget.value)} />
        <div>
          <Text size="sm" fw={500} mb={4} id="session-type">Type</Text>
          <SegmentedControl fullWidth value={type} aria-labelledby="session-type"
            onChange={(v) => setType(v as SessionType)}
            data={[{ value: "INTERACTIVE", label: "Interactive (chat with Arthur)" },
                   { value: "AUTONOMOUS", label: "Autonomous" }]} />
        </div>
        <Select label="When the last client disconnects" value={onDisconnect}
          allowDeselect={false} onChange={(v) => v && setOnDisconnect(v as OnDisconnect)}
          data={[{ value: "SUSPEND", label: "Suspend the session" },
                 { value: "KEEP_OPEN", label: "Keep it running" },
                 { value: "CLOSE", label: "Close it" }]} />
        <Button type="submit">Create</Button>
      </Stack>
    </form>
  );
}
