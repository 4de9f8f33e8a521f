import { Button, Group, Stack, Text } from "@mantine/core";

import { useStore } from "../store";
import { NewSessionButton } from "./SessionList";

/** The chat pane while no session is bound: what to do, with the buttons that do it. On a
 * phone the sessions are behind the menu button, so rather than pointing at a list that
 * is not on screen, *Open a session* opens the menu. `onSessions` opens it. */
export function NoSession({ onSessions }: { onSessions(): void }) {
  const resumable = useStore((s) => s.sessions.some((x) => x.status !== "CLOSED"));
  return (
    <Stack gap="sm" align="flex-start" data-testid="no-session">
      {resumable ? (
        <>
          <Text c="dimmed" visibleFrom="sm">Open a session on the left, or start a new one.</Text>
          <Text c="dimmed" hiddenFrom="sm">Open one of your sessions, or start a new one.</Text>
        </>
      ) : <Text c="dimmed">Start a session to chat with Arthur.</Text>}
      <Group gap="xs">
        <NewSessionButton>Start a session</NewSessionButton>
        {resumable && (
          <Button variant="light" hiddenFrom="sm" onClick={onSessions}>Open a session</Button>)}
      </Group>
    </Stack>
  );
}
