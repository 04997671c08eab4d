/**
 * What a message shows, read from its wire form (the same concepts as the
 * CLI's clients/history_view.py): tool calls from a tool message's JSON, a
 * cell's code and outputs, images kept as blob references. Pure functions; every
 * string here is untrusted (a model, a tool, a kernel or a file wrote it) and
 * reaches the page only as text or through rendermime as untrusted.
 */
import type { ClineMessage, KernelOutput } from './wire';

/** Messages that are bookkeeping, not history a person reads. */
export const QUIET_SAYS = new Set([
  'api_req_started',
  'api_req_finished',
  'api_req_deleted',
  'api_req_waiting',
  'api_req_retried'
]);

export function jsonObject(text: string | null | undefined): Record<string, unknown> | null {
  if (!text || !text.startsWith('{')) {
    return null;
  }
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value)
      ? (value as Record<string, unknown>)
      : null;
  } catch {
    return null;
  }
}

/** A tool call as a tool message (ask or auto-approved say) describes it. */
export interface ToolCall {
  tool: string;
  path: string | null;
  diff: string | null;
  content: string | null;
  code: string | null;
  command: string | null;
  /** The other arguments, for a compact line. */
  args: Record<string, unknown>;
}

export function toolOf(message: ClineMessage): ToolCall | null {
  const data = jsonObject(message.text);
  if (data === null || typeof data.tool !== 'string') {
    return null;
  }
  const str = (v: unknown): string | null => (typeof v === 'string' ? v : null);
  const args: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(data)) {
    if (!['tool', 'diff', 'content', 'code', 'path', 'command'].includes(k)) {
      args[k] = v;
    }
  }
  return {
    tool: data.tool,
    path: str(data.path),
    diff: str(data.diff),
    content: str(data.content),
    code: str(data.code),
    command: str(data.command),
    args
  };
}

/** The text (JSON) of a `cell_output` message. */
export interface CellView {
  kernelId: string;
  code: string;
  status: string;
  executionId: string | null;
  executionCount: number | null;
  outputs: KernelOutput[];
  omitted: number;
  kernelRestarted: boolean;
}

/** What a tool call gave back (a `tool_result` message), as the CLI's `→` line. */
export interface ToolResultView {
  tool: string;
  /** The result's text, cut to `FOLD_LINES` lines; `more`: lines left folded. */
  head: string;
  more: string;
  isError: boolean;
  /** Notes on what the text does not show: images, characters not kept. */
  notes: string[];
}

/** Lines of a result shown before the rest is folded (as the CLI folds). */
export const FOLD_LINES = 20;

export function toolResultOf(message: ClineMessage): ToolResultView {
  const data = jsonObject(message.text);
  const text = data !== null && typeof data.text === 'string' ? data.text : (message.text ?? '');
  const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);
  const notes: string[] = [];
  if (data !== null && num(data.images) > 0) {
    notes.push(`[${num(data.images)} image(s)]`);
  }
  if (data !== null && num(data.omitted) > 0) {
    notes.push(`[${num(data.omitted).toLocaleString()} characters not kept]`);
  }
  const lines = (text.trim() ? text : '(nothing)').split('\n');
  return {
    tool: data !== null && typeof data.tool === 'string' ? data.tool : '',
    head: lines.slice(0, FOLD_LINES).join('\n'),
    more: lines.slice(FOLD_LINES).join('\n'),
    isError: data !== null && data.isError === true,
    notes
  };
}

export function cellOf(message: ClineMessage): CellView | null {
  const data = jsonObject(message.text);
  if (data === null || typeof data.code !== 'string') {
    return null;
  }
  return {
    kernelId: String(data.kernelId ?? ''),
    code: data.code,
    status: String(data.status ?? 'running'),
    executionId: typeof data.executionId === 'string' ? data.executionId : null,
    executionCount: typeof data.executionCount === 'number' ? data.executionCount : null,
    outputs: Array.isArray(data.outputs) ? (data.outputs as KernelOutput[]) : [],
    omitted: typeof data.omitted === 'number' ? data.omitted : 0,
    kernelRestarted: data.kernelRestarted === true
  };
}

