import { Badge, Button, Card, Group, ScrollArea, Stack, Text, Title } from "@mantine/core";

import { focusProcess, lifecycle, type Lifecycle } from "../client";
import type { ProcessStatus } from "../protocol";
import { useStore, type WorkerCard } from "../store";
import { engineSummary } from "./EngineViews";
import { NewProcess } from "./NewProcess";

/** Filled pills with white text: shades dark enough for WCAG AA contrast (yellow gets dark
 * text from the theme's autoContrast). */
export const STATUS_COLOR: Record<ProcessStatus, string> = {
  INIT: "gray.7", RUNNING: "blue.8", IDLE: "teal.9", BLOCKED: "orange.9", PAUSED: "yellow",
  SUSPENDED: "grape.8", CLOSED: "dark",
};

/** Which lifecycle buttons a status allows (docs/protocol.md "Sessions and processes");
 * the server checks again and a refusal is shown as a notification. */
const ALLOWED: Record<Lifecycle, ProcessStatus[]> = {
  pause: ["RUNNING", "IDLE", "BLOCKED"],
  resume: ["PAUSED", "SUSPENDED"],
  stop: ["RUNNING", "IDLE", "BLOCKED", "PAUSED", "SUSPENDED"],
  reset: ["RUNNING", "IDLE", "BLOCKED", "PAUSED", "SUSPENDED"],
};

/** The statuses a card lists at most (the newest; a long-lived process has many). */
const TRAIL_SHOWN = 8;

/** The session's processes other than the chat, newest first, as live cards. */
export function Workers() {
  const processes = useStore((s) => s.processes);
  const chat = useStore((s) => s.chatProcessId);
  const workers = Object.values(processes).filter((p) => p.id !== chat).reverse();
  return (
    <Stack h="100%" gap="sm">
      <Group justify="space-between">
        <Title order={2} size="h4">Workers</Title>
        <NewProcess />
      </Group>
      <ScrollArea style={{ flex: 1 }}>
        <Stack gap="sm">
          {workers.length === 0 && <Text c="dimmed" size="sm">No workers yet.</Text>}
          {workers.map((p) => <ProcessCard key={p.id} process={p} />)}
        </Stack>
      </ScrollArea>
    </Stack>
  );
}

function ProcessCard({ process: p }: { process: WorkerCard }) {
  const title = p.name || p.id;
  const focused = useStore((s) => s.focus === p.id);
  const summary = engineSummary(p);
  return (
    <Card withBorder padding="sm" data-testid="worker-card" data-process-id={p.id}
      data-status={p.status} aria-label={`Worker ${title}`} data-focused={focused || undefined}
      style={focused ? { borderColor: "var(--mantine-color-blue-8)", borderWidth: 2 } : undefined}>
      <Group justify="space-between" wrap="nowrap">
        <Text fw={600} truncate>{title}</Text>
        <Badge color={STATUS_COLOR[p.status]} data-testid="status-pill">{p.status}</Badge>
      </Group>
      <Text size="xs" c="dimmed">
        {p.engine}{p.recipeName && p.recipeName !== p.engine ? ` · ${p.recipeName}` : ""}
      </Text>
      {p.goal && <Text size="sm" mt={4} lineClamp={3}>{p.goal}</Text>}
      <Text size="xs" mt={4} data-testid="trail">
        {(p.trail.length > TRAIL_SHOWN ? ["…", ...p.trail.slice(-TRAIL_SHOWN)] : p.trail)
          .join(" → ")}
      </Text>
      {summary && <Text size="xs" mt={2} data-testid="engine-summary">{summary}</Text>}
      {p.lastEvent && (
        <Text size="xs" c="dimmed" mt={2} lineClamp={2} data-testid="last-event">
          {p.lastEvent}
        </Text>
      )}
      <Group gap={4} mt="xs">
        <Button size="compact-xs" variant={focused ? "filled" : "outline"} aria-pressed={focused}
          aria-label={`open ${title}`} onClick={() => focusProcess(focused ? null : p.id)}>
          {focused ? "shown" : "open"}
        </Button>
        {(Object.keys(ALLOWED) as Lifecycle[]).map((action) => (
          <Button key={action} size="compact-xs" variant="light"
            color={action === "stop" ? "red" : undefined}
            disabled={!ALLOWED[action].includes(p.status)}
            aria-label={`${action} ${title}`}
            onClick={() => void lifecycle(p.id, action)}>
            {action}
          </Button>
        ))}
      </Group>
    </Card>
  );
}
