// Scenario 7: taking back history in the panel. A user's message is edited and
// resent (the old reply goes, the new one arrives); the task is forked at the
// first answer (the new task shows in the list with the history up to there);
// the edited message is deleted (its answer stays).
import { expect, test } from '@jupyterlab/galata';

import { conversation, openPanel, openTaskId, screenshot, startTask } from './control';

test('edit and resend, fork from a message, delete a message', async ({ page }) => {
  // A page error (one unmounted the whole panel once) fails the scenario with its words.
  const pageErrors: string[] = [];
  page.on('pageerror', e => pageErrors.push(e.message));
  await openPanel(page);
  await startTask(page, 'Describe data.csv');
  const state = page.getByTestId('hdsp-task-state');
  const said = (kind: string, text: string) =>
    page.locator(`[data-testid="hdsp-conversation"] [data-testid="hdsp-message"][data-say="${kind}"]`).filter({ hasText: text });
  await expect(said('completion_result', 'first answer')).toHaveCount(1);
  await expect(state).toHaveText(/completed/i);
  const original = await openTaskId(page);

  // A second message and its reply.
  await page.getByTestId('hdsp-prompt').fill('Now plot y');
  await page.getByTestId('hdsp-send').click();
  await expect(said('completion_result', 'old reply')).toHaveCount(1);
  await expect(state).toHaveText(/completed/i);

  // Edit it: the confirmation holds the text; Resend replaces it and what followed.
  const mine = said('user_feedback', 'Now plot y');
  await mine.locator('[data-testid="hdsp-message-action"][data-action="edit"]').click();
  const confirm = mine.getByTestId('hdsp-confirm');
  await expect(confirm).toContainText('Kernel variables are not rolled back');
  await confirm.getByTestId('hdsp-edit-text').fill('Now plot x');
  await screenshot(page, 'scenario-7-edit');
  await confirm.getByTestId('hdsp-confirm-yes').click();
  await expect(said('completion_result', 'new reply')).toHaveCount(1);
  await expect(said('completion_result', 'old reply')).toHaveCount(0);
  await expect(said('user_feedback', 'Now plot y')).toHaveCount(0);
  await expect(said('user_feedback', 'Now plot x')).toHaveCount(1);
  await expect(state).toHaveText(/completed/i);
  const edited = await conversation(page);

  // Fork at the first answer: a new task, opened, with the history up to it.
  const items = page.getByTestId('hdsp-task-item');
  await expect(items).toHaveCount(1);
  await said('completion_result', 'first answer').locator('[data-testid="hdsp-message-action"][data-action="fork"]').click();
  await expect(items).toHaveCount(2);
  await expect.poll(() => openTaskId(page)).not.toBe(original);
  await expect(said('completion_result', 'first answer')).toHaveCount(1);
  const forked = await conversation(page);
  const upTo = edited.findIndex(m => m.text.includes('first answer'));
  expect(forked.map(m => m.text)).toEqual(edited.slice(0, upTo + 1).map(m => m.text));
  expect(forked.some(m => m.text.includes('Now plot x'))).toBe(false);

  // Back to the original: delete the edited message; the reply to it stays.
  await page.locator(`[data-testid="hdsp-task-item"][data-task-id="${original}"]`).click();
  await expect(said('user_feedback', 'Now plot x')).toHaveCount(1);
  const target = said('user_feedback', 'Now plot x');
  await target.locator('[data-testid="hdsp-message-action"][data-action="delete"]').click();
  await target.getByTestId('hdsp-confirm-yes').click();
  await expect(said('user_feedback', 'Now plot x')).toHaveCount(0);
  await expect(said('completion_result', 'new reply')).toHaveCount(1);
  // The view is what a fresh load shows.
  const live = await conversation(page);
  await page.reload();
  await openPanel(page);
  await expect.poll(() => conversation(page)).toEqual(live);
  expect(pageErrors).toEqual([]);
});
