/**
 * JupyterLab's side of the live edits (liveEdits.ts): the notebooks open in this
 * window's main area, read through the few members needed (a duck type of
 * @jupyterlab/notebook's NotebookPanel, as contextChips.tsx does, so the panel
 * takes no dependency on the notebook package), and the HTTP transport to the
 * server extension (`POST hdsp/command`, CONTRACT.md).
 */
import { ServerConnection } from '@jupyterlab/services';
import type { ISignal } from '@lumino/signaling';

import type { HdspApi } from './api';
import { Declared, HostTransport, LiveEditHost, NotebookSet, OpenNotebook, SharedNotebookLike } from './liveEdits';
import type { PanelModel } from './model';
import type { DocumentEditAnswer } from './wire';

interface SignalLike {
  connect(slot: (...args: any[]) => void, thisArg?: unknown): boolean;
  disconnect(slot: (...args: any[]) => void, thisArg?: unknown): boolean;
}

interface NotebookWidgetLike {
  isDisposed: boolean;
  disposed: SignalLike;
  context: {
    path: string;
    isReady: boolean;
    ready: Promise<void>;
    pathChanged?: SignalLike;
    model: { sharedModel: SharedNotebookLike };
    save(): Promise<void>;
  };
}

/** The shell, as much of it as this needs (JupyterLab's LabShell). */
export interface MainAreaLike {
  widgets(area?: string): Iterable<unknown>;
  currentChanged?: ISignal<unknown, unknown>;
  layoutModified?: ISignal<unknown, unknown>;
}

function asNotebook(widget: unknown): NotebookWidgetLike | null {
  const w = widget as Partial<NotebookWidgetLike> | null;
  const shared = (w?.context as Partial<NotebookWidgetLike['context']> | undefined)?.model?.sharedModel as
    | Partial<SharedNotebookLike>
    | undefined;
  if (
    !w ||
    typeof w.context?.path !== 'string' ||
    !shared ||
    !Array.isArray(shared.cells) ||
    typeof shared.insertCell !== 'function' ||
    typeof shared.transact !== 'function' ||
    typeof shared.toJSON !== 'function' ||
    typeof shared.fromJSON !== 'function'
  ) {
    return null;
  }
  return w as NotebookWidgetLike;
}

/** The notebooks open (and loaded) in the main area. */
export class MainAreaNotebooks implements NotebookSet {
  private readonly listeners = new Set<() => void>();
  private readonly watched = new WeakSet<object>();

  constructor(private readonly shell: MainAreaLike) {
    shell.layoutModified?.connect(this.changed, this);
    shell.currentChanged?.connect(this.changed, this);
  }

  current(): OpenNotebook[] {
    const open: OpenNotebook[] = [];
    for (const widget of this.shell.widgets('main')) {
      const panel = asNotebook(widget);
      if (panel === null || panel.isDisposed) {
        continue;
      }
      this.watch(panel);
      if (panel.context.isReady && !open.some(n => n.path === panel.context.path)) {
        const context = panel.context;
        open.push({
          path: context.path,
          model: context.model.sharedModel,
          // (The window's own save: JupyterLab's, with its checks.)
          save: typeof context.save === 'function' ? () => context.save() : undefined
        });
      }
    }
    return open;
  }

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  dispose(): void {
    this.shell.layoutModified?.disconnect(this.changed, this);
    this.shell.currentChanged?.disconnect(this.changed, this);
    this.listeners.clear();
  }

  private watch(panel: NotebookWidgetLike): void {
    if (this.watched.has(panel)) {
      return;
    }
    this.watched.add(panel);
    panel.disposed.connect(this.changed, this);
    panel.context.pathChanged?.connect(this.changed, this);
    if (!panel.context.isReady) {
      void panel.context.ready.then(() => this.changed());
    }
  }

  private changed(): void {
    this.listeners.forEach(l => l());
  }
}

/** The host's requests through `POST hdsp/command`. */
export class CommandTransport implements HostTransport {
  constructor(private readonly api: HdspApi) {}

  async declare(hostId: string, paths: string[], leaseSeconds: number, keepalive = false): Promise<Declared> {
    const body = await this.post(
      { commandName: 'HostDocuments', hostId, route: 'panel', paths, leaseSeconds },
      keepalive
    );
    return { paths: (body.paths ?? {}) as Record<string, string>, serverTime: Number(body.serverTime) };
  }

  async answer(answer: DocumentEditAnswer): Promise<void> {
    await this.post({ commandName: 'AnswerDocumentEdit', data: answer }, false);
  }

  private async post(command: Record<string, unknown>, keepalive: boolean): Promise<Record<string, unknown>> {
    const response = await ServerConnection.makeRequest(
      this.api.url('command'),
      { method: 'POST', body: JSON.stringify({ command }), keepalive },
      this.api.settings
    );
    const text = await response.text();
    if (!response.ok) {
      throw new Error(`hdsp/command answered ${response.status}: ${text.slice(0, 300)}`);
    }
    return text ? (JSON.parse(text) as Record<string, unknown>) : {};
  }
}

/**
 * Start this window's live-edit host: it follows the panel's event socket and
 * the link's state; returns what stops it (the panel is disposed).
 */
export function startLiveEdits(shell: MainAreaLike, model: PanelModel): { dispose(): void } {
  const notebooks = new MainAreaNotebooks(shell);
  const connected = () => model.getState().connection.state === 'connected';
  const host = new LiveEditHost(notebooks, new CommandTransport(model.api), { connected });
  let wasConnected = connected();
  const stopState = model.subscribe(() => {
    const now = connected();
    if (now && !wasConnected) {
      host.reconnected();
    }
    wasConnected = now;
  });
  const stopEvents = model.onEvent(event => host.onEvent(event));
  // A window that goes away withdraws at once (else its lease runs out).
  const onHide = () => host.withdraw(true);
  window.addEventListener('pagehide', onHide);
  host.start();
  return {
    dispose: () => {
      window.removeEventListener('pagehide', onHide);
      stopState();
      stopEvents();
      host.dispose();
      notebooks.dispose();
    }
  };
}
