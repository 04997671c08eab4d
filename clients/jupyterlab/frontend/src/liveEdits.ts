/**
 * The panel as a document host (route `panel`, protocol/README.md "Document
 * hosts"): without real-time collaboration, the notebooks open in this window
 * are edited by the agent here, in their notebook models, so that the user sees
 * cells appear and outputs stream in, and Lab's own save writes the file (no
 * "file changed on disk").
 *
 * - `applyEdit` applies one `DocumentEdit` to a notebook's shared model (the
 *   @jupyter/ydoc YNotebook every JupyterLab 4 notebook has, collaborative or
 *   not), in one transaction, as the server extension's `rtc` host does to the
 *   room's document (clients/jupyterlab/shared_notebooks.py): a cell whose live
 *   source is not the one the agent read (SHA-256) is left alone and reported as
 *   a conflict, never overwritten.
 * - `LiveEditHost` declares the window's open notebooks (`HostDocuments`, again
 *   when they change, when the link to hdspd comes back, and before the lease
 *   ends), applies each `documentEditRequested` addressed to it, and answers
 *   with `AnswerDocumentEdit`. Each window is a host of its own: the daemon
 *   addresses each request to one of them, so exactly one window applies it.
 * - Checkpoints use it too: `snapshot` answers with the whole notebook as the
 *   window would save it (a checkpoint keeps what the user sees, saved or not);
 *   `replace` (a restore the user asked for) makes the notebook the checkpoint's
 *   and saves it with the window's own save, answering once it is saved: the
 *   view shows the restore at once, and the file matches it.
 *
 * Nothing here reads JupyterLab itself: liveEditsLab.ts gives it the window's
 * notebooks and the HTTP transport.
 */
import { sha256 } from '@noble/hashes/sha2';
import { bytesToHex, utf8ToBytes } from '@noble/hashes/utils';

import type { DocumentCell, DocumentEdit, DocumentEditAnswer, DocumentEditRequest, TaskEvent } from './wire';

/** What the host id of a panel starts with (the server extension checks it). */
export const PANEL_HOST_PREFIX = 'panel-';
/** Seconds a declaration lasts unless renewed. */
export const LEASE_SECONDS = 30;
/** How often the declaration is renewed (a third of the lease). */
export const RENEW_MS = (LEASE_SECONDS * 1000) / 3;

/** The SHA-256 of a source's UTF-8, as the daemon computes it. */
export function sourceDigest(source: string): string {
  return bytesToHex(sha256(utf8ToBytes(source)));
}

// ---- the notebook model, as much of it as an edit needs ------------------------

/** A cell of @jupyter/ydoc's YNotebook (the members used here). */
export interface SharedCellLike {
  readonly id: string;
  readonly cell_type: string;
  getSource(): string;
  setSource(source: string): void;
  getMetadata(): Record<string, unknown>;
  setMetadata(key: string, value: unknown): void;
  toJSON(): Record<string, unknown>;
  execution_count?: number | null;
  /** 'running' shows the cell as running (`[*]`), as a run the user started does. */
  executionState?: string;
  getOutputs?(): unknown[];
  setOutputs?(outputs: unknown[]): void;
}

/** @jupyter/ydoc's YNotebook (the members used here). */
export interface SharedNotebookLike {
  readonly cells: ReadonlyArray<SharedCellLike>;
  insertCell(index: number, cell: Record<string, unknown>): unknown;
  deleteCell(index: number): void;
  moveCell(fromIndex: number, toIndex: number): void;
  transact(f: () => void): void;
  /** The whole notebook (nbformat JSON), as the window saves it. */
  toJSON(): Record<string, unknown>;
  /** Make the notebook `value` (cells, metadata), in one transaction. */
  fromJSON(value: Record<string, any>): void;
}

/** What an edit came to: the answer less its ids. */
export type EditOutcome = Pick<DocumentEditAnswer, 'status' | 'message' | 'cells' | 'notebook'>;

function documentCell(cell: SharedCellLike, full: boolean): DocumentCell {
  const count = cell.cell_type === 'code' ? cell.execution_count ?? null : null;
  const out: DocumentCell = { id: cell.id, cellType: cell.cell_type, source: cell.getSource(), executionCount: count };
  if (full) {
    out.outputs = cell.cell_type === 'code' ? ((cell.getOutputs?.() ?? []) as {}[]) : null;
    out.metadata = cell.getMetadata() as {};
  }
  return out;
}

