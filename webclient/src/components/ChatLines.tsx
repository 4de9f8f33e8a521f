import { Accordion, Alert, Anchor, Badge, Button, Code, Group, Paper, Text } from "@mantine/core";

import type { ChatLine, Citation } from "../protocol";
import { set, useStore, type LiveToolCall } from "../store";
import { InboxAnswerCard } from "./inbox/Answer";
import { Markdown } from "./Markdown";
import { jsonObject, Readable, Reply } from "./Readable";
import { Suggestions } from "./Suggestions";
import { UserLine } from "./UserLine";

/** One committed chat line, drawn by its role. */
/** `earlier`: a reply asked again since (it stays, marked as the earlier attempt);
 * `onAgain`: this is Arthur's last reply, and the button under it asks for it again. */
export function ChatItem({ line, speaker = "Arthur", earlier = false, onAgain }: {
  line: ChatLine; speaker?: string; earlier?: boolean; onAgain?: () => void;
}) {
  switch (line.role) {
    case "user":
      return <UserLine line={line} />;
    case "assistant":
      return (
        <Paper p="sm" radius="md" withBorder maw={{ base: "100%", sm: "85%" }} data-role="assistant"
          data-earlier={earlier || undefined}>
          <Group gap="xs">
            <Text size="xs" c="dimmed">{speaker}</Text>
            {line.meta.interrupted === true &&
              <Badge size="xs" color="gray" variant="light" data-role="interrupted">interrupted</Badge>}
            {earlier && <Badge size="xs" color="gray" variant="light">earlier attempt</Badge>}
            {"again" in line.meta && <Badge size="xs" variant="light">asked again</Badge>}
            {typeof line.meta.turn === "string" &&
              <Group ml="auto" gap={0}><TurnLink processId={line.processId} turnId={line.meta.turn} /></Group>}
          </Group>
          <Reply text={line.content} />
          {onAgain && (
            <Group justify="flex-end" mt={4}>
              <Button size="compact-xs" variant="subtle" onClick={onAgain}
                aria-label={`Ask ${speaker} again for this reply`}>Ask again</Button>
            </Group>
          )}
          {line.sources && line.sources.length > 0 && <Sources sources={line.sources} />}
          {Array.isArray(line.meta.suggestions) && <Suggestions phrases={line.meta.suggestions} />}
        </Paper>
      );
    case "error":
      return (
        <Alert color="red" title="Error" data-role="error" role="alert">
          <Text style={{ whiteSpace: "pre-wrap" }}>{line.content}</Text>
        </Alert>
      );
    case "tool":
      return <ToolCard {...parseToolLine(line)} />;
    case "event":
      return <EventCard content={line.content} />;
    default:
      return <Text size="sm" c="dimmed" data-role={line.role}>{line.content}</Text>;
  }
}

/** Opens the inspector at the turn that wrote a line (its `meta.turn`). */
function TurnLink({ processId, turnId }: { processId: string; turnId: string }) {
  return (
    <Anchor component="button" type="button" size="xs" c="dimmed" data-testid="turn-link"
      aria-label="Inspect the turn that wrote this line"
      onClick={() => set({ inspecting: { processId, turnId } })}>Inspect</Anchor>
  );
}

/** A passage's source as plain text: `guide.md › Install, lines 3-9` (`, p. 4` for a PDF). */
function sourceLabel(source: Citation): string {
  let where = source.documentName + (source.section ? ` › ${source.section}` : "");
  if (source.page != null) return `${where}, p. ${source.page}`;
  if (source.lineStart != null) {
    const end = source.lineEnd ?? source.lineStart;
    where += end === source.lineStart ? `, line ${end}` : `, lines ${source.lineStart}-${end}`;
  }
  return where;
}

/** The document passages a reply used, under it. Document names and sections are the
 * documents' own text: shown as text, never as Markdown, HTML or a link. */
function Sources({ sources }: { sources: Citation[] }) {
  return (
    <Group gap={4} mt="xs" data-role="sources" aria-label="Sources">
      <Text size="xs" c="dimmed">Sources:</Text>
      {sources.map((source, i) => (
        <Badge key={i} size="sm" variant="light" color="gray" tt="none" data-role="source">
          {sourceLabel(source)}
        </Badge>
      ))}
    </Group>
  );
}

/** The reply being streamed (token events), until its chat line commits. */
export function Streaming({ text, speaker = "Arthur" }: { text: string; speaker?: string }) {
  return (
    <Paper p="sm" radius="md" withBorder maw={{ base: "100%", sm: "85%" }} data-role="streaming" aria-busy="true">
      <Text size="xs" c="dimmed">{speaker} is writing…</Text>
      <Markdown text={text} />
    </Paper>
  );
}

export function LiveTool({ call }: { call: LiveToolCall }) {
  return <ToolCard name={call.toolName} args={JSON.stringify(call.params ?? {})}
    status={call.status} result={null} />;
}

interface ToolView { name: string; args: string; status: string; result: string | null }

