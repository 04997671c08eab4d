/**
 * The reducer, event by event: ordering rules, asks answered here or elsewhere,
 * the queue, usage, retry countdowns, kernel output, the task list and the
 * connection banner.
 */
import {
  Action,
  appendOutputs,
  descendants,
  filterTasks,
  initialState,
  messagesOf,
  reduce,
  SocketFrame,
  taskTree,
  ViewState
} from '../src/state';
import type { ClineMessage, HistoryItem, KernelOutput, TaskEvent, TaskSnapshot } from '../src/wire';

const T = 'd04f41f6-13ed-4460-b378-e1fb53cb89ae';
const OTHER = '11111111-2222-3333-4444-555555555555';

function ev(data: TaskEvent['data'], seq?: number, prevSeq?: number): SocketFrame {
  const event: TaskEvent = { type: 'TaskEvent', origin: 'server', data } as TaskEvent;
  if (seq !== undefined) {
    event.seq = seq;
  }
  if (prevSeq !== undefined) {
    event.prevSeq = prevSeq;
  }
  return { kind: 'event', event };
}

function msg(message: ClineMessage, action: 'created' | 'updated', seq?: number, prevSeq?: number, taskId = T): SocketFrame {
  return ev({ eventName: 'message', payload: [{ taskId, action, message }] }, seq, prevSeq);
}

function simple(eventName: string, seq?: number, taskId = T): SocketFrame {
  return ev({ eventName, payload: [taskId] } as TaskEvent['data'], seq);
}

function run(state: ViewState, ...items: (SocketFrame | Action)[]): ViewState {
  return items.reduce(
    (s, item) => reduce(s, 'kind' in item ? { type: 'frame', frame: item } : item, 1000),
    state
  );
}

function openState(): ViewState {
  return run(initialState(), { type: 'open', taskId: T });
}

const row = (id: string, ts: number, n: number, extra: Partial<HistoryItem> = {}): HistoryItem => ({
  id,
  number: n,
  ts,
  task: `task ${n}`,
  tokensIn: 0,
  tokensOut: 0,
  totalCost: 0,
  ...extra
});

describe('messages keyed by ts', () => {
  it('a streamed update replaces the message with the same ts', () => {
    const s = run(
      openState(),
      msg({ ts: 10, type: 'say', say: 'text', text: 'He', partial: true }, 'created', 1, 0),
      msg({ ts: 10, type: 'say', say: 'text', text: 'Hello', partial: true }, 'updated', undefined, 1),
      msg({ ts: 10, type: 'say', say: 'text', text: 'Hello there', partial: false }, 'updated', 2, 1)
    );
    expect(messagesOf(s.open!)).toEqual([{ ts: 10, type: 'say', say: 'text', text: 'Hello there', partial: false }]);
  });

  it('keeps messages in ts order whatever order they come in', () => {
    const s = run(
      openState(),
      msg({ ts: 30, type: 'say', say: 'text', text: 'c' }, 'created', 3),
      msg({ ts: 10, type: 'say', say: 'text', text: 'a' }, 'created', 4),
      msg({ ts: 20, type: 'say', say: 'text', text: 'b' }, 'created', 5)
    );
    expect(messagesOf(s.open!).map(m => m.text)).toEqual(['a', 'b', 'c']);
  });

  it('ignores a durable event at or below the last seq seen', () => {
    const s = run(
      openState(),
      msg({ ts: 10, type: 'say', say: 'text', text: 'final' }, 'updated', 5),
      msg({ ts: 10, type: 'say', say: 'text', text: 'older' }, 'updated', 4),
      msg({ ts: 10, type: 'say', say: 'text', text: 'same' }, 'updated', 5)
    );
    expect(messagesOf(s.open!)[0].text).toBe('final');
    expect(s.lastSeq).toBe(5);
  });

  it('drops a stale streamed update of a message already final', () => {
    const s = run(
      openState(),
      msg({ ts: 10, type: 'say', say: 'text', text: 'the whole text', partial: false }, 'updated', 7, 3),
      // published before seq 7 (its prevSeq is 3), delivered late
      msg({ ts: 10, type: 'say', say: 'text', text: 'the who', partial: true }, 'updated', undefined, 3)
    );
    expect(messagesOf(s.open!)[0]).toMatchObject({ text: 'the whole text', partial: false });
  });

  it('takes a retried partial that replaces a final message published later', () => {
    const s = run(
      openState(),
      msg({ ts: 10, type: 'say', say: 'text', text: 'first try', partial: false }, 'updated', 7, 3),
      msg({ ts: 10, type: 'say', say: 'text', text: 'second', partial: true }, 'updated', undefined, 7)
    );
    expect(messagesOf(s.open!)[0]).toMatchObject({ text: 'second', partial: true });
  });

  it('does not apply events of a task that is not open, but updates its row', () => {
    const s = run(
      openState(),
      simple('taskCreated', 1, OTHER),
      msg({ ts: 5, type: 'say', say: 'text', text: 'other prompt' }, 'created', 2, 1, OTHER)
    );
    expect(s.open!.order).toEqual([]);
    expect(s.tasks.find(t => t.id === OTHER)).toMatchObject({ state: 'running', task: 'other prompt' });
  });
});

