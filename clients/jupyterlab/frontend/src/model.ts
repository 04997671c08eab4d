/**
 * The panel's model: the state (state.ts) behind a dispatch, the event socket,
 * and the commands the panel's buttons send. React reads it through
 * `subscribe`/`getState` (useSyncExternalStore).
 */
import { PageConfig } from '@jupyterlab/coreutils';

import { CommandError, HdspApi } from './api';
import { EventSocket } from './socket';
import { Action, descendants, initialState, reduce, SocketFrame, ViewState } from './state';
import type { PromptContext, RespondToAskData, TaskEvent } from './wire';

/** The auto-approval switches the panel offers for a new task. */
export const APPROVAL_SWITCHES = [
  { key: 'alwaysAllowReadOnly', label: 'Read files', initial: true },
  { key: 'alwaysAllowWrite', label: 'Write files', initial: false },
  { key: 'alwaysAllowExecute', label: 'Run code', initial: false },
  { key: 'alwaysAllowCommand', label: 'Run commands', initial: false }
] as const;

export type ApprovalKey = (typeof APPROVAL_SWITCHES)[number]['key'];

/** Where the panel remembers the open task, so that a reload shows it again. */
export const OPEN_TASK_KEY = 'hdsp:open-task';

function remembered(): string | null {
  try {
    return window.localStorage.getItem(OPEN_TASK_KEY);
  } catch {
    return null; // storage disabled
  }
}

function remember(taskId: string | null): void {
  try {
    if (taskId === null) {
      window.localStorage.removeItem(OPEN_TASK_KEY);
    } else {
      window.localStorage.setItem(OPEN_TASK_KEY, taskId);
    }
  } catch {
    // storage disabled: a reload shows the task list instead
  }
}

export class PanelModel {
  private state: ViewState = initialState();
  private readonly listeners = new Set<() => void>();
  private readonly eventListeners = new Set<(event: TaskEvent) => void>();
  private socket: EventSocket | null = null;
  /** The profile new tasks use (null: the daemon's current one). */
  profile: string | null = null;
  approvals: Record<ApprovalKey, boolean> = Object.fromEntries(
    APPROVAL_SWITCHES.map(s => [s.key, s.initial])
  ) as Record<ApprovalKey, boolean>;

  constructor(readonly api: HdspApi = new HdspApi()) {}

  // ---- the store -------------------------------------------------------------

  getState = (): ViewState => this.state;

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  /** Told every event the socket brings (a view that reacts to kernel events). */
  onEvent(listener: (event: TaskEvent) => void): () => void {
    this.eventListeners.add(listener);
    return () => {
      this.eventListeners.delete(listener);
    };
  }

  dispatch(action: Action): void {
    const next = reduce(this.state, action);
    if (next !== this.state) {
      this.state = next;
      this.listeners.forEach(l => l());
    }
  }

  private fail(error: unknown): void {
    const message =
      error instanceof CommandError
        ? error.message
        : error instanceof Error
          ? error.message
          : String(error);
    this.dispatch({ type: 'error', message });
  }

  // ---- the link --------------------------------------------------------------

  async start(): Promise<void> {
    await this.refreshStatus();
    this.socket = new EventSocket({
      url: () => this.api.eventsUrl(this.state.lastSeq),
      onFrame: frame => this.onFrame(frame),
      onOpen: () => {
        this.dispatch({ type: 'socket', state: 'open' });
        if (this.state.connection.state !== 'connected') {
          void this.refreshStatus();
        }
      },
      onClose: () => this.dispatch({ type: 'socket', state: 'closed' }),
      WebSocket: this.api.settings.WebSocket
    });
    this.socket.start();
    const again = remembered();
    if (again !== null) {
      this.dispatch({ type: 'open', taskId: again });
    }
    await this.refresh();
  }

  dispose(): void {
    this.socket?.dispose();
    this.socket = null;
  }

  private onFrame(frame: SocketFrame): void {
    const before = this.state.connection.state;
    this.dispatch({ type: 'frame', frame });
    if (frame.kind === 'connection' && frame.state === 'connected' && before !== 'connected') {
      void this.refresh();
    }
    if (frame.kind === 'event') {
      const event = frame.event;
      this.eventListeners.forEach(l => l(event));
      const name = frame.event.data.eventName;
      if (name === 'taskCreated') {
        void this.refreshTasks();
      } else if (name === 'settingsChanged') {
        void this.refreshProfiles();
      } else if (name === 'taskInteractive' || name === 'taskIdle') {
        // An agent of the open task's tree waits on an ask this panel has not
        // seen (it asked before the panel loaded): fetch it, to show it there.
        const taskId = (frame.event.data.payload as unknown[])[0];
        if (typeof taskId === 'string' && this.inOpenTree(taskId) && !(this.state.asks[taskId]?.length)) {
          void this.fetchAsks(taskId);
        }
      }
    }
  }

