/**
 * The panel's state: a pure reducer (no DOM, no I/O) that turns what the server
 * extension sends (the WebSocket's frames, see CONTRACT.md) and the replies to
 * the panel's commands into what the panel shows.
 *
 * Ordering (protocol/README.md, "Ordering and replay"): a durable event (one
 * with a `seq`) at or below the last `seq` applied is a duplicate (replay and
 * live overlap) and is dropped; a live-only event (a streamed `partial` update,
 * kernel output) carries `prevSeq`, the last durable event of its task before
 * it, and is dropped when the message it updates is already final as of a
 * later durable event or snapshot.
 */
import type {
  ClineMessage,
  HistoryItem,
  KernelOutput,
  ProfileList,
  QueuedMessage,
  StatusResult,
  TaskEvent,
  TaskSnapshot,
  TaskState,
  TokenUsage
} from './wire';

/** The server extension's link to hdspd, or the browser's link to Jupyter. */
export type LinkState = 'connecting' | 'connected' | 'reconnecting' | 'down';

/** One frame of the `hdsp/events` WebSocket (CONTRACT.md). */
export type SocketFrame =
  | { kind: 'event'; event: TaskEvent }
  | { kind: 'connection'; state: 'connected' | 'reconnecting' | 'down'; hint?: string | null };

export interface ConnectionView {
  state: LinkState;
  /** What the banner says, in words. */
  text: string;
  /** How to start hdspd, when it is down. */
  hint: string | null;
  /** Whether the link came back after it was lost ("Reconnected to hdspd"). */
  reconnected: boolean;
}

/** A task in the list: its HistoryItem (with its state). */
export type TaskRow = HistoryItem;

/** A streamed retry countdown (`api_req_retry_delayed`, partial). */
export interface RetryView {
  ts: number;
  problem: string;
  attempt: number | null;
  secondsLeft: number | null;
}

/** A message as the panel keeps it: the wire message and how current it is. */
export interface MessageEntry {
  message: ClineMessage;
  /** The durable seq (or snapshot headSeq) its current version is as of; 0 for live. */
  asOf: number;
}

export interface OpenTask {
  taskId: string;
  /** Whether its snapshot (GetTask) arrived. */
  loaded: boolean;
  state: TaskState | null;
  /** Messages by ts, and their order (ascending ts). */
  messages: Record<number, MessageEntry>;
  order: number[];
  /** The last durable seq applied for this task (events or snapshot). */
  lastSeq: number;
  /** The oldest ask that waits for an answer (the first of `waitingAsks`). */
  pendingAsk: ClineMessage | null;
  /**
   * Every ask that waits, oldest first: the concurrent tool calls of one reply
   * ask together, and each is answered on its own.
   */
  waitingAsks: ClineMessage[];
  queue: QueuedMessage[];
  usage: TokenUsage | null;
  retry: RetryView | null;
  /** The latest `api_req_waiting` text while a model request waits. */
  waiting: string | null;
  /** Live kernel outputs by executionId (all of them, uncut). */
  outputs: Record<string, KernelOutput[]>;
}

export interface ViewState {
  connection: ConnectionView;
  /** The last durable seq seen on the socket: where a reconnect resumes (`since`). */
  lastSeq: number;
  /** Tasks, newest first. */
  tasks: TaskRow[];
  /** Per task: the seq of the last durable event that changed its row. */
  rowSeq: Record<string, number>;
  open: OpenTask | null;
  /**
   * The asks that wait in every task, by task, oldest first (as events and
   * snapshots told): the open task's tree shows its agents' asks.
   */
  asks: Record<string, ClineMessage[]>;
  profiles: ProfileList | null;
  status: StatusResult | null;
  /** An error in plain words (a failed command, a broken link). */
  error: string | null;
}

export type Action =
  | { type: 'frame'; frame: SocketFrame }
  | { type: 'socket'; state: 'open' | 'closed' }
  | { type: 'status'; daemon: 'running' | 'down'; hint: string | null; status: StatusResult | null }
  /** A ListTasks reply; `asOf`: the last seq applied when it was asked for. */
  | { type: 'tasks'; tasks: HistoryItem[]; asOf?: number }
  | { type: 'open'; taskId: string | null }
  | { type: 'snapshot'; snapshot: TaskSnapshot }
  | { type: 'profiles'; profiles: ProfileList }
  | { type: 'error'; message: string | null };