describe('taking messages back', () => {
  it('a rewind drops every message from its ts on', () => {
    const s = run(
      openState(),
      msg({ ts: 10, type: 'say', say: 'text', text: 'a' }, 'created', 1),
      msg({ ts: 20, type: 'say', say: 'user_feedback', text: 'b' }, 'created', 2),
      msg({ ts: 30, type: 'ask', ask: 'tool', text: 'c' }, 'created', 3),
      ev({ eventName: 'taskRewound', payload: [T, 20] } as TaskEvent['data'], 4)
    );
    expect(messagesOf(s.open!).map(m => m.text)).toEqual(['a']);
    expect(s.open!.pendingAsk).toBeNull();
  });

  it('a deletion drops only the messages it names', () => {
    const s = run(
      openState(),
      msg({ ts: 10, type: 'say', say: 'text', text: 'a' }, 'created', 1),
      msg({ ts: 20, type: 'say', say: 'user_feedback', text: 'b' }, 'created', 2),
      msg({ ts: 30, type: 'say', say: 'text', text: 'c' }, 'created', 3),
      ev({ eventName: 'taskMessagesDeleted', payload: [T, [20]] } as TaskEvent['data'], 4)
    );
    expect(messagesOf(s.open!).map(m => m.text)).toEqual(['a', 'c']);
  });
});