  async refreshStatus(): Promise<void> {
    try {
      const reply = await this.api.status();
      this.dispatch({ type: 'status', ...reply });
    } catch (error) {
      this.fail(error);
    }
  }

  /** The task list, the profiles and the open task's snapshot, afresh. */
  async refresh(): Promise<void> {
    await this.refreshStatus();
    if (this.state.connection.state === 'down') {
      return;
    }
    await Promise.all([this.refreshTasks(), this.refreshProfiles(), this.reloadOpenTask()]);
  }

  async refreshTasks(): Promise<void> {
    try {
      const asOf = this.state.lastSeq;
      const list = await this.api.command({ commandName: 'ListTasks', data: { limit: 200 } });
      this.dispatch({ type: 'tasks', tasks: list.tasks, asOf });
    } catch (error) {
      this.fail(error);
    }
  }

  async refreshProfiles(): Promise<void> {
    try {
      const profiles = await this.api.command({ commandName: 'ListProfiles' });
      this.dispatch({ type: 'profiles', profiles });
    } catch (error) {
      this.fail(error);
    }
  }

  /** Whether `taskId` is below the open task (one of its agents' tasks). */
  private inOpenTree(taskId: string): boolean {
    const open = this.state.open;
    return open !== null && descendants(this.state.tasks, open.taskId).some(r => r.row.id === taskId);
  }

  /** A task's snapshot, for the asks it waits on (an agent's, shown in its caller's view). */
  private async fetchAsks(taskId: string): Promise<void> {
    try {
      const snapshot = await this.api.command({ commandName: 'GetTask', data: { taskId } });
      this.dispatch({ type: 'snapshot', snapshot });
    } catch (error) {
      if (!(error instanceof CommandError && error.code === 'task_not_found')) {
        this.fail(error);
      }
    }
  }

  /** The asks of the open task's agents that wait, as far as this panel knows none yet. */
  private async fetchTreeAsks(): Promise<void> {
    const open = this.state.open;
    if (open === null) {
      return;
    }
    const asking = descendants(this.state.tasks, open.taskId).filter(
      r => (r.row.state === 'interactive' || r.row.state === 'idle') && !this.state.asks[r.row.id]?.length
    );
    await Promise.all(asking.map(r => this.fetchAsks(r.row.id)));
  }

  private async reloadOpenTask(): Promise<void> {
    const open = this.state.open;
    if (open === null) {
      return;
    }
    try {
      const snapshot = await this.api.command({
        commandName: 'GetTask',
        data: { taskId: open.taskId }
      });
      this.dispatch({ type: 'snapshot', snapshot });
      await this.fetchTreeAsks();
    } catch (error) {
      if (error instanceof CommandError && error.code === 'task_not_found') {
        remember(null);
        this.dispatch({ type: 'open', taskId: null });
      }
      this.fail(error);
    }
  }

  // ---- what the buttons do ---------------------------------------------------

  async openTask(taskId: string | null): Promise<void> {
    remember(taskId);
    this.dispatch({ type: 'open', taskId });
    this.dispatch({ type: 'error', message: null });
    await this.reloadOpenTask();
  }

  /**
   * Sends the prompt: a new task, or a message to the open one (`steer`: into
   * the running turn, before its next model request; else queued until it ends),
   * with the notebook context the user kept (chips) and the notebook's kernel.
   */
  async send(
    text: string,
    delivery: 'queue' | 'steer' = 'queue',
    context: PromptContext | null = null,
    notebookKernelId: string | null = null
  ): Promise<boolean> {
    const trimmed = text.trim();
    if (!trimmed) {
      return false;
    }
    this.dispatch({ type: 'error', message: null });
    const open = this.state.open;
    // The notebook's own kernel, for the server extension to attach (CONTRACT.md).
    const extra = context?.notebook && notebookKernelId ? { notebookKernelId } : {};
    try {
      if (open === null) {
        const workspace = PageConfig.getOption('serverRoot') || undefined;
        const ref = await this.api.command({
          commandName: 'StartNewTask',
          data: {
            text: trimmed,
            configuration: {
              apiConfigName: this.profile ?? undefined,
              workspace,
              approvals: { ...this.approvals }
            },
            ...(context ? { context } : {})
          }
        }, extra);
        await this.refreshTasks();
        await this.openTask(ref.taskId);
      } else {
        await this.api.command({
          commandName: 'SendMessage',
          taskId: open.taskId,
          data: {
            text: trimmed,
            ...(delivery === 'steer' ? { delivery } : {}),
            ...(context ? { context } : {})
          }
        }, extra);
      }
      return true;
    } catch (error) {
      this.fail(error);
      return false;
    }
  }