export const DOWN_TEXT = 'hdspd is not running';

export function initialState(): ViewState {
  return {
    connection: { state: 'connecting', text: 'Connecting to hdspd…', hint: null, reconnected: false },
    lastSeq: 0,
    tasks: [],
    rowSeq: {},
    open: null,
    asks: {},
    profiles: null,
    status: null,
    error: null
  };
}

export function emptyTask(taskId: string): OpenTask {
  return {
    taskId,
    loaded: false,
    state: null,
    messages: {},
    order: [],
    lastSeq: 0,
    pendingAsk: null,
    waitingAsks: [],
    queue: [],
    usage: null,
    retry: null,
    waiting: null,
    outputs: {}
  };
}

// ---- connection --------------------------------------------------------------

function connectionView(
  previous: ConnectionView,
  state: 'connected' | 'reconnecting' | 'down',
  hint: string | null
): ConnectionView {
  if (state === 'connected') {
    const wasLost = previous.state === 'reconnecting' || previous.state === 'down';
    return {
      state,
      text: wasLost || previous.reconnected ? 'Reconnected to hdspd' : 'Connected to hdspd',
      hint: null,
      reconnected: wasLost || previous.reconnected
    };
  }
  if (state === 'down') {
    return { state, text: hint ?? `${DOWN_TEXT}: start it with \`hdspd\``, hint, reconnected: false };
  }
  return {
    state,
    text: hint ?? 'Lost the link to hdspd; reconnecting…',
    hint,
    reconnected: false
  };
}

// ---- task list ---------------------------------------------------------------

/** The state a task event puts its task in (null: the event says nothing of it). */
const EVENT_STATES: Record<string, TaskState> = {
  taskCreated: 'running',
  taskStarted: 'running',
  taskActive: 'running',
  taskInteractive: 'interactive',
  taskIdle: 'idle',
  taskResumable: 'resumable',
  taskCompleted: 'completed',
  taskAborted: 'aborted',
  taskPaused: 'paused',
  taskUnpaused: 'running'
};

function sortTasks(tasks: TaskRow[]): TaskRow[] {
  return [...tasks].sort((a, b) => b.ts - a.ts || b.number - a.number);
}

function updateRow(tasks: TaskRow[], taskId: string, change: Partial<TaskRow>, now: number): TaskRow[] {
  const i = tasks.findIndex(t => t.id === taskId);
  if (i < 0) {
    // A task this list has not seen (created by another client): a row until
    // the next ListTasks brings its HistoryItem.
    const row: TaskRow = {
      id: taskId,
      number: 0,
      ts: now,
      task: '',
      tokensIn: 0,
      tokensOut: 0,
      totalCost: 0,
      ...change
    };
    return sortTasks([row, ...tasks]);
  }
  const next = [...tasks];
  next[i] = { ...next[i], ...change };
  return next;
}

/** The tasks whose prompt, id, number, workspace or profile contain `query`. */
export function filterTasks(tasks: TaskRow[], query: string): TaskRow[] {
  const q = query.trim().toLowerCase();
  if (!q) {
    return tasks;
  }
  return tasks.filter(t =>
    [t.task, t.id, `#${t.number}`, t.workspace ?? '', t.apiConfigName ?? '', t.state ?? '']
      .join('\n')
      .toLowerCase()
      .includes(q)
  );
}

/** A row of the task list as a tree shows it: how deep below its root it is. */
export interface TreeRow {
  row: TaskRow;
  depth: number;
}

/**
 * `tasks` as a tree (agents calling agents): each task with the tasks it
 * called right below it, oldest call first, one level deeper; a task whose
 * caller is not among `tasks` is a root, and the roots keep their order.
 */
