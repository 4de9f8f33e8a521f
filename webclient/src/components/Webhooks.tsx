import {
  Alert, Badge, Button, Checkbox, Code, CopyButton, Group, Paper, Stack, Table, Text, TextInput,
  Title,
} from "@mantine/core";
import { useCallback, useEffect, useState } from "react";

import { request } from "../client";
import { shownProject } from "../documents";
import type { DeliveryView, SubscriptionView, WebhookEvent } from "../protocol";
import { useStore } from "../store";

const EVENTS: [WebhookEvent, string][] = [
  ["process.done", "a process is done"],
  ["process.failed", "a process failed"],
  ["process.blocked", "a process waits for someone"],
  ["inbox.item.created", "an Inbox item is created"],
  ["inbox.item.answered", "an Inbox item is answered"],
  ["schedule.run.finished", "a schedule's run finished"],
];

const STATUS: Record<DeliveryView["status"], string> = {
  PENDING: "blue.8", DELIVERED: "teal.9", DEAD: "red.9",
};

/** The Webhooks tab: the caller's webhook subscriptions of the bound session's project —
 * a form to subscribe a URL to events (the secret is shown once, to copy), each
 * subscription with its delivery log (status, tries, the last attempt's code and error)
 * and *Redeliver* for a dead or delivered one; enable, disable and delete. URLs, errors
 * and bodies are data: drawn as text only. */
export function Webhooks() {
  const project = useStore(shownProject);
  const [subs, setSubs] = useState<SubscriptionView[]>([]);
  const [secret, setSecret] = useState<{ id: string; secret: string } | null>(null);
  const load = useCallback(async () => {
    const answer = await request("webhook-list", { projectId: project }, true);
    if (answer) setSubs(answer.subscriptions);
  }, [project]);
  useEffect(() => { void load(); }, [load]);

  return (
    <Stack gap="sm" data-testid="webhooks">
      <div>
        <Title order={2} size="h4">Webhooks of project “{project}”</Title>
        <Text size="sm" c="dimmed">
          Signed POSTs (Standard Webhooks) to your URL when these events happen.
        </Text>
      </div>
      <NewWebhook project={project} onCreated={(id, s) => { setSecret({ id, secret: s }); void load(); }} />
      {secret && (
        <Alert color="gray" title="Copy the secret now: it is shown this once"
          withCloseButton closeButtonLabel="Hide the secret" onClose={() => setSecret(null)}
          data-testid="webhook-secret">
          <Group wrap="nowrap" gap="xs">
            <Code style={{ overflowWrap: "anywhere" }}>{secret.secret}</Code>
            <CopyButton value={secret.secret}>
              {({ copied, copy }) => (
                <Button size="xs" variant="default" onClick={copy}>{copied ? "Copied" : "Copy"}</Button>)}
            </CopyButton>
          </Group>
        </Alert>)}
      <Stack gap="xs" role="list" aria-label="Webhooks">
        {subs.length === 0 && <Text c="dimmed" size="sm">No webhooks in this project yet.</Text>}
        {subs.map((s) => <Subscription key={s.id} sub={s} onChanged={() => void load()} />)}
      </Stack>
    </Stack>
  );
}

function NewWebhook({ project, onCreated }: {
  project: string; onCreated(id: string, secret: string): void;
}) {
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState<WebhookEvent[]>(["process.done"]);
  const [busy, setBusy] = useState(false);
  const submit = async () => {
    setBusy(true);
    const answer = await request("webhook-create", { projectId: project, url, events, description: "" });
    setBusy(false);
    if (answer) {
      setUrl("");
      onCreated(answer.subscription.id, answer.secret);
    }
  };
  return (
    <Paper withBorder p="sm">
      <Stack gap="xs">
        <TextInput label="Receiver URL" placeholder="https://hooks.example.com/vancetope"
          value={url} onChange={(e) => setUrl(e.currentTarget.value)} />
        <Checkbox.Group label="Events" value={events}
          onChange={(v) => setEvents(v as WebhookEvent[])}>
          <Group gap="sm" mt={4}>
            {EVENTS.map(([value, label]) => <Checkbox key={value} value={value} label={label} />)}
          </Group>
        </Checkbox.Group>
        <Group justify="flex-end">
          <Button onClick={() => void submit()} loading={busy}
            disabled={url.trim() === "" || events.length === 0}>Add webhook</Button>
        </Group>
      </Stack>
    </Paper>
  );
}

function Subscription({ sub, onChanged }: { sub: SubscriptionView; onChanged(): void }) {
  const [log, setLog] = useState<DeliveryView[] | null>(null);
  const loadLog = async () => {
    const answer = await request("webhook-deliveries", { subscriptionId: sub.id, limit: 20 });
    if (answer) setLog(answer.deliveries);
  };
  const change = async (enabled: boolean) => {
    if (await request("webhook-update", { subscriptionId: sub.id, enabled })) onChanged();
  };
  const remove = async () => {
    if (await request("webhook-delete", { subscriptionId: sub.id })) onChanged();
  };
  const redeliver = async (id: string) => {
    if (await request("webhook-redeliver", { deliveryId: id })) void loadLog();
  };
  return (
    <Paper withBorder p="sm" role="listitem" data-testid="webhook">
      <Group justify="space-between" wrap="wrap" gap="xs">
        <div style={{ minWidth: 0 }}>
          <Text fw={600} style={{ overflowWrap: "anywhere" }}>{sub.url}</Text>
          <Text size="xs" c="dimmed">{sub.events.join(", ")}</Text>
        </div>
        <Group gap="xs" wrap="nowrap">
          <Badge color={sub.enabled ? "teal.9" : "gray.7"}>{sub.enabled ? "on" : "off"}</Badge>
          <Button size="xs" variant="default" onClick={() => void change(!sub.enabled)}>
            {sub.enabled ? "Disable" : "Enable"}</Button>
          <Button size="xs" variant="default" onClick={() => void loadLog()}>Deliveries</Button>
          <Button size="xs" color="red" variant="light" onClick={() => void remove()}>Delete</Button>
        </Group>
      </Group>
      {log && (log.length === 0
        ? <Text size="sm" c="dimmed" mt="xs">Nothing delivered yet.</Text>
        : (
          <Table.ScrollContainer minWidth={320} mt="xs">
            <Table striped withTableBorder fz="sm" aria-label="Deliveries" data-testid="webhook-log">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Event</Table.Th><Table.Th>Status</Table.Th><Table.Th>Tries</Table.Th>
                  <Table.Th>Last attempt</Table.Th><Table.Th />
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {log.map((d) => {
                  const last = d.attempts[d.attempts.length - 1];
                  return (
                    <Table.Tr key={d.id}>
                      <Table.Td>{d.event}</Table.Td>
                      <Table.Td><Badge color={STATUS[d.status]}>{d.status.toLowerCase()}</Badge></Table.Td>
                      <Table.Td>{d.tries}</Table.Td>
                      <Table.Td>{last ? `${last.statusCode ?? "no answer"}${last.error ? ` — ${last.error}` : ""}` : "—"}</Table.Td>
                      <Table.Td>{d.status !== "PENDING" &&
                        <Button size="xs" variant="subtle" onClick={() => void redeliver(d.id)}>Redeliver</Button>}</Table.Td>
                    </Table.Tr>);
                })}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>))}
    </Paper>
  );
}
