// Scenario 9: a long session's controls in the panel. The conversation is
// condensed with the header's Condense (its marker shows the tokens before and
// after), the task is rewound across that marker with "Rewind to here" (the
// marker and what came after it go; the Python side checks that the model is
// sent the condensed messages again, not the summary), and the model's read of
// data.csv is deleted with its result (the Python side checks the call is never
// sent again). The live view is what a fresh load shows.
import { expect, test } from '@jupyterlab/galata';

import { conversation, openPanel, screenshot, startTask } from './control';

test('condense, rewind across the summary, delete a tool call', async ({ page }) => {
  const pageErrors: string[] = [];
  page.on('pageerror', e => pageErrors.push(e.message));
  await openPanel(page);
  await startTask(page, 'Describe data.csv');
  const state = page.getByTestId('hdsp-task-state');
  const conv = '[data-testid="hdsp-conversation"] [data-testid="hdsp-message"]';
  const said = (kind: string, text: string) => page.locator(`${conv}[data-say="${kind}"]`).filter({ hasText: text });
  const send = async (text: string, answer: string): Promise<void> => {
    await page.getByTestId('hdsp-prompt').fill(text);
    await page.getByTestId('hdsp-send').click();
    await expect(said('completion_result', answer)).toHaveCount(1);
    await expect(state).toHaveText(/completed/i);
  };
  await expect(said('completion_result', 'first answer')).toHaveCount(1);
  await expect(state).toHaveText(/completed/i);
  await send('Now plot y', 'second answer');
  await send('And x?', 'third answer');

  // Condense: a marker with the request's tokens before and after.
  await page.getByTestId('hdsp-condense').click();
  const marker = page.locator('[data-testid="hdsp-context-marker"][data-kind="condensed"]');
  await expect(marker).toHaveCount(1);
  const before = Number(await marker.getAttribute('data-before'));
  const after = Number(await marker.getAttribute('data-after'));
  expect(before).toBeGreaterThan(after);
  expect(after).toBeGreaterThan(0);
  await expect(marker).toContainText(`${before.toLocaleString('en-US')} → ${after.toLocaleString('en-US')} tokens`);
  await screenshot(page, 'scenario-9-condensed');

  // Rewind to the second answer: the third turn and the marker go, after asking.
  const second = said('completion_result', 'second answer');
  await second.locator('[data-testid="hdsp-message-action"][data-action="rewind"]').click();
  const confirm = second.getByTestId('hdsp-confirm');
  await expect(confirm).toContainText(/Remove \d+ later messages\?.*Kernel variables are not rolled back/);
  await confirm.getByTestId('hdsp-confirm-yes').click();
  await expect(page.getByTestId('hdsp-context-marker')).toHaveCount(0);
  await expect(said('completion_result', 'third answer')).toHaveCount(0);
  await expect(said('user_feedback', 'And x?')).toHaveCount(0);
  await expect(said('completion_result', 'second answer')).toHaveCount(1);
  await send('Then z', 'fourth answer');

  // Delete the model's read of data.csv: its card and its result go, nothing else.
  const shown = await conversation(page);
  const read = page.locator(`${conv}[data-say="tool"]`).filter({ has: page.locator('[data-tool="read_file"]') });
  await expect(read).toHaveCount(1);
  const call = (await read.getAttribute('data-ts'))!;
  await read.locator('[data-testid="hdsp-message-action"][data-action="delete"]').click();
  const sure = read.getByTestId('hdsp-confirm');
  await expect(sure).toContainText('tool call with its result');
  await sure.getByTestId('hdsp-confirm-yes').click();
  await expect(page.locator(`${conv}[data-ts="${call}"]`)).toHaveCount(0);
  const left = await conversation(page);
  expect(left.length).toBeLessThan(shown.length);
  expect(left.filter(m => m.kind === 'say:completion_result').map(m => m.text)).toEqual(
    shown.filter(m => m.kind === 'say:completion_result').map(m => m.text)
  );
  await send('Last one', 'fifth answer');

  // The view is what a fresh load shows.
  const live = await conversation(page);
  await page.reload();
  await openPanel(page);
  await expect.poll(() => conversation(page)).toEqual(live);
  expect(pageErrors).toEqual([]);
});