export function taskTree(tasks: TaskRow[]): TreeRow[] {
  const ids = new Set(tasks.map(t => t.id));
  const children = new Map<string, TaskRow[]>();
  for (const t of tasks) {
    const parent = t.parentTaskId;
    if (parent && parent !== t.id && ids.has(parent)) {
      children.set(parent, [...(children.get(parent) ?? []), t]);
    }
  }
  const out: TreeRow[] = [];
  const seen = new Set<string>();
  const walk = (row: TaskRow, depth: number) => {
    if (seen.has(row.id)) {
      return; // a cycle in broken data: each task once
    }
    seen.add(row.id);
    out.push({ row, depth });
    const kids = [...(children.get(row.id) ?? [])].sort((a, b) => a.number - b.number || a.ts - b.ts);
    kids.forEach(k => walk(k, depth + 1));
  };
  tasks.filter(t => !(t.parentTaskId && t.parentTaskId !== t.id && ids.has(t.parentTaskId))).forEach(t => walk(t, 0));
  tasks.forEach(t => walk(t, 0)); // left over: only a cycle
  return out;
}

/** The tasks below `taskId` (its agents' tasks, theirs, ...), each with its depth from it. */
export function descendants(tasks: TaskRow[], taskId: string): TreeRow[] {
  const tree = taskTree(tasks);
  const at = tree.findIndex(r => r.row.id === taskId);
  if (at < 0) {
    return [];
  }
  const base = tree[at].depth;
  const out: TreeRow[] = [];
  for (let i = at + 1; i < tree.length && tree[i].depth > base; i++) {
    out.push({ row: tree[i].row, depth: tree[i].depth - base });
  }
  return out;
}

// ---- messages ----------------------------------------------------------------

function insertOrder(order: number[], ts: number): number[] {
  if (order.length === 0 || order[order.length - 1] < ts) {
    return [...order, ts];
  }
  if (order.includes(ts)) {
    return order;
  }
  return [...order, ts].sort((a, b) => a - b);
}

const RETRY_LINE = /Retry (\d+) in (\d+) s\.?$/;

function retryOf(message: ClineMessage): RetryView | null {
  if (message.say !== 'api_req_retry_delayed' || !message.partial) {
    return null;
  }
  const text = message.text ?? '';
  const cut = text.lastIndexOf('\n');
  const problem = cut >= 0 ? text.slice(0, cut) : text;
  const last = cut >= 0 ? text.slice(cut + 1) : '';
  const m = RETRY_LINE.exec(last);
  return {
    ts: message.ts,
    problem,
    attempt: m ? Number(m[1]) : null,
    secondsLeft: m ? Number(m[2]) : null
  };
}

/** Whether `message` is an ask that waits for an answer. */
export function isWaitingAsk(message: ClineMessage): boolean {
  return (
    message.type === 'ask' &&
    !message.partial &&
    !message.isAnswered &&
    message.ask !== 'command_output'
  );
}

/** `asks` with `message` in its place if it is a waiting ask, else without its ts. */
function withAsk(asks: ClineMessage[], message: ClineMessage): ClineMessage[] {
  const others = asks.filter(a => a.ts !== message.ts);
  if (!isWaitingAsk(message)) {
    return others.length === asks.length ? asks : others; // answered, or no longer an ask
  }
  return [...others, message].sort((a, b) => a.ts - b.ts);
}

/**
 * The asks of a snapshot that wait: its pending ask (the oldest) and the asks
 * after it still unanswered (concurrent calls ask together). An older
 * unanswered ask is a stopped turn's, which waits for nothing.
 */
export function snapshotAsks(snap: TaskSnapshot): ClineMessage[] {
  const oldest = snap.pendingAsk ?? null;
  if (oldest === null) {
    return [];
  }
  const later = snap.messages.filter(m => m.ts > oldest.ts && isWaitingAsk(m));
  return [oldest, ...later];
}

