import { Signal } from '@lumino/signaling';

import { NotebookContextSource } from '../src/contextChips';
import {
  chipsOf,
  contextOf,
  MAX_CELL_HEAD_CHARS,
  MAX_OUTLINE_CELLS,
  MAX_SELECTION_CHARS,
  outlineCell,
  outlineOf,
  splitLines,
  withoutRemoved
} from '../src/promptContext';

describe('the prompt context', () => {
  it('splits lines as the daemon does (Python splitlines)', () => {
    expect(splitLines('')).toEqual([]);
    expect(splitLines('a\nb\n')).toEqual(['a', 'b']);
    expect(splitLines('a\r\nb\rc')).toEqual(['a', 'b', 'c']);
  });

  it('outlines a cell: first lines, bounded; execution count; output kinds', () => {
    const cell = outlineCell({
      cellType: 'code',
      id: 'c1',
      source: 'import pandas as pd\ndf = pd.read_csv("s.csv")\ndf.head()\nx\n',
      executionCount: 3,
      outputs: [
        { output_type: 'stream', name: 'stdout', text: 'hi' },
        { output_type: 'execute_result', data: { 'text/html': '<table/>', 'text/plain': 'df' } },
        { output_type: 'stream', name: 'stderr', text: 'again' },
        { output_type: 'display_data', data: { 'text/plain': 'x' } }
      ]
    });
    expect(cell).toEqual({
      cellType: 'code',
      id: 'c1',
      head: 'import pandas as pd\ndf = pd.read_csv("s.csv")\ndf.head()',
      lines: 4,
      executionCount: 3,
      outputKinds: ['stream', 'text/html', 'text/plain']
    });
    const long = outlineCell({ cellType: 'markdown', source: 'y'.repeat(1000) });
    expect(long.head?.length).toBe(MAX_CELL_HEAD_CHARS);
    expect(long.head?.endsWith('…')).toBe(true);
    expect(outlineCell({ cellType: 'weird', source: '' })).toEqual({ cellType: 'raw', head: '', lines: 0 });
  });

  it('cuts a long notebook and says so', () => {
    const cells = Array.from({ length: MAX_OUTLINE_CELLS + 5 }, () => ({ cellType: 'code', source: '1' }));
    const { outline, truncated } = outlineOf(cells);
    expect(outline.length).toBe(MAX_OUTLINE_CELLS);
    expect(truncated).toBe(true);
  });

  it('builds the context and its chips, and drops what the user removed', () => {
    const context = contextOf({
      path: 'work/sales.ipynb',
      activeIndex: 1,
      cells: [
        { cellType: 'markdown', id: 'a', source: '# t' },
        { cellType: 'code', id: 'b', source: 'df', executionCount: 7 }
      ],
      selection: 'z'.repeat(MAX_SELECTION_CHARS + 10)
    });
    expect(context?.notebook).toBe('work/sales.ipynb');
    expect(context?.cell).toEqual({ index: 1, id: 'b' });
    expect(context?.selection?.length).toBe(MAX_SELECTION_CHARS);
    expect(chipsOf(context).map(c => [c.kind, c.label])).toEqual([
      ['notebook', 'sales.ipynb'],
      ['cell', 'cell 2 [7]'],
      ['selection', `“${'z'.repeat(23)}…”`],
      ['outline', 'outline (2 cells)']
    ]);
    const less = withoutRemoved({ ...context, kernelId: 'made-up' }, new Set(['selection', 'outline']));
    expect(less).toEqual({ notebook: 'work/sales.ipynb', cell: { index: 1, id: 'b' } });
    expect(withoutRemoved(context, new Set(['notebook', 'cell', 'selection', 'outline']))).toBe(null);
    expect(contextOf(null)).toBe(null);
  });

  it('follows the shell: the current notebook, its active cell, the selection', () => {
    const activeCellChanged = new Signal<unknown, unknown>({});
    const source = 'alpha beta\ngamma';
    const cell = (id: string, text: string) => ({
      model: { type: 'code', id, sharedModel: { getSource: () => text }, executionCount: null, outputs: { toJSON: () => [] } },
      editor: {
        getSelection: () => ({ start: { line: 0, column: 6 }, end: { line: 0, column: 10 } }),
        getOffsetAt: (p: { line: number; column: number }) => p.column
      }
    });
    const notebook = {
      context: { path: 'nb.ipynb' },
      content: { activeCellIndex: 0, activeCell: cell('one', source), widgets: [cell('one', source), cell('two', 'x')], activeCellChanged }
    };
    const currentChanged = new Signal<unknown, unknown>({});
    const shell = { currentWidget: notebook as unknown, currentChanged };
    const nbs = new NotebookContextSource(shell);
    let calls = 0;
    nbs.subscribe(() => calls++);
    expect(nbs.getContext()).toMatchObject({ notebook: 'nb.ipynb', cell: { index: 0, id: 'one' }, selection: 'beta' });

    notebook.content.activeCellIndex = 1;
    notebook.content.activeCell = cell('two', 'x');
    activeCellChanged.emit(null);
    expect(nbs.getContext()?.cell).toEqual({ index: 1, id: 'two' });
    expect(calls).toBe(1);

    shell.currentWidget = { title: 'a text editor' };
    currentChanged.emit(null);
    expect(nbs.getContext()).toBe(null);
    nbs.dispose();
  });
});
