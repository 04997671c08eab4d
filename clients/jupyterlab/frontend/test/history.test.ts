/**
 * Taking back history in the panel (issue 19): which actions each message
 * offers, what the confirmations say, the condense and truncation markers, the
 * commands the model sends for each action, and the reducer following a rewind
 * across a summary, an edit and a deletion.
 */
import { CommandError } from '../src/api';
import {
  actionsFor,
  canSteer,
  confirmation,
  contextMarkerOf,
  isDestructive,
  markerText
} from '../src/history';
import { PanelModel } from '../src/model';
import { initialState, messagesOf, reduce, SocketFrame, ViewState } from '../src/state';
import type { ClineMessage, TaskEvent, TaskSnapshot } from '../src/wire';

const T = 'd04f41f6-13ed-4460-b378-e1fb53cb89ae';
const FORK = '99999999-2222-3333-4444-555555555555';

const say = (ts: number, kind: string, text = '', extra: Partial<ClineMessage> = {}): ClineMessage => ({
  ts,
  type: 'say',
  say: kind,
  text,
  partial: false,
  ...extra
});

function ev(data: TaskEvent['data'], seq: number): SocketFrame {
  return { kind: 'event', event: { type: 'TaskEvent', origin: 'server', data, seq } as TaskEvent };
}

function snapshot(messages: ClineMessage[], headSeq: number): TaskSnapshot {
  return {
    item: { id: T, number: 1, ts: 1, task: 'prompt', tokensIn: 0, tokensOut: 0, totalCost: 0 },
    state: 'completed',
    messages,
    headSeq
  } as TaskSnapshot;
}

describe('the actions a message offers', () => {
  const options = { isPrompt: false, waitingAsk: false };

  it('offers edit, rewind, fork and delete on a message of the user', () => {
    expect(actionsFor(say(5, 'user_feedback', 'again'), options)).toEqual(['edit', 'rewind', 'fork', 'delete']);
  });

  it('offers rewind and fork on the prompt, and delete too on the model’s text and tool calls', () => {
    expect(actionsFor(say(1, 'text', 'the prompt'), { ...options, isPrompt: true })).toEqual(['rewind', 'fork']);
    expect(actionsFor(say(2, 'text', 'an answer'), options)).toEqual(['rewind', 'fork', 'delete']);
    expect(actionsFor(say(3, 'completion_result', 'done', { toolUseId: 'c1' }), options)).toEqual([
      'rewind',
      'fork',
      'delete'
    ]);
    expect(actionsFor(say(4, 'tool_result', '{}', { toolUseId: 'c2' }), options)).toEqual(['rewind', 'fork', 'delete']);
    // A record of the task's own (a request, a marker) is not deleted.
    expect(actionsFor(say(5, 'api_req_started', '{}'), options)).toEqual(['rewind', 'fork']);
    expect(actionsFor(say(6, 'condense_context', ''), options)).toEqual(['rewind', 'fork']);
  });

  it('offers nothing on a message still streaming, or on the ask that waits', () => {
    expect(actionsFor(say(2, 'text', 'The', { partial: true }), options)).toEqual([]);
    const ask: ClineMessage = { ts: 4, type: 'ask', ask: 'tool', text: '{}', toolUseId: 'c1' };
    expect(actionsFor(ask, { ...options, waitingAsk: true })).toEqual([]);
    expect(actionsFor(ask, options)).toEqual(['rewind', 'fork', 'delete']);
  });

  it('asks before what removes messages, and says how many go and that kernels are not rolled back', () => {
    expect(['edit', 'rewind', 'delete'].every(a => isDestructive(a as never))).toBe(true);
    expect(isDestructive('fork')).toBe(false);
    expect(confirmation('rewind', 3)).toMatch(/Remove 3 later messages\?.*Kernel variables are not rolled back/);
    expect(confirmation('rewind', 1)).toContain('1 later message?');
    expect(confirmation('edit', 2)).toContain('2 later messages are replaced');
    expect(confirmation('delete', 0)).toContain('its answers stay');
    expect(confirmation('delete', 0, 'call')).toMatch(/tool call with its result.*not undone/);
    expect(confirmation('delete', 0, 'text')).toContain('tool calls stay');
  });

  it('offers to steer only while a turn runs', () => {
    expect(canSteer('running')).toBe(true);
    for (const state of ['interactive', 'idle', 'completed', null]) {
      expect(canSteer(state)).toBe(false);
    }
  });
});

describe('the context markers', () => {
  it('shows a summary with the tokens before and after', () => {
    const info = { condenseId: 'c1', prevContextTokens: 7900, newContextTokens: 2100, messagesCondensed: 12, summary: 'We loaded x.' };
    const marker = contextMarkerOf(say(9, 'condense_context', JSON.stringify(info), { contextCondense: info }))!;
    expect(marker).toMatchObject({ kind: 'condensed', before: 7900, after: 2100, hidden: 12, summary: 'We loaded x.' });
    expect(markerText(marker)).toBe('Context condensed: 7,900 → 2,100 tokens (12 messages summarised; the history keeps them)');
  });

  it('reads the marker from its text when the field is absent (an older record)', () => {
    const info = { truncationId: 't1', messagesRemoved: 4, prevContextTokens: 9000, newContextTokens: 6000 };
    const marker = contextMarkerOf(say(9, 'sliding_window_truncation', JSON.stringify(info)))!;
    expect(markerText(marker)).toBe(
      'Context truncated: 9,000 → 6,000 tokens (4 oldest messages left out of requests; the history keeps them)'
    );
  });

  it('says a condense is under way, or why it failed, and is nothing for other messages', () => {
    expect(markerText(contextMarkerOf(say(9, 'condense_context', '', { partial: true }))!)).toBe('Condensing the conversation…');
    const failed = contextMarkerOf(say(9, 'condense_context_error', 'Nothing to condense: too few messages.'))!;
    expect(failed.kind).toBe('failed');
    expect(markerText(failed)).toBe('Nothing to condense: too few messages.');
    expect(contextMarkerOf(say(9, 'sliding_window_truncation', 'not json'))!.kind).toBe('truncated');
    expect(contextMarkerOf(say(9, 'text', 'hello'))).toBeNull();
  });
});

