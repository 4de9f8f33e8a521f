import {
  ActionIcon, Badge, Button, Card, Collapse, Group, ScrollArea, Stack, Text, Title,
} from "@mantine/core";
import { useState } from "react";

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

/** The session's processes other than the chat as live cards, each under the process that
 * started it (`parentProcessId`): the top ones newest first, a process's own workers in
 * the order they were started. A finished branch (its process and all it started CLOSED)
 * folds to one line; its toggle opens it again. */
export function Workers() {
  const processes = useStore((s) => s.processes);
  const chat = useStore((s) => s.chatProcessId);
  const workers = Object.values(processes).filter((p) => p.id !== chat);
  const under = new Map<string, WorkerCard[]>();
  const top: WorkerCard[] = [];
  for (const p of workers) {
    const parent = p.parentProcessId;
    if (parent && parent !== chat && processes[parent]) {
      under.set(parent, [...(under.get(parent) ?? []), p]);
    } else {
      top.push(p);
    }
  }
  return (
    <Stack h="100%" gap="sm">
      <Group justify="space-between">
        <Title order={2} size="h4">Workers</Title>
        <NewProcess />
      </Group>
      <ScrollArea style={{ flex: 1 }}>
        <Stack gap="sm">
          {workers.length === 0 && <Text c="dimmed" size="sm">No workers yet.</Text>}
          {top.reverse().map((p) => <Branch key={p.id} process={p} under={under} />)}
        </Stack>
      </ScrollArea>
    </Stack>
  );
}

/** The processes `p` started, directly or not. */
function descendants(p: WorkerCard, under: Map<string, WorkerCard[]>): WorkerCard[] {
  return (under.get(p.id) ?? []).flatMap((c) => [c, ...descendants(c, under)]);
}

/** A card and, indented below it, the cards of the processes it started. */
function Branch({ process: p, under }: { process: WorkerCard; under: Map<string, WorkerCard[]> }) {
  const started = under.get(p.id) ?? [];
  const all = descendants(p, under);
  const finished = p.status === "CLOSED" && all.every((c) => c.status === "CLOSED");
  // Unset: follows the branch (open while it works, folded once finished); the user's
  // click decides from then on.
  const [chosen, setChosen] = useState<boolean | null>(null);
  const open = chosen ?? !finished;
  return (
    <div data-testid="worker-branch" data-process-id={p.id}>
      <ProcessCard process={p} open={open} onToggle={() => setChosen(!open)}
        hidden={open ? 0 : all.length} />
      {started.length > 0 && (
        <Collapse expanded={open}>
          <Stack gap="xs" mt="xs" ml="xs" pl="sm" role="group" data-testid="worker-children"
            aria-label={`Started by ${p.name || p.id}`}
            style={{ borderInlineStart: "2px solid var(--mantine-color-gray-3)" }}>
            {started.map((c) => <Branch key={c.id} process={c} under={under} />)}
          </Stack>
        </Collapse>
      )}
    </div>
  );
}

/** `open`: the whole card, else its name, status and one line; `hidden`: how many
 * processes it started are folded away with it. */
function ProcessCard({ process: p, open, onToggle, hidden }: {
  process: WorkerCard; open: boolean; onToggle(): void; hidden: number;
}) {
  const title = p.name || p.id;
  const focused = useStore((s) => s.focus === p.id);
  const summary = engineSummary(p);
  const show = (
    <Button size="compact-xs" variant={focused ? "filled" : "outline"} aria-pressed={focused}
      aria-label={`open ${title}`} onClick={() => focusProcess(focused ? null : p.id)}
      style={{ flexShrink: 0 }}>
      {focused ? "shown" : "open"}
    </Button>
  );
  return (
    <Card withBorder padding="sm" data-testid="worker-card" data-process-id={p.id}
      data-status={p.status} aria-label={`Worker ${title}`} data-focused={focused || undefined}
      data-open={open}
      style={focused ? { borderColor: "var(--mantine-color-blue-8)", borderWidth: 2 } : undefined}>
      <Group justify="space-between" wrap="nowrap">
        <Group gap={4} wrap="nowrap" style={{ minWidth: 0 }}>
          <ActionIcon variant="subtle" color="dark" size="sm" onClick={onToggle}
            aria-expanded={open} aria-label={`details of ${title}`}>
            <span aria-hidden>{open ? "▾" : "▸"}</span>
          </ActionIcon>
          <Text fw={600} truncate>{title}</Text>
        </Group>
        <Badge color={STATUS_COLOR[p.status]} data-testid="status-pill">{p.status}</Badge>
      </Group>
      {!open && (
        <Group justify="space-between" wrap="nowrap" mt={4} gap="xs">
          <Text size="xs" c="dimmed" truncate data-testid="folded">
            {[p.engine, hidden ? `${hidden} more worker${hidden === 1 ? "" : "s"}` : "", p.goal]
              .filter(Boolean).join(" · ")}
          </Text>
          {show}
        </Group>
      )}
      {open && (
        <>
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
            {show}
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
        </>
      )}
    </Card>
  );
}
