// nbvars (issue 17): after the agent runs code that builds `df`, the variables
// view of the open task lists `df` with its shape, and opening it shows its
// columns; the inspection took no execution count (the next cell is number 2).
import { expect, test } from '@jupyterlab/galata';

import { openPanel, startTask } from './control';

test('the variables view lists df with its shape after the agent built it', async ({ page }) => {
  await openPanel(page);
  await page.locator('[data-testid="hdsp-auto-approve"] input[data-key="alwaysAllowExecute"]').check();
  await startTask(page, 'Build a data frame');

  const view = page.getByTestId('hdsp-variables');
  await expect(view).toBeVisible();
  const df = view.locator('[data-testid="hdsp-variable"][data-name="df"]');
  await expect(df).toBeVisible();
  await expect(df.locator('summary')).toContainText('pandas.DataFrame · 1000 × 2');
  await df.locator('summary').click();
  await expect(df).toContainText('x: int64, y: float64');
  // Modules and functions are not variables.
  await expect(view.locator('[data-testid="hdsp-variable"][data-name="pd"]')).toHaveCount(0);
  // The task ends after a second cell: the view reads again and shows `later`.
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/completed/i);
  await expect(view.locator('[data-testid="hdsp-variable"][data-name="later"]')).toBeVisible();
});
