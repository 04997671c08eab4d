// ckpt2 (issue 20): the agent overwrites data.csv and runs code; the user opens
// the task's checkpoints, reads the diff with now, restores the first checkpoint
// from the panel (after a confirmation), and data.csv is back byte for byte. Then
// a restore "with kernel": the replay's ask shows its cells, the user approves
// it, and the task's history says the kernel was replayed, with its variables.
import { expect, test } from '@jupyterlab/galata';
import * as fs from 'fs';
import * as path from 'path';

import { openPanel, screenshot, startTask } from './control';

test('a checkpoint restored from the panel brings the file back', async ({ page }) => {
  const workspace = process.env.HDSP_WORKSPACE!;
  const file = path.join(workspace, 'data.csv');
  const original = fs.readFileSync(file, 'utf8');
  await openPanel(page);
  await page.locator('[data-testid="hdsp-auto-approve"] input[data-key="alwaysAllowWrite"]').check();
  await page.locator('[data-testid="hdsp-auto-approve"] input[data-key="alwaysAllowExecute"]').check();
  await startTask(page, 'Overwrite data.csv, then count');
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/completed/i);
  expect(fs.readFileSync(file, 'utf8')).toBe('overwritten\n');

  const view = page.getByTestId('hdsp-checkpoints');
  await view.getByTestId('hdsp-checkpoints-toggle').click();
  await expect(view.getByTestId('hdsp-checkpoint')).toHaveCount(3);
  const first = view.locator('[data-testid="hdsp-checkpoint"][data-number="1"]');
  await expect(first).toContainText('before write_to_file');

  // The diff with now, readable: the file, its status, its lines.
  await first.getByTestId('hdsp-checkpoint-diff-button').click();
  const diff = first.getByTestId('hdsp-checkpoint-diff');
  await expect(diff).toContainText('modified data.csv');
  await expect(diff.locator('.hdsp-diff-add')).toContainText(['+overwritten']);
  await expect(diff.locator('.hdsp-diff-del').first()).toContainText('-x,y');

  // Restore, files only, after the confirmation.
  await first.getByTestId('hdsp-checkpoint-restore').click();
  const confirm = first.getByTestId('hdsp-restore-confirm');
  await expect(confirm).toContainText('can be undone');
  await expect(confirm.getByTestId('hdsp-restore-mode-history')).toBeVisible();
  await screenshot(page, 'checkpoints-restore-confirm');
  await confirm.getByTestId('hdsp-restore-go').click();
  const result = view.getByTestId('hdsp-restore-result');
  await expect(result).toContainText('Files changed: data.csv.');
  await expect(result).toContainText('To undo, restore checkpoint 4.');
  await expect.poll(() => fs.readFileSync(file, 'utf8')).toBe(original);
  await expect(view.getByTestId('hdsp-checkpoint')).toHaveCount(4); // the undo checkpoint

  // With the kernel: checkpoint 3 was taken after `n = 41` ran.
  const third = view.locator('[data-testid="hdsp-checkpoint"][data-number="3"]');
  await third.getByTestId('hdsp-checkpoint-restore').click();
  await third.getByTestId('hdsp-restore-kernel').check();
  await expect(third.getByTestId('hdsp-restore-confirm')).toContainText('(1 execution) runs again');
  await third.getByTestId('hdsp-restore-go').click();
  const ask = page.getByTestId('hdsp-replay-ask');
  await expect(ask).toContainText('n = 41');
  await expect(ask).not.toContainText('n += 1');
  await ask.getByTestId('hdsp-replay-approve').click();
  await expect(ask).toHaveCount(0);
  await expect(
    page.locator('[data-testid="hdsp-message"][data-say="checkpoint_restored"]').last()
  ).toContainText('kernel replayed 1 execution(s); variables: n');
  expect(fs.readFileSync(file, 'utf8')).toBe('overwritten\n');
});
