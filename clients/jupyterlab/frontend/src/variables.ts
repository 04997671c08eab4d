/**
 * The variables view's logic, apart from React: when to read the kernel's
 * variables again, how a listing replaces the one shown, and the line each
 * variable gets. Everything in a VariableSummary was made by the user's objects
 * (a `__repr__`, a column name): the view shows it as text only.
 */
import { messagesOf, OpenTask } from './state';
import type { VariableList, VariableSummary } from './wire';

/** What the variables view shows for the open task. */
export interface VariablesView {
  taskId: string | null;
  /** The last listing that had variables in it (a busy kernel keeps it). */
  listing: VariableList | null;
  /** A note on the last read: the kernel was busy, has none, failed. */
  note: string | null;
  loading: boolean;
}

export const EMPTY_VIEW: VariablesView = { taskId: null, listing: null, note: null, loading: false };

/**
 * A key that changes whenever one of the task's executions ended: the ts of its
 * final `cell_output` messages (and how many there are). The view reads the
 * variables again when it changes.
 */
export function executionKey(task: OpenTask | null): string {
  if (task === null) {
    return '';
  }
  const done = messagesOf(task).filter(m => m.type === 'say' && m.say === 'cell_output' && !m.partial);
  return `${task.taskId}:${done.length}:${done.length ? done[done.length - 1].ts : 0}`;
}

/** The view after a reply to ListVariables for `taskId`. */
export function applyListing(view: VariablesView, taskId: string, reply: VariableList): VariablesView {
  const sameTask = view.taskId === taskId;
  switch (reply.status ?? 'ok') {
    case 'ok':
      return { taskId, listing: reply, note: null, loading: false };
    case 'busy':
    case 'timeout':
      // Keep what was shown: it is still the latest we know.
      return {
        taskId,
        listing: sameTask ? view.listing : null,
        note: reply.message ?? 'The kernel is busy.',
        loading: false
      };
    case 'no_kernel':
      return { taskId, listing: null, note: 'No kernel yet: the task has run no code.', loading: false };
    default:
      return {
        taskId,
        listing: sameTask ? view.listing : null,
        note: reply.message ?? 'The variables could not be read.',
        loading: false
      };
  }
}

/** "12.3 MB" */
export function formatBytes(n: number): string {
  let size = n;
  for (const unit of ['B', 'KB', 'MB', 'GB']) {
    if (size < 1024 || unit === 'GB') {
      return unit === 'B' ? `${Math.round(size)} B` : `${size.toFixed(1)} ${unit}`;
    }
    size /= 1024;
  }
  return `${n} B`;
}

/** The facts after a variable's name: "DataFrame · 1000 × 2 · 15.7 KB". */
export function describeVariable(v: VariableSummary): string {
  const facts = [v.type];
  if (v.shape) {
    facts.push(v.shape.join(' × '));
  } else if (v.length !== undefined && v.length !== null) {
    facts.push(`len ${v.length}`);
  }
  if (v.dtype) {
    facts.push(v.dtype);
  }
  if (v.memory !== undefined && v.memory !== null) {
    facts.push(formatBytes(v.memory));
  }
  return facts.join(' · ');
}

/** "a: int64, b: str (+3 more)" */
export function describeColumns(v: VariableSummary): string {
  const columns = (v.columns ?? []).map(c => `${c.name}: ${c.dtype}`).join(', ');
  return v.columnsOmitted ? `${columns} (+${v.columnsOmitted} more)` : columns;
}