  /** Answer the ask `askTs` of the open task, or of `taskId` (an agent's task of its tree). */
  async respond(
    askTs: number,
    response: RespondToAskData['response'],
    text?: string,
    taskId?: string
  ): Promise<void> {
    const target = taskId ?? this.state.open?.taskId ?? null;
    if (target === null) {
      return;
    }
    try {
      await this.api.command({
        commandName: 'RespondToAsk',
        taskId: target,
        data: { askTs, response, text: text && text.trim() ? text.trim() : undefined }
      });
      this.dispatch({ type: 'error', message: null });
    } catch (error) {
      if (error instanceof CommandError && error.code === 'already_answered') {
        // Someone else answered first: the ask's own update shows who.
        if (taskId === undefined) {
          await this.reloadOpenTask();
        } else {
          await this.fetchAsks(taskId);
        }
        return;
      }
      this.fail(error);
    }
  }

  private async taskCommand(
    run: (taskId: string) => Promise<unknown>,
    taskId: string | null = this.state.open?.taskId ?? null
  ): Promise<void> {
    if (taskId === null) {
      return;
    }
    try {
      await run(taskId);
      this.dispatch({ type: 'error', message: null });
    } catch (error) {
      this.fail(error);
    }
  }

  stop(): Promise<void> {
    return this.taskCommand(taskId => this.api.command({ commandName: 'CancelTask', taskId }));
  }

  close(): Promise<void> {
    return this.taskCommand(taskId => this.api.command({ commandName: 'CloseTask', taskId }));
  }

  resume(taskId?: string): Promise<void> {
    return this.taskCommand(
      id => this.api.command({ commandName: 'ResumeTask', data: id }),
      taskId ?? this.state.open?.taskId ?? null
    );
  }

  deleteQueued(id: string): Promise<void> {
    return this.taskCommand(taskId =>
      this.api.command({ commandName: 'DeleteQueuedMessage', taskId, data: id })
    );
  }

  /** Replace the open task's todo list (a markdown checklist); the model is told. */
  updateTodoList(markdown: string): Promise<void> {
    return this.taskCommand(taskId =>
      this.api.command({ commandName: 'UpdateTodoList', taskId, data: { markdown } })
    );
  }

  setProfile(name: string | null): void {
    this.profile = name;
  }

  setApproval(key: ApprovalKey, on: boolean): void {
    this.approvals = { ...this.approvals, [key]: on };
  }

  // ---- taking back history (issue 19) ----------------------------------------

  /** Keep message `ts` of the open task and remove what came after it (`include`: it too). */
  rewind(ts: number, include = false): Promise<void> {
    return this.taskCommand(taskId =>
      this.api.command({ commandName: 'RewindTask', data: { taskId, ts, include } })
    );
  }

  /** Replace the user's message `ts` with `text` and go on from there. */
  async editMessage(ts: number, text: string): Promise<boolean> {
    const trimmed = text.trim();
    if (!trimmed) {
      return false;
    }
    let ok = false;
    await this.taskCommand(async taskId => {
      await this.api.command({ commandName: 'EditMessage', data: { taskId, ts, text: trimmed } });
      ok = true;
    });
    return ok;
  }

  /** Delete the user's message `ts` from the history and from later requests. */
  deleteMessage(ts: number): Promise<void> {
    return this.taskCommand(taskId =>
      this.api.command({ commandName: 'DeleteMessage', data: { taskId, ts } })
    );
  }

  /** A new task with the open task's history up to message `ts`; the panel opens it. */
  fork(ts: number): Promise<void> {
    return this.taskCommand(async taskId => {
      const ref = await this.api.command({ commandName: 'ForkTask', data: { taskId, ts } });
      await this.refreshTasks();
      await this.openTask(ref.taskId);
    });
  }

  /** Condense the open task's conversation now (not while it works). */
  condense(): Promise<void> {
    return this.taskCommand(taskId => this.api.command({ commandName: 'CondenseTask', taskId }));
  }
}