describe('snapshots', () => {
  const snapshot = (messages: ClineMessage[], headSeq: number, extra: Partial<TaskSnapshot> = {}): TaskSnapshot => ({
    item: row(T, 100, 1, { state: 'running' }),
    state: 'running',
    messages,
    headSeq,
    ...extra
  });

  it('events after the snapshot apply; those it includes do not', () => {
    const s = run(
      openState(),
      { type: 'snapshot', snapshot: snapshot([{ ts: 10, type: 'say', say: 'text', text: 'v2' }], 8) },
      msg({ ts: 10, type: 'say', say: 'text', text: 'v1' }, 'updated', 6),
      msg({ ts: 11, type: 'say', say: 'text', text: 'next' }, 'created', 9)
    );
    expect(messagesOf(s.open!).map(m => m.text)).toEqual(['v2', 'next']);
  });

  it('a snapshot older than events already applied keeps the newer messages', () => {
    const s = run(
      openState(),
      msg({ ts: 10, type: 'say', say: 'text', text: 'newer' }, 'updated', 12),
      { type: 'snapshot', snapshot: snapshot([{ ts: 10, type: 'say', say: 'text', text: 'older' }], 8) }
    );
    expect(messagesOf(s.open!)[0].text).toBe('newer');
  });

  it('a snapshot older than the events applied leaves the row and the state as the events left them', () => {
    const s = run(
      openState(),
      simple('taskCreated', 9),
      simple('taskInteractive', 10),
      { type: 'snapshot', snapshot: snapshot([], 8) }
    );
    expect(s.open!.state).toBe('interactive');
    expect(s.tasks.find(t => t.id === T)?.state).toBe('interactive');
  });

  it('a snapshot of a task no longer open changes only its row', () => {
    let s = run(openState(), { type: 'open', taskId: OTHER });
    s = run(s, { type: 'snapshot', snapshot: snapshot([{ ts: 10, type: 'say', say: 'text', text: 'x' }], 8) });
    expect(s.open!.taskId).toBe(OTHER);
    expect(s.open!.order).toEqual([]);
    expect(s.tasks.find(t => t.id === T)?.state).toBe('running');
  });

  it("takes every waiting ask from the snapshot, not a stopped turn's unanswered one", () => {
    const stale: ClineMessage = { ts: 10, type: 'ask', ask: 'tool', text: '{"tool": "read_file"}' };
    const a: ClineMessage = { ts: 20, type: 'ask', ask: 'tool', text: '{"tool": "write_to_file"}' };
    const b: ClineMessage = { ts: 21, type: 'ask', ask: 'tool', text: '{"tool": "write_to_file"}' };
    let s = run(openState(), { type: 'snapshot', snapshot: snapshot([stale, a, b], 8, { state: 'interactive', pendingAsk: a }) });
    expect(s.open!.waitingAsks.map(m => m.ts)).toEqual([20, 21]);
    expect(s.asks[T].map(m => m.ts)).toEqual([20, 21]);
    s = run(openState(), { type: 'snapshot', snapshot: snapshot([stale], 8, { state: 'idle' }) });
    expect(s.open!.waitingAsks).toEqual([]);
    expect(s.open!.pendingAsk).toBe(null);
  });

  it('takes the pending ask and the queue from the snapshot', () => {
    const ask: ClineMessage = { ts: 20, type: 'ask', ask: 'tool', text: '{"tool": "write_to_file"}' };
    const s = run(openState(), {
      type: 'snapshot',
      snapshot: snapshot([ask], 8, {
        state: 'interactive',
        pendingAsk: ask,
        queue: [{ id: 'q1', text: 'later', timestamp: 5 }]
      })
    });
    expect(s.open!.pendingAsk).toEqual(ask);
    expect(s.open!.queue.map(q => q.id)).toEqual(['q1']);
    expect(s.open!.state).toBe('interactive');
    expect(s.open!.loaded).toBe(true);
  });
});

describe('asks', () => {
  const ask: ClineMessage = { ts: 20, type: 'ask', ask: 'tool', text: '{"tool": "write_to_file", "path": "a"}' };

  it('an ask waits until it is answered, and then says who answered', () => {
    let s = run(openState(), msg(ask, 'created', 1), simple('taskInteractive', 2));
    expect(s.open!.pendingAsk?.ts).toBe(20);
    expect(s.open!.state).toBe('interactive');
    s = run(
      s,
      msg({ ...ask, isAnswered: true, answer: 'noButtonClicked', answeredBy: 'cli' }, 'updated', 3),
      simple('taskAskResponded', 4)
    );
    expect(s.open!.pendingAsk).toBe(null);
    expect(messagesOf(s.open!)[0]).toMatchObject({ isAnswered: true, answeredBy: 'cli' });
  });

  it('asks of concurrent calls wait together and are answered one by one', () => {
    const second: ClineMessage = { ...ask, ts: 21, text: '{"tool": "write_to_file", "path": "b"}' };
    let s = run(openState(), msg(ask, 'created', 1), msg(second, 'created', 2), simple('taskInteractive', 3));
    expect(s.open!.waitingAsks.map(a => a.ts)).toEqual([20, 21]);
    expect(s.open!.pendingAsk?.ts).toBe(20);
    // The later one answered first (elsewhere): the earlier still waits, with its buttons.
    s = run(
      s,
      msg({ ...second, isAnswered: true, answer: 'yesButtonClicked', answeredBy: 'cli' }, 'updated', 4),
      simple('taskAskResponded', 5),
      simple('taskInteractive', 6)
    );
    expect(s.open!.waitingAsks.map(a => a.ts)).toEqual([20]);
    expect(s.open!.pendingAsk?.ts).toBe(20);
    s = run(s, msg({ ...ask, isAnswered: true, answer: 'noButtonClicked' }, 'updated', 7), simple('taskActive', 8));
    expect(s.open!.waitingAsks).toEqual([]);
    expect(s.open!.pendingAsk).toBe(null);
  });

  it('a partial ask and command output do not wait for an answer', () => {
    const s = run(
      openState(),
      msg({ ts: 30, type: 'ask', ask: 'followup', text: '{"question"', partial: true }, 'created', undefined, 0),
      msg({ ts: 31, type: 'ask', ask: 'command_output', text: 'out' }, 'created', 1)
    );
    expect(s.open!.pendingAsk).toBe(null);
  });

  it('an aborted task waits for no answer', () => {
    const s = run(openState(), msg(ask, 'created', 1), simple('taskAborted', 2));
    expect(s.open!.pendingAsk).toBe(null);
    expect(s.tasks[0].state).toBe('aborted');
  });
});

