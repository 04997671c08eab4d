// The panel's live edits on a real notebook model: @jupyter/ydoc's YNotebook, the
// shared model every JupyterLab 4 notebook has (collaborative or not).
import { YNotebook } from '@jupyter/ydoc';

import {
  applyEdit,
  Declared,
  HostTransport,
  LEASE_SECONDS,
  LiveEditHost,
  NotebookSet,
  OpenNotebook,
  PANEL_HOST_PREFIX,
  sourceDigest
} from '../src/liveEdits';
import type { DocumentEdit, DocumentEditAnswer, DocumentEditRequest, TaskEvent } from '../src/wire';

// Each YNotebook's awareness runs an interval timer until the notebook is
// disposed: left running, jest's process never exits.
const made: YNotebook[] = [];
afterEach(() => made.splice(0).forEach(nb => nb.dispose()));

function notebook(...sources: string[]): YNotebook {
  const nb = new YNotebook();
  made.push(nb);
  sources.forEach((source, i) => nb.insertCell(i, { cell_type: 'code', source, id: `c${i}` }));
  return nb;
}

function sources(nb: YNotebook): string[] {
  return nb.cells.map(c => c.getSource());
}

const MARKER = { editedBy: 'agent', task: 't1', ts: 1 };

describe('applyEdit', () => {
  test('the digest is the SHA-256 of the UTF-8 source, as the daemon computes it', () => {
    // python3 -c "import hashlib; print(hashlib.sha256('é = 1'.encode()).hexdigest())"
    expect(sourceDigest('')).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sourceDigest('é = 1')).toBe(sourceDigest('\u00e9 = 1'));
    expect(sourceDigest('a')).toBe('ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb');
  });

  test('a read gives every cell with its outputs and metadata', () => {
    const nb = notebook('a = 1');
    const outcome = applyEdit(nb, { op: 'read' });
    expect(outcome.status).toBe('ok');
    expect(outcome.cells).toEqual([
      { id: 'c0', cellType: 'code', source: 'a = 1', executionCount: null, outputs: [], metadata: {} }
    ]);
  });

  test('insert puts a marked cell under the named one', () => {
    const nb = notebook('a = 1', 'b = 2');
    const edit: DocumentEdit = { op: 'insert', afterId: 'c0', newId: 'n1', source: 'df.x.plot()', marker: MARKER };
    const outcome = applyEdit(nb, edit);
    expect(outcome.status).toBe('ok');
    expect(sources(nb)).toEqual(['a = 1', 'df.x.plot()', 'b = 2']);
    expect(nb.cells[1].id).toBe('n1');
    expect(nb.cells[1].cell_type).toBe('code');
    expect(nb.cells[1].getMetadata('hdsp')).toEqual(MARKER);
    expect(outcome.cells?.map(c => c.id)).toEqual(['c0', 'n1', 'c1']);
    // At the top without afterId; a markdown cell when asked.
    applyEdit(nb, { op: 'insert', newId: 'n2', source: '# Title', cellType: 'markdown' });
    expect(nb.cells[0].cell_type).toBe('markdown');
  });

  test('insert after a cell that is gone is a conflict and inserts nothing', () => {
    const nb = notebook('a = 1');
    const outcome = applyEdit(nb, { op: 'insert', afterId: 'gone', newId: 'n1', source: 'x' });
    expect(outcome.status).toBe('conflict');
    expect(sources(nb)).toEqual(['a = 1']);
    expect(applyEdit(nb, { op: 'insert', newId: 'n1' }).status).toBe('invalid');
  });

  test('edit replaces the source, clears outputs, marks the cell', () => {
    const nb = notebook('print(1)');
    const cell = nb.cells[0] as any;
    cell.setOutputs([{ output_type: 'stream', name: 'stdout', text: '1\n' }]);
    cell.execution_count = 3;
    const outcome = applyEdit(nb, {
      op: 'edit',
      cellId: 'c0',
      expectedSha256: sourceDigest('print(1)'),
      source: 'print(2)',
      marker: MARKER
    });
    expect(outcome.status).toBe('ok');
    expect(sources(nb)).toEqual(['print(2)']);
    expect(cell.getOutputs()).toEqual([]);
    expect(cell.execution_count).toBeNull();
    expect(nb.cells[0].getMetadata('hdsp')).toEqual(MARKER);
  });

  test('edit to another type keeps the id and metadata', () => {
    const nb = notebook('text');
    nb.cells[0].setMetadata('tags', ['keep']);
    const outcome = applyEdit(nb, {
      op: 'edit',
      cellId: 'c0',
      expectedSha256: sourceDigest('text'),
      source: '# Text',
      cellType: 'markdown',
      marker: MARKER
    });
    expect(outcome.status).toBe('ok');
    expect(nb.cells[0].cell_type).toBe('markdown');
    expect(nb.cells[0].id).toBe('c0');
    expect(nb.cells[0].getMetadata('tags')).toEqual(['keep']);
    expect(nb.cells[0].getMetadata('hdsp')).toEqual(MARKER);
  });

  test('a cell the user changed since the agent read it is a conflict, never overwritten', () => {
    const nb = notebook('agent read this');
    nb.cells[0].setSource('the user typed this');
    for (const op of ['edit', 'delete', 'move', 'run'] as const) {
      const outcome = applyEdit(nb, {
        op,
        cellId: 'c0',
        expectedSha256: sourceDigest('agent read this'),
        source: 'agent text'
      });
      expect(outcome.status).toBe('conflict');
      expect(outcome.cells).toEqual([
        { id: 'c0', cellType: 'code', source: 'the user typed this', executionCount: null }
      ]);
    }
    expect(sources(nb)).toEqual(['the user typed this']);
    // A cell deleted since: a conflict with no cell.
    const gone = applyEdit(nb, { op: 'edit', cellId: 'nope', expectedSha256: 'x', source: 'y' });
    expect(gone).toEqual({ status: 'conflict', message: 'The cell is no longer in the notebook.', cells: [] });
  });

  test('delete and move', () => {
    const nb = notebook('a', 'b', 'c', 'd');
    const sha = (s: string) => sourceDigest(s);
    expect(applyEdit(nb, { op: 'move', cellId: 'c0', expectedSha256: sha('a'), afterId: 'c2' }).status).toBe('ok');
    expect(sources(nb)).toEqual(['b', 'c', 'a', 'd']);
    expect(applyEdit(nb, { op: 'move', cellId: 'c3', expectedSha256: sha('d') }).status).toBe('ok');
    expect(sources(nb)).toEqual(['d', 'b', 'c', 'a']);
    expect(applyEdit(nb, { op: 'move', cellId: 'c2', expectedSha256: sha('c'), afterId: 'gone' }).status).toBe(
      'conflict'
    );
    // Moved cells keep their ids (a later edit names them).
    expect(nb.cells.map(c => c.id)).toEqual(['c3', 'c1', 'c2', 'c0']);
    expect(applyEdit(nb, { op: 'delete', cellId: 'c1', expectedSha256: sha('b') }).status).toBe('ok');
    expect(sources(nb)).toEqual(['d', 'c', 'a']);
  });

  test('run clears the cell and gives it back; outputs stream into it', () => {
    const nb = notebook('print("hi")');
    const cell = nb.cells[0] as any;
    cell.setOutputs([{ output_type: 'stream', name: 'stdout', text: 'old\n' }]);
    const run = applyEdit(nb, { op: 'run', cellId: 'c0', expectedSha256: sourceDigest('print("hi")') });
    expect(run.status).toBe('ok');
    expect(run.cells?.[0].id).toBe('c0');
    expect(cell.getOutputs()).toEqual([]);
    // It shows as running ([*]) while its outputs stream in, and not once they are final.
    expect(cell.executionState).toBe('running');
    const first = [{ output_type: 'stream', name: 'stdout', text: 'h' }];
    expect(applyEdit(nb, { op: 'outputs', cellId: 'c0', outputs: first, running: true }).status).toBe('ok');
    expect(cell.executionState).toBe('running');
    const outputs = [
      { output_type: 'stream', name: 'stdout', text: 'hi\n' },
      { output_type: 'display_data', data: { 'image/png': 'iVBORw0KGgo=', 'text/plain': '<Figure>' }, metadata: {} }
    ];
    expect(applyEdit(nb, { op: 'outputs', cellId: 'c0', outputs, executionCount: 4 }).status).toBe('ok');
    expect(cell.executionState).toBe('idle');
    expect(cell.execution_count).toBe(4);
    expect(cell.getOutputs().map((o: any) => o.output_type)).toEqual(['stream', 'display_data']);
    expect(cell.getOutputs()[1].data['image/png']).toBe('iVBORw0KGgo=');
  });

  test('a snapshot gives the whole notebook as the window would save it, and changes nothing', () => {
    const nb = notebook();
    nb.fromJSON({
      nbformat: 4,
      nbformat_minor: 5,
      metadata: { kernelspec: { name: 'python3', display_name: 'Python 3' } },
      cells: [
        { id: 'c0', cell_type: 'code', source: 'a = 1', metadata: {}, outputs: [], execution_count: null },
        { id: 'c1', cell_type: 'code', source: 'b = 2', metadata: {}, outputs: [], execution_count: 1 }
      ]
    });
    (nb.cells[1] as any).setOutputs([{ output_type: 'stream', name: 'stdout', text: '2\n' }]);
    const outcome = applyEdit(nb, { op: 'snapshot' });
    expect(outcome.status).toBe('ok');
    const saved = outcome.notebook as any;
    expect(saved).toEqual(nb.toJSON());
    expect(saved.metadata.kernelspec.name).toBe('python3');
    expect(saved.cells.map((c: any) => c.source)).toEqual(['a = 1', 'b = 2']);
    expect(saved.cells[1].outputs).toEqual([{ output_type: 'stream', name: 'stdout', text: '2\n' }]);
    expect(sources(nb)).toEqual(['a = 1', 'b = 2']);
  });

  test('a replace makes the notebook the one given, cells, outputs and metadata', () => {
    const nb = notebook('a = 1', 'agent cell');
    const restored = {
      nbformat: 4,
      nbformat_minor: 5,
      metadata: { kernelspec: { name: 'python3', display_name: 'Python 3' } },
      cells: [
        {
          id: 'c0',
          cell_type: 'code',
          source: 'a = 1',
          metadata: {},
          execution_count: 1,
          outputs: [{ output_type: 'execute_result', data: { 'text/plain': '1' }, metadata: {}, execution_count: 1 }]
        },
        { id: 'm1', cell_type: 'markdown', source: '# Notes', metadata: {} }
      ]
    };
    const request = { op: 'replace' as const, notebook: restored };
    expect(applyEdit(nb, request).status).toBe('ok');
    expect(sources(nb)).toEqual(['a = 1', '# Notes']);
    expect(nb.cells.map(c => c.cell_type)).toEqual(['code', 'markdown']);
    expect((nb.cells[0] as any).getOutputs()[0].data['text/plain']).toBe('1');
    expect(nb.getMetadata('kernelspec')).toEqual({ name: 'python3', display_name: 'Python 3' });
    // The request's notebook is left as it came.
    expect(request.notebook.cells[1].id).toBe('m1');
    expect(applyEdit(nb, { op: 'replace' }).status).toBe('invalid');
    expect(applyEdit(nb, { op: 'replace', notebook: { cells: 'no' } }).status).toBe('invalid');
    expect(sources(nb)).toEqual(['a = 1', '# Notes']);
  });

  test('an unknown op is invalid', () => {
    const nb = notebook('a');
    expect(applyEdit(nb, { op: 'explode' as any, cellId: 'c0' }).status).toBe('invalid');
  });
});

