import { Alert, Button, Group, Paper, SimpleGrid, Stack, Table, Text, Title } from "@mantine/core";
import { useCallback, useEffect, useState } from "react";

import { request } from "../client";
import type { Reply, UsageTotals } from "../protocol";
import { useStore } from "../store";

const count = new Intl.NumberFormat(undefined);
/** Costs are in whatever currency the operator's price table (`llm.prices`) uses. */
const money = new Intl.NumberFormat(undefined, { maximumFractionDigits: 4 });

/** The Usage tab: the caller's LLM tokens (in: what the model read, out: what it wrote),
 * calls and cost in the bound session and in this month, each per model. Read with the
 * `usage` frame on opening, on a session change and on *Refresh*; only committed turns
 * count. Cost shows only where the tenant has a price table. */
export function Usage() {
  const sessionId = useStore((s) => s.sessionId);
  const title = useStore((s) => s.sessions.find((x) => x.id === s.sessionId)?.title);
  const [report, setReport] = useState<Reply<"usage"> | null>(null);
  const [loading, setLoading] = useState(false);
  const load = useCallback(async () => {
    setLoading(true);
    const answer = await request("usage", sessionId ? { sessionId } : {}, true);
    setLoading(false);
    if (answer) setReport(answer);
  }, [sessionId]);
  useEffect(() => { void load(); }, [load]);

  return (
    <Stack gap="sm" data-testid="usage">
      <Group justify="space-between" wrap="nowrap" align="flex-start">
        <div>
          <Title order={2} size="h4">LLM usage</Title>
          <Text size="sm" c="dimmed">Tokens in are what the model read, tokens out what it wrote.</Text>
        </div>
        <Button variant="default" size="xs" loading={loading} onClick={() => void load()}
          style={{ flexShrink: 0 }}>
          Refresh</Button>
      </Group>
      {report === null
        ? <Text c="dimmed" size="sm">{loading ? "Loading…" : "No usage to show."}</Text>
        : (
          <SimpleGrid cols={{ base: 1, lg: 2 }} spacing="sm">
            {report.session
              ? <Totals label={`This session${title ? ` — ${title}` : ""}`}
                totals={report.session} testId="usage-session" />
              : <Alert variant="light" color="gray">Open a session to see its usage.</Alert>}
            <Totals label={`This month (${report.month}, UTC)`} totals={report.thisMonth}
              testId="usage-month" />
          </SimpleGrid>)}
    </Stack>
  );
}

function Totals({ label, totals, testId }: { label: string; totals: UsageTotals; testId: string }) {
  const priced = totals.cost !== null;
  return (
    <Paper withBorder p="sm" data-testid={testId}>
      <Text fw={600} mb={4}>{label}</Text>
      <Group gap="lg" mb="xs">
        <Figure name="Tokens in" value={count.format(totals.tokensIn)} />
        <Figure name="Tokens out" value={count.format(totals.tokensOut)} />
        <Figure name="Calls" value={count.format(totals.calls)} />
        {priced && <Figure name="Cost" value={money.format(totals.cost ?? 0)} />}
      </Group>
      {totals.models.length === 0
        ? <Text size="sm" c="dimmed">No model calls yet.</Text>
        : (
          <Table.ScrollContainer minWidth={320}>
            <Table striped withTableBorder fz="sm" aria-label={`${label}, per model`}>
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Model</Table.Th>
                  <Table.Th ta="right">In</Table.Th>
                  <Table.Th ta="right">Out</Table.Th>
                  <Table.Th ta="right">Calls</Table.Th>
                  {priced && <Table.Th ta="right">Cost</Table.Th>}
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {totals.models.map((m) => (
                  <Table.Tr key={m.model}>
                    <Table.Td style={{ wordBreak: "break-all" }}>{m.model}</Table.Td>
                    <Table.Td ta="right">{count.format(m.tokensIn)}</Table.Td>
                    <Table.Td ta="right">{count.format(m.tokensOut)}</Table.Td>
                    <Table.Td ta="right"
                      title={m.estimatedCalls ? `${m.estimatedCalls} counted from the text: the endpoint reported no usage` : undefined}>
                      {count.format(m.calls)}{m.estimatedCalls > 0 && " *"}</Table.Td>
                    {priced && <Table.Td ta="right">{money.format(m.cost ?? 0)}</Table.Td>}
                  </Table.Tr>))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>)}
      {totals.models.some((m) => m.estimatedCalls > 0) &&
        <Text size="xs" c="dimmed" mt={4}>* some calls were counted from the text: the endpoint reported no usage.</Text>}
    </Paper>
  );
}

function Figure({ name, value }: { name: string; value: string }) {
  return (
    <div>
      <Text size="xs" c="dimmed">{name}</Text>
      <Text fw={600}>{value}</Text>
    </div>
  );
}
