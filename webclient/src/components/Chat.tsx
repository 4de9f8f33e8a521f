import { Alert, Button, Group, Paper, ScrollArea, Stack, Text, Textarea } from "@mantine/core";
import { useEffect, useRef, useState } from "react";

import { sendMessage } from "../client";
import { useStore } from "../store";
import { ChatItem, LiveTool, Streaming } from "./ChatLines";

/** The chat with the session's chat process: transcript, the reply being streamed, and
 * the composer (Enter sends, Shift+Enter breaks the line). */
export function Chat() {
  const sessionId = useStore((s) => s.sessionId);
  const chatProcessId = useStore((s) => s.chatProcessId);
  const lines = useStore((s) => s.lines);
  const streaming = useStore((s) => s.streaming);
  const liveTools = useStore((s) => s.liveTools);
  const drift = useStore((s) => s.contextDrift);
  const bottom = useRef<HTMLDivElement>(null);
  useEffect(() => {
    bottom.current?.scrollIntoView({ block: "end" });
  }, [lines, streaming, liveTools]);

  if (!sessionId) {
    return <Text c="dimmed">Open a session on the left, or create a new one.</Text>;
  }
  return (
    <Stack h="calc(100dvh - 56px - 2 * var(--mantine-spacing-md) - var(--chat-offset, 0px))" gap="sm">
      {drift && (
        <Alert color="yellow" title="The working directory changed">
          This session's processes stayed suspended. Resume, stop or reset each one on its
          card.
        </Alert>
      )}
      <ScrollArea style={{ flex: 1 }} className="transcript" offsetScrollbars>
        <Stack gap="xs" role="log" aria-label="Chat" aria-live="polite" data-testid="transcript">
          {!chatProcessId && (
            <Text c="dimmed">An autonomous session has no chat; its processes are under Workers.</Text>
          )}
          {lines.map((line) => <ChatItem key={line.id} line={line} />)}
          {liveTools.map((t) => <LiveTool key={t.toolCallId} call={t} />)}
          {streaming && <Streaming text={streaming} />}
          <div ref={bottom} />
        </Stack>
      </ScrollArea>
      {chatProcessId && <Composer />}
    </Stack>
  );
}

function Composer() {
  const [text, setText] = useState("");
  const [sending, setSending] = useState(false);
  const send = async () => {
    const content = text.trim();
    if (!content || sending) return;
    setSending(true);
    if (await sendMessage(content)) setText("");
    setSending(false);
  };
  return (
    <Paper>
      <form onSubmit={(e) => { e.preventDefault(); void send(); }}>
        <Group align="flex-end" wrap="nowrap">
          <Textarea style={{ flex: 1 }} autosize minRows={1} maxRows={6} maxLength={32000}
            label="Message to Arthur" value={text}
            onChange={(e) => setText(e.currentTarget.value)}
            onKeyDown={(e) => {
              if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); void send(); }
            }} />
          <Button type="submit" loading={sending} disabled={!text.trim()}>Send</Button>
        </Group>
      </form>
    </Paper>
  );
}