describe('queue, usage, retry', () => {
  it('the queue follows queuedMessagesUpdated', () => {
    let s = run(
      openState(),
      ev({ eventName: 'queuedMessagesUpdated', payload: [T, [{ id: 'a', text: 'one', timestamp: 1 }, { id: 'b', text: 'two', timestamp: 2 }]] }, 1)
    );
    expect(s.open!.queue.map(q => q.text)).toEqual(['one', 'two']);
    s = run(s, ev({ eventName: 'queuedMessagesUpdated', payload: [T, [{ id: 'b', text: 'two', timestamp: 2 }]] }, 2));
    expect(s.open!.queue.map(q => q.id)).toEqual(['b']);
  });

  it('token usage updates the open task and its row', () => {
    const usage = { totalTokensIn: 120, totalTokensOut: 30, totalCost: 0.0123, contextTokens: 90 };
    const s = run(
      openState(),
      simple('taskCreated', 1),
      ev({ eventName: 'taskTokenUsageUpdated', payload: [T, usage, {}] }, 2)
    );
    expect(s.open!.usage).toEqual(usage);
    expect(s.tasks[0]).toMatchObject({ tokensIn: 120, tokensOut: 30, totalCost: 0.0123 });
  });

  it('a retry counts down while its message streams, and ends with it', () => {
    const retry = (text: string, partial: boolean, seq?: number): SocketFrame =>
      msg({ ts: 40, type: 'say', say: 'api_req_retry_delayed', text, partial }, seq === 1 ? 'created' : 'updated', seq, 0);
    let s = run(openState(), retry('The provider is overloaded (529).\nRetry 2 in 8 s.', true, 1));
    expect(s.open!.retry).toEqual({ ts: 40, problem: 'The provider is overloaded (529).', attempt: 2, secondsLeft: 8 });
    s = run(s, retry('The provider is overloaded (529).\nRetry 2 in 7 s.', true));
    expect(s.open!.retry?.secondsLeft).toBe(7);
    s = run(s, retry('The provider is overloaded (529).\nRetried (attempt 2).', false, 2));
    expect(s.open!.retry).toBe(null);
  });
});