function cellsOf(nb: SharedNotebookLike, full = false): DocumentCell[] {
  return nb.cells.map(c => documentCell(c, full));
}

function indexOf(nb: SharedNotebookLike, id: string | null | undefined): number | null {
  if (!id) {
    return null;
  }
  const index = nb.cells.findIndex(c => c.id === id);
  return index < 0 ? null : index;
}

function setOutputs(cell: SharedCellLike, outputs: unknown[], count: number | null, running = false): void {
  cell.setOutputs?.(outputs);
  cell.execution_count = count;
  // (As the server extension's rtc host sets `execution_state`: JupyterLab
  // shows a running cell as [*] and takes a count as the end of the run.)
  if ('executionState' in cell) {
    cell.executionState = running ? 'running' : 'idle';
  }
}

function newCell(id: string, kind: string, source: string, metadata: Record<string, unknown>): Record<string, unknown> {
  const cell: Record<string, unknown> = { id, cell_type: kind, source, metadata };
  if (kind === 'code') {
    cell.outputs = [];
    cell.execution_count = null;
  }
  return cell;
}

/** Apply `edit` to the notebook (one transaction); what it came to. (A
 * `replace` is then saved by the host: `LiveEditHost.handle`.) */
export function applyEdit(nb: SharedNotebookLike, edit: DocumentEdit): EditOutcome {
  if (edit.op === 'read') {
    return { status: 'ok', cells: cellsOf(nb, true) };
  }
  if (edit.op === 'snapshot') {
    return { status: 'ok', notebook: nb.toJSON() };
  }
  if (edit.op === 'replace') {
    const value = edit.notebook as Record<string, unknown> | null | undefined;
    if (!value || !Array.isArray(value.cells) || typeof value.metadata !== 'object' || value.metadata === null) {
      return { status: 'invalid', message: 'A replace needs the notebook.' };
    }
    // (fromJSON takes the object apart: a copy of the request's.)
    nb.fromJSON(JSON.parse(JSON.stringify(value)));
    return { status: 'ok' };
  }
  let outcome: Applied = { status: 'invalid', message: 'Nothing was done.' };
  nb.transact(() => {
    outcome = apply(nb, edit);
  });
  // The model lists its cells anew once the transaction is over.
  const { listCells, ...answer } = outcome;
  return listCells ? { ...answer, cells: cellsOf(nb) } : answer;
}

/** An outcome, and whether its answer lists the notebook's cells (after the transaction). */
type Applied = EditOutcome & { listCells?: boolean };

/** Where a cell goes that goes after `afterId` (null: that cell is gone). */
function after(nb: SharedNotebookLike, afterId: string | null | undefined): number | null {
  if (!afterId) {
    return 0;
  }
  const anchor = indexOf(nb, afterId);
  return anchor === null ? null : anchor + 1;
}

function apply(nb: SharedNotebookLike, edit: DocumentEdit): Applied {
  if (edit.op === 'insert') {
    const at = after(nb, edit.afterId);
    if (at === null) {
      return { status: 'conflict', message: 'The cell to insert after is no longer in the notebook.' };
    }
    if (!edit.newId || typeof edit.source !== 'string') {
      return { status: 'invalid', message: 'An insert needs newId and source.' };
    }
    const marker = edit.marker ? { hdsp: edit.marker } : {};
    nb.insertCell(at, newCell(edit.newId, edit.cellType || 'code', edit.source, marker));
    return { status: 'ok', listCells: true };
  }
  const index = indexOf(nb, edit.cellId);
  if (index === null) {
    return { status: 'conflict', message: 'The cell is no longer in the notebook.', cells: [] };
  }
  const cell = nb.cells[index];
  if (edit.expectedSha256 && sourceDigest(cell.getSource()) !== edit.expectedSha256) {
    return {
      status: 'conflict',
      message: 'The cell was changed since the agent read it.',
      cells: [documentCell(cell, false)]
    };
  }
  switch (edit.op) {
    case 'edit': {
      if (typeof edit.source !== 'string') {
        return { status: 'invalid', message: 'An edit needs source.' };
      }
      const kind = edit.cellType || cell.cell_type;
      if (kind !== cell.cell_type) {
        // Another type is another kind of cell: the same id and metadata, anew.
        const metadata: Record<string, unknown> = { ...cell.getMetadata() };
        if (edit.marker) {
          metadata.hdsp = edit.marker;
        }
        const id = cell.id;
        nb.deleteCell(index);
        nb.insertCell(index, newCell(id, kind, edit.source, metadata));
        break;
      }
      cell.setSource(edit.source);
      if (kind === 'code') {
        setOutputs(cell, [], null);
      }
      if (edit.marker) {
        cell.setMetadata('hdsp', edit.marker);
      }
      break;
    }
    case 'delete':
      nb.deleteCell(index);
      break;
    case 'move': {
      const rest = nb.cells.filter(c => c.id !== cell.id);
      let at = 0;
      if (edit.afterId) {
        const anchor = rest.findIndex(c => c.id === edit.afterId);
        if (anchor < 0) {
          return { status: 'conflict', message: 'The cell to move after is no longer in the notebook.' };
        }
        at = anchor + 1;
      }
      if (at !== index) {
        nb.moveCell(index, at);
      }
      break;
    }
    case 'run':
      if (cell.cell_type === 'code') {
        setOutputs(cell, [], null, true);
      }
      return { status: 'ok', cells: [documentCell(cell, false)] };
    case 'outputs':
      if (cell.cell_type !== 'code') {
        return { status: 'invalid', message: 'Only a code cell has outputs.' };
      }
      setOutputs(cell, edit.outputs ?? [], edit.executionCount ?? null, edit.running ?? false);
      return { status: 'ok' };
    default:
      return { status: 'invalid', message: `Unknown op ${JSON.stringify(edit.op)}.` };
  }
  return { status: 'ok', listCells: true };
}

