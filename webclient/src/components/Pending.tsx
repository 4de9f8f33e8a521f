import { Button, Group, Loader, Paper, Text } from "@mantine/core";

import { discardPending, sendAgain } from "../client";
import type { PendingLine } from "../store";

/** A line the user sent, shown at once: *Sending…* until the server stored it, *Sent* until
 * its `user` line commits (then the committed line replaces it), or the error that refused
 * it, with *Send again* and *Discard*. */
export function PendingItem({ processId, line }: { processId: string; line: PendingLine }) {
  const failed = line.error !== null;
  const state = failed ? "failed" : line.messageId ? "sent" : "sending";
  return (
    <Paper p="sm" radius="md" bg={failed ? "red.0" : "blue.0"} ml="auto"
      maw={{ base: "100%", sm: "85%" }} data-testid="pending" data-state={state}
      aria-busy={!failed}>
      <Group justify="space-between" gap="md" wrap="nowrap">
        <Text size="xs" c="dimmed">You</Text>
        <Text size="xs" c={failed ? "red.9" : "dimmed"}>
          {failed ? "Not delivered" : line.messageId ? "Sent" : "Sending…"}</Text>
      </Group>
      <Text style={{ whiteSpace: "pre-wrap" }}>{line.content}</Text>
      {failed && (
        <>
          <Text size="sm" c="red.9" mt={4} role="alert" style={{ whiteSpace: "pre-wrap" }}>
            {line.error}</Text>
          <Group gap="xs" mt={6}>
            <Button size="compact-sm" variant="light"
              onClick={() => sendAgain(processId, line.key, line.content, line.messageId !== null)}>
              Send again</Button>
            <Button size="compact-sm" variant="subtle" color="gray"
              onClick={() => discardPending(processId, line.key)}>Discard</Button>
          </Group>
        </>
      )}
    </Paper>
  );
}

/** The process's turn runs (its status is RUNNING) and it has streamed nothing yet: say so
 * from the turn's start, however long the model takes. */
export function Working({ speaker }: { speaker: string }) {
  return (
    <Group gap="xs" data-testid="working" role="status" aria-live="polite">
      <Loader size="xs" type="dots" />
      <Text size="sm" c="dimmed">{speaker} is working…</Text>
    </Group>
  );
}
