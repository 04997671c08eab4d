// Issue 17, without real-time collaboration, scenario 4: the user closes the
// notebook while the agent works: its next edit goes to the file, and opening the
// notebook again shows it.
import { expect, test } from '@jupyterlab/galata';

import { request } from './control';
import { cellCount, cellSource, noDialog, openNotebook, sendFromPanel } from './livePanel';

test('an edit after the notebook was closed goes to its file', async ({ page }) => {
  await openNotebook(page, 'closing.ipynb');
  await sendFromPanel(page, 'add a cell');
  await request('wait-read'); // the agent read the open notebook; its insert is held

  // (Lab marks it changed when its kernel connects: the user discards that.)
  expect(await page.notebook.close(true)).toBe(true);
  await expect(page.locator('.jp-NotebookPanel')).toHaveCount(0);
  await request('release-insert');
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/completed/i, { timeout: 60000 });

  await openNotebook(page, 'closing.ipynb');
  await expect.poll(() => cellCount(page)).toBe(2);
  expect(await cellSource(page, 1)).toBe('b = 2');
  await noDialog(page);
});
