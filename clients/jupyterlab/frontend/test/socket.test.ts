/**
 * The event socket's reconnects: each one resumes from the last seq applied
 * (the URL is asked for afresh), after a backoff that grows and resets once a
 * connection opens. Node has no browser WebSocket, so a scripted stand-in plays
 * the socket; time is jest's fake clock (no sleeps).
 */
import { backoff, EventSocket } from '../src/socket';
import type { SocketFrame } from '../src/state';

class ScriptedSocket {
  static made: ScriptedSocket[] = [];
  onopen: (() => void) | null = null;
  onmessage: ((msg: { data: string }) => void) | null = null;
  onclose: (() => void) | null = null;
  constructor(readonly url: string) {
    ScriptedSocket.made.push(this);
  }
  close(): void {
    this.onclose?.();
  }
}

describe('the event socket', () => {
  beforeEach(() => {
    ScriptedSocket.made = [];
    jest.useFakeTimers();
  });
  afterEach(() => jest.useRealTimers());

  it('backs off exponentially up to a cap', () => {
    expect([0, 1, 2, 3, 10].map(n => backoff(n, 500, 10_000))).toEqual([500, 1000, 2000, 4000, 10_000]);
  });

  it('reconnects with the latest since, and passes frames on', () => {
    let since = 0;
    const frames: SocketFrame[] = [];
    const states: string[] = [];
    const socket = new EventSocket({
      url: () => `ws://x/hdsp/events?since=${since}`,
      onFrame: f => {
        frames.push(f);
        if (f.kind === 'event' && f.event.seq) {
          since = f.event.seq;
        }
      },
      onOpen: () => states.push('open'),
      onClose: () => states.push('closed'),
      WebSocket: ScriptedSocket as unknown as typeof WebSocket,
      minDelay: 100,
      maxDelay: 1000
    });
    socket.start();
    const first = ScriptedSocket.made[0];
    first.onopen!();
    first.onmessage!({ data: JSON.stringify({ kind: 'event', event: { type: 'TaskEvent', origin: 'server', seq: 7, data: { eventName: 'taskCreated', payload: ['t'] } } }) });
    first.onmessage!({ data: 'not json' });
    expect(frames).toHaveLength(1);

    first.onclose!();
    expect(ScriptedSocket.made).toHaveLength(1);
    jest.advanceTimersByTime(99);
    expect(ScriptedSocket.made).toHaveLength(1);
    jest.advanceTimersByTime(1);
    expect(ScriptedSocket.made[1].url).toBe('ws://x/hdsp/events?since=7');

    // It fails again at once: the next wait is longer.
    ScriptedSocket.made[1].onclose!();
    jest.advanceTimersByTime(199);
    expect(ScriptedSocket.made).toHaveLength(2);
    jest.advanceTimersByTime(1);
    expect(ScriptedSocket.made).toHaveLength(3);
    expect(states).toEqual(['open', 'closed', 'closed']);

    socket.dispose();
    jest.advanceTimersByTime(10_000);
    expect(ScriptedSocket.made).toHaveLength(3);
  });
});
