// Scenario 8: while a turn runs, a message sent with "Steer the running turn"
// joins that turn before its next model request (the Python side checks the
// request), and the conversation shows where it landed.
import { expect, test } from '@jupyterlab/galata';

import { conversation, openPanel, request, startTask } from './control';

test('a message sent with Steer joins the running turn', async ({ page }) => {
  await openPanel(page);
  await startTask(page, 'Describe data.csv');
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/running/i);

  // Steer is offered while the turn runs.
  const steer = page.getByTestId('hdsp-steer');
  await expect(steer).toBeVisible();
  await steer.check();
  await page.getByTestId('hdsp-prompt').fill('Use column y only');
  await page.getByTestId('hdsp-send').click();
  await expect(page.getByTestId('hdsp-prompt')).toHaveValue('');

  await request('release-turn');
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/completed/i);
  await expect(steer).toHaveCount(0); // not offered once the turn is over
  const shown = await conversation(page);
  const steered = shown.findIndex(m => m.kind === 'say:user_feedback' && m.text.includes('Use column y only'));
  const read = shown.findIndex(m => m.kind === 'say:tool' || m.kind === 'say:tool_result');
  const answer = shown.findIndex(m => m.kind === 'say:completion_result' && m.text.includes('steered answer'));
  expect(steered).toBeGreaterThan(0);
  // Inside the turn: after the read it joined, before the answer it led to.
  expect(read).toBeLessThan(steered);
  expect(steered).toBeLessThan(answer);
});