// ---- the host -------------------------------------------------------------------

/** A notebook open in this window: its path as Lab shows it, its model, and
 * its save (the window's own, as the user's Ctrl+S). */
export interface OpenNotebook {
  path: string;
  model: SharedNotebookLike;
  save?: () => Promise<void>;
}

/** The window's open notebooks, and word when they change. */
export interface NotebookSet {
  current(): OpenNotebook[];
  /** Call `listener` when notebooks open, close or are renamed; returns the unsubscribe. */
  subscribe(listener: () => void): () => void;
}

/** What the server extension answers a panel's HostDocuments (CONTRACT.md). */
export interface Declared {
  /** Each Lab path declared, made absolute (symlinks resolved) by the server. */
  paths: Record<string, string>;
  /** The server's clock (Unix seconds) when it answered. */
  serverTime: number;
}

/** How the host reaches hdspd (through the server extension). */
export interface HostTransport {
  declare(hostId: string, paths: string[], leaseSeconds: number, keepalive?: boolean): Promise<Declared>;
  answer(answer: DocumentEditAnswer): Promise<void>;
}

export interface LiveEditHostOptions {
  /** Whether the link to hdspd is up now (a declaration needs it). */
  connected?: () => boolean;
  /** The local clock, in ms (Date.now). */
  now?: () => number;
  /** The host id (a fresh `panel-…` one by default). */
  hostId?: string;
  /** Say what went wrong (console.warn by default). */
  warn?: (message: string, error?: unknown) => void;
}

function randomId(): string {
  const c = globalThis.crypto as Crypto | undefined;
  if (c && typeof c.randomUUID === 'function') {
    return c.randomUUID().replace(/-/g, '');
  }
  const bytes = new Uint8Array(16);
  c?.getRandomValues(bytes);
  return bytesToHex(bytes) + Date.now().toString(16);
}

export class LiveEditHost {
  readonly hostId: string;
  /** Absolute path (as the daemon names it) → Lab path, from the last declaration. */
  private absolute = new Map<string, string>();
  /** Server clock minus local clock, in seconds. */
  private offset = 0;
  private declaring: Promise<void> | null = null;
  private again = false;
  private timer: ReturnType<typeof setInterval> | null = null;
  private unsubscribe: (() => void) | null = null;
  private disposed = false;
  private readonly now: () => number;
  private readonly connected: () => boolean;
  private readonly warn: (message: string, error?: unknown) => void;
  /** What was declared last (sorted Lab paths), to declare only changes between renewals. */
  private declared: string | null = null;

  constructor(
    private readonly notebooks: NotebookSet,
    private readonly transport: HostTransport,
    options: LiveEditHostOptions = {}
  ) {
    this.hostId = options.hostId ?? PANEL_HOST_PREFIX + randomId();
    this.now = options.now ?? Date.now;
    this.connected = options.connected ?? (() => true);
    this.warn = options.warn ?? ((message, error) => console.warn(message, error));
  }

