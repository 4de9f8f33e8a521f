// The engines' own progress, drawn live: marvin's task tree, vogon's phases with their
// checkpoints, zaphod's heads and synthesis. Each is drawn from the events seen since the
// last full read (the card's `tree` / `phase` / `council`), else from the `engineView` of
// the last `process-status` / `process-list` read.
import {
  Alert, Badge, Button, Group, List, Stepper, Text, Timeline, Tree, useTree,
  type RenderTreeNodePayload, type TreeNodeData,
} from "@mantine/core";
import { useMemo, useState } from "react";

import { focusProcess } from "../client";
import { openItem } from "../inbox";
import type { Council, NodeStatus, Synthesis, TaskTree, VogonView } from "../protocol";
import { committedTree, type WorkerCard } from "../store";
import { Markdown } from "./Markdown";

const NODE_COLOR: Record<NodeStatus, string> = {
  PENDING: "gray.7", RUNNING: "blue.8", DONE: "teal.9", FAILED: "red.8", SKIPPED: "dark",
};

const HEAD_COLOR: Record<string, string> = {
  pending: "gray.7", running: "blue.8", done: "teal.9", failed: "red.8", stopped: "dark",
  blocked: "orange.9", timeout: "orange.9",
};

export function treeOf(p: WorkerCard): TaskTree | null {
  const tree = p.tree ?? committedTree(p);
  return tree && tree.root && tree.nodes ? tree : null;
}

function synthesisOf(p: WorkerCard): Synthesis | null {
  return p.engineView?.engine === "zaphod" ? p.engineView.synthesis : null;
}

export function councilOf(p: WorkerCard): Council | null {
  return p.council ?? (p.engineView?.engine === "zaphod" ? p.engineView.council : null);
}

/** vogon's committed view with the newest `vogon-phase` event since the read laid over it. */
export function vogonOf(p: WorkerCard): VogonView | null {
  const view = p.engineView?.engine === "vogon" ? p.engineView : null;
  const live = p.phase;
  if (!live) return view;
  return {
    engine: "vogon", phases: view?.phases ?? [], history: view?.history ?? [],
    index: live.index, iteration: live.iteration, step: live.step, current: live.phase,
    outcome: live.step === "finished" ? live.outcome ?? null : null,
    waiting: live.step === "waiting" && live.itemId
      ? { id: live.itemId, title: live.title ?? "" } : null,
  };
}

/** One line for the worker card. */
export function engineSummary(p: WorkerCard): string | null {
  if (p.engine === "marvin") {
    const tree = treeOf(p);
    if (!tree) return null;
    const nodes = Object.values(tree.nodes);
    const done = nodes.filter((n) => n.status === "DONE").length;
    const running = nodes.filter((n) => n.status === "RUNNING").length;
    return `task tree: ${done}/${nodes.length} steps done${running ? `, ${running} running` : ""}`;
  }
  if (p.engine === "vogon") {
    const v = vogonOf(p);
    if (!v) return null;
    const of = v.phases.length ? `/${v.phases.length}` : "";
    const state = v.outcome ? v.outcome : v.waiting ? "waiting for your answer" : v.step;
    return `phase ${v.index + 1}${of} ${v.current} (run ${v.iteration}): ${state}`;
  }
  if (p.engine === "zaphod") {
    const c = councilOf(p);
    if (!c) return null;
    const round = c.heads.filter((h) => h.round === c.round);
    const answered = round.filter((h) => h.status === "done").length;
    return `council round ${c.round}/${c.rounds}: ${answered}/${round.length} heads answered`
      + (c.phase === "heads" ? "" : `, ${c.phase}`);
  }
  return null;
}

/** The focused worker's engine view (none for engines without one). */
export function EngineView({ process: p }: { process: WorkerCard }) {
  if (p.engine === "marvin") {
    const tree = treeOf(p);
    return tree ? <MarvinTree tree={tree} /> : null;
  }
  if (p.engine === "vogon") {
    const v = vogonOf(p);
    return v ? <VogonPhases view={v} /> : null;
  }
  if (p.engine === "zaphod") {
    const c = councilOf(p);
    return c ? <ZaphodCouncil council={c} synthesis={synthesisOf(p)} /> : null;
  }
  return null;
}

function treeData(tree: TaskTree, id: string): TreeNodeData {
  const node = tree.nodes[id];
  return {
    value: id, label: node?.goal ?? id,
    children: (node?.children ?? []).filter((c) => tree.nodes[c]).map((c) => treeData(tree, c)),
  };
}

