import {
  Accordion, Badge, Button, Code, Drawer, Group, Loader, Paper, Stack, Table, Text,
} from "@mantine/core";
import { useMediaQuery } from "@mantine/hooks";
import { Fragment, useEffect, useState } from "react";

import { request } from "../client";
import type { InspectedMessage, ModelStep, ToolStep, TurnInspection } from "../protocol";
import { set, useStore } from "../store";

const PAGE = 20;

/** The inspector of a process (issue 32, part 2): its turns, newest first (`turn-list`), and
 * one turn opened (`turn-get`): what the model was given (system prompt, messages, tools
 * offered), what it answered, each tool call with its arguments, result and outcome, tokens
 * and timings. Opened by *Turns* over a chat, or by *Inspect* on a line (the turn that wrote
 * it). Every text is the server's record, cut and redacted there: shown as plain text. */
export function Inspector() {
  const inspecting = useStore((s) => s.inspecting);
  const phone = useMediaQuery("(max-width: 48em)", false);
  const close = () => set({ inspecting: null });
  return (
    // Built of its parts without Drawer.Header: Mantine's header is a <header>, a second
    // banner landmark beside the app's; Drawer.Title still names the dialog.
    <Drawer.Root opened={inspecting !== null} onClose={close} position="right"
      size={phone ? "100%" : "xl"}>
      <Drawer.Overlay />
      <Drawer.Content data-testid="inspector">
        <Drawer.Body pt="md">
          <Group justify="space-between" mb="sm">
            <Drawer.Title component="h2" fz="h4" fw={600}>{inspecting?.turnId ? "Turn" : "Turns"}</Drawer.Title>
            <Drawer.CloseButton aria-label="Close the inspector" />
          </Group>
          {inspecting && (inspecting.turnId
            ? <TurnView key={inspecting.turnId} processId={inspecting.processId}
                turnId={inspecting.turnId} />
            : <TurnList key={inspecting.processId} processId={inspecting.processId} />)}
        </Drawer.Body>
      </Drawer.Content>
    </Drawer.Root>
  );
}

function ms(turn: TurnInspection): number {
  return Date.parse(turn.endedAt) - Date.parse(turn.startedAt);
}

