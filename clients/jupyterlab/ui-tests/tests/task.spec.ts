// Scenario 1: open the panel, start a task, see streamed text appear bit by bit
// and the task complete. The Python side scripts the fake model to stream
// HDSP_STREAMED_TEXT slowly, then complete.
import { expect, test } from '@jupyterlab/galata';
import * as path from 'path';

test('a task started in the panel streams its text and completes', async ({ page }) => {
  await page.evaluate(async () => {
    await (window as any).jupyterapp.commands.execute('hdsp:open-panel');
  });
  await expect(page.getByTestId('hdsp-connection')).toHaveAttribute('data-state', 'connected');

  await page.getByTestId('hdsp-new-task').click();
  await page.getByTestId('hdsp-prompt').fill('Describe data.csv');
  const sent = Date.now();
  await page.getByTestId('hdsp-send').click();

  // Streamed text: a partial message shows part of the text before the whole.
  const text = process.env.HDSP_STREAMED_TEXT!;
  const partial = page.locator('[data-testid="hdsp-message"][data-say="text"][data-partial="true"]');
  await expect(partial.first()).toBeVisible();
  const firstToken = Date.now() - sent;
  const seen = (await partial.first().innerText()).trim();
  expect(seen.length).toBeGreaterThan(0);
  expect(seen.length).toBeLessThan(text.length);

  const final = page.locator('[data-testid="hdsp-message"][data-say="text"][data-partial="false"]');
  await expect(final.last()).toContainText(text.slice(0, 40));
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/completed/i);
  console.log(`HDSP_FIRST_TOKEN_MS=${firstToken}`);
  await page.screenshot({ path: path.join(process.env.HDSP_UI_OUTPUT!, 'scenario-1.png') });
});
