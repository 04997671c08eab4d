import { emptyTask, OpenTask } from '../src/state';
import {
  applyListing,
  describeColumns,
  describeVariable,
  EMPTY_VIEW,
  executionKey,
  formatBytes
} from '../src/variables';
import type { ClineMessage, VariableList } from '../src/wire';

function withMessages(messages: ClineMessage[]): OpenTask {
  const task = emptyTask('t1');
  for (const m of messages) {
    task.messages[m.ts] = { message: m, asOf: 0 };
    task.order.push(m.ts);
  }
  return task;
}

const DF_LIST: VariableList = {
  kernelId: 'k1',
  status: 'ok',
  variables: [
    {
      name: 'df',
      type: 'pandas.DataFrame',
      shape: [1000, 2],
      memory: 16132,
      columns: [
        { name: 'x', dtype: 'int64' },
        { name: 'y', dtype: 'float64' }
      ],
      columnsOmitted: 3,
      head: '   x    y\n0  0  0.0'
    },
    { name: 'bad', type: 'Unprintable', memory: 48, error: 'preview: raised ValueError' },
    { name: 'n', type: 'int', memory: 28, preview: '42' }
  ]
};

describe('the variables view', () => {
  it('reads the variables again when an execution of the task ends, not while it runs', () => {
    const running = withMessages([
      { ts: 1, type: 'say', say: 'text', text: 'hi' },
      { ts: 2, type: 'say', say: 'cell_output', text: '{}', partial: true }
    ]);
    const ended = withMessages([
      { ts: 1, type: 'say', say: 'text', text: 'hi' },
      { ts: 2, type: 'say', say: 'cell_output', text: '{}', partial: false }
    ]);
    const more = withMessages([
      { ts: 1, type: 'say', say: 'text', text: 'hi' },
      { ts: 2, type: 'say', say: 'cell_output', text: '{}', partial: false },
      { ts: 3, type: 'say', say: 'text', text: 'and then' }
    ]);
    const again = withMessages([
      { ts: 2, type: 'say', say: 'cell_output', text: '{}', partial: false },
      { ts: 4, type: 'say', say: 'cell_output', text: '{}', partial: false }
    ]);
    expect(executionKey(null)).toBe('');
    expect(executionKey(running)).not.toBe(executionKey(ended));
    expect(executionKey(more)).toBe(executionKey(ended)); // text alone changes nothing
    expect(executionKey(again)).not.toBe(executionKey(ended));
  });

  it('keeps the last list while the kernel is busy, and says so', () => {
    const shown = applyListing(EMPTY_VIEW, 't1', DF_LIST);
    expect(shown).toMatchObject({ taskId: 't1', note: null, loading: false });
    expect(shown.listing?.variables?.map(v => v.name)).toEqual(['df', 'bad', 'n']);

    const busy = applyListing(shown, 't1', { kernelId: 'k1', status: 'busy', message: 'The kernel is running code.' });
    expect(busy.listing).toBe(shown.listing);
    expect(busy.note).toBe('The kernel is running code.');

    // Another task's list is never shown for this one.
    const other = applyListing(shown, 't2', { status: 'busy', message: 'busy' });
    expect(other.listing).toBe(null);
    const none = applyListing(shown, 't1', { status: 'no_kernel' });
    expect(none).toMatchObject({ listing: null, note: 'No kernel yet: the task has run no code.' });
  });

  it('describes a variable in a line: type, shape, dtype, memory, columns', () => {
    const [df, bad, n] = DF_LIST.variables ?? [];
    expect(describeVariable(df)).toBe('pandas.DataFrame · 1000 × 2 · 15.8 KB');
    expect(describeColumns(df)).toBe('x: int64, y: float64 (+3 more)');
    expect(describeVariable(bad)).toBe('Unprintable · 48 B');
    expect(describeVariable({ name: 's', type: 'list', length: 3, memory: 80 })).toBe('list · len 3 · 80 B');
    expect(describeVariable(n)).toBe('int · 28 B');
    expect(formatBytes(16_000_132)).toBe('15.3 MB');
  });
});