/** A `tool` line is `name(arguments) → status: result` with name and status in `meta`. */
function parseToolLine(line: ChatLine): ToolView {
  const name = String(line.meta.toolName ?? "tool");
  const status = String(line.meta.status ?? "");
  const marker = `) → ${status}: `;
  const at = line.content.indexOf(marker);
  if (!line.content.startsWith(name + "(") || at < 0) {
    return { name, args: "", status, result: line.content };
  }
  return {
    name, status, args: line.content.slice(name.length + 1, at),
    result: line.content.slice(at + marker.length),
  };
}

function pretty(json: string): string {
  try {
    return JSON.stringify(JSON.parse(json), null, 2);
  } catch {
    return json;
  }
}

const TOOL_COLOR: Record<string, string> = { running: "blue", success: "green", error: "red" };

function ToolCard({ name, args, status, result }: ToolView) {
  return (
    <Accordion variant="contained" chevronPosition="left" data-role="tool">
      <Accordion.Item value="call">
        <Accordion.Control>
          <Group gap="xs">
            <Text size="sm">Tool call</Text>
            <Code>{name}</Code>
            <Badge size="sm" variant="dot" color={TOOL_COLOR[status] ?? "gray"}>{status}</Badge>
          </Group>
        </Accordion.Control>
        <Accordion.Panel>
          <Text size="xs" fw={500}>Arguments</Text>
          <Code block>{pretty(args)}</Code>
          {result !== null && (
            <>
              <Text size="xs" fw={500} mt="xs">Result</Text>
              <Code block>{pretty(result)}</Code>
            </>
          )}
        </Accordion.Panel>
      </Accordion.Item>
    </Accordion>
  );
}

interface Tagged { tag: string; attrs: Record<string, string>; text: string; payload: string | null }

/** An `event` line is one XML-tagged message (`<process-event …>`, `<inbox-answer …>`,
 * `<external-command …>`, `<tool-result …>`, prompting.py's event_text), its values
 * XML-escaped by the server. */
function parseTagged(content: string): Tagged | null {
  const doc = new DOMParser().parseFromString(`<r>${content}</r>`, "application/xml");
  const element = doc.documentElement.firstElementChild;
  if (doc.querySelector("parsererror") || !element) return null;
  const payload = element.querySelector("payload");
  payload?.remove();
  const attrs: Record<string, string> = {};
  for (const a of Array.from(element.attributes)) attrs[a.name] = a.value;
  return { tag: element.tagName, attrs, text: element.textContent ?? "", payload: payload?.textContent ?? null };
}

/** A worker's summary is often the JSON its engine returned: show its `summary`. */
function summaryOf(text: string): string {
  try {
    const value = JSON.parse(text);
    if (value && typeof value.summary === "string") return value.summary;
  } catch { /* plain text */ }
  return text;
}

/** A worker report's payload: its fields readably, or the text as it came. */
function Details({ json }: { json: string }) {
  const value = jsonObject(json);
  return value ? <Readable value={value} /> : <Code block>{json}</Code>;
}

const TITLES: Record<string, string> = {
  "process-event": "Worker", "inbox-answer": "Inbox answer",
  "external-command": "Command", "tool-result": "Tool result",
};

function EventCard({ content }: { content: string }) {
  const tagged = parseTagged(content);
  const processes = useStore((s) => s.processes);
  if (!tagged) return <Text size="sm" c="dimmed" data-role="event">{content}</Text>;
  if (tagged.tag === "inbox-answer") return <InboxAnswerCard attrs={tagged.attrs} text={tagged.text} />;
  const source = tagged.attrs.sourceProcessId;
  const who = source ? tagged.attrs.sourceName ?? processes[source]?.name ?? source
    : tagged.attrs.title ?? tagged.attrs.name;
  const kind = tagged.attrs.type ?? tagged.attrs.status ?? "";
  const heading = (mb?: number) => (
    <Group gap="xs" mb={mb}>
      <Text size="sm" fw={500}>{TITLES[tagged.tag] ?? tagged.tag}</Text>
      {who && <Code>{who}</Code>}
      {kind && <Badge size="sm" variant="light">{kind}</Badge>}
    </Group>
  );
  const body = (
    <>
      <Markdown text={summaryOf(tagged.text)} />
      {tagged.payload && (
        <Accordion chevronPosition="left" mt="xs">
          <Accordion.Item value="payload">
            <Accordion.Control>Details</Accordion.Control>
            <Accordion.Panel><Details json={tagged.payload} /></Accordion.Panel>
          </Accordion.Item>
        </Accordion>
      )}
    </>
  );
  if (tagged.tag === "process-event") {
    // Told to Arthur, who relays it in his next line: folded, so it is read once.
    return (
      <Accordion variant="contained" chevronPosition="left" data-role="event">
        <Accordion.Item value="report">
          <Accordion.Control>{heading()}</Accordion.Control>
          <Accordion.Panel>{body}</Accordion.Panel>
        </Accordion.Item>
      </Accordion>
    );
  }
  return (
    <Paper withBorder p="sm" radius="md" bg="gray.0" data-role="event">
      {heading(4)}
      {body}
    </Paper>
  );
}