describe('kernel output', () => {
  const out = (o: Partial<KernelOutput>): KernelOutput => ({ outputType: 'stream', ...o }) as KernelOutput;

  it('joins stream text of one name and keeps stdout and stderr apart', () => {
    const got = appendOutputs(
      [out({ name: 'stdout', text: 'a\n' })],
      [out({ name: 'stdout', text: 'b\n' }), out({ name: 'stderr', text: 'warn\n' }), out({ name: 'stdout', text: 'c\n' })]
    );
    expect(got.map(o => [o.name, o.text])).toEqual([
      ['stdout', 'a\nb\n'],
      ['stderr', 'warn\n'],
      ['stdout', 'c\n']
    ]);
  });

  it('clear_output clears at once, or before the next output with wait', () => {
    expect(appendOutputs([out({ name: 'stdout', text: 'x' })], [{ outputType: 'clear_output' }])).toEqual([]);
    const waited = appendOutputs([out({ name: 'stdout', text: 'x' })], [{ outputType: 'clear_output', wait: true }]);
    expect(waited).toHaveLength(1);
    expect(appendOutputs(waited, [{ outputType: 'clear_output', wait: true }, out({ name: 'stdout', text: 'y' })])).toEqual([
      out({ name: 'stdout', text: 'y' })
    ]);
  });

  it('update_display_data replaces its display', () => {
    const shown = appendOutputs([], [
      { outputType: 'display_data', displayId: 'd1', data: { 'text/plain': '1' }, metadata: {} }
    ]);
    const updated = appendOutputs(shown, [
      { outputType: 'update_display_data', displayId: 'd1', data: { 'text/plain': '2' }, metadata: {} }
    ]);
    expect(updated).toEqual([{ outputType: 'display_data', displayId: 'd1', data: { 'text/plain': '2' }, metadata: {} }]);
  });

  it('executionOutput events collect per execution of the open task', () => {
    const s = run(
      openState(),
      ev({ eventName: 'executionOutput', payload: [{ taskId: T, kernelId: 'k', executionId: 'e1', outputs: [out({ name: 'stdout', text: 'line 0\n' })] }] }),
      ev({ eventName: 'executionOutput', payload: [{ taskId: T, kernelId: 'k', executionId: 'e1', outputs: [out({ name: 'stdout', text: 'line 1\n' })] }] }),
      ev({ eventName: 'executionOutput', payload: [{ taskId: OTHER, kernelId: 'k', executionId: 'e2', outputs: [out({ name: 'stdout', text: 'no' })] }] })
    );
    expect(s.open!.outputs).toEqual({ e1: [out({ name: 'stdout', text: 'line 0\nline 1\n' })] });
  });
});

describe('the task list', () => {
  it('is newest first, and keeps rows only events told of', () => {
    let s = run(initialState(), simple('taskCreated', 1, OTHER));
    s = run(s, { type: 'tasks', tasks: [row(T, 100, 1), row('x', 300, 3)] });
    expect(s.tasks.map(t => t.id)).toEqual([OTHER, 'x', T]); // OTHER dated now (1000)
  });

  it('a list asked for before events that changed a row keeps their word', () => {
    let s = run(initialState(), { type: 'tasks', tasks: [row(T, 100, 1, { state: 'running' })] });
    const asOf = s.lastSeq;
    const usage = { totalTokensIn: 1, totalTokensOut: 2, totalCost: 0, contextTokens: 1 };
    s = run(s, ev({ eventName: 'taskCompleted', payload: [T, usage, {}, { isSubtask: false }] }, 5));
    s = run(s, { type: 'tasks', tasks: [row(T, 100, 1, { state: 'running', task: 'listed' })], asOf });
    expect(s.tasks[0]).toMatchObject({ state: 'completed', task: 'listed' });
    s = run(s, { type: 'tasks', tasks: [row(T, 100, 1, { state: 'idle' })], asOf: 5 });
    expect(s.tasks[0].state).toBe('idle');
  });

  it('state events change the badge; unknown events change nothing', () => {
    const s = run(initialState(), { type: 'tasks', tasks: [row(T, 100, 1, { state: 'running' })] }, simple('taskSomethingNew', 1), simple('taskIdle', 2));
    expect(s.tasks[0].state).toBe('idle');
  });

  it('search matches prompt, number, id and state', () => {
    const tasks = [row(T, 100, 1, { task: 'Plot the sales', state: 'completed' }), row(OTHER, 200, 2, { task: 'Clean data' })];
    expect(filterTasks(tasks, 'sales').map(t => t.id)).toEqual([T]);
    expect(filterTasks(tasks, '#2').map(t => t.id)).toEqual([OTHER]);
    expect(filterTasks(tasks, 'COMPLETED').map(t => t.id)).toEqual([T]);
    expect(filterTasks(tasks, '11111111').map(t => t.id)).toEqual([OTHER]);
    expect(filterTasks(tasks, '  ')).toHaveLength(2);
  });
});