// ---- the host ------------------------------------------------------------------

class Notebooks implements NotebookSet {
  open: OpenNotebook[] = [];
  private listeners = new Set<() => void>();
  current(): OpenNotebook[] {
    return this.open;
  }
  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
  set(open: OpenNotebook[]): void {
    this.open = open;
    this.listeners.forEach(l => l());
  }
}

/** What the server extension does with a declaration, in memory. */
class Server implements HostTransport {
  declarations: { hostId: string; paths: string[]; keepalive: boolean }[] = [];
  answers: DocumentEditAnswer[] = [];
  clock = 1000; // the server's clock, seconds

  async declare(hostId: string, paths: string[], leaseSeconds: number, keepalive = false): Promise<Declared> {
    expect(leaseSeconds).toBe(LEASE_SECONDS);
    this.declarations.push({ hostId, paths, keepalive });
    return { paths: Object.fromEntries(paths.map(p => [p, `/root/${p}`])), serverTime: this.clock };
  }

  async answer(answer: DocumentEditAnswer): Promise<void> {
    this.answers.push(answer);
  }
}

function requested(request: DocumentEditRequest): TaskEvent {
  return { type: 'TaskEvent', data: { eventName: 'documentEditRequested', payload: [request] } } as unknown as TaskEvent;
}

