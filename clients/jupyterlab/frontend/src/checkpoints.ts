/**
 * The checkpoints view's logic, apart from React (issue 20): the line each
 * checkpoint gets, which restores it offers, what the confirmation says, how a
 * diff reads line by line, what a restore's reply says, and the cells of a
 * kernel replay's ask. Paths, diffs and code are untrusted (the agent, a tool
 * or a file made them): the view shows them as text only.
 */
import type { CheckpointInfo, CheckpointRestoreResult, ClineMessage, RestoreCheckpointData } from './wire';

export type RestoreMode = NonNullable<RestoreCheckpointData['restore']>;

/** A restore the view offers for one checkpoint. */
export interface RestoreChoice {
  restore: RestoreMode;
  label: string;
}

/** What the user picked in the confirmation. */
export interface RestorePlan {
  checkpoint: CheckpointInfo;
  restore: RestoreMode;
  withKernel: boolean;
}

const MODE_LABELS: Record<RestoreMode, string> = {
  files: 'Files only',
  history: 'History only',
  both: 'Files and history'
};

/** "12:03:04", or the date too when it was not today. */
export function when(ts: number, now: number = Date.now()): string {
  const d = new Date(ts);
  const time = d.toTimeString().slice(0, 8);
  return new Date(now).toDateString() === d.toDateString() ? time : `${d.toISOString().slice(0, 10)} ${time}`;
}

/** "a.py, b.csv (+3 more)", or "no file changed". */
export function changedSummary(cp: CheckpointInfo, shown = 3): string {
  const changed = cp.changed ?? [];
  if (changed.length === 0) {
    return 'no file changed since the one before';
  }
  const more = changed.length > shown ? ` (+${changed.length - shown} more)` : '';
  return changed.slice(0, shown).join(', ') + more;
}

/**
 * The restores a checkpoint allows: its files always; the history (and both)
 * only when a message of the task shows it (the rewind goes back to it).
 */
export function restoreChoices(cp: CheckpointInfo): RestoreChoice[] {
  const modes: RestoreMode[] = cp.messageTs != null ? ['files', 'history', 'both'] : ['files'];
  return modes.map(restore => ({ restore, label: MODE_LABELS[restore] }));
}

/** Whether "with kernel" is offered: the task had run code by this checkpoint. */
export function offersKernel(cp: CheckpointInfo): boolean {
  return (cp.executions ?? 0) > 0;
}

/** The confirmation's text: what the restore will do, and how to undo it. */
export function confirmText(plan: RestorePlan, nested: string[] = []): string[] {
  const cp = plan.checkpoint;
  const lines = [`Restore checkpoint ${cp.number} (${cp.reason}, ${when(cp.ts)})?`];
  if (plan.restore !== 'history') {
    lines.push(
      "The workspace's files go back to how they were then; files made since are removed. " +
        'A checkpoint of the files as they are now is taken first, so that this restore can be undone.'
    );
  }
  if (plan.restore !== 'files') {
    lines.push("The task's history is rewound to this checkpoint's message: later messages are removed.");
  }
  if (plan.withKernel) {
    const n = cp.executions ?? 0;
    lines.push(
      `Then the task's kernel restarts (its variables are lost) and the code it ran up to here ` +
        `(${n} execution${n === 1 ? '' : 's'}) runs again, once you approve the cells.`
    );
  }
  if (nested.length > 0) {
    lines.push(`Left as they are (git repositories of their own, not in checkpoints): ${nested.join(', ')}.`);
  }
  return lines;
}

/** The command's data for `plan`: a replay never holds the request (waitForReplay false). */
export function restoreData(taskId: string, plan: RestorePlan): RestoreCheckpointData {
  const data: RestoreCheckpointData = { taskId, checkpoint: plan.checkpoint.number, restore: plan.restore };
  if (plan.withKernel) {
    data.withKernel = true;
    data.waitForReplay = false;
  }
  return data;
}

