// Scenario 5: two browser windows (contexts) on one task and `hdsp answer` from
// the CLI; the first answer wins, and both panels show the ask answered.
import { expect, Page, test } from '@jupyterlab/galata';
import * as fs from 'fs';
import * as path from 'path';

import { openPanel, openTaskId, request, startTask } from './control';

test('the first answer wins, and both windows show it', async ({ page, browser, baseURL }) => {
  const workspace = process.env.HDSP_WORKSPACE!;
  await openPanel(page);
  await startTask(page, 'Write two files');
  await expect(page.getByTestId('hdsp-ask')).toBeVisible();
  const taskId = await openTaskId(page);

  // The second window: another browser context, logged in with the token.
  const context = await browser.newContext();
  const other: Page = await context.newPage();
  await other.goto(`${baseURL}/lab?token=${process.env.HDSP_LAB_TOKEN}`);
  await openPanel(other);
  await other.locator(`[data-testid="hdsp-task-item"][data-task-id="${taskId}"]`).click();
  await expect(other.getByTestId('hdsp-ask')).toBeVisible();
  const firstAsk = await page.getByTestId('hdsp-ask').getAttribute('data-ask-ts');
  expect(await other.getByTestId('hdsp-ask').getAttribute('data-ask-ts')).toBe(firstAsk);

  // The CLI answers first: both windows show who, and neither offers the buttons.
  expect(await request('cli-approve', taskId)).toBe('0');
  for (const p of [page, other]) {
    const answered = p.locator(`[data-testid="hdsp-message"][data-ts="${firstAsk}"] [data-testid="hdsp-ask-answered"]`);
    await expect(answered).toContainText(/approved by hdsp/i);
    await expect(p.locator(`[data-testid="hdsp-ask"][data-ask-ts="${firstAsk}"]`)).toHaveCount(0);
  }
  await expect.poll(() => fs.existsSync(path.join(workspace, 'first.txt'))).toBe(true);

  // The second ask: the other window denies it first; the CLI's later --yes is
  // refused and writes nothing.
  const secondAsk = other.locator(`[data-testid="hdsp-ask"]:not([data-ask-ts="${firstAsk}"])`);
  await expect(secondAsk).toBeVisible();
  await expect(page.locator(`[data-testid="hdsp-ask"]:not([data-ask-ts="${firstAsk}"])`)).toBeVisible();
  const secondTs = await secondAsk.getAttribute('data-ask-ts');
  await secondAsk.getByTestId('hdsp-deny').click();
  for (const p of [page, other]) {
    const answered = p.locator(`[data-testid="hdsp-message"][data-ts="${secondTs}"] [data-testid="hdsp-ask-answered"]`);
    await expect(answered).toContainText(/denied by jupyterlab/i);
    await expect(p.locator(`[data-testid="hdsp-ask"][data-ask-ts="${secondTs}"]`)).toHaveCount(0);
  }
  expect(await request('cli-approve-late', taskId)).not.toBe('0');
  expect(fs.existsSync(path.join(workspace, 'second.txt'))).toBe(false);
  await context.close();
});
