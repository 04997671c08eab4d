// Issue 20 with live edits (issue 17): checkpoints of a notebook open in
// JupyterLab, through real-time collaboration (tests/jupyterlab/
// test_browser_live_edits_rtc.py) or through this window's panel
// (test_browser_live_edits_panel.py): the same steps either way.
//
// The user builds df in HDSP_NOTEBOOK (cells HDSP_USER_CELLS); the agent inserts
// HDSP_AGENT_SOURCE under the active cell and runs it, in the open notebook;
// the user does not save (with HDSP_AUTOSAVE set, the collaboration room saves
// by itself a second after each change; else nothing writes the file). The
// checkpoint before the insert, diffed with now, shows the agent's cell (a
// checkpoint reads the open document, not the file). Restored from the panel,
// the open notebook shows the user's cells at once, the file already holds
// them, no dialog comes, and the user's save keeps them.
import { expect, test } from '@jupyterlab/galata';

import { openPanel } from './control';
import {
  activateCell,
  cellCount,
  cellSource,
  essence,
  fileCells,
  openNotebook,
  pageCells,
  sendFromPanel,
  watchDialogs
} from './livePanel';

const NOTEBOOK = () => process.env.HDSP_NOTEBOOK!;
const USER_CELLS = (): string[] => JSON.parse(process.env.HDSP_USER_CELLS!);
const AGENT = () => process.env.HDSP_AGENT_SOURCE!;

test.use({ viewport: { width: 1280, height: 800 } });
test.describe.configure({ timeout: 180000 });

const cells = (page: any) => page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell');

test('a checkpoint keeps the agent’s unsaved cell, and its restore shows in the open notebook at once', async ({
  page
}) => {
  const dialogs = await watchDialogs(page);
  await openNotebook(page, NOTEBOOK());
  await page.notebook.runCell(0); // the user builds df
  await expect(cells(page).nth(0).locator('.jp-OutputArea-output')).toContainText('(8, 1)');
  await activateCell(page, 0);

  await sendFromPanel(page, 'add a cell with the sum of x');
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/completed/i, { timeout: 60000 });
  // The agent's cell, run, in the open notebook; the file is still the user's.
  await expect(cells(page)).toHaveCount(USER_CELLS().length + 1);
  expect(await cellSource(page, 1)).toBe(AGENT());
  await expect(cells(page).nth(1).locator('.jp-OutputArea-output')).toContainText('31');
  if (process.env.HDSP_AUTOSAVE) {
    // The room saved the agent's cell by itself.
    await expect.poll(() => fileCells(NOTEBOOK()).map(c => essence(c).source)).toContain(AGENT());
  } else {
    // Nothing wrote the file: it is still the user's.
    expect(fileCells(NOTEBOOK()).map(c => essence(c))).toEqual(
      USER_CELLS().map(source => ({ type: 'code', source, count: null, outputs: [] }))
    );
  }

  // The checkpoint before the insert, diffed with now: the agent's cell, though
  // it was never saved.
  await openPanel(page);
  const view = page.getByTestId('hdsp-checkpoints');
  await view.getByTestId('hdsp-checkpoints-toggle').click();
  await expect(view.getByTestId('hdsp-checkpoint')).toHaveCount(2);
  const first = view.locator('[data-testid="hdsp-checkpoint"][data-number="1"]');
  await expect(first).toContainText('before insert_cell');
  await first.getByTestId('hdsp-checkpoint-diff-button').click();
  const diff = first.getByTestId('hdsp-checkpoint-diff');
  await expect(diff).toContainText(`modified ${NOTEBOOK()}`);
  await expect(diff).toContainText('cell 1 (code) added');
  await expect(diff).toContainText(AGENT());

  // Restore it (files): the open notebook shows the user's cells at once, the
  // output of their run included (what JupyterLab showed at the checkpoint).
  await first.getByTestId('hdsp-checkpoint-restore').click();
  await first.getByTestId('hdsp-restore-go').click();
  const result = view.getByTestId('hdsp-restore-result');
  await expect(result).toContainText(`Restored in the open notebook and saved: ${NOTEBOOK()}.`);
  await expect(cells(page)).toHaveCount(USER_CELLS().length);
  expect(await cellCount(page)).toBe(USER_CELLS().length);
  for (const [i, source] of USER_CELLS().entries()) {
    expect(await cellSource(page, i)).toBe(source);
  }
  await expect(cells(page).nth(0).locator('.jp-OutputArea-output')).toContainText('(8, 1)');

  // The file holds what the page shows already, and still after the user saves.
  const same = async () =>
    JSON.stringify(fileCells(NOTEBOOK()).map(c => essence(c))) ===
    JSON.stringify((await pageCells(page, NOTEBOOK())).map(c => essence(c)));
  await expect.poll(same, { message: 'the file after the restore' }).toBe(true);
  await page.notebook.activate(NOTEBOOK());
  expect(await page.notebook.save()).toBe(true);
  await expect.poll(same, { message: 'the file after the user saved' }).toBe(true);
  expect(fileCells(NOTEBOOK()).map(c => essence(c).source)).toEqual(USER_CELLS());
  expect(await dialogs()).toEqual([]);
});
