// nbctx (issue 17): the user builds `df` in a notebook; the panel's prompt shows
// the notebook and its active cell as context chips; "describe df" makes the
// agent run code in the notebook's own kernel, and its output shows the real
// columns. The Python side scripts the model (execute_code printing
// list(df.columns)) and checks what the model received.
import { expect, test } from '@jupyterlab/galata';

import { openPanel, screenshot } from './control';

test('a prompt about the open notebook runs in its kernel', async ({ page }) => {
  await page.notebook.createNew('sales.ipynb');
  await page.notebook.setCell(
    0,
    'code',
    "import pandas as pd\ndf = pd.DataFrame({'region': ['north', 'south'], 'sales': [3, 4]})\ndf.shape"
  );
  await page.notebook.runCell(0);
  await expect(page.locator('.jp-OutputArea-output').first()).toContainText('(2, 2)');

  await openPanel(page);
  await page.getByTestId('hdsp-new-task').click();
  await page.getByTestId('hdsp-prompt').click(); // focus: the chips read the notebook again
  const chips = page.getByTestId('hdsp-context-chip');
  await expect(chips.and(page.locator('[data-kind="notebook"]'))).toContainText('sales.ipynb');
  await expect(chips.and(page.locator('[data-kind="cell"]'))).toContainText('cell');
  const outline = chips.and(page.locator('[data-kind="outline"]'));
  await expect(outline).toBeVisible();
  await screenshot(page, 'nbctx-context-chips');
  // The user leaves the outline out of this prompt.
  await outline.getByTestId('hdsp-context-remove').click();
  await expect(outline).toHaveCount(0);
  await expect(chips.and(page.locator('[data-kind="notebook"]'))).toBeVisible();

  await page.locator('[data-testid="hdsp-auto-approve"] input[data-key="alwaysAllowExecute"]').check();
  await page.getByTestId('hdsp-prompt').fill('describe df');
  await page.getByTestId('hdsp-send').click();
  // (A refused prompt would say why here.)
  await expect(page.getByTestId('hdsp-task-state').or(page.getByTestId('hdsp-error'))).toBeVisible();
  await expect(page.getByTestId('hdsp-error')).toHaveCount(0);

  // The agent's code ran where `df` lives: its output has the real columns.
  const cell = page.locator('[data-testid="hdsp-tool-card"][data-tool="execute_code"].hdsp-cell').first();
  await expect(cell.getByTestId('hdsp-output')).toContainText("['region', 'sales']");
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/completed/i);
  // The user's message in the history shows the context it carried.
  await expect(page.getByTestId('hdsp-message-context').first()).toContainText('sales.ipynb');
  // The chips went with the prompt; the next prompt starts with them all again.
  await screenshot(page, 'nbctx-describe-df');
});