describe('events the panel cannot read', () => {
  it('are skipped without losing what was shown', () => {
    const before = run(openState(), msg({ ts: 10, type: 'say', say: 'text', text: 'kept' }, 'created', 1));
    const broken = [
      simple('taskCompleted', 2), // no usage in its payload
      ev({ eventName: 'message', payload: [] } as never, 3),
      ev({ eventName: 'queuedMessagesUpdated', payload: [T, 'not a list'] } as never, 4),
      ev({ eventName: 'someFutureEvent', payload: [{ x: 1 }] } as never, 5)
    ];
    const after = run(before, ...broken);
    expect(messagesOf(after.open!).map(m => m.text)).toEqual(['kept']);
    expect(after.open!.queue).toEqual([]);
  });
});

describe('the connection banner', () => {
  const conn = (state: 'connected' | 'reconnecting' | 'down', hint: string | null = null): SocketFrame => ({ kind: 'connection', state, hint });

  it('says connected, then reconnected after a loss', () => {
    let s = run(initialState(), conn('connected'));
    expect(s.connection).toMatchObject({ state: 'connected', text: 'Connected to hdspd' });
    s = run(s, conn('reconnecting'));
    expect(s.connection.state).toBe('reconnecting');
    s = run(s, conn('connected'));
    expect(s.connection).toMatchObject({ state: 'connected', text: 'Reconnected to hdspd' });
  });

  it('says how to start hdspd when it is down', () => {
    const hint = 'hdspd is not running: start it with `hdspd` or `systemctl --user start hdspd`';
    const s = run(initialState(), conn('down', hint));
    expect(s.connection).toMatchObject({ state: 'down', text: hint });
    const fromStatus = run(initialState(), { type: 'status', daemon: 'down', hint, status: null });
    expect(fromStatus.connection.text).toBe(hint);
  });

  it('a lost browser socket shows as reconnecting, and a running daemon after it as reconnected', () => {
    const s = run(initialState(), conn('connected'), { type: 'socket', state: 'closed' });
    expect(s.connection.state).toBe('reconnecting');
    const back = run(s, { type: 'socket', state: 'open' }, { type: 'status', daemon: 'running', hint: null, status: { headSeq: 3 } as never });
    expect(back.connection).toMatchObject({ state: 'connected', text: 'Reconnected to hdspd' });
  });

  it('the first status of a running daemon says connected', () => {
    const s = run(initialState(), { type: 'status', daemon: 'running', hint: null, status: { headSeq: 0 } as never });
    expect(s.connection).toMatchObject({ state: 'connected', text: 'Connected to hdspd' });
  });

  it('the first status says where the event stream resumes', () => {
    const status = { headSeq: 42 } as never;
    const s = run(initialState(), { type: 'status', daemon: 'running', hint: null, status });
    expect(s.lastSeq).toBe(42);
    const dup = run(s, simple('taskCreated', 42));
    expect(dup.tasks).toEqual([]);
  });
});

describe('mode and todo list', () => {
  it('a todo list update and a mode switch change the task row', () => {
    const todos = [
      { id: '1', content: 'load', status: 'completed' as const },
      { id: '2', content: 'plot' }
    ];
    const s = run(
      openState(),
      { type: 'tasks', tasks: [row(T, 1, 1, { mode: 'ask' })] },
      ev({ eventName: 'taskTodoListUpdated', payload: [T, todos, 'model'] }, 5),
      ev({ eventName: 'taskModeSwitched', payload: [T, 'analyst'] }, 6)
    );
    const r = s.tasks.find(t => t.id === T);
    expect(r?.todos).toEqual(todos);
    expect(r?.mode).toBe('analyst');
  });
});