function applyMessage(task: OpenTask, message: ClineMessage, asOf: number): OpenTask {
  const messages = { ...task.messages, [message.ts]: { message, asOf } };
  const order = insertOrder(task.order, message.ts);
  const waitingAsks = withAsk(task.waitingAsks, message);
  const pendingAsk = waitingAsks[0] ?? null;
  let retry = task.retry;
  if (message.say === 'api_req_retry_delayed') {
    retry = retryOf(message);
  } else if (message.say === 'api_req_retried' || (message.say === 'text' && retry !== null)) {
    retry = null;
  }
  let waiting = task.waiting;
  if (message.say === 'api_req_waiting') {
    waiting = message.partial ? (message.text ?? '') : null;
  }
  return { ...task, messages, order, pendingAsk, waitingAsks, retry, waiting };
}

/** The open task's messages in order. */
export function messagesOf(task: OpenTask): ClineMessage[] {
  return task.order.map(ts => task.messages[ts].message);
}

// ---- kernel output -----------------------------------------------------------

/**
 * `outputs` with `more` appended as a notebook shows them: consecutive stream
 * text of one name joins up, `clear_output` clears (at once, or before the next
 * output when `wait`), and `update_display_data` replaces its display.
 */
export function appendOutputs(outputs: KernelOutput[], more: KernelOutput[]): KernelOutput[] {
  let out = [...outputs];
  let clearPending = false;
  for (const o of more) {
    if (o.outputType === 'clear_output') {
      if (o.wait) {
        clearPending = true;
      } else {
        out = [];
      }
      continue;
    }
    if (clearPending) {
      out = [];
      clearPending = false;
    }
    if (o.outputType === 'update_display_data') {
      if (o.displayId) {
        out = out.map(prev =>
          prev.displayId === o.displayId ? { ...prev, data: o.data, metadata: o.metadata } : prev
        );
      }
      continue;
    }
    const last = out[out.length - 1];
    if (o.outputType === 'stream' && last && last.outputType === 'stream' && last.name === o.name) {
      out[out.length - 1] = { ...last, text: (last.text ?? '') + (o.text ?? '') };
      continue;
    }
    out.push(o);
  }
  return out;
}

// ---- events ------------------------------------------------------------------

function payloadTaskId(event: TaskEvent): string | null {
  const data = event.data;
  if (data.eventName === 'message') {
    return data.payload[0].taskId;
  }
  if (data.eventName === 'executionOutput') {
    return data.payload[0].taskId ?? null;
  }
  const first = (data.payload as unknown[])[0];
  if (data.eventName.startsWith('task') || data.eventName === 'queuedMessagesUpdated') {
    return typeof first === 'string' ? first : null;
  }
  return null;
}

function isUsage(value: unknown): value is TokenUsage {
  return value !== null && typeof value === 'object' && typeof (value as TokenUsage).totalTokensIn === 'number';
}

function usageChange(usage: TokenUsage): Partial<TaskRow> {
  return {
    tokensIn: usage.totalTokensIn,
    tokensOut: usage.totalTokensOut,
    totalCost: usage.totalCost,
    cacheReads: usage.totalCacheReads ?? null,
    cacheWrites: usage.totalCacheWrites ?? null
  };
}

