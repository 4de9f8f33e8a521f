import { AppShell, Badge, Burger, Button, Group, Tabs, Title } from "@mantine/core";
import { useDisclosure } from "@mantine/hooks";

import { signOut } from "../client";
import { loadInbox } from "../inbox";
import { useStore, type ConnectionStatus } from "../store";
import { Chat } from "./Chat";
import { Inbox, usePendingCount } from "./inbox/Inbox";
import { SessionList } from "./SessionList";
import { SignIn } from "./SignIn";
import { Workers } from "./Workers";

const BADGE: Record<ConnectionStatus, [string, string]> = {
  "signed-out": ["gray", "signed out"],
  connecting: ["yellow", "connecting"],
  open: ["green", "connected"],
  reconnecting: ["orange", "reconnecting"],
};

/** The layout: sessions on the left, the chat in the middle, worker cards on the right. */
export function App() {
  const connection = useStore((s) => s.connection);
  const user = useStore((s) => s.welcome?.userId);
  const [navOpen, { toggle }] = useDisclosure();
  const pending = usePendingCount();
  if (connection === "signed-out") return <SignIn />;
  const [color, label] = BADGE[connection];
  return (
    <AppShell header={{ height: 56 }} padding="md"
      navbar={{ width: 260, breakpoint: "sm", collapsed: { mobile: !navOpen } }}
      aside={{ width: 340, breakpoint: "md", collapsed: { mobile: true } }}>
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between">
          <Group>
            <Burger opened={navOpen} onClick={toggle} hiddenFrom="sm" size="sm"
              aria-label="Sessions" />
            <Title order={1} size="h3">Vancetope</Title>
            <Badge color={color} variant="light" data-testid="connection">{label}</Badge>
          </Group>
          <Group>
            {user && <Badge variant="outline">{user}</Badge>}
            <Button variant="subtle" onClick={() => signOut()}>Sign out</Button>
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="md"><SessionList /></AppShell.Navbar>
      <AppShell.Main>
        <Tabs defaultValue="chat" keepMounted
          onChange={(tab) => { if (tab === "inbox") void loadInbox(); }}>
          <Tabs.List mb="sm">
            <Tabs.Tab value="chat">Chat</Tabs.Tab>
            <Tabs.Tab value="inbox" rightSection={pending > 0 &&
              <Badge size="sm" circle data-testid="inbox-pending">{pending}</Badge>}>Inbox</Tabs.Tab>
          </Tabs.List>
          <Tabs.Panel value="chat"><Chat /></Tabs.Panel>
          <Tabs.Panel value="inbox"><Inbox /></Tabs.Panel>
        </Tabs>
      </AppShell.Main>
      <AppShell.Aside p="md"><Workers /></AppShell.Aside>
    </AppShell>
  );
}
