// Issue 17, without real-time collaboration, scenario 2: with plots.ipynb open and
// `df` built by the user, "add a cell that plots df.x" makes the agent insert a
// cell under the active cell, through this window's panel (the notebook model,
// not the file), and run it: the plot shows in the open notebook, no "file
// changed on disk" dialog comes, and after the user saves, the saved file is what
// Lab shows (the Python side checks it). The kernel holds the agent's cell after
// its figure is shown (HDSP_KERNEL_HOLD, run silently in the notebook's kernel,
// until the file HDSP_RELEASE_KERNEL exists): the plot is seen while the cell
// still runs, so it streamed in.
import { expect, test } from '@jupyterlab/galata';
import * as fs from 'fs';

import { screenshot } from './control';
import { activateCell, cellCount, cellSource, noDialog, openNotebook, sendFromPanel, windowShot } from './livePanel';

test('the agent inserts and runs a plotting cell in the open notebook', async ({ page }) => {
  await openNotebook(page, 'plots.ipynb');
  await page.notebook.runCell(0); // the user builds df
  await expect(page.locator('.jp-Cell').first().locator('.jp-OutputArea-output')).toContainText('(50, 2)');
  await activateCell(page, 0);
  await page.evaluate(async code => {
    const panel = (window as any).jupyterapp.shell.currentWidget;
    await panel.sessionContext.session.kernel.requestExecute({ code, silent: true, store_history: false }).done;
  }, process.env.HDSP_KERNEL_HOLD!);

  await sendFromPanel(page, 'add a cell that plots df.x');
  // The plot shows while the kernel still holds the cell, which shows as running.
  const running = page.locator('.jp-NotebookPanel .jp-Cell').nth(1);
  await expect(running.locator('.jp-OutputArea-output img')).toBeVisible({ timeout: 60000 });
  await expect(running.locator('.jp-InputPrompt')).toContainText('[*]');
  expect(fs.existsSync(process.env.HDSP_RELEASE_KERNEL!)).toBe(false);
  fs.writeFileSync(process.env.HDSP_RELEASE_KERNEL!, '');
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/completed/i, { timeout: 60000 });

  // The cell is under the active one, with the agent's mark, run, its plot shown.
  expect(await cellCount(page)).toBe(3);
  expect(await cellSource(page, 1)).toBe('ax = df.x.plot()');
  expect(await cellSource(page, 2)).toBe("print('below')");
  const marker = await page.evaluate(
    () => (window as any).jupyterapp.shell.currentWidget.content.model.sharedModel.cells[1].getMetadata('hdsp')
  );
  expect(marker.editedBy).toBe('agent');
  const plotted = page.locator('.jp-NotebookPanel .jp-Cell').nth(1);
  // Highlighted as the agent's; the user's cells are not.
  await expect(plotted).toHaveClass(/\bhdsp-agent-cell\b/);
  await expect(plotted).toHaveAttribute('data-hdsp-task', /.+/);
  await expect(page.locator('.jp-NotebookPanel .jp-Cell').nth(0)).not.toHaveClass(/\bhdsp-agent-cell\b/);
  await expect(page.locator('.jp-NotebookPanel .jp-Cell').nth(2)).not.toHaveClass(/\bhdsp-agent-cell\b/);
  await expect(plotted.locator('.jp-OutputArea-output img')).toBeVisible();
  await expect(plotted.locator('.jp-InputPrompt')).toContainText('[2]');
  await noDialog(page);
  await screenshot(page, 'live-edits-panel-plot');
  await windowShot(page, 'live-edits-panel-notebook');

  // The user saves: no "File Changed" dialog (the file was never written behind Lab).
  await page.notebook.save();
  await noDialog(page);
});
