// Scenario 3: code runs in the task's kernel with its output live (a loop's lines
// show while the cell still runs), an image output is rendered, and Stop
// interrupts a long cell within 2 s.
import { expect, test } from '@jupyterlab/galata';
import * as fs from 'fs';
import * as path from 'path';

import { openPanel, screenshot, startTask } from './control';

test('live output, an image, and Stop interrupting a long cell', async ({ page }) => {
  const workspace = process.env.HDSP_WORKSPACE!;
  await openPanel(page);
  // Code runs without asking in this task (the auto-approval toggle).
  await page.locator('[data-testid="hdsp-auto-approve"] input[data-key="alwaysAllowExecute"]').check();
  await startTask(page, 'Plot the data');

  // The loop prints three lines over a second, then waits for the file
  // `release-loop`: its lines are on screen while the cell still runs.
  const cells = page.locator('[data-testid="hdsp-tool-card"][data-tool="execute_code"].hdsp-cell');
  const loop = cells.first();
  await expect(loop.getByTestId('hdsp-output')).toContainText('tick 2');
  await expect(loop.locator('.hdsp-cell-status')).toHaveText('running');
  await expect(loop.getByTestId('hdsp-output')).not.toContainText('loop done');
  await screenshot(page, 'scenario-3-live-output');
  fs.writeFileSync(path.join(workspace, 'release-loop'), '');
  await expect(loop.getByTestId('hdsp-output')).toContainText('loop done');
  await expect(loop.locator('.hdsp-cell-status')).not.toHaveText('running');

  // The image: an <img> that loaded.
  const image = cells.nth(1).locator('[data-testid="hdsp-output"] img');
  await expect(image).toBeVisible();
  await expect.poll(() => image.evaluate(img => (img as HTMLImageElement).naturalWidth)).toBe(40);

  // The long cell: Stop interrupts it within 2 s.
  const long = cells.nth(2);
  await expect(long.getByTestId('hdsp-output')).toContainText('long cell started');
  await expect(long.locator('.hdsp-cell-status')).toHaveText('running');
  const stopped = Date.now();
  await page.getByTestId('hdsp-stop').click();
  await expect(long.locator('.hdsp-cell-status')).not.toHaveText('running', { timeout: 2000 });
  console.log(`HDSP_STOP_MS=${Date.now() - stopped}`);
  await expect(page.getByTestId('hdsp-task-state')).not.toHaveText(/running/i);
});