describe('agents calling agents', () => {
  const ROOT = 'root-0000';
  const A = 'child-aaa';
  const B = 'child-bbb';
  const GRAND = 'grand-ccc';

  it('the task list is a tree: each task with the tasks it called below it', () => {
    const tasks = [
      row(GRAND, 400, 4, { parentTaskId: A, rootTaskId: ROOT, agent: 'coder' }),
      row(B, 300, 3, { parentTaskId: ROOT, rootTaskId: ROOT, agent: 'reviewer' }),
      row(A, 200, 2, { parentTaskId: ROOT, rootTaskId: ROOT, agent: 'analyst' }),
      row(OTHER, 150, 5),
      row(ROOT, 100, 1, { childIds: [A, B] })
    ];
    const tree = taskTree(tasks);
    expect(tree.map(r => [r.row.id, r.depth])).toEqual([
      [OTHER, 0],
      [ROOT, 0],
      [A, 1],
      [GRAND, 2],
      [B, 1]
    ]);
    expect(descendants(tasks, ROOT).map(r => [r.row.id, r.depth])).toEqual([
      [A, 1],
      [GRAND, 2],
      [B, 1]
    ]);
    expect(descendants(tasks, B)).toEqual([]);
    // A task whose caller is not listed (filtered out) stands as a root.
    expect(taskTree(tasks.filter(t => t.id !== A)).map(r => [r.row.id, r.depth])).toEqual([
      [GRAND, 0],
      [OTHER, 0],
      [ROOT, 0],
      [B, 1]
    ]);
    // Broken data with a cycle shows each task once.
    const cycle = [row('x', 1, 1, { parentTaskId: 'y' }), row('y', 2, 2, { parentTaskId: 'x' })];
    expect(taskTree(cycle)).toHaveLength(2);
  });

  it("the caller's events tie a child to it and carry what it returned", () => {
    let s = run(initialState(), { type: 'tasks', tasks: [row(ROOT, 100, 1)] });
    s = run(
      s,
      simple('taskCreated', 1, A),
      ev({ eventName: 'taskSpawned', payload: [ROOT, A] }, 2),
      ev({ eventName: 'taskDelegated', payload: [ROOT, A] }, 3)
    );
    const child = s.tasks.find(t => t.id === A)!;
    expect(child).toMatchObject({ parentTaskId: ROOT, rootTaskId: ROOT });
    expect(s.tasks.find(t => t.id === ROOT)!.childIds).toEqual([A]);
    expect(taskTree(s.tasks).map(r => [r.row.id, r.depth])).toEqual([
      [ROOT, 0],
      [A, 1]
    ]);
    const asOf = s.lastSeq;
    s = run(s, ev({ eventName: 'taskDelegationCompleted', payload: [ROOT, A, '310 rows'] }, 4));
    expect(s.tasks.find(t => t.id === A)!.result).toBe('310 rows');
    // A list asked for before the return keeps it (and the tree's links).
    s = run(s, { type: 'tasks', tasks: [row(ROOT, 100, 1), row(A, 200, 2, { agent: 'analyst' })], asOf });
    expect(s.tasks.find(t => t.id === A)).toMatchObject({ result: '310 rows', parentTaskId: ROOT, agent: 'analyst' });
    expect(s.tasks.find(t => t.id === ROOT)!.childIds).toEqual([A]);
  });

  it("every task's waiting asks are known, so a caller's view shows its agents' asks", () => {
    const ask: ClineMessage = { ts: 20, type: 'ask', ask: 'tool', text: '{"tool": "write_to_file", "path": "a"}' };
    const second: ClineMessage = { ...ask, ts: 21 };
    let s = run(openState(), msg(ask, 'created', 1, undefined, A), msg(second, 'created', 2, undefined, A));
    expect(s.asks[A].map(a => a.ts)).toEqual([20, 21]);
    expect(s.open!.waitingAsks).toEqual([]); // not the open task's
    s = run(s, msg({ ...ask, isAnswered: true }, 'updated', 3, undefined, A));
    expect(s.asks[A].map(a => a.ts)).toEqual([21]);
    s = run(s, simple('taskAborted', 4, A));
    expect(s.asks[A]).toBeUndefined();
    // A snapshot of the agent's task (fetched after a reload) tells them too.
    const snap: TaskSnapshot = {
      item: row(B, 300, 3, { parentTaskId: T, agent: 'writer', state: 'interactive' }),
      state: 'interactive',
      messages: [ask],
      headSeq: 9,
      pendingAsk: ask
    };
    s = run(s, { type: 'snapshot', snapshot: snap });
    expect(s.asks[B].map(a => a.ts)).toEqual([20]);
    expect(s.tasks.find(t => t.id === B)).toMatchObject({ agent: 'writer', parentTaskId: T });
  });
});
