import { Button, Group, Paper, ScrollArea, Stack, Text } from "@mantine/core";
import { useState } from "react";

import { chatSummary } from "../client";
import { set } from "../store";
import type { ChatHistorySummary } from "../protocol";

/** The "Summary" button over a chat: shows, as read now, the summary of the chat's older
 * lines that its model sees in their place (docs/protocol.md "The chat summary"), or that
 * there is none yet; a second click hides it. The text was written by a model: plain text. */
export function ChatSummary({ processId }: { processId: string }) {
  const [shown, setShown] = useState<ChatHistorySummary | null | undefined>(undefined);
  const [loading, setLoading] = useState(false);
  const toggle = async () => {
    if (shown !== undefined) { setShown(undefined); return; }
    setLoading(true);
    const summary = await chatSummary(processId);
    setLoading(false);
    if (summary !== undefined) setShown(summary);
  };
  return (
    <Stack gap="xs">
      <Group justify="flex-end" gap="xs">
        <Button size="compact-sm" variant="subtle" data-testid="open-turns"
          onClick={() => set({ inspecting: { processId, turnId: null } })}>Turns</Button>
        <Button size="compact-sm" variant="subtle" loading={loading}
          aria-expanded={shown !== undefined} onClick={() => void toggle()}>Summary</Button>
      </Group>
      {shown !== undefined && (
        <Paper withBorder p="xs" data-testid="chat-summary">
          {shown === null
            ? <Text size="sm" c="dimmed">No summary yet: the model still sees the whole chat.</Text>
            : <>
              <Text size="xs" c="dimmed">
                Summary of lines 1–{shown.throughSeq}, which the model sees in their place</Text>
              <ScrollArea.Autosize mah="30dvh" type="auto">
                <Text size="sm" style={{ whiteSpace: "pre-wrap" }}>{shown.text}</Text>
              </ScrollArea.Autosize>
            </>}
        </Paper>
      )}
    </Stack>
  );
}
