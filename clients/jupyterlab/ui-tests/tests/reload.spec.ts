// Scenario 4: the page is reloaded mid-task; the whole conversation is there,
// and live updates resume with no gap and no duplicate.
import { expect, test } from '@jupyterlab/galata';

import { conversation, openPanel, openTaskId, request, startTask } from './control';

test('a reload mid-task loses nothing and resumes live', async ({ page }) => {
  const text = process.env.HDSP_STREAMED_TEXT!;
  await openPanel(page);
  await startTask(page, 'Look at data.csv, then describe it');

  // The first turn (a text and a read) is done; the second streams, held part-way.
  const partial = page.locator('[data-testid="hdsp-message"][data-say="text"][data-partial="true"]');
  await expect(partial).toHaveCount(1);
  await expect(page.locator('[data-testid="hdsp-tool-card"][data-tool="read_file"]')).toBeVisible();
  // What the read gave back shows under it as text (as `hdsp show`'s `→` line),
  // never as the record's raw JSON.
  const result = page.locator('[data-testid="hdsp-tool-result"][data-tool="read_file"]');
  await expect(result).toContainText('→');
  await expect(result).toContainText('x,y');
  await expect(page.getByText('[tool_result]')).toHaveCount(0);
  const taskId = await openTaskId(page);
  const before = await conversation(page);

  await page.reload();
  await openPanel(page);
  expect(await openTaskId(page)).toBe(taskId);
  // Everything shown before the reload is shown again, the same.
  await expect.poll(() => conversation(page)).toEqual(before);

  // Live again: the rest of the stream arrives, whole and once.
  await request('release-stream');
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/completed/i);
  const texts = page.locator('[data-testid="hdsp-message"][data-say="text"]');
  await expect(texts.filter({ hasText: text })).toHaveCount(1);
  await expect(partial).toHaveCount(0);
  const live = await conversation(page);
  expect(live.find(m => m.text.includes(text.slice(0, 30)))?.text).toBe(text);
  expect(new Set(live.map(m => m.ts)).size).toBe(live.length);

  // What the live view built is what a fresh load shows.
  await page.reload();
  await openPanel(page);
  await expect.poll(() => conversation(page)).toEqual(live);
});
