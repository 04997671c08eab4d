// Issue 17, scenario 1, in both modes (with real-time collaboration on and off;
// the Python side chooses, tests/jupyterlab/test_browser_live_edits_*.py): the
// user builds `df` in the open notebook; "describe df" from the panel makes the
// agent list the kernel's variables and describe `df`, in the notebook's own
// kernel (nothing else holds `df`), and answer with its real columns. The panel's
// variables view shows the same `df`. The Python side scripts the model
// (tests/support/live_edit_scenarios.py) and checks what the model was told.
//   HDSP_NOTEBOOK       the notebook (in the workspace), its cells HDSP_USER_CELLS (JSON)
import { expect, test } from '@jupyterlab/galata';

import { openPanel } from './control';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined) {
    throw new Error(`${name} is not set (tests/jupyterlab/test_browser_live_edits_*.py sets it)`);
  }
  return value;
};

test.describe.configure({ timeout: 180000 });

test('scenario 1: "describe df" lists the notebook kernel\'s variables and answers with df\'s columns', async ({
  page
}) => {
  const notebook = env('HDSP_NOTEBOOK');
  const cells = page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell');
  // (From the root: Galata's file browser starts in a folder of the test's own.)
  expect(await page.notebook.openByPath(`/${notebook}`)).toBe(true);
  await page.notebook.activate(notebook);
  await expect(cells).toHaveCount(JSON.parse(env('HDSP_USER_CELLS')).length);
  await page.notebook.runCell(0); // the user builds df in the notebook's kernel
  await expect(cells.nth(0).locator('.jp-OutputArea-output')).toContainText('(8, 1)');
  await page.notebook.selectCells(0);

  await openPanel(page);
  await page.getByTestId('hdsp-new-task').click();
  await page.getByTestId('hdsp-prompt').click(); // (the context chips read the notebook again)
  await expect(
    page.getByTestId('hdsp-context-chip').and(page.locator('[data-kind="notebook"]'))
  ).toContainText(notebook);
  await page.getByTestId('hdsp-prompt').fill('describe df');
  await page.getByTestId('hdsp-send').click();
  await expect(page.getByTestId('hdsp-task-state').or(page.getByTestId('hdsp-error'))).toBeVisible();
  await expect(page.getByTestId('hdsp-error')).toHaveCount(0);
  // Reading variables is a read: no approval is asked.
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/completed/i, { timeout: 60000 });
  await expect(page.getByTestId('hdsp-conversation')).toContainText('x (int64)');

  // The variables view reads the same kernel: the user's df, with its column.
  const view = page.getByTestId('hdsp-variables');
  const df = view.locator('[data-testid="hdsp-variable"][data-name="df"]');
  await expect(df.locator('summary')).toContainText('pandas.DataFrame · 8 × 1');
  await df.locator('summary').click();
  await expect(df).toContainText('x: int64');
  // The inspection ran silently: the user's next run is number 2.
  await page.notebook.activate(notebook);
  await page.notebook.runCell(1);
  await expect(cells.nth(1).locator('.jp-InputPrompt')).toContainText('[2]');
});