function TurnList({ processId }: { processId: string }) {
  const [turns, setTurns] = useState<TurnInspection[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const more = async (after: string | null) => {
    const page = await request("turn-list", { processId, limit: PAGE, cursor: after });
    if (!page) return;
    setTurns((before) => [...(after ? before ?? [] : []), ...page.turns]);
    setCursor(page.nextCursor);
  };
  useEffect(() => { void more(null); }, [processId]);  // eslint-disable-line
  if (turns === null) return <Loader size="sm" />;
  if (turns.length === 0) return <Text c="dimmed">No turn recorded yet.</Text>;
  return (
    <Stack gap="xs">
      <Table.ScrollContainer minWidth={0}>
        <Table highlightOnHover data-testid="turn-list">
          <Table.Thead>
            <Table.Tr><Table.Th>Started</Table.Th><Table.Th>Call</Table.Th>
              <Table.Th>Steps</Table.Th><Table.Th>Tokens in / out</Table.Th></Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {turns.map((t) => (
              <Table.Tr key={t.id} data-turn-id={t.id} style={{ cursor: "pointer" }}
                onClick={() => set({ inspecting: { processId, turnId: t.id } })}>
                <Table.Td>
                  <Button variant="subtle" size="compact-xs" px={0}>
                    {new Date(t.startedAt).toLocaleTimeString()}</Button>
                </Table.Td>
                <Table.Td>{t.lifecycle}</Table.Td>
                <Table.Td>{t.stepCount}</Table.Td>
                <Table.Td>{t.tokensIn} / {t.tokensOut}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
      {cursor && <Button variant="subtle" size="compact-sm" onClick={() => void more(cursor)}>
        Older turns</Button>}
    </Stack>
  );
}

function TurnView({ processId, turnId }: { processId: string; turnId: string }) {
  const [turn, setTurn] = useState<TurnInspection | null | undefined>(undefined);
  useEffect(() => {
    void request("turn-get", { turnId }).then((answer) => setTurn(answer ? answer.turn : null));
  }, [turnId]);
  const back = (
    <Button variant="subtle" size="compact-sm" onClick={() => set({ inspecting: { processId, turnId: null } })}>
      ← All turns</Button>
  );
  if (turn === undefined) return <Loader size="sm" />;
  if (turn === null) return <Stack>{back}<Text c="dimmed">This turn's record is not there (kept for a limited time).</Text></Stack>;
  const steps = turn.steps ?? [], tools = turn.tools ?? [];
  return (
    <Stack gap="sm" data-testid="turn" data-turn-id={turn.id}>
      <Group justify="space-between">{back}<Code>{turn.id}</Code></Group>
      <Paper withBorder p="xs">
        <Group gap="xs">
          <Badge variant="light">{turn.lifecycle}</Badge>
          <Badge variant="light" color="gray">{turn.engine}</Badge>
          <Badge variant="light" color="gray">then {turn.statusAfter}</Badge>
        </Group>
        <Text size="sm" mt={4}>
          {new Date(turn.startedAt).toLocaleString()} · {ms(turn)} ms · profile {turn.profile ?? "–"} ·
          model {turn.model ?? "–"} · tokens {turn.tokensIn} in / {turn.tokensOut} out
        </Text>
        {((turn.cutChars ?? 0) > 0 || (turn.droppedSteps ?? 0) > 0) && (
          <Text size="xs" c="orange">
            Cut to the record's size: {turn.cutChars} characters{(turn.droppedSteps ?? 0) > 0 &&
              `, ${turn.droppedSteps} steps`} left out.</Text>)}
      </Paper>
      {steps.length === 0 && <Text c="dimmed">No model or tool call in this turn.</Text>}
      <Accordion multiple variant="contained" chevronPosition="left"
        defaultValue={steps.map((_, i) => String(i))}>
        {steps.map((step, i) => step.kind === "tool"
          ? <ToolStepItem key={i} value={String(i)} step={step as ToolStep} />
          : <ModelStepItem key={i} value={String(i)} step={step as ModelStep} />)}
      </Accordion>
      {tools.length > 0 && (
        <Accordion variant="contained" chevronPosition="left">
          <Accordion.Item value="tools">
            <Accordion.Control>Tools offered ({tools.length})</Accordion.Control>
            <Accordion.Panel>
              <Stack gap="xs">
                {tools.map((t) => (
                  <div key={t.name}><Code>{t.name}</Code>
                    <Text size="xs" c="dimmed">{t.description}</Text></div>))}
              </Stack>
            </Accordion.Panel>
          </Accordion.Item>
        </Accordion>
      )}
    </Stack>
  );
}

function timing(step: ModelStep | ToolStep): string {
  return `+${step.atMs} ms · ${step.durationMs} ms`;
}

function ModelStepItem({ step, value }: { step: ModelStep; value: string }) {
  return (
    <Accordion.Item value={value} data-role="model-step">
      <Accordion.Control>
        <Group gap="xs">
          <Text size="sm" fw={500}>Model</Text><Code>{step.model}</Code>
          <Text size="xs" c="dimmed">{timing(step)} · {step.tokensIn} / {step.tokensOut} tokens</Text>
        </Group>
      </Accordion.Control>
      <Accordion.Panel>
        <Stack gap={6}>
          <Text size="xs" fw={500}>Input</Text>
          {(step.shared ?? 0) > 0 && <Text size="xs" c="dimmed">
            The previous model call's first {step.shared} messages, then:</Text>}
          {step.messages.map((m, i) => (
            <Fragment key={i}>
              {i === omittedAt(step) && <Text size="xs" c="dimmed" data-role="omitted-messages">
                {step.omitted} earlier messages not kept in the record (the chat keeps them)</Text>}
              <Message message={m} />
            </Fragment>))}
          {(step.tools ?? []).length > 0 && <Text size="xs" c="dimmed">Tools offered: {(step.tools ?? []).join(", ")}</Text>}
          <Text size="xs" fw={500} mt={4}>Output ({step.finishReason})</Text>
          <Message message={step.output} />
        </Stack>
      </Accordion.Panel>
    </Accordion.Item>
  );
}

/** Where the messages a record left out stood: after the leading system messages (-1: none
 * left out). */
function omittedAt(step: ModelStep): number {
  if (!step.omitted) return -1;
  return Math.max(0, step.messages.findIndex((m) => m.role !== "system"));
}

/** Long arguments and results wrap: a block that scrolled sideways would need a keyboard
 * stop of its own (and a phone scrolls badly inside a drawer). */
const WRAP = { whiteSpace: "pre-wrap", overflowWrap: "anywhere" } as const;


function Message({ message }: { message: InspectedMessage }) {
  return (
    <Paper withBorder p={6} data-role="inspected-message" data-message-role={message.role}>
      <Badge size="xs" variant="default">{message.role}</Badge>
      {message.content && <Folded text={message.content} />}
      {(message.toolCalls ?? []).map((c) => (
        <Code key={c.id} block mt={4} style={WRAP}>{`→ ${c.name}(${c.arguments})`}</Code>))}
    </Paper>
  );
}

const FOLD_LINES = 6;

/** A long text (a system prompt) folded to its first lines, so the steps stay in view. */
function Folded({ text }: { text: string }) {
  const [open, setOpen] = useState(false);
  const long = text.length > 600 || text.split("\n").length > FOLD_LINES;
  return (
    <>
      <Text size="sm" style={WRAP} lineClamp={long && !open ? FOLD_LINES : undefined}>{text}</Text>
      {long && <Button variant="subtle" size="compact-xs" px={0} onClick={() => setOpen(!open)}
        aria-expanded={open}>{open ? "Show less" : "Show all"}</Button>}
    </>
  );
}

const OUTCOME_COLOR: Record<string, string> = { SUCCESS: "green", ERROR: "red", TIMEOUT: "orange" };

function ToolStepItem({ step, value }: { step: ToolStep; value: string }) {
  return (
    <Accordion.Item value={value} data-role="tool-step">
      <Accordion.Control>
        <Group gap="xs">
          <Text size="sm" fw={500}>Tool</Text><Code>{step.name}</Code>
          <Badge size="sm" variant="dot" color={OUTCOME_COLOR[step.outcome] ?? "gray"}>{step.outcome}</Badge>
          <Text size="xs" c="dimmed">{timing(step)}</Text>
        </Group>
      </Accordion.Control>
      <Accordion.Panel>
        <Text size="xs" fw={500}>Arguments</Text>
        <Code block style={WRAP}>{step.arguments}</Code>
        <Text size="xs" fw={500} mt="xs">Result</Text>
        <Code block style={WRAP}>{step.result}</Code>
      </Accordion.Panel>
    </Accordion.Item>
  );
}
