import {
  Alert, Badge, Button, Group, Paper, ScrollArea, Stack, Text, Textarea, Title,
} from "@mantine/core";
import { Fragment, useEffect, useLayoutEffect, useRef, useState } from "react";

import { askAgain, focusProcess, interrupt, loadEarlier, sendMessage } from "../client";
import { NO_TRANSCRIPT, useStore, viewedProcess } from "../store";
import { ChatItem, LiveTool, Streaming } from "./ChatLines";
import { ChatSummary } from "./ChatSummary";
import { EngineView } from "./EngineViews";
import { Inspector } from "./Inspector";
import { NewProcess } from "./NewProcess";
import { PendingItem, Working } from "./Pending";
import { STATUS_COLOR } from "./Workers";

/** The chat of the process shown — the chat process (Arthur), or a focused worker — with
 * the worker's engine view, the chat summary on request, the transcript (*Load earlier* pages back), the reply being
 * streamed, and the composer addressed to that process (Enter sends, Shift+Enter breaks
 * the line). Shown once a session is bound (before, `NoSession`). */
export function Chat() {
  const chatProcessId = useStore((s) => s.chatProcessId);
  const viewed = useStore(viewedProcess);
  const focused = useStore((s) => (s.focus ? s.processes[s.focus] : undefined));
  const unread = useStore((s) => s.unread);
  const { lines, pending, streaming, liveTools, hasEarlier } = useStore(
    (s) => (viewed && s.transcripts[viewed]) || NO_TRANSCRIPT);
  const working = useStore((s) => viewed !== null && s.processes[viewed]?.status === "RUNNING");
  const drift = useStore((s) => s.contextDrift);
  const viewport = useRef<HTMLDivElement>(null);
  const bottom = useRef<HTMLDivElement>(null);
  const kept = useRef<{ height: number; top: number } | null>(null);
  const [loading, setLoading] = useState(false);
  const last = lines[lines.length - 1]?.id;
  const found = useStore((s) => (s.found?.processId === viewed ? s.found.seq : null));
  useEffect(() => {
    bottom.current?.scrollIntoView({ block: "end" });
  }, [viewed, last, streaming, liveTools.length, pending.length, working]);
  // A search hit opened: its line in view, after the scroll to the end above.
  useEffect(() => {
    if (found !== null) {
      viewport.current?.querySelector("[data-found]")?.scrollIntoView({ block: "center" });
    }
  }, [found, viewed]);
  // Earlier lines were put above: keep the lines that were in view where they were.
  useLayoutEffect(() => {
    const v = viewport.current;
    if (v && kept.current) {
      v.scrollTop = v.scrollHeight - kept.current.height + kept.current.top;
      kept.current = null;
    }
  }, [lines]);

  const speaker = focused ? focused.name || focused.id : "Arthur";
  // Replies asked again since: the earlier attempts (the lines after the question a reply
  // with `meta.again` answers, before that reply).
  const attempts = new Set<number>();
  for (const line of lines) {
    const asked = line.meta.again;
    if (typeof asked !== "number") continue;
    for (const other of lines) {
      if (other.role === "assistant" && other.seq > asked && other.seq < line.seq) attempts.add(other.seq);
    }
  }
  // Arthur's last line, when it is a reply and nothing runs: it can be asked for again.
  const final = lines[lines.length - 1];
  const againable = !focused && !working && !streaming && final?.role === "assistant"
    && lines.some((l) => l.role === "user") ? final.id : null;
  const earlier = async () => {
    const v = viewport.current;
    if (!viewed || !v) return;
    kept.current = { height: v.scrollHeight, top: v.scrollTop };
    setLoading(true);
    await loadEarlier(viewed);
    setLoading(false);
  };
  return (
    <Stack h="calc(100dvh - 56px - 2 * var(--mantine-spacing-md) - var(--chat-offset, 0px))" gap="sm">
      {drift && (
        <Alert color="yellow" title="The working directory changed">
          This session's processes stayed suspended. Resume, stop or reset each one on its
          card.
        </Alert>
      )}
      {focused && (
        <Paper withBorder p="xs" data-testid="focused" data-process-id={focused.id}>
          {/* On a phone the button wraps below the name rather than squeezing the status
              badge and its own label into ellipses. */}
          <Group justify="space-between" gap="xs">
            <Group gap="xs" wrap="nowrap" style={{ minWidth: 0 }}>
              <Title order={2} size="h5" style={{ overflow: "hidden", textOverflow: "ellipsis" }}>
                {speaker}</Title>
              <Badge color={STATUS_COLOR[focused.status]} style={{ flexShrink: 0 }}>
                {focused.status}</Badge>
              <Text size="xs" c="dimmed" visibleFrom="sm">{focused.engine}</Text>
            </Group>
            <Button size="compact-sm" variant="light" onClick={() => focusProcess(null)}
              style={{ flexShrink: 0 }} rightSection={unread > 0 &&
                <Badge size="sm" circle data-testid="unread" aria-label={`${unread} new`}>{unread}</Badge>}>
              {chatProcessId ? "Back to Arthur" : "Close"}
            </Button>
          </Group>
          {/* Mantine's autosize content is as wide as its widest line: held to the pane's
              width, so a long goal in marvin's tree ends in an ellipsis. */}
          <ScrollArea.Autosize mah="35dvh" mt="xs" type="auto" scrollbars="y"
            styles={{ content: { minWidth: 0, display: "block" } }}>
            <EngineView process={focused} />
          </ScrollArea.Autosize>
        </Paper>
      )}
      {viewed && <ChatSummary processId={viewed} key={`summary:${viewed}`} />}
      <Inspector />
      <ScrollArea style={{ flex: 1 }} className="transcript" offsetScrollbars viewportRef={viewport}
        viewportProps={{ tabIndex: 0 }}>
        {hasEarlier && (
          <Group justify="center" mb="xs">
            <Button size="compact-sm" variant="subtle" loading={loading} onClick={() => void earlier()}>
              Load earlier
            </Button>
          </Group>
        )}
        <Stack gap="xs" role="log" aria-label={`Chat with ${speaker}`} aria-live="polite"
          data-testid="transcript" data-process-id={viewed ?? undefined}>
          {!viewed && (
            <Stack gap="xs" align="flex-start">
              <Text c="dimmed">
                An autonomous session has no chat: open a process under Workers to read its
                chat and write to it, or start one.
              </Text>
              <NewProcess />
            </Stack>
          )}
          {lines.map((line) => {
            const item = <ChatItem line={line} speaker={speaker} earlier={attempts.has(line.seq)}
              onAgain={line.id === againable ? () => void askAgain(viewed!) : undefined} />;
            return line.seq === found
              // The line a search hit opened, marked (only it: the others stay direct children).
              ? <div key={line.id} className="found-line" data-found aria-label="Line found">
                  {item}</div>
              : <Fragment key={line.id}>{item}</Fragment>;
          })}
          {viewed && pending.map((p) => <PendingItem key={p.key} processId={viewed} line={p} />)}
          {liveTools.map((t) => <LiveTool key={t.toolCallId} call={t} />)}
          {streaming ? <Streaming text={streaming} speaker={speaker} />
            : working && <Working speaker={speaker} />}
          <div ref={bottom} />
        </Stack>
      </ScrollArea>
      {viewed && <Composer to={speaker} key={viewed} ended={focused?.status === "CLOSED"}
        onStop={streaming || working ? () => void interrupt(viewed) : undefined} />}
    </Stack>
  );
}

/** `ended`: the process is CLOSED and takes no more messages (the server refuses them).
 * `onStop`: a reply is in progress; the Stop button beside Send stops it. */
function Composer({ to, ended, onStop }: { to: string; ended: boolean; onStop?: () => void }) {
  const [text, setText] = useState("");
  // Shown at once above as pending (or failed, to send again): the composer is free.
  const send = () => {
    const content = text.trim();
    if (!content) return;
    sendMessage(content);
    setText("");
  };
  return (
    <Paper>
      <form onSubmit={(e) => { e.preventDefault(); send(); }}>
        <Group align="flex-end" wrap="nowrap">
          <Textarea style={{ flex: 1 }} autosize minRows={1} maxRows={6} maxLength={32000}
            label={`Message to ${to}`} value={text} disabled={ended}
            description={ended ? "This process has ended: it takes no more messages." : undefined}
            onChange={(e) => setText(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); }
            }} />
          {onStop && <Button color="red" variant="light" onClick={onStop}
            aria-label={`Stop ${to}'s reply`}>Stop</Button>}
          <Button type="submit" disabled={ended || !text.trim()}>Send</Button>
        </Group>
      </form>
    </Paper>
  );
}