  /** Declare now, on every change, and every RENEW_MS. */
  start(): void {
    this.unsubscribe = this.notebooks.subscribe(() => void this.declareIfChanged());
    this.timer = setInterval(() => void this.declare(), RENEW_MS);
    void this.declare();
  }

  /** The link to hdspd came back: it may have forgotten this host (a restart). */
  reconnected(): void {
    void this.declare();
  }

  private paths(): string[] {
    return [...new Set(this.notebooks.current().map(n => n.path))].sort();
  }

  private declareIfChanged(): Promise<void> {
    return JSON.stringify(this.paths()) === this.declared ? Promise.resolve() : this.declare();
  }

  /** Declare the open notebooks (one declaration at a time; a change meanwhile declares again). */
  declare(): Promise<void> {
    if (this.disposed || !this.connected()) {
      return Promise.resolve();
    }
    if (this.declaring !== null) {
      this.again = true;
      return this.declaring;
    }
    this.declaring = (async () => {
      do {
        this.again = false;
        const paths = this.paths();
        const sent = this.now();
        try {
          const reply = await this.transport.declare(this.hostId, paths, LEASE_SECONDS);
          const middle = (sent + this.now()) / 2;
          this.offset = reply.serverTime - middle / 1000;
          this.absolute = new Map(Object.entries(reply.paths).map(([lab, abs]) => [abs, lab]));
          this.declared = JSON.stringify(paths);
        } catch (error) {
          this.declared = null;
          this.warn('hdsp: could not declare the open notebooks for live edits', error);
        }
      } while (this.again && !this.disposed);
      this.declaring = null;
    })();
    return this.declaring;
  }

  /** Told every event of the socket: applies the requests addressed to this host. */
  onEvent(event: TaskEvent): void {
    const data = event.data;
    if (data.eventName !== 'documentEditRequested') {
      return;
    }
    const request = data.payload[0];
    if (request.hostId !== this.hostId || this.disposed) {
      return;
    }
    void this.respond(request);
  }

  private async respond(request: DocumentEditRequest): Promise<void> {
    const answer = await this.handle(request);
    await this.transport.answer(answer).catch(error => this.warn('hdsp: an edit’s answer did not reach hdspd', error));
    if (answer.status === 'not_open') {
      // The daemon forgets a host that says so: say at once what is still open.
      void this.declare();
    }
  }

  /** Apply one request; the answer to send (a `replace` once it is saved). */
  async handle(request: DocumentEditRequest): Promise<DocumentEditAnswer> {
    const base = { requestId: request.requestId, hostId: this.hostId };
    if (this.now() / 1000 + this.offset > request.expiresAt) {
      return { ...base, status: 'expired', message: 'The request came too late; nothing was changed.' };
    }
    const lab = this.absolute.get(request.path);
    const open = lab === undefined ? undefined : this.notebooks.current().find(n => n.path === lab);
    if (open === undefined) {
      return { ...base, status: 'not_open', message: 'The notebook is not open in this JupyterLab window.' };
    }
    if (request.edit.op === 'replace' && open.save === undefined) {
      return { ...base, status: 'invalid', message: 'This window cannot save the notebook.' };
    }
    let outcome: EditOutcome;
    try {
      outcome = applyEdit(open.model, request.edit);
    } catch (error) {
      this.warn('hdsp: an edit of a notebook failed', error);
      const name = error instanceof Error ? error.name : typeof error;
      return { ...base, status: 'invalid', message: `The edit failed in JupyterLab: ${name}` };
    }
    if (request.edit.op === 'replace' && outcome.status === 'ok') {
      try {
        await open.save!();
      } catch (error) {
        this.warn('hdsp: a restored notebook was not saved', error);
        const name = error instanceof Error ? error.message : String(error);
        return { ...base, status: 'invalid', message: `JupyterLab showed the restore but did not save it: ${name}` };
      }
    }
    return { ...base, ...outcome };
  }

  /** Withdraw this host (the window goes away): `keepalive` lets the request outlive the page. */
  withdraw(keepalive = false): void {
    if (this.declared === null || this.declared === '[]') {
      return;
    }
    this.declared = '[]';
    void this.transport.declare(this.hostId, [], LEASE_SECONDS, keepalive).catch(() => undefined);
  }

  dispose(): void {
    if (this.disposed) {
      return;
    }
    this.withdraw();
    this.disposed = true;
    this.unsubscribe?.();
    if (this.timer !== null) {
      clearInterval(this.timer);
      this.timer = null;
    }
  }
}
