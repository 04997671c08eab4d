import {
  changedSummary,
  confirmText,
  diffLines,
  offersKernel,
  replayAskOf,
  restoreChoices,
  restoreData,
  resultLines,
  touchesCheckpoints
} from '../src/checkpoints';
import type { CheckpointInfo, ClineMessage } from '../src/wire';

const CP: CheckpointInfo = {
  taskId: 't1',
  number: 3,
  ts: Date.UTC(2026, 0, 2, 3, 4, 5),
  commit: 'abc',
  reason: 'before write_to_file',
  messageTs: 1234,
  changed: ['a.py', 'b.csv', 'c.txt', 'd.md'],
  executions: 2
};

describe('the checkpoint list', () => {
  it('says what changed, briefly', () => {
    expect(changedSummary(CP)).toBe('a.py, b.csv, c.txt (+1 more)');
    expect(changedSummary({ ...CP, changed: [] })).toBe('no file changed since the one before');
  });

  it('offers history and both only where a message shows the checkpoint', () => {
    expect(restoreChoices(CP).map(c => c.restore)).toEqual(['files', 'history', 'both']);
    expect(restoreChoices({ ...CP, messageTs: null }).map(c => c.restore)).toEqual(['files']);
  });

  it('offers the kernel only where the task had run code', () => {
    expect(offersKernel(CP)).toBe(true);
    expect(offersKernel({ ...CP, executions: 0 })).toBe(false);
    expect(offersKernel({ ...CP, executions: undefined })).toBe(false);
  });

  it('reads again on its own task s checkpoint events only', () => {
    expect(touchesCheckpoints('checkpointSaved', ['t1', {}], 't1')).toBe(true);
    expect(touchesCheckpoints('checkpointRestored', ['t1', {}, 'files'], 't1')).toBe(true);
    expect(touchesCheckpoints('checkpointSaved', ['t2', {}], 't1')).toBe(false);
    expect(touchesCheckpoints('message', ['t1'], 't1')).toBe(false);
  });
});

describe('the confirmation', () => {
  it('says what each restore does and that it can be undone', () => {
    const files = confirmText({ checkpoint: CP, restore: 'files', withKernel: false });
    expect(files[0]).toMatch(/^Restore checkpoint 3 \(before write_to_file, /);
    expect(files.join(' ')).toContain('can be undone');
    expect(files.join(' ')).not.toContain('history is rewound');
    const both = confirmText({ checkpoint: CP, restore: 'both', withKernel: true }, ['vendor/']);
    expect(both.join(' ')).toContain('history is rewound');
    expect(both.join(' ')).toContain('(2 executions) runs again, once you approve the cells');
    expect(both[both.length - 1]).toBe('Left as they are (git repositories of their own, not in checkpoints): vendor/.');
    const history = confirmText({ checkpoint: CP, restore: 'history', withKernel: false });
    expect(history.join(' ')).not.toContain('files go back');
  });

  it('sends a replay that never holds the request', () => {
    expect(restoreData('t1', { checkpoint: CP, restore: 'files', withKernel: false })).toEqual({
      taskId: 't1',
      checkpoint: 3,
      restore: 'files'
    });
    expect(restoreData('t1', { checkpoint: CP, restore: 'both', withKernel: true })).toEqual({
      taskId: 't1',
      checkpoint: 3,
      restore: 'both',
      withKernel: true,
      waitForReplay: false
    });
  });
});

describe('a restore s outcome', () => {
  it('names the files, the open notebooks restored, the notes, the undo, the nested repositories and a pending replay', () => {
    const lines = resultLines({
      taskId: 't1',
      checkpoint: 3,
      restore: 'files',
      files: ['a.py', 'plots.ipynb'],
      openNotebooks: ['plots.ipynb'],
      notes: ['other.ipynb is open in JupyterLab, which did not take the restore.'],
      undoCheckpoint: 7,
      nested: ['vendor/lib/'],
      replayPending: true
    });
    expect(lines).toEqual([
      'Restored checkpoint 3 (files only).',
      'Files changed: a.py, plots.ipynb.',
      'Restored in the open notebook and saved: plots.ipynb.',
      'other.ipynb is open in JupyterLab, which did not take the restore.',
      'To undo, restore checkpoint 7.',
      'Left as they are (git repositories of their own): vendor/lib/.',
      "The kernel's replay waits for your approval (below, or in the conversation)."
    ]);
  });

  it('says where a replay stopped, and the variables after one', () => {
    const base = { taskId: 't1', checkpoint: 2, restore: 'history' as const, rewound: true };
    expect(resultLines({ ...base, kernel: { approved: true, failedAt: 3, error: 'NameError: x' } })).toContain(
      "The kernel's replay stopped at execution 3: NameError: x."
    );
    expect(
      resultLines({ ...base, kernel: { approved: true, variables: [{ name: 'df', type: 'dict' }] } })
    ).toEqual(['Restored checkpoint 2 (history only).', "History rewound to the checkpoint's message.", 'Kernel replayed; variables: df.']);
    expect(resultLines({ ...base, kernel: { approved: false } })).toContain('The kernel was not replayed (not approved).');
  });
});

describe('a diff', () => {
  it('reads line by line, without git s header lines', () => {
    const diff = 'diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n same\n';
    expect(diffLines(diff)).toEqual([
      { kind: 'hunk', text: '@@ -1 +1 @@' },
      { kind: 'del', text: '-old' },
      { kind: 'add', text: '+new' },
      { kind: 'context', text: ' same' }
    ]);
  });

  it('reads a notebook s cells', () => {
    expect(diffLines('cell 0 (code) changed\n-a = 1\n+a = 2').map(l => l.kind)).toEqual(['cell', 'del', 'add']);
  });
});

describe('a replay ask', () => {
  const ask = (text: string, extra: Partial<ClineMessage> = {}): ClineMessage => ({
    ts: 99,
    type: 'ask',
    ask: 'tool',
    text,
    ...extra
  });
  const text = JSON.stringify({
    tool: 'replay_kernel',
    checkpoint: 3,
    note: 'Restart the kernel.',
    cells: [
      { seq: 1, code: 'df = 1' },
      { seq: 2, code: 'open("x")', skip: 'skipped: marked' }
    ]
  });

  it('shows its cells', () => {
    expect(replayAskOf(ask(text))).toEqual({
      ts: 99,
      checkpoint: 3,
      note: 'Restart the kernel.',
      cells: [
        { seq: 1, code: 'df = 1', skip: null },
        { seq: 2, code: 'open("x")', skip: 'skipped: marked' }
      ]
    });
  });

  it('is no other ask, nor an answered one, nor broken JSON', () => {
    expect(replayAskOf(ask(text, { isAnswered: true }))).toBeNull();
    expect(replayAskOf(ask(JSON.stringify({ tool: 'write_to_file', path: 'x' })))).toBeNull();
    expect(replayAskOf(ask('{not json'))).toBeNull();
    expect(replayAskOf(ask(text, { ask: 'followup' }))).toBeNull();
    expect(replayAskOf(null)).toBeNull();
  });

  it('keeps malformed cells as text', () => {
    const odd = JSON.stringify({ tool: 'replay_kernel', cells: [{ seq: 'x', code: 5 }, 'junk'] });
    expect(replayAskOf(ask(odd))?.cells).toEqual([{ seq: 0, code: '', skip: null }]);
  });
});
