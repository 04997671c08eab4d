/**
 * The `hdsp/events` WebSocket: frames in, and a reconnect with backoff that
 * resumes from the last `seq` the panel applied (`since`), so nothing is missed
 * and nothing is shown twice (the reducer drops what it has).
 */
import type { SocketFrame } from './state';

export interface EventSocketOptions {
  /** The URL to (re)connect to, resuming after the last seq seen. */
  url: () => string;
  onFrame: (frame: SocketFrame) => void;
  onOpen: () => void;
  onClose: () => void;
  /** The WebSocket class (Jupyter's settings carry one). */
  WebSocket?: typeof WebSocket;
  /** Backoff bounds in ms. */
  minDelay?: number;
  maxDelay?: number;
}

/** The delay before reconnect attempt `attempt` (0-based): doubling, capped. */
export function backoff(attempt: number, minDelay = 500, maxDelay = 10_000): number {
  return Math.min(maxDelay, minDelay * 2 ** Math.min(attempt, 16));
}

export class EventSocket {
  private socket: WebSocket | null = null;
  private attempt = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private stopped = false;

  constructor(private readonly options: EventSocketOptions) {}

  start(): void {
    this.stopped = false;
    this.connect();
  }

  dispose(): void {
    this.stopped = true;
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.socket?.close();
    this.socket = null;
  }

  private connect(): void {
    if (this.stopped) {
      return;
    }
    const Ws = this.options.WebSocket ?? WebSocket;
    const socket = new Ws(this.options.url());
    this.socket = socket;
    socket.onopen = () => {
      this.attempt = 0;
      this.options.onOpen();
    };
    socket.onmessage = (msg: MessageEvent) => {
      let frame: SocketFrame;
      try {
        frame = JSON.parse(String(msg.data));
      } catch {
        console.warn('hdsp: a frame that is not JSON was ignored', msg.data);
        return;
      }
      this.options.onFrame(frame);
    };
    socket.onclose = () => {
      if (this.socket !== socket) {
        return;
      }
      this.socket = null;
      this.options.onClose();
      if (!this.stopped) {
        const delay = backoff(this.attempt++, this.options.minDelay, this.options.maxDelay);
        this.timer = setTimeout(() => {
          this.timer = null;
          this.connect();
        }, delay);
      }
    };
  }
}