describe('the reducer follows rewinds, edits and deletions', () => {
  const history = [
    say(1, 'text', 'the prompt'),
    say(2, 'text', 'first answer'),
    say(3, 'user_feedback', 'more'),
    say(4, 'condense_context', '{}', { contextCondense: { condenseId: 'c1', prevContextTokens: 900, newContextTokens: 200 } }),
    say(5, 'text', 'answer after the summary'),
    say(6, 'user_feedback', 'and again'),
    say(7, 'text', 'last answer')
  ];

  function loaded(): ViewState {
    let state = reduce(initialState(), { type: 'open', taskId: T });
    state = reduce(state, { type: 'snapshot', snapshot: snapshot(history, 10) });
    return state;
  }

  it('a rewind across a summary takes the summary off, and the messages it hid stay shown', () => {
    const state = reduce(loaded(), { type: 'frame', frame: ev({ eventName: 'taskRewound', payload: [T, 4] } as TaskEvent['data'], 11) });
    expect(messagesOf(state.open!).map(m => m.ts)).toEqual([1, 2, 3]);
    expect(messagesOf(state.open!).some(m => contextMarkerOf(m) !== null)).toBe(false);
  });

  it('an edit is a rewind from the message, then the new message and its answer arrive', () => {
    const frames: SocketFrame[] = [
      ev({ eventName: 'taskRewound', payload: [T, 6] } as TaskEvent['data'], 11),
      ev({ eventName: 'message', payload: [{ taskId: T, action: 'created', message: say(8, 'user_feedback', 'edited') }] }, 12),
      ev({ eventName: 'message', payload: [{ taskId: T, action: 'created', message: say(9, 'text', 'new answer') }] }, 13)
    ];
    const state = frames.reduce((s, frame) => reduce(s, { type: 'frame', frame }), loaded());
    const texts = messagesOf(state.open!).map(m => m.text);
    expect(texts.slice(-3)).toEqual(['answer after the summary', 'edited', 'new answer']);
    expect(texts).not.toContain('last answer');
    expect(texts).not.toContain('and again');
  });

  it('a deletion takes off just the deleted messages', () => {
    const state = reduce(loaded(), {
      type: 'frame',
      frame: ev({ eventName: 'taskMessagesDeleted', payload: [T, [6]] } as TaskEvent['data'], 11)
    });
    expect(messagesOf(state.open!).map(m => m.ts)).toEqual([1, 2, 3, 4, 5, 7]);
  });
});

describe('the commands the actions send', () => {
  function model(replies: Record<string, unknown> = {}): { model: PanelModel; sent: unknown[] } {
    const sent: unknown[] = [];
    const api = {
      command: async (command: { commandName: string }) => {
        sent.push(command);
        const reply = replies[command.commandName];
        if (reply instanceof Error) {
          throw reply;
        }
        return reply ?? { taskId: T, state: 'idle' };
      },
      status: async () => ({ daemon: 'running', hint: null, status: null })
    };
    const m = new PanelModel(api as never);
    m.dispatch({ type: 'open', taskId: T });
    return { model: m, sent };
  }

  beforeAll(() => {
    // The model remembers the open task in localStorage: none here.
    (globalThis as { window?: unknown }).window = {};
  });

  it('rewind keeps the message, edit resends the new text, delete names the message', async () => {
    const { model: m, sent } = model();
    await m.rewind(5);
    expect(await m.editMessage(6, '  edited  ')).toBe(true);
    expect(await m.editMessage(6, '   ')).toBe(false);
    await m.deleteMessage(3);
    await m.condense();
    expect(sent).toEqual([
      { commandName: 'RewindTask', data: { taskId: T, ts: 5, include: false } },
      { commandName: 'EditMessage', data: { taskId: T, ts: 6, text: 'edited' } },
      { commandName: 'DeleteMessage', data: { taskId: T, ts: 3 } },
      { commandName: 'CondenseTask', taskId: T }
    ]);
  });

  it('fork opens the new task', async () => {
    const { model: m, sent } = model({ ForkTask: { taskId: FORK, state: 'idle' }, ListTasks: { tasks: [] } });
    await m.fork(5);
    expect(sent[0]).toEqual({ commandName: 'ForkTask', data: { taskId: T, ts: 5 } });
    expect(m.getState().open?.taskId).toBe(FORK);
  });

  it('a message sent to steer says so; a queued one is sent as before', async () => {
    const { model: m, sent } = model();
    await m.send('look at y instead', 'steer');
    await m.send('then plot it');
    expect(sent).toEqual([
      { commandName: 'SendMessage', taskId: T, data: { text: 'look at y instead', delivery: 'steer' } },
      { commandName: 'SendMessage', taskId: T, data: { text: 'then plot it' } }
    ]);
  });

  it('a refused action shows the daemon’s words and sends nothing more', async () => {
    const refusal = new CommandError('invalid_request', 'That would remove the task’s first message.', 400);
    const { model: m } = model({ RewindTask: refusal });
    await m.rewind(1);
    expect(m.getState().error).toBe('That would remove the task’s first message.');
  });
});
