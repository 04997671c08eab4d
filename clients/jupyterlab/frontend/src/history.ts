/**
 * Taking back history (issue 19): which of rewind, edit, fork and delete a
 * message of the open task offers, what each asks before it runs, and what the
 * condense and truncation markers say. Pure: no DOM, no I/O (the commands are
 * PanelModel's; the buttons are HistoryActions.tsx's).
 */
import type { ClineMessage } from './wire';

/** What a message offers. */
export type HistoryAction = 'edit' | 'rewind' | 'fork' | 'delete';

/** The user's own messages: the task's prompt (its first `text`) and `user_feedback`. */
export function isUserMessage(message: ClineMessage, isPrompt: boolean): boolean {
  return message.type === 'say' && (message.say === 'user_feedback' || (isPrompt && message.say === 'text'));
}

/** What a deletion of `message` takes: a user's message, a tool call (with its result), the model's text. */
export type DeletedKind = 'mine' | 'call' | 'text';

/** What deleting `message` would take, or null when the daemon deletes no such message. */
export function deletedKind(message: ClineMessage, isPrompt: boolean): DeletedKind | null {
  if (isPrompt) {
    return null; // the daemon keeps a task's prompt (fork the task instead)
  }
  if (message.type === 'say' && message.say === 'user_feedback') {
    return 'mine';
  }
  if (message.toolUseId) {
    return 'call';
  }
  if (message.type === 'say' && message.say === 'text') {
    return 'text';
  }
  return null;
}

/**
 * The actions `message` offers, in the order the panel shows them. Nothing while
 * it streams (a partial message has no stable place yet), and nothing on the
 * waiting ask (answer it, or Stop). Only a `user_feedback` message can be
 * edited. Delete is offered on what the daemon deletes (DeleteMessage): the
 * user's messages, the model's text, and any message of a tool call (the call
 * goes with its result). Rewinding to a message keeps it and removes what came
 * after.
 */
export function actionsFor(
  message: ClineMessage,
  options: { isPrompt: boolean; waitingAsk: boolean }
): HistoryAction[] {
  if (message.partial || options.waitingAsk) {
    return [];
  }
  const deletable = deletedKind(message, options.isPrompt) !== null;
  if (message.type === 'say' && message.say === 'user_feedback') {
    return ['edit', 'rewind', 'fork', 'delete'];
  }
  return deletable ? ['rewind', 'fork', 'delete'] : ['rewind', 'fork'];
}

/** Whether an action removes messages (then the panel asks first). */
export function isDestructive(action: HistoryAction): boolean {
  return action === 'rewind' || action === 'edit' || action === 'delete';
}

/** The button's label and title. */
export const ACTION_WORDS: Record<HistoryAction, { label: string; title: string }> = {
  edit: {
    label: 'Edit',
    title: 'Edit this message and resend it: what came after it goes, and the task goes on from the new text'
  },
  rewind: {
    label: 'Rewind to here',
    title: 'Keep this message and remove everything after it (a running turn is stopped first)'
  },
  fork: {
    label: 'Fork from here',
    title: 'A new task with this history up to and including this message; this task is not changed'
  },
  delete: {
    label: 'Delete',
    title: 'Delete this message from the history and from what the model is sent (a tool call goes with its result)'
  }
};

/** What the confirmation says before a destructive action runs (`deleted`: what a deletion takes). */
export function confirmation(action: HistoryAction, after: number, deleted: DeletedKind = 'mine'): string {
  const later = after === 1 ? '1 later message' : `${after} later messages`;
  switch (action) {
    case 'rewind':
      return after === 0
        ? 'Nothing comes after this message.'
        : `Remove ${later}? A running turn is stopped first. Kernel variables are not rolled back.`;
    case 'edit':
      return `Resend this message as edited? It and ${later} are replaced. Kernel variables are not rolled back.`;
    case 'delete':
      switch (deleted) {
        case 'call':
          return 'Delete this tool call with its result and all its messages? The model is no longer sent them. What the call did (files, kernel variables) is not undone.';
        case 'text':
          return 'Delete this text of the model’s reply? The model is no longer sent it; the reply’s tool calls stay.';
        default:
          return 'Delete this message? The model is no longer sent it; its answers stay.';
      }
    default:
      return '';
  }
}

/** The before/after of a condense or truncation marker, from its `contextCondense` / `contextTruncation`. */
export interface ContextMarker {
  kind: 'condensed' | 'truncated' | 'condensing' | 'failed';
  before: number | null;
  after: number | null;
  /** How many messages the summary or truncation hid from the model. */
  hidden: number | null;
  summary: string | null;
  /** The error of a failed condense. */
  error: string | null;
}

function numberOf(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function parsed(text: string | null | undefined): Record<string, unknown> | null {
  try {
    const value: unknown = JSON.parse(text ?? '');
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

/** The marker `message` is, or null when it is none. */
export function contextMarkerOf(message: ClineMessage): ContextMarker | null {
  const say = message.say ?? '';
  if (say === 'condense_context_error') {
    return { kind: 'failed', before: null, after: null, hidden: null, summary: null, error: message.text ?? null };
  }
  if (say === 'condense_context') {
    const info = (message.contextCondense as Record<string, unknown> | null | undefined) ?? parsed(message.text);
    if (message.partial || info === null) {
      return { kind: 'condensing', before: null, after: null, hidden: null, summary: null, error: null };
    }
    return {
      kind: 'condensed',
      before: numberOf(info.prevContextTokens),
      after: numberOf(info.newContextTokens),
      hidden: numberOf(info.messagesCondensed),
      summary: typeof info.summary === 'string' ? info.summary : null,
      error: null
    };
  }
  if (say === 'sliding_window_truncation') {
    const info = (message.contextTruncation as Record<string, unknown> | null | undefined) ?? parsed(message.text);
    return {
      kind: 'truncated',
      before: numberOf(info?.prevContextTokens),
      after: numberOf(info?.newContextTokens),
      hidden: numberOf(info?.messagesRemoved),
      summary: null,
      error: null
    };
  }
  return null;
}

/** The marker in words: "Context condensed: 7,900 → 2,100 tokens (12 messages summarised)". */
export function markerText(marker: ContextMarker): string {
  const tokens =
    marker.before !== null && marker.after !== null
      ? `${marker.before.toLocaleString('en-US')} → ${marker.after.toLocaleString('en-US')} tokens`
      : null;
  switch (marker.kind) {
    case 'condensing':
      return 'Condensing the conversation…';
    case 'failed':
      return marker.error || 'Condensing the conversation failed.';
    case 'condensed': {
      const hidden = marker.hidden !== null ? ` (${marker.hidden} messages summarised; the history keeps them)` : '';
      return `Context condensed${tokens ? `: ${tokens}` : ''}${hidden}`;
    }
    case 'truncated': {
      const hidden =
        marker.hidden !== null
          ? ` (${marker.hidden} oldest messages left out of requests; the history keeps them)`
          : ' (the oldest messages were left out of requests; the history keeps them)';
      return `Context truncated${tokens ? `: ${tokens}` : ''}${hidden}`;
    }
  }
}

/** Whether a message sent now steers the running turn or waits in the queue: offered while a turn runs. */
export function canSteer(state: string | null): boolean {
  return state === 'running';
}
