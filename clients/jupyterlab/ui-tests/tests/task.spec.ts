// Scenario 1: open the panel, start a task, see streamed text appear bit by bit
// and the task complete. The Python side scripts the fake model to stream
// HDSP_STREAMED_TEXT and hold the stream part-way until the spec asks it to go on.
import { expect, test } from '@jupyterlab/galata';

import { openPanel, request, screenshot, startTask } from './control';

test('a task started in the panel streams its text and completes', async ({ page }) => {
  await openPanel(page);
  const started = await startTask(page, 'Describe data.csv');

  // Streamed text: a partial message shows part of the text before the whole.
  const text = process.env.HDSP_STREAMED_TEXT!;
  const partial = page.locator('[data-testid="hdsp-message"][data-say="text"][data-partial="true"]');
  await expect(partial.first()).toBeVisible();
  const firstToken = await started.firstTokenMs();
  const seen = (await partial.first().innerText()).trim();
  expect(seen.length).toBeGreaterThan(0);
  expect(seen.length).toBeLessThan(text.length);
  expect(text.startsWith(seen)).toBe(true);
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/running/i);
  // The stream is held after about half of the text: all of that shows, still partial.
  await expect(partial.first()).toContainText(process.env.HDSP_HELD_TEXT!);
  await screenshot(page, 'scenario-1-streaming');

  // The rest of the stream: the text grows, then is final, and the task completes.
  await request('release-stream');
  const final = page.locator('[data-testid="hdsp-message"][data-say="text"][data-partial="false"]');
  await expect(final.last()).toContainText(text);
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/completed/i);
  console.log(`HDSP_FIRST_TOKEN_MS=${firstToken.toFixed(0)}`);
});