function applyEvent(state: ViewState, event: TaskEvent, now: number): ViewState {
  const seq = event.seq ?? null;
  if (seq !== null && seq <= state.lastSeq) {
    return state; // a durable event applied already (replay and live overlap)
  }
  const next: ViewState = seq !== null ? { ...state, lastSeq: seq } : state;
  const taskId = payloadTaskId(event);
  if (taskId === null) {
    return next;
  }
  const data = event.data;
  let tasks = next.tasks;
  const eventState = EVENT_STATES[data.eventName];
  if (eventState !== undefined) {
    tasks = updateRow(tasks, taskId, { state: eventState }, now);
  }
  if (
    (data.eventName === 'taskTokenUsageUpdated' || data.eventName === 'taskCompleted') &&
    isUsage(data.payload[1])
  ) {
    tasks = updateRow(tasks, taskId, usageChange(data.payload[1]), now);
  }
  if (data.eventName === 'taskTodoListUpdated' && Array.isArray(data.payload[1])) {
    tasks = updateRow(tasks, taskId, { todos: data.payload[1] }, now);
  }
  if (data.eventName === 'taskModeSwitched' && typeof data.payload[1] === 'string') {
    tasks = updateRow(tasks, taskId, { mode: data.payload[1] }, now);
  }
  if (data.eventName === 'message') {
    const { message } = data.payload[0];
    const row = tasks.find(t => t.id === taskId);
    if (row !== undefined && !row.task && message.type === 'say' && message.say === 'text') {
      tasks = updateRow(tasks, taskId, { task: message.text ?? '' }, now);
    }
  }
  // Agents calling agents: the caller's events tie the tree together (and
  // change the child's row too).
  const child = (data.payload as unknown[])[1];
  const beforeTree = tasks;
  if ((data.eventName === 'taskSpawned' || data.eventName === 'taskDelegated') && typeof child === 'string') {
    const parentRow = tasks.find(t => t.id === taskId);
    const root = parentRow?.rootTaskId ?? taskId;
    if (!(parentRow?.childIds ?? []).includes(child)) {
      tasks = updateRow(tasks, taskId, { childIds: [...(parentRow?.childIds ?? []), child] }, now);
    }
    const childRow = tasks.find(t => t.id === child);
    if (childRow?.parentTaskId !== taskId) {
      tasks = updateRow(tasks, child, { parentTaskId: taskId, rootTaskId: root }, now);
    }
  }
  if (data.eventName === 'taskDelegationCompleted' && typeof child === 'string') {
    const returned = (data.payload as unknown[])[2];
    tasks = updateRow(tasks, child, { result: typeof returned === 'string' ? returned : null }, now);
  }
  let asks = next.asks;
  if (data.eventName === 'message' && data.payload[0].message.type === 'ask') {
    const mine = asks[taskId] ?? [];
    const changed = withAsk(mine, data.payload[0].message);
    if (changed !== mine) {
      asks = { ...asks, [taskId]: changed };
    }
  } else if ((data.eventName === 'taskAborted' || data.eventName === 'taskCompleted') && asks[taskId] !== undefined) {
    asks = { ...asks };
    delete asks[taskId]; // a task that ended waits for nothing
  }
  const withAsks = asks === next.asks ? next : { ...next, asks };
  const rowSeq =
    seq === null
      ? next.rowSeq
      : { ...next.rowSeq, [taskId]: seq, ...(tasks !== beforeTree && typeof child === 'string' ? { [child]: seq } : {}) };
  const withTasks = tasks === next.tasks ? withAsks : { ...withAsks, tasks, rowSeq };
  const open = withTasks.open;
  if (open === null || open.taskId !== taskId) {
    return withTasks;
  }
  const applied = applyToTask(open, event);
  return applied === open ? withTasks : { ...withTasks, open: applied };
}

function applyToTask(task: OpenTask, event: TaskEvent): OpenTask {
  const seq = event.seq ?? null;
  if (seq !== null && seq <= task.lastSeq) {
    return task; // the snapshot includes it
  }
  let t: OpenTask = seq !== null ? { ...task, lastSeq: seq } : task;
  const data = event.data;
  const eventState = EVENT_STATES[data.eventName];
  if (eventState !== undefined) {
    t = { ...t, state: eventState };
  }
  switch (data.eventName) {
    case 'message': {
      const { message } = data.payload[0];
      if (seq === null) {
        const current = t.messages[message.ts];
        const prevSeq = event.prevSeq ?? 0;
        if (current !== undefined && !current.message.partial && current.asOf > prevSeq) {
          return t; // a stale streamed update of a message already final
        }
        return applyMessage(t, message, 0);
      }
      return applyMessage(t, message, seq);
    }
    case 'taskAskResponded':
      // The answered ask's own update (which comes first) took it off the
      // waiting asks; the others still wait.
      return t;
    case 'taskActive':
    case 'taskStarted':
    case 'taskAborted':
    case 'taskCompleted':
      return {
        ...t,
        pendingAsk: data.eventName === 'taskActive' || data.eventName === 'taskStarted' ? t.pendingAsk : null,
        waitingAsks: data.eventName === 'taskActive' || data.eventName === 'taskStarted' ? t.waitingAsks : [],
        retry: data.eventName === 'taskAborted' || data.eventName === 'taskCompleted' ? null : t.retry,
        usage: data.eventName === 'taskCompleted' && isUsage(data.payload[1]) ? data.payload[1] : t.usage
      };
    case 'taskRewound': {
      // Every message from ts on is gone (a rewind, or an edit resent from there).
      const from = data.payload[1];
      return typeof from === 'number' ? withoutMessages(t, ts => ts >= from) : t;
    }
    case 'taskMessagesDeleted': {
      const gone = data.payload[1];
      return Array.isArray(gone) ? withoutMessages(t, ts => gone.includes(ts)) : t;
    }
    case 'queuedMessagesUpdated':
      return Array.isArray(data.payload[1]) ? { ...t, queue: data.payload[1] } : t;
    case 'taskTokenUsageUpdated':
      return isUsage(data.payload[1]) ? { ...t, usage: data.payload[1] } : t;
    case 'executionOutput': {
      const { executionId, outputs } = data.payload[0];
      const before = t.outputs[executionId] ?? [];
      return { ...t, outputs: { ...t.outputs, [executionId]: appendOutputs(before, outputs ?? []) } };
    }
    default:
      return t;
  }
}

