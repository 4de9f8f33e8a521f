import {
  Badge, Button, Group, Modal, NavLink, ScrollArea, SegmentedControl, Select, Stack, Text,
  TextInput, Title, type ButtonProps,
} from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";
import type React from "react";
import { useState } from "react";

import { closeSession, createSession, openSession, suspendSession } from "../client";
import type { OnDisconnect, SessionType } from "../protocol";
import { useStore } from "../store";
import { RenameSession } from "./RenameSession";

const STATUS_COLOR = { OPEN: "green", SUSPENDED: "yellow", CLOSED: "gray" } as const;

/** The user's sessions (session-list), the bound one highlighted; create, open, suspend,
 * close. `onPicked` folds the menu away on a narrow screen once a session is chosen. */
export function SessionList({ onPicked }: { onPicked(): void }) {
  const sessions = useStore((s) => s.sessions);
  const current = useStore((s) => s.sessionId);
  const bound = sessions.find((s) => s.id === current);
  return (
    <Stack flex={1} mih={0} gap="sm">
      <Group justify="space-between">
        <Title order={2} size="h4">Sessions</Title>
        <NewSessionButton size="xs" onCreated={onPicked}>New session</NewSessionButton>
      </Group>
      <ScrollArea style={{ flex: 1 }}>
        <nav aria-label="Sessions">
          {sessions.length === 0 && <Text c="dimmed" size="sm">No sessions yet.</Text>}
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
        </nav>
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