/** What a restore's reply says, line by line. */
export function resultLines(result: CheckpointRestoreResult): string[] {
  const lines = [`Restored checkpoint ${result.checkpoint} (${MODE_LABELS[result.restore].toLowerCase()}).`];
  if (result.restore !== 'history') {
    const files = result.files ?? [];
    lines.push(files.length ? `Files changed: ${files.join(', ')}.` : 'No file needed to change.');
  }
  if (result.openNotebooks && result.openNotebooks.length) {
    lines.push(`Restored in the open notebook and saved: ${result.openNotebooks.join(', ')}.`);
  }
  lines.push(...(result.notes ?? []));
  if (result.rewound) {
    lines.push("History rewound to the checkpoint's message.");
  }
  if (result.undoCheckpoint != null) {
    lines.push(`To undo, restore checkpoint ${result.undoCheckpoint}.`);
  }
  if (result.nested && result.nested.length) {
    lines.push(`Left as they are (git repositories of their own): ${result.nested.join(', ')}.`);
  }
  if (result.replayPending) {
    lines.push("The kernel's replay waits for your approval (below, or in the conversation).");
  }
  const replay = result.kernel;
  if (replay) {
    if (!replay.approved) {
      lines.push('The kernel was not replayed (not approved).');
    } else if (replay.failedAt != null) {
      lines.push(`The kernel's replay stopped at execution ${replay.failedAt}: ${replay.error ?? 'an error'}.`);
    } else if (replay.error) {
      lines.push(`The kernel was not replayed: ${replay.error}`);
    } else {
      const names = (replay.variables ?? []).map(v => v.name);
      lines.push(`Kernel replayed; variables: ${names.join(', ') || 'none'}.`);
    }
  }
  return lines;
}

export type DiffLineKind = 'add' | 'del' | 'hunk' | 'cell' | 'meta' | 'context';

/** A line of a file's diff (unified, or a notebook's cell by cell) and its kind. */
export function diffLineKind(line: string): DiffLineKind {
  if (line.startsWith('+++') || line.startsWith('---') || line.startsWith('diff --git') || line.startsWith('index ')) {
    return 'meta';
  }
  if (line.startsWith('+')) {
    return 'add';
  }
  if (line.startsWith('-')) {
    return 'del';
  }
  if (line.startsWith('@@')) {
    return 'hunk';
  }
  if (/^cell \d+/.test(line)) {
    return 'cell';
  }
  return 'context';
}

/** A file's diff as the view shows it: git's own header lines left out. */
export function diffLines(diff: string): { kind: DiffLineKind; text: string }[] {
  return diff
    .replace(/\n$/, '')
    .split('\n')
    .map(text => ({ kind: diffLineKind(text), text }))
    .filter(line => line.kind !== 'meta');
}

/** One cell a replay's ask shows. */
export interface ReplayCell {
  seq: number;
  code: string;
  skip: string | null;
}

/** A kernel replay's ask: the checkpoint and the cells it would run again. */
export interface ReplayAsk {
  ts: number;
  checkpoint: number | null;
  note: string;
  cells: ReplayCell[];
}

/** The replay ask `message` is, or null (any other message, or JSON that is not one). */
export function replayAskOf(message: ClineMessage | null): ReplayAsk | null {
  if (message === null || message.type !== 'ask' || message.ask !== 'tool' || message.isAnswered) {
    return null;
  }
  let data: unknown;
  try {
    data = JSON.parse(message.text ?? '');
  } catch {
    return null;
  }
  if (typeof data !== 'object' || data === null || (data as { tool?: unknown }).tool !== 'replay_kernel') {
    return null;
  }
  const raw = (data as { cells?: unknown }).cells;
  const cells: ReplayCell[] = [];
  for (const cell of Array.isArray(raw) ? raw : []) {
    if (typeof cell === 'object' && cell !== null) {
      const c = cell as { seq?: unknown; code?: unknown; skip?: unknown };
      cells.push({
        seq: typeof c.seq === 'number' ? c.seq : 0,
        code: typeof c.code === 'string' ? c.code : '',
        skip: typeof c.skip === 'string' ? c.skip : null
      });
    }
  }
  const checkpoint = (data as { checkpoint?: unknown }).checkpoint;
  const note = (data as { note?: unknown }).note;
  return {
    ts: message.ts,
    checkpoint: typeof checkpoint === 'number' ? checkpoint : null,
    note: typeof note === 'string' ? note : 'Restart the kernel and run these cells again:',
    cells
  };
}

/** Whether an event should make the view read the task's checkpoints again. */
export function touchesCheckpoints(eventName: string, payload: unknown, taskId: string): boolean {
  return (
    (eventName === 'checkpointSaved' || eventName === 'checkpointRestored') &&
    Array.isArray(payload) &&
    payload[0] === taskId
  );
}