/** The task without the messages whose ts `gone` picks (a waiting ask among them goes too). */
function withoutMessages(task: OpenTask, gone: (ts: number) => boolean): OpenTask {
  const messages: Record<number, MessageEntry> = {};
  for (const [key, entry] of Object.entries(task.messages)) {
    if (!gone(Number(key))) {
      messages[Number(key)] = entry;
    }
  }
  const order = task.order.filter(ts => !gone(ts));
  const waitingAsks = task.waitingAsks.filter(a => !gone(a.ts));
  return { ...task, messages, order, waitingAsks, pendingAsk: waitingAsks[0] ?? null };
}

function applySnapshot(state: ViewState, snap: TaskSnapshot): ViewState {
  const taskId = snap.item.id;
  const previous = state.open;
  if (state.lastSeq <= snap.headSeq) {
    // The asks it waits on (unless events were newer: they told already).
    state = { ...state, asks: { ...state.asks, [taskId]: snapshotAsks(snap) } };
  }
  if (previous === null || previous.taskId !== taskId) {
    // A snapshot of a task no longer open: its row, unless events were newer.
    const tasks = state.lastSeq > snap.headSeq ? state.tasks : updateRow(state.tasks, taskId, { ...snap.item, state: snap.state }, snap.item.ts);
    return { ...state, tasks };
  }
  let task: OpenTask = {
    ...emptyTask(taskId),
    loaded: true,
    state: snap.state,
    lastSeq: Math.max(snap.headSeq, previous.lastSeq),
    queue: snap.queue ?? [],
    outputs: previous.outputs,
    usage: {
      totalTokensIn: snap.item.tokensIn ?? 0,
      totalTokensOut: snap.item.tokensOut ?? 0,
      totalCost: snap.item.totalCost ?? 0,
      contextTokens: 0,
      totalCacheReads: snap.item.cacheReads ?? null,
      totalCacheWrites: snap.item.cacheWrites ?? null
    }
  };
  for (const m of snap.messages) {
    task = applyMessage(task, m, snap.headSeq);
  }
  // The asks that wait are the snapshot's, not every unanswered ask of the
  // history (a stopped turn leaves its ask unanswered, and nothing waits on it).
  const asked = snapshotAsks(snap);
  task = { ...task, waitingAsks: asked, pendingAsk: asked[0] ?? null };
  // Events applied while the snapshot was on its way are newer than it.
  for (const ts of previous.order) {
    const entry = previous.messages[ts];
    if (entry.asOf > snap.headSeq || (entry.asOf === 0 && entry.message.partial)) {
      const kept = task.messages[ts];
      if (kept === undefined || kept.message.partial || entry.asOf > snap.headSeq) {
        task = applyMessage(task, entry.message, entry.asOf);
      }
    }
  }
  if (previous.lastSeq > snap.headSeq) {
    task = { ...task, state: previous.state ?? task.state, queue: previous.queue };
    if (task.state === 'aborted' || task.state === 'completed') {
      task = { ...task, waitingAsks: [], pendingAsk: null }; // it ended since
    }
  }
  const newer = previous.lastSeq > snap.headSeq;
  const tasks = updateRow(
    state.tasks,
    taskId,
    newer ? { ...snap.item, state: task.state, ...usageChange(previous.usage ?? task.usage!) } : { ...snap.item, state: snap.state },
    snap.item.ts
  );
  if (newer && previous.usage !== null) {
    task = { ...task, usage: previous.usage };
  }
  return { ...state, tasks, open: task };
}

