import {
  Badge, Button, Group, Modal, Paper, Select, SimpleGrid, Stack, Text, TextInput, Textarea, Title,
} from "@mantine/core";
import { useCallback, useEffect, useState } from "react";

import { request } from "../client";
import type { ChatLine, RunStatus, RunView, ScheduleView } from "../protocol";
import { useStore } from "../store";

/** A run's status as a pill: shades dark enough for white text (WCAG AA). */
const RUN_COLOR: Record<RunStatus, string> = {
  CLAIMED: "gray.7", STARTED: "blue.8", BLOCKED: "yellow.9", DONE: "teal.9", FAILED: "red.9",
  STOPPED: "gray.7", STALE: "gray.7",
};

function at(iso: string | null | undefined): string {
  return iso ? new Date(iso).toLocaleString() : "—";
}

/** The Schedules tab: the user's schedules (`schedule-list`), each with its cron and time
 * zone, its next run and its last run's outcome; *Pause* / *Resume*, *Run now*
 * (`schedule-run-now`: a run outside the cron); *Runs* opens a
 * schedule's next run times and latest runs (`schedule-get`), and a run opens its process's
 * report (`chat-history` of the run's process: its session is closed once the run ends).
 * A form creates a schedule (`schedule-create`); a refusal (a bad cron expression, an
 * unknown time zone or recipe, a full project) is shown as the server words it. Names,
 * goals and reports are data: drawn as text only. */
export function Schedules() {
  const welcome = useStore((s) => s.welcome);
  const [schedules, setSchedules] = useState<ScheduleView[] | null>(null);
  const [shown, setShown] = useState<string | null>(null);
  const load = useCallback(async () => {
    const answer = await request("schedule-list", {}, true);
    if (answer) setSchedules(answer.schedules);
  }, []);
  useEffect(() => { void load(); }, [load, welcome]);

  const toggle = async (s: ScheduleView) => {
    await request(s.paused ? "schedule-resume" : "schedule-pause", { scheduleId: s.id });
    await load();
  };
  const runNow = async (s: ScheduleView) => {
    await request("schedule-run-now", { scheduleId: s.id });
    await load();
  };

  return (
    <Stack gap="sm" data-testid="schedules">
      <Group justify="space-between" wrap="nowrap" align="flex-start">
        <div>
          <Title order={2} size="h4">Schedules</Title>
          <Text size="sm" c="dimmed">
            Each tick runs the recipe in a session of its own; its synthesis arrives in your Inbox.
          </Text>
        </div>
        <Button variant="default" size="xs" onClick={() => void load()} style={{ flexShrink: 0 }}>
          Refresh</Button>
      </Group>
      {schedules === null
        ? <Text c="dimmed" size="sm">Loading…</Text>
        : schedules.length === 0
          ? <Text c="dimmed" size="sm">No schedules yet.</Text>
          : (
            <SimpleGrid cols={{ base: 1, lg: 2 }} spacing="sm">
              {schedules.map((s) => (
                <Paper withBorder p="sm" key={s.id} data-testid="schedule" data-schedule={s.id}>
                  <Group justify="space-between" wrap="nowrap" align="flex-start">
                    <div style={{ minWidth: 0 }}>
                      <Text fw={600} style={{ overflowWrap: "anywhere" }}>{s.name}</Text>
                      <Text size="sm" c="dimmed" style={{ overflowWrap: "anywhere" }}>
                        <code>{s.cron}</code> · {s.timezone} · {s.recipe}</Text>
                    </div>
                    {s.paused && <Badge color="gray.7">paused</Badge>}
                  </Group>
                  <Text size="sm" mt={4}>Next run: {s.paused ? "—" : at(s.nextRunAt)}</Text>
                  <Group gap="xs" mt={4} data-testid="last-run">
                    <Text size="sm">Last run:</Text>
                    {s.lastRun
                      ? <>
                        <Badge color={RUN_COLOR[s.lastRun.status]}>{s.lastRun.status}</Badge>
                        <Text size="sm">{at(s.lastRun.tick)}</Text>
                      </>
                      : <Text size="sm" c="dimmed">none yet</Text>}
                  </Group>
                  <Group gap="xs" mt="xs">
                    <Button size="xs" variant="default" onClick={() => setShown(s.id)}>Runs</Button>
                    <Button size="xs" variant="default" onClick={() => void toggle(s)}>
                      {s.paused ? "Resume" : "Pause"}</Button>
                    <Button size="xs" variant="default" onClick={() => void runNow(s)}>
                      Run now</Button>
                  </Group>
                </Paper>))}
            </SimpleGrid>)}
      <NewSchedule onCreated={() => void load()} />
      {shown && <ScheduleRuns scheduleId={shown} onClose={() => { setShown(null); void load(); }} />}
    </Stack>
  );
}

