/**
 * A recording of a real daemon run (tests/jupyterlab_frontend/test_panel_state.py
 * makes one; test/fixtures/ keeps one): the reducer fed its frames ends exactly
 * at the daemon's own snapshot, however the frames arrive (once, replayed twice
 * over, after the snapshot, with the snapshot landing mid-stream).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { initialState, messagesOf, reduce, SocketFrame, ViewState } from '../src/state';
import type { TaskSnapshot } from '../src/wire';

interface Recording {
  taskId: string;
  sinceSeq: number;
  frames: SocketFrame[];
  snapshot: TaskSnapshot;
}

const path =
  process.env.HDSP_RECORDING ?? join(__dirname, 'fixtures', 'write-approve-run.json');
const recording: Recording = JSON.parse(readFileSync(path, 'utf8'));

function opened(): ViewState {
  return reduce(initialState(), { type: 'open', taskId: recording.taskId }, 0);
}

function feed(state: ViewState, frames: SocketFrame[]): ViewState {
  return frames.reduce((s, frame) => reduce(s, { type: 'frame', frame }, 0), state);
}

function expectAtSnapshot(state: ViewState): void {
  const open = state.open!;
  const snap = recording.snapshot;
  expect(messagesOf(open)).toEqual(snap.messages);
  expect(open.state).toBe(snap.state);
  expect(open.pendingAsk).toBe(null);
  expect(open.retry).toBe(null);
  const row = state.tasks.find(t => t.id === recording.taskId)!;
  expect(row.state).toBe(snap.state);
  expect(row.tokensIn).toBe(snap.item.tokensIn);
  expect(row.tokensOut).toBe(snap.item.tokensOut);
  expect(open.usage?.totalTokensIn).toBe(snap.item.tokensIn);
}

const durable = recording.frames.filter(f => f.kind === 'event' && f.event.seq != null);
const lastSeq = Math.max(...durable.map(f => (f.kind === 'event' ? f.event.seq! : 0)));

describe(`a recorded daemon run (${path})`, () => {
  it('holds streamed updates, an ask and kernel output', () => {
    const names = recording.frames.map(f => (f.kind === 'event' ? f.event.data.eventName : ''));
    expect(names).toContain('executionOutput');
    expect(names).toContain('taskInteractive');
    expect(names).toContain('taskCompleted');
  });

  it('ends at the snapshot when fed in order', () => {
    const state = feed(opened(), recording.frames);
    expectAtSnapshot(state);
    expect(state.lastSeq).toBe(lastSeq);
  });

  it('ignores the durable events when they come again (replay overlaps live)', () => {
    const once = feed(opened(), recording.frames);
    const twice = feed(once, durable);
    expect(twice).toEqual(once);
  });

  it('ends at the snapshot when the snapshot comes first and the events after it', () => {
    let state = reduce(opened(), { type: 'snapshot', snapshot: recording.snapshot }, 0);
    state = feed(state, recording.frames);
    expectAtSnapshot(state);
  });

  it('ends at the snapshot when the snapshot lands mid-stream', () => {
    const half = Math.floor(recording.frames.length / 2);
    let state = feed(opened(), recording.frames.slice(0, half));
    state = reduce(state, { type: 'snapshot', snapshot: recording.snapshot }, 0);
    state = feed(state, recording.frames.slice(half));
    expectAtSnapshot(state);
  });

  it('saw the ask wait, then saw it answered', () => {
    let sawAsk = false;
    let state = opened();
    for (const frame of recording.frames) {
      state = reduce(state, { type: 'frame', frame }, 0);
      if (state.open!.pendingAsk !== null) {
        sawAsk = true;
        expect(state.open!.pendingAsk.ask).toBe('tool');
      }
    }
    expect(sawAsk).toBe(true);
    const answered = messagesOf(state.open!).find(m => m.type === 'ask' && m.ask === 'tool')!;
    expect(answered.isAnswered).toBe(true);
    expect(answered.answeredBy).toBeTruthy();
  });

  it('kept the streamed kernel output of the run', () => {
    const state = feed(opened(), recording.frames);
    const all = Object.values(state.open!.outputs).flat();
    const text = all.map(o => o.text ?? '').join('');
    expect(text).toContain('line 0\nline 1\nline 2\n');
  });
});
