import { AppShell, Badge, Burger, Button, Group, Tabs, Title } from "@mantine/core";
import { useDisclosure, useMediaQuery } from "@mantine/hooks";
import type React from "react";

import { signOut } from "../client";
import { set, useStore, type ConnectionStatus, type Tab } from "../store";
import { Chat } from "./Chat";
import { Documents } from "./Documents";
import { Inbox, usePendingCount } from "./inbox/Inbox";
import { NoSession } from "./NoSession";
import { SessionList } from "./SessionList";
import { Schedules } from "./Schedules";
import { SignIn } from "./SignIn";
import { Usage } from "./Usage";
import { Webhooks } from "./Webhooks";
import { Workers } from "./Workers";

const BADGE: Record<ConnectionStatus, [string, string]> = {
  "signed-out": ["gray", "signed out"],
  connecting: ["yellow", "connecting"],
  open: ["green", "connected"],
  reconnecting: ["orange", "reconnecting"],
};

/** The layout: sessions on the left, the chat, the Inbox, the project's documents, the
 * LLM usage (this session, this month) and the project's webhooks ("Hooks") as tabs
 * in the middle, worker cards on the right. Narrower than Mantine's `md` breakpoint the workers become a third
 * tab in the middle; narrower than `sm` (a phone) the sessions fold into the burger menu,
 * and the user and *Sign out* move into it too, so the header keeps room for the whole
 * connection status. */
export function App() {
  const connection = useStore((s) => s.connection);
  const user = useStore((s) => s.welcome?.userId);
  const [navOpen, { toggle, open, close }] = useDisclosure();
  const wide = useMediaQuery("(min-width: 62em)", true);
  const pending = usePendingCount();
  if (connection === "signed-out") return <SignIn />;
  const [color, label] = BADGE[connection];
  return (
    <AppShell header={{ height: 56 }} padding="md"
      navbar={{ width: 260, breakpoint: "sm", collapsed: { mobile: !navOpen } }}
      aside={{ width: 340, breakpoint: "md", collapsed: { desktop: !wide, mobile: true } }}>
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between" wrap="nowrap">
          <Group wrap="nowrap" gap="xs">
            <Burger opened={navOpen} onClick={toggle} hiddenFrom="sm" size="sm"
              aria-label="Sessions" />
            <Title order={1} size="h3">Vancetope</Title>
            <Badge color={color} variant="dot" data-testid="connection" role="status"
              style={{ flexShrink: 0 }}>{label}</Badge>
          </Group>
          <Group visibleFrom="sm" wrap="nowrap">
            {user && <Badge variant="outline">{user}</Badge>}
            <Button variant="subtle" onClick={() => signOut()}>Sign out</Button>
          </Group>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="md">
        <SessionList onPicked={close} />
        <Group hiddenFrom="sm" justify="space-between" mt="sm" wrap="nowrap">
          {user && <Badge variant="outline">{user}</Badge>}
          <Button variant="subtle" onClick={() => signOut()}>Sign out</Button>
        </Group>
      </AppShell.Navbar>
      <AppShell.Main><Middle wide={wide} pending={pending} onSessions={open} /></AppShell.Main>
      {wide && <AppShell.Aside p="md"><Workers /></AppShell.Aside>}
    </AppShell>
  );
}

/** `onSessions` opens the sessions menu (a phone's empty chat points there). */
function Middle({ wide, pending, onSessions }: {
  wide: boolean; pending: number; onSessions(): void;
}) {
  const tab = useStore((s) => s.tab);
  const bound = useStore((s) => s.sessionId !== null);
  const unread = useStore((s) => s.unread);
  const focused = useStore((s) => s.focus !== null);
  const shown = !wide || tab !== "workers" ? tab : "chat";
  return (
    <Tabs value={shown} keepMounted={false}
      // On a phone the tabs keep one line (the chat's height counts on it) with narrower
      // padding, and scroll sideways where six do not fit.
      styles={wide ? undefined : {
        list: { flexWrap: "nowrap", overflowX: "auto", overflowY: "hidden" },
        tab: { paddingInline: "var(--mantine-spacing-xs)", flexShrink: 0 } }}
      onChange={(next) => set({ tab: (next ?? "chat") as Tab,
        // Arthur's chat is in view again: his new lines are read.
        ...(next === "chat" && !focused ? { unread: 0 } : {}) })}>
      <Tabs.List grow={!wide} mb="sm">
        <Tabs.Tab value="chat" rightSection={shown !== "chat" && unread > 0 &&
          <Badge size="sm" circle data-testid="chat-unread" aria-label={`${unread} new from Arthur`}>
            {unread}</Badge>}>Chat</Tabs.Tab>
        <Tabs.Tab value="inbox" rightSection={pending > 0 &&
          <Badge size="sm" circle data-testid="inbox-pending">{pending}</Badge>}>Inbox</Tabs.Tab>
        {!wide && <Tabs.Tab value="workers">Workers</Tabs.Tab>}
        <Tabs.Tab value="documents">Documents</Tabs.Tab>
        <Tabs.Tab value="schedules">Schedules</Tabs.Tab>
        <Tabs.Tab value="usage">Usage</Tabs.Tab>
        <Tabs.Tab value="webhooks">Hooks</Tabs.Tab>
      </Tabs.List>
      {/* the tab list above takes this much of the height the chat fills */}
      <Tabs.Panel value="chat" style={{ "--chat-offset": "52px" } as React.CSSProperties}>
        {bound ? <Chat /> : <NoSession onSessions={onSessions} />}
      </Tabs.Panel>
      <Tabs.Panel value="inbox"><Inbox /></Tabs.Panel>
      {!wide && <Tabs.Panel value="workers"><Workers /></Tabs.Panel>}
      <Tabs.Panel value="documents"><Documents /></Tabs.Panel>
      <Tabs.Panel value="schedules"><Schedules /></Tabs.Panel>
      <Tabs.Panel value="usage"><Usage /></Tabs.Panel>
      <Tabs.Panel value="webhooks"><Webhooks /></Tabs.Panel>
    </Tabs>
  );
}