function NewSchedule({ onCreated }: { onCreated(): void }) {
  const [name, setName] = useState("");
  const [cron, setCron] = useState("0 7 * * 1-5");
  const [timezone, setTimezone] = useState(Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC");
  const [recipe, setRecipe] = useState("vogon-cron");
  const [goal, setGoal] = useState("");
  const [missed, setMissed] = useState<"skip" | "runOnce">("skip");
  const create = async () => {
    const answer = await request("schedule-create",
      { name, cron, timezone, recipe, goal, missed });
    if (answer) {
      setName("");
      setGoal("");
      onCreated();
    }
  };
  return (
    <Paper withBorder p="sm">
      <Title order={3} size="h5" mb="xs">New schedule</Title>
      <form onSubmit={(e) => { e.preventDefault(); void create(); }}>
        <SimpleGrid cols={{ base: 1, sm: 2 }} spacing="xs">
          <TextInput label="Name" value={name} required maxLength={100}
            onChange={(e) => setName(e.currentTarget.value)} />
          <TextInput label="Cron expression" value={cron} required maxLength={100}
            description="minute hour day-of-month month day-of-week"
            onChange={(e) => setCron(e.currentTarget.value)} />
          <TextInput label="Time zone" value={timezone} required maxLength={64}
            onChange={(e) => setTimezone(e.currentTarget.value)} />
          <TextInput label="Recipe" value={recipe} required maxLength={64}
            onChange={(e) => setRecipe(e.currentTarget.value)} />
          <Select label="Missed ticks" value={missed} allowDeselect={false}
            data={[{ value: "skip", label: "Skip them" }, { value: "runOnce", label: "Run once" }]}
            onChange={(v) => setMissed(v === "runOnce" ? "runOnce" : "skip")} />
        </SimpleGrid>
        <Textarea label="Goal" value={goal} autosize minRows={2} maxLength={32000} mt="xs"
          onChange={(e) => setGoal(e.currentTarget.value)} />
        <Button type="submit" mt="xs" size="sm">Create schedule</Button>
      </form>
    </Paper>
  );
}

function ScheduleRuns({ scheduleId, onClose }: { scheduleId: string; onClose(): void }) {
  const [detail, setDetail] = useState<{ next: string[]; runs: RunView[]; name: string } | null>(null);
  const [run, setRun] = useState<RunView | null>(null);
  useEffect(() => {
    void request("schedule-get", { scheduleId }).then((answer) => {
      if (answer) setDetail({ next: answer.nextRuns, runs: answer.runs, name: answer.schedule.name });
    });
  }, [scheduleId]);
  return (
    <Modal opened onClose={onClose} title={detail ? `Runs of ${detail.name}` : "Runs"} size="lg">
      {detail && (
        <Stack gap="xs" data-testid="schedule-runs">
          <Text size="sm">Next: {detail.next.length ? detail.next.map(at).join(", ") : "paused"}</Text>
          {detail.runs.length === 0 && <Text size="sm" c="dimmed">No run yet.</Text>}
          {detail.runs.map((r) => (
            <Group key={r.id} gap="xs" wrap="nowrap" justify="space-between">
              <Group gap="xs" wrap="nowrap">
                <Badge color={RUN_COLOR[r.status]}>{r.status}</Badge>
                <Text size="sm">{at(r.tick)}</Text>
              </Group>
              <Button size="xs" variant="subtle" onClick={() => setRun(r)}>Open</Button>
            </Group>))}
          {run && <RunReport run={run} />}
        </Stack>)}
    </Modal>
  );
}

function RunReport({ run }: { run: RunView }) {
  const [lines, setLines] = useState<ChatLine[] | null>(null);
  useEffect(() => {
    setLines(null);
    void request("chat-history", { processId: run.processId, limit: 50 }).then((answer) => {
      if (answer) setLines(answer.messages);
    });
  }, [run.processId]);
  return (
    <Paper withBorder p="sm" data-testid="run-report">
      <Text size="xs" c="dimmed">Process {run.processId} · session {run.sessionId}</Text>
      {lines === null
        ? <Text size="sm" c="dimmed">Loading…</Text>
        : lines.filter((l) => l.role === "assistant").slice(-1).map((l) => (
          <Text key={l.id} size="sm" style={{ whiteSpace: "pre-wrap", overflowWrap: "anywhere" }}>
            {l.content}</Text>))}
    </Paper>
  );
}
