import {
  closestCenter, DndContext, KeyboardSensor, PointerSensor, useSensor, useSensors,
  type DragEndEvent,
} from "@dnd-kit/core";
import {
  arrayMove, SortableContext, sortableKeyboardCoordinates, useSortable,
  verticalListSortingStrategy,
} from "@dnd-kit/sortable";
import { CSS } from "@dnd-kit/utilities";
import { Button, Group, Paper, Stack, Text } from "@mantine/core";
import { useState } from "react";

interface Entry { id: string; label: string }

function Row({ entry, index }: { entry: Entry; index: number }) {
  const { attributes, listeners, setNodeRef, transform, transition, isDragging } =
    useSortable({ id: entry.id });
  return (
    <Paper ref={setNodeRef} withBorder p="xs" data-testid="ordering-row" data-id={entry.id}
      className="ordering-row" {...attributes} {...listeners}
      aria-label={`${index + 1}. ${entry.label}`}
      style={{ transform: CSS.Transform.toString(transform), transition,
        opacity: isDragging ? 0.6 : 1 }}>
      <Group gap="xs" wrap="nowrap">
        <Text c="dimmed" aria-hidden>⠿</Text>
        <Text fw={500}>{index + 1}.</Text>
        <Text>{entry.label}</Text>
      </Group>
    </Paper>
  );
}

/** ORDERING: drag the rows, or focus one and press Space, the arrow keys and Space again
 * (dnd-kit's keyboard sensor, with its screen-reader announcements). */
export function Ordering({ items, busy, onSubmit }: {
  items: Entry[]; busy: boolean; onSubmit: (orderedIds: string[]) => void;
}) {
  const [order, setOrder] = useState(items);
  const sensors = useSensors(
    useSensor(PointerSensor),
    useSensor(KeyboardSensor, { coordinateGetter: sortableKeyboardCoordinates }),
  );
  const onDragEnd = ({ active, over }: DragEndEvent) => {
    if (!over || active.id === over.id) return;
    setOrder((now) => arrayMove(now,
      now.findIndex((e) => e.id === active.id), now.findIndex((e) => e.id === over.id)));
  };
  return (
    <Stack gap="xs">
      <Text size="sm" c="dimmed" id="ordering-help">
        Drag a row, or focus it and press Space, then the arrow keys, then Space to drop.
      </Text>
      <DndContext sensors={sensors} collisionDetection={closestCenter} onDragEnd={onDragEnd}
        accessibility={{ screenReaderInstructions: { draggable:
          "Press Space to pick up a row, the arrow keys to move it, Space to drop it." } }}>
        <SortableContext items={order} strategy={verticalListSortingStrategy}>
          <Stack gap={4} data-testid="ordering-list">
            {order.map((entry, i) => <Row key={entry.id} entry={entry} index={i} />)}
          </Stack>
        </SortableContext>
      </DndContext>
      <Group>
        <Button loading={busy} onClick={() => onSubmit(order.map((e) => e.id))}>
          Submit this order
        </Button>
      </Group>
    </Stack>
  );
}