/** The reducer. `now` (ms) dates rows of tasks first seen through an event. */
export function reduce(state: ViewState, action: Action, now: number = Date.now()): ViewState {
  switch (action.type) {
    case 'frame': {
      const frame = action.frame;
      if (frame.kind === 'connection') {
        return {
          ...state,
          connection: connectionView(state.connection, frame.state, frame.hint ?? null)
        };
      }
      if (frame.kind === 'event') {
        try {
          return applyEvent(state, frame.event, now);
        } catch (error) {
          // An event this panel cannot read (a newer daemon, a broken frame):
          // skip it, as the protocol says of unknown events, and say so.
          console.warn('hdsp: an event the panel cannot read was skipped', frame.event, error);
          return state;
        }
      }
      return state;
    }
    case 'socket':
      if (action.state === 'closed') {
        return {
          ...state,
          connection: {
            state: 'reconnecting',
            text: 'Lost the link to the Jupyter server; reconnecting…',
            hint: null,
            reconnected: false
          }
        };
      }
      return state;
    case 'status': {
      if (action.daemon === 'down') {
        return {
          ...state,
          status: null,
          connection: connectionView(state.connection, 'down', action.hint)
        };
      }
      // The first status says where the log stands: the socket resumes from there.
      const lastSeq = state.lastSeq === 0 && action.status ? action.status.headSeq : state.lastSeq;
      // A running daemon means the link is up, whether or not a connection
      // frame said so yet (a fresh socket, a reload).
      const connection =
        state.connection.state === 'connected'
          ? state.connection
          : connectionView(state.connection, 'connected', null);
      return { ...state, status: action.status, lastSeq, connection };
    }
    case 'tasks': {
      // The list as the daemon has it, plus rows only events told of so far;
      // a row that events changed after the list was asked for keeps their word.
      const asOf = action.asOf ?? 0;
      const byId = new Map(state.tasks.map(t => [t.id, t]));
      const listed = new Set(action.tasks.map(t => t.id));
      const rows = action.tasks.map(t => {
        const mine = byId.get(t.id);
        if (mine === undefined || (state.rowSeq[t.id] ?? 0) <= asOf) {
          return t;
        }
        return {
          ...t,
          state: mine.state,
          tokensIn: mine.tokensIn,
          tokensOut: mine.tokensOut,
          totalCost: mine.totalCost,
          task: t.task || mine.task,
          // The tree's links and an agent's return, as the caller's events told.
          parentTaskId: t.parentTaskId ?? mine.parentTaskId,
          rootTaskId: t.rootTaskId ?? mine.rootTaskId,
          childIds: (mine.childIds?.length ?? 0) > (t.childIds?.length ?? 0) ? mine.childIds : t.childIds,
          result: t.result ?? mine.result
        };
      });
      const extra = state.tasks.filter(t => !listed.has(t.id));
      return { ...state, tasks: sortTasks([...rows, ...extra]) };
    }
    case 'open':
      if (action.taskId === null) {
        return { ...state, open: null };
      }
      if (state.open !== null && state.open.taskId === action.taskId) {
        return state;
      }
      return { ...state, open: emptyTask(action.taskId) };
    case 'snapshot':
      return applySnapshot(state, action.snapshot);
    case 'profiles':
      return { ...state, profiles: action.profiles };
    case 'error':
      return { ...state, error: action.message };
    default:
      return state;
  }
}
