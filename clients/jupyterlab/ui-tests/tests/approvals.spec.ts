// Scenario 2: a write ask shows its diff and is approved in the panel (the file
// is written); a second write ask is denied with a reason (the Python side checks
// the model received it).
import { expect, test } from '@jupyterlab/galata';
import * as fs from 'fs';
import * as path from 'path';

import { openPanel, screenshot, startTask } from './control';

test('a write is approved with its diff, a second is denied with a reason', async ({ page }) => {
  const workspace = process.env.HDSP_WORKSPACE!;
  await openPanel(page);
  await startTask(page, 'Summarise data.csv into summary.md');

  const ask = page.getByTestId('hdsp-ask');
  await expect(ask).toBeVisible();
  await expect(ask.getByTestId('hdsp-diff')).toContainText('+# Summary');
  await expect(ask).toContainText('summary.md');
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/interactive/i);
  await screenshot(page, 'scenario-2-write-ask');
  const firstAsk = await ask.getAttribute('data-ask-ts');
  await ask.getByTestId('hdsp-approve').click();

  // Approved: the first ask shows its answer, and the file is there.
  await expect(
    page.locator(`[data-testid="hdsp-message"][data-ts="${firstAsk}"] [data-testid="hdsp-ask-answered"]`)
  ).toContainText(/approved/i);
  await expect.poll(() => fs.existsSync(path.join(workspace, 'summary.md'))).toBe(true);

  // The second ask: another write, denied with a reason.
  const second = page.locator(`[data-testid="hdsp-ask"]:not([data-ask-ts="${firstAsk}"])`);
  await expect(second).toBeVisible();
  await expect(second).toContainText('delete-me.txt');
  await second.getByTestId('hdsp-deny-reason').fill(process.env.HDSP_DENY_REASON!);
  await second.getByTestId('hdsp-deny').click();
  await expect(page.locator('[data-testid="hdsp-ask-answered"]').last()).toContainText(/denied/i);
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/completed/i);
  expect(fs.existsSync(path.join(workspace, 'delete-me.txt'))).toBe(false);
});