const BLOB = /^hdsp-blob:(?:([\w.+-]+\/[\w.+-]+);)?sha256,([0-9a-f]{64})$/;

/** A blob reference's sha256 and media type, or null for anything else. */
export function blobRef(value: string): { sha256: string; mediaType: string | null } | null {
  const m = BLOB.exec(value.trim());
  return m ? { sha256: m[2], mediaType: m[1] ?? null } : null;
}

/** `src` for an image a message carries: a data URL as it is, a blob through the server. */
export function imageSrc(value: string, blobUrl: (sha256: string) => string): string | null {
  const ref = blobRef(value);
  if (ref !== null) {
    return blobUrl(ref.sha256);
  }
  if (/^data:image\/(png|jpeg|gif|webp);base64,[A-Za-z0-9+/=\s]+$/.test(value)) {
    return value;
  }
  if (/^[A-Za-z0-9+/=\s]+$/.test(value)) {
    return `data:image/png;base64,${value}`;
  }
  return null;
}

/** ANSI colour codes (IPython's tracebacks): rendered as plain text here. */
const SGR = /\x1b\[[0-9;]*m/g;

export function stripAnsi(text: string): string {
  return text.replace(SGR, '');
}

/** A kernel output as a mime bundle for rendermime. */
export function outputBundle(output: KernelOutput): Record<string, unknown> {
  switch (output.outputType) {
    case 'stream':
      return {
        [output.name === 'stderr' ? 'application/vnd.jupyter.stderr' : 'application/vnd.jupyter.stdout']:
          output.text ?? ''
      };
    case 'error': {
      const trace = (output.traceback ?? []).map(stripAnsi).join('\n');
      return { 'application/vnd.jupyter.stderr': trace || `${output.ename}: ${output.evalue}` };
    }
    default:
      return (output.data as Record<string, unknown> | null) ?? {};
  }
}

/** The image of a bundle that is a blob reference rather than base64, if any. */
export function blobImage(bundle: Record<string, unknown>): { sha256: string; mediaType: string } | null {
  for (const [mime, value] of Object.entries(bundle)) {
    if (mime.startsWith('image/') && typeof value === 'string') {
      const ref = blobRef(value);
      if (ref !== null) {
        return { sha256: ref.sha256, mediaType: ref.mediaType ?? mime };
      }
    }
  }
  return null;
}

/** Code as a Markdown fence that its own backticks cannot close. */
export function fence(code: string, language = 'python'): string {
  const runs = code.match(/`+/g) ?? [];
  const longest = runs.reduce((n, r) => Math.max(n, r.length), 0);
  const ticks = '`'.repeat(Math.max(3, longest + 1));
  return `${ticks}${language}\n${code}\n${ticks}`;
}

/** How an answer reads, by Roo's askResponse. */
export function verdict(answer: string | null | undefined): string {
  switch (answer) {
    case 'yesButtonClicked':
      return 'Approved';
    case 'noButtonClicked':
      return 'Denied';
    default:
      return 'Answered';
  }
}

/** Who answered, in words ("by jupyterlab", "no answer in time"). */
export function answeredBy(message: ClineMessage): string {
  const by = message.answeredBy;
  if (!by) {
    return '';
  }
  if (by === 'timeout') {
    return ' (no answer in time)';
  }
  if (by === 'resume') {
    return ' by resuming the task';
  }
  return ` by ${by}`;
}

/** Plain words for a task state. */
export const STATE_WORDS: Record<string, string> = {
  running: 'running',
  interactive: 'waiting for you',
  idle: 'idle',
  resumable: 'stopped (resumable)',
  completed: 'completed',
  aborted: 'aborted',
  paused: 'waiting for the agents it called'
};
