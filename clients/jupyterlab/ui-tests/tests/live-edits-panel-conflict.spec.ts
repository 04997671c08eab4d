// Issue 17, without real-time collaboration, scenario 3: the user edits the plot
// cell while the agent prepares an edit of it: the agent's edit is not applied,
// the model is told of a conflict with the user's text (the Python side checks
// what the model received), and the cell keeps the user's text.
import { expect, test } from '@jupyterlab/galata';

import { request } from './control';
import { activateCell, cellSource, noDialog, openNotebook, sendFromPanel } from './livePanel';

test('an edit of a cell the user changed meanwhile is a conflict', async ({ page }) => {
  await openNotebook(page, 'conflict.ipynb');
  await activateCell(page, 1);
  await sendFromPanel(page, 'give the plot a title');
  await request('wait-read'); // the agent has read the notebook; its edit is held

  await page.notebook.setCell(1, 'code', "ax = df.x.plot(color='red')");
  expect(await cellSource(page, 1)).toBe("ax = df.x.plot(color='red')");
  await request('release-edit');

  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/completed/i, { timeout: 60000 });
  expect(await cellSource(page, 1)).toBe("ax = df.x.plot(color='red')");
  await noDialog(page);
});