function last<T>(items: T[]): T | undefined {
  return items[items.length - 1];
}

async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) {
    await Promise.resolve();
  }
}

describe('LiveEditHost', () => {
  let localMs = 5_000_000; // the browser's clock, far from the server's
  const now = () => localMs;

  async function started(open: OpenNotebook[]): Promise<{ host: LiveEditHost; server: Server; notebooks: Notebooks }> {
    const notebooks = new Notebooks();
    notebooks.open = open;
    const server = new Server();
    const host = new LiveEditHost(notebooks, server, { now, warn: () => undefined });
    host.start();
    await settle();
    return { host, server, notebooks };
  }

  afterEach(() => jest.useRealTimers());

  test('declares the open notebooks, again when they change, and withdraws on dispose', async () => {
    jest.useFakeTimers();
    const { host, server, notebooks } = await started([{ path: 'a.ipynb', model: notebook('a') }]);
    expect(host.hostId.startsWith(PANEL_HOST_PREFIX)).toBe(true);
    expect(server.declarations).toEqual([{ hostId: host.hostId, paths: ['a.ipynb'], keepalive: false }]);
    notebooks.set([...notebooks.open, { path: 'b.ipynb', model: notebook('b') }]);
    await settle();
    expect(last(server.declarations)?.paths).toEqual(['a.ipynb', 'b.ipynb']);
    notebooks.set(notebooks.open); // no change: nothing declared
    await settle();
    expect(server.declarations).toHaveLength(2);
    jest.advanceTimersByTime(LEASE_SECONDS * 1000); // renewed before the lease ends
    await settle();
    expect(server.declarations.length).toBeGreaterThanOrEqual(3);
    host.withdraw(true); // the page goes away
    expect(last(server.declarations)).toEqual({ hostId: host.hostId, paths: [], keepalive: true });
    host.dispose();
  });

  test('applies a request addressed to it and answers; ignores others', async () => {
    const nb = notebook('a = 1');
    const { host, server } = await started([{ path: 'a.ipynb', model: nb }]);
    const request: DocumentEditRequest = {
      requestId: 'r1',
      hostId: host.hostId,
      path: '/root/a.ipynb',
      // The server's clock says 1000: the request is good for 10 s by it,
      // whatever the browser's clock says.
      expiresAt: 1010,
      edit: { op: 'insert', afterId: 'c0', newId: 'n1', source: 'df.x.plot()', marker: MARKER }
    };
    host.onEvent(requested({ ...request, hostId: 'panel-another-window' }));
    await settle();
    expect(server.answers).toEqual([]);
    expect(sources(nb)).toEqual(['a = 1']);
    host.onEvent(requested(request));
    await settle();
    expect(sources(nb)).toEqual(['a = 1', 'df.x.plot()']);
    expect(server.answers).toHaveLength(1);
    expect(server.answers[0]).toMatchObject({ requestId: 'r1', hostId: host.hostId, status: 'ok' });
    host.dispose();
  });

  test('two windows with the same notebook: only the addressed one applies the edit', async () => {
    const mine = notebook('a = 1');
    const theirs = notebook('a = 1');
    const one = await started([{ path: 'a.ipynb', model: mine }]);
    const two = await started([{ path: 'a.ipynb', model: theirs }]);
    const event = requested({
      requestId: 'r1',
      hostId: two.host.hostId,
      path: '/root/a.ipynb',
      expiresAt: 1010,
      edit: { op: 'insert', newId: 'n1', source: 'x = 2' }
    });
    one.host.onEvent(event);
    two.host.onEvent(event);
    await settle();
    expect(sources(mine)).toEqual(['a = 1']);
    expect(sources(theirs)).toEqual(['x = 2', 'a = 1']);
    expect(one.server.answers).toEqual([]);
    expect(two.server.answers.map(a => a.status)).toEqual(['ok']);
    one.host.dispose();
    two.host.dispose();
  });

  test('a closed notebook is not_open (and the host declares again); a late request is expired', async () => {
    const nb = notebook('a = 1');
    const { host, server, notebooks } = await started([{ path: 'a.ipynb', model: nb }]);
    notebooks.open = []; // closed, before the declaration went out
    host.onEvent(
      requested({ requestId: 'r1', hostId: host.hostId, path: '/root/a.ipynb', expiresAt: 1010, edit: { op: 'read' } })
    );
    await settle();
    expect(server.answers[0].status).toBe('not_open');
    expect(last(server.declarations)?.paths).toEqual([]);
    notebooks.set([{ path: 'a.ipynb', model: nb }]);
    await settle();
    localMs += 11_000; // 11 s later by the browser's clock: past expiresAt on the server's
    host.onEvent(
      requested({
        requestId: 'r2',
        hostId: host.hostId,
        path: '/root/a.ipynb',
        expiresAt: 1010,
        edit: { op: 'insert', newId: 'n1', source: 'late' }
      })
    );
    await settle();
    expect(server.answers[1].status).toBe('expired');
    expect(sources(nb)).toEqual(['a = 1']);
    host.dispose();
  });

  test('a replace is saved with the window’s own save before it is answered', async () => {
    const nb = notebook('a = 1', 'agent cell');
    let release: () => void = () => undefined;
    const saves: string[][] = [];
    const save = () =>
      new Promise<void>(resolve => {
        saves.push(sources(nb));
        release = resolve;
      });
    const { host, server } = await started([{ path: 'a.ipynb', model: nb, save }]);
    const notebookOf = (...cells: string[]) => ({
      nbformat: 4,
      nbformat_minor: 5,
      metadata: {},
      cells: cells.map((source, i) => ({ id: `r${i}`, cell_type: 'code', source, metadata: {}, outputs: [] }))
    });
    host.onEvent(
      requested({
        requestId: 'r1',
        hostId: host.hostId,
        path: '/root/a.ipynb',
        expiresAt: 1010,
        edit: { op: 'replace', notebook: notebookOf('a = 1') }
      })
    );
    await settle();
    // Shown at once, saved as shown, answered only once saved.
    expect(sources(nb)).toEqual(['a = 1']);
    expect(saves).toEqual([['a = 1']]);
    expect(server.answers).toEqual([]);
    release();
    await settle();
    expect(server.answers.map(a => [a.requestId, a.status])).toEqual([['r1', 'ok']]);

    // A save that fails is an invalid answer that says so.
    const failing = notebook('x');
    const other = await started([
      { path: 'b.ipynb', model: failing, save: () => Promise.reject(new Error('disk full')) }
    ]);
    other.host.onEvent(
      requested({
        requestId: 'r2',
        hostId: other.host.hostId,
        path: '/root/b.ipynb',
        expiresAt: 1010,
        edit: { op: 'replace', notebook: notebookOf('y') }
      })
    );
    await settle();
    expect(other.server.answers[0]).toMatchObject({ requestId: 'r2', status: 'invalid' });
    expect(other.server.answers[0].message).toContain('disk full');
    host.dispose();
    other.host.dispose();
  });

  test('no declaration while the link to hdspd is down; one when it comes back', async () => {
    let up = false;
    const notebooks = new Notebooks();
    notebooks.open = [{ path: 'a.ipynb', model: notebook('a') }];
    const server = new Server();
    const host = new LiveEditHost(notebooks, server, { now, connected: () => up, warn: () => undefined });
    host.start();
    await settle();
    expect(server.declarations).toEqual([]);
    up = true;
    host.reconnected();
    await settle();
    expect(server.declarations.map(d => d.paths)).toEqual([['a.ipynb']]);
    host.dispose();
  });
});