/** marvin's tree: every node open unless the user closed it (arrow keys move and open). */
function MarvinTree({ tree }: { tree: TaskTree }) {
  const [closed, setClosed] = useState("");  // the closed nodes' ids, sorted, joined
  const expandedState = useMemo(() => Object.fromEntries(Object.keys(tree.nodes)
    .map((id) => [id, !closed.split(" ").includes(id)])), [tree, closed]);
  // A new array each render would make the Tree initialize again each time.
  const data = useMemo(() => [treeData(tree, tree.root)], [tree]);
  const controller = useTree({
    expandedState,
    onExpandedStateChange: (state) =>
      setClosed(Object.entries(state).filter(([, open]) => !open).map(([id]) => id).sort().join(" ")),
  });
  const renderNode = ({ node, expanded, hasChildren, elementProps }: RenderTreeNodePayload) => {
    const n = tree.nodes[node.value];
    return (
      // minWidth 0 lets a long goal end in an ellipsis on a narrow screen.
      <Group gap={6} wrap="nowrap" {...elementProps}
        style={{ ...elementProps.style, minWidth: 0, overflow: "hidden" }} data-testid="task-node"
        data-node={n.id} data-status={n.status} data-kind={n.kind}>
        <Text size="xs" w={12} aria-hidden style={{ flexShrink: 0 }}>
          {hasChildren ? (expanded ? "▾" : "▸") : ""}</Text>
        <Badge size="xs" variant="outline" color="dark" style={{ flexShrink: 0 }}>
          {n.kind.toLowerCase().replace("_", " ")}</Badge>
        <Badge size="xs" color={NODE_COLOR[n.status]} style={{ flexShrink: 0 }}>{n.status}</Badge>
        <Text size="sm" truncate title={n.goal} style={{ minWidth: 0, flex: 1 }}>{n.goal}</Text>
      </Group>
    );
  };
  return (
    <Tree data={data} tree={controller} levelOffset="md"
      renderNode={renderNode} aria-label="Task tree" data-testid="task-tree" />
  );
}

function gateWords(history: VogonView["history"], phase: string): string {
  return history.filter((h) => h.phase === phase)
    .map((h) => `run ${h.iteration}: gate ${h.gate}`).join(" · ");
}

/** vogon's phases as a vertical stepper; a checkpoint waiting in the Inbox links there. */
function VogonPhases({ view: v }: { view: VogonView }) {
  const active = v.outcome === "completed" ? v.phases.length : v.index;
  return (
    <div data-testid="vogon-phases" data-step={v.step} data-outcome={v.outcome ?? undefined}>
      {v.phases.length > 0 && (
        <Stepper active={active} orientation="vertical" size="xs" allowNextStepsSelect={false}
          color={v.outcome && v.outcome !== "completed" ? "red.8" : "blue.8"}>
          {v.phases.map((phase, i) => (
            <Stepper.Step key={phase.name} label={phase.name} data-testid="vogon-phase"
              description={[
                phase.checkpoint ? `checkpoint: ${phase.checkpoint.toLowerCase()}` : "",
                gateWords(v.history, phase.name),
                i === v.index && !v.outcome ? `run ${v.iteration}: ${v.waiting ? "waiting" : v.step}` : "",
              ].filter(Boolean).join(" · ")} />
          ))}
        </Stepper>
      )}
      {v.outcome && <Text size="sm" mt="xs">Strategy {v.outcome}.</Text>}
      {v.waiting && (
        <Alert color="orange" mt="xs" title="Waiting for your answer" data-testid="checkpoint">
          <Text size="sm" mb={6}>{v.waiting.title}</Text>
          <Button size="compact-sm" color="orange.9"
            onClick={() => openItem(v.waiting!.id)}>Open in the Inbox</Button>
        </Alert>
      )}
    </div>
  );
}

/** zaphod's council: a timeline of its rounds with each head's status, then the synthesis. */
function ZaphodCouncil({ council: c, synthesis }: {
  council: Council; synthesis: Synthesis | null;
}) {
  const rounds = Math.max(c.rounds || 1, c.round || 1, ...c.heads.map((h) => h.round));
  const done = c.phase !== "heads";
  const shownRounds = c.pattern === "debate" ? rounds : Math.max(...c.heads.map((h) => h.round), 1);
  return (
    <Timeline active={done ? shownRounds : (c.round || 1) - 1} bulletSize={16} lineWidth={2}
      color="blue.8" data-testid="council" data-phase={c.phase}>
      {Array.from({ length: shownRounds }, (_, i) => i + 1).map((round) => (
        <Timeline.Item key={round} title={`Round ${round}`}>
          <Group gap={4} mt={4}>
            {c.heads.filter((h) => h.round === round).map((h) => (
              <Button key={`${h.name}-${round}`} size="compact-xs"
                color={HEAD_COLOR[h.status] ?? "gray.7"} data-testid="council-head"
                data-status={h.status} disabled={!h.processId}
                aria-label={`head ${h.name}: ${h.status}, open its chat`}
                onClick={() => h.processId && focusProcess(h.processId)}>
                {h.name}: {h.status}
              </Button>
            ))}
          </Group>
        </Timeline.Item>
      ))}
      <Timeline.Item title="Synthesis" data-testid="synthesis">
        {synthesis ? (
          <>
            <Markdown text={`**Conclusion:** ${synthesis.conclusion}\n\n${synthesis.consensus}`} />
            {synthesis.differences.length > 0 && (
              <List size="sm">{synthesis.differences.map((x, i) =>
                <List.Item key={i}>{x}</List.Item>)}</List>)}
          </>
        ) : <Text size="sm" c="dimmed">{done ? c.phase : "once the heads have answered"}</Text>}
        {c.missingHeads.length > 0 && (
          <Text size="sm" c="red.8">Missing: {c.missingHeads.join(", ")}</Text>)}
      </Timeline.Item>
    </Timeline>
  );
}
