// Live edits through real-time collaboration (issue 17), scenarios 2-4: JupyterLab
// runs with jupyter-collaboration on, so the agent's notebook tools change the
// open notebook's shared document. tests/jupyterlab/test_browser_live_edits_rtc.py
// starts the processes, writes the notebook, scripts the model (the story is in
// tests/support/live_edit_scenarios.py) and runs one test of this file at a time
// (`-g`). Besides control.ts's variables:
//   HDSP_NOTEBOOK       the notebook (in the workspace), its cells HDSP_USER_CELLS (JSON)
//   HDSP_PLOT_SOURCE    the source of the agent's plot cell
//   HDSP_KERNEL_HOLD    code run silently in the notebook's kernel: the plot cell's
//                       run then waits for the file HDSP_RELEASE_KERNEL
//   HDSP_USER_EDIT      what the user types into the agent's cell (scenario 3)
//   HDSP_CLOSED_INSERT  the cell the agent adds while the notebook is closed (4)
import { expect, IJupyterLabPageFixture, test } from '@jupyterlab/galata';
import type { Locator } from '@playwright/test';
import * as fs from 'fs';
import * as path from 'path';

import { openPanel, request } from './control';
import { watchDialogs } from './livePanel';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined) {
    throw new Error(`${name} is not set (tests/jupyterlab/test_browser_live_edits_rtc.py sets it)`);
  }
  return value;
};
const NOTEBOOK = () => env('HDSP_NOTEBOOK');
const USER_CELLS = (): string[] => JSON.parse(env('HDSP_USER_CELLS'));

// (Room for the panel beside the notebook in the README's picture.)
test.use({ viewport: { width: 1280, height: 800 } });
// A whole task with a notebook and its kernel: more than the config's 90 s on a
// loaded machine.
test.describe.configure({ timeout: 180000 });

/** The notebook's cells in the page. */
const cells = (page: IJupyterLabPageFixture): Locator =>
  page.locator('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell');

/**
 * Open the notebook and run its first cell (the user builds `df` in the
 * notebook's kernel), leaving that cell active: the agent's cell goes under it.
 */
async function openUserNotebook(page: IJupyterLabPageFixture): Promise<void> {
  // (From the root: Galata's file browser starts in a folder of the test's own.)
  expect(await page.notebook.openByPath(`/${NOTEBOOK()}`)).toBe(true);
  await page.notebook.activate(NOTEBOOK());
  await expect(cells(page)).toHaveCount(USER_CELLS().length);
  await page.notebook.runCell(0);
  await expect(cells(page).nth(0).locator('.jp-OutputArea-output')).toContainText('(8, 1)');
  await page.notebook.selectCells(0);
}

/** Start the task from the panel, with writes and runs allowed without asking. */
async function ask(page: IJupyterLabPageFixture, prompt: string): Promise<void> {
  await openPanel(page);
  await page.getByTestId('hdsp-new-task').click();
  for (const key of ['alwaysAllowWrite', 'alwaysAllowExecute']) {
    await page.locator(`[data-testid="hdsp-auto-approve"] input[data-key="${key}"]`).check();
  }
  await page.getByTestId('hdsp-prompt').click(); // (the context chips read the notebook again)
  await expect(
    page.getByTestId('hdsp-context-chip').and(page.locator('[data-kind="notebook"]'))
  ).toContainText(NOTEBOOK());
  await page.getByTestId('hdsp-prompt').fill(prompt);
  await page.getByTestId('hdsp-send').click();
  await expect(page.getByTestId('hdsp-task-state')).toBeVisible();
  await expect(page.getByTestId('hdsp-error')).toHaveCount(0);
}

async function completed(page: IJupyterLabPageFixture): Promise<void> {
  await expect(page.getByTestId('hdsp-task-state')).toHaveText(/completed/i, { timeout: 60000 });
}

/** The cells of the notebook as the page's model holds them, and as its file does. */
async function labCells(page: IJupyterLabPageFixture): Promise<any[]> {
  return page.evaluate(path => {
    const app = (window as any).jupyterapp;
    const panel = [...app.shell.widgets('main')].find((w: any) => w.context?.path === path);
    return panel.context.model.toJSON().cells;
  }, NOTEBOOK());
}

function fileCells(): any[] {
  const raw = JSON.parse(fs.readFileSync(path.join(env('HDSP_WORKSPACE'), NOTEBOOK()), 'utf8'));
  return raw.cells;
}

/** What of a cell the file and the page must agree on. */
function essence(cell: any): unknown {
  const source = Array.isArray(cell.source) ? cell.source.join('') : cell.source;
  return {
    id: cell.id,
    type: cell.cell_type,
    source,
    count: cell.execution_count ?? null,
    outputs: (cell.outputs ?? []).map((o: any) => [o.output_type, Object.keys(o.data ?? {}).sort()]),
    agent: cell.metadata?.hdsp?.editedBy ?? null
  };
}

/**
 * A picture of JupyterLab for the README (into HDSP_SCREENSHOT_DIR when `make
 * screenshots` sets it): the panel beside the notebook.
 */
async function screenshotLab(page: IJupyterLabPageFixture, name: string): Promise<void> {
  const dir = process.env.HDSP_SCREENSHOT_DIR || env('HDSP_UI_OUTPUT');
  fs.mkdirSync(dir, { recursive: true });
  await page.evaluate(() => (window as any).jupyterapp.shell._hsplitPanel?.setRelativeSizes([0.36, 0.64, 0]));
  await page.screenshot({ path: path.join(dir, `${name}.png`) });
}

test('scenario 2: the agent inserts a plot cell, runs it, and its outputs stream into the open notebook', async ({
  page
}) => {
  const dialogs = await watchDialogs(page);
  await openUserNotebook(page);
  // The kernel will hold the plot cell after its figure is shown, until released.
  await page.evaluate(async code => {
    const panel = (window as any).jupyterapp.shell.currentWidget;
    await panel.sessionContext.session.kernel.requestExecute({ code, silent: true, store_history: false }).done;
  }, env('HDSP_KERNEL_HOLD'));

  await ask(page, 'add a cell that plots df.x');

  // The agent's cell appears under the active cell (above the user's second
  // one), highlighted as the agent's; the user's cells are not.
  await expect(cells(page)).toHaveCount(USER_CELLS().length + 1);
  const agent = cells(page).nth(1);
  await expect(agent.locator('.jp-InputArea-editor')).toContainText(env('HDSP_PLOT_SOURCE'));
  await expect(cells(page).nth(2).locator('.jp-InputArea-editor')).toContainText(USER_CELLS()[1]);
  await expect(agent).toHaveClass(/\bhdsp-agent-cell\b/);
  await expect(agent).toHaveAttribute('data-hdsp-task', /.+/);
  await expect(cells(page).nth(0)).not.toHaveClass(/\bhdsp-agent-cell\b/);
  await expect(cells(page).nth(2)).not.toHaveClass(/\bhdsp-agent-cell\b/);

  // The plot shows while the kernel still holds the cell (it streamed in), and
  // the cell shows as running, as one the user runs does.
  const plot = agent.locator('.jp-OutputArea-output img');
  await expect(plot).toBeVisible();
  await expect.poll(() => plot.evaluate(img => (img as HTMLImageElement).naturalWidth)).toBeGreaterThan(100);
  await expect(agent.locator('.jp-InputPrompt')).toContainText('[*]');
  expect(fs.existsSync(env('HDSP_RELEASE_KERNEL'))).toBe(false);
  fs.writeFileSync(env('HDSP_RELEASE_KERNEL'), '');

  await completed(page);
  // The final outputs came with the execution count (the user's run was 1).
  await expect(agent.locator('.jp-InputPrompt')).toContainText('[2]');
  await expect(plot).toBeVisible();
  // (The variables view reads the kernel again once it is idle.)
  await expect(page.getByTestId('hdsp-variables')).not.toContainText('running code');
  await screenshotLab(page, 'live-edit-agent-plot');

  // Saved, the file holds what the page shows.
  expect(await page.notebook.save()).toBe(true);
  await expect
    .poll(async () => JSON.stringify(fileCells().map(essence)), { message: 'the saved file' })
    .toEqual(JSON.stringify((await labCells(page)).map(essence)));
  const saved = fileCells();
  expect(saved.map(c => (Array.isArray(c.source) ? c.source.join('') : c.source))).toEqual([
    USER_CELLS()[0],
    env('HDSP_PLOT_SOURCE'),
    USER_CELLS()[1]
  ]);
  expect(saved[1].outputs.some((o: any) => 'image/png' in (o.data ?? {}))).toBe(true);
  expect(await dialogs()).toEqual([]);
});

test('scenario 3: the user edits the agent cell while the agent prepares an edit', async ({ page }) => {
  const dialogs = await watchDialogs(page);
  await openUserNotebook(page);
  await ask(page, 'add a cell that plots df.x');

  await expect(cells(page)).toHaveCount(USER_CELLS().length + 1);
  const agent = cells(page).nth(1);
  await expect(agent.locator('.jp-InputArea-editor')).toContainText(env('HDSP_PLOT_SOURCE'));
  // The agent is preparing its edit of the cell (its reply is held): the user
  // rewrites the cell meanwhile, by typing.
  const editor = agent.locator('.jp-InputArea-editor .cm-content');
  await editor.click();
  await page.keyboard.press('Control+A');
  await page.keyboard.type(env('HDSP_USER_EDIT'));
  await expect(editor).toHaveText(env('HDSP_USER_EDIT'));
  await request('release-edit', env('HDSP_USER_EDIT'));

  await completed(page);
  // The agent's edit was refused: the user's text stays, in the page and the file.
  await expect(editor).toHaveText(env('HDSP_USER_EDIT'));
  await expect(agent).toHaveClass(/\bhdsp-agent-cell\b/);
  expect(await page.notebook.save()).toBe(true);
  await expect
    .poll(() => (Array.isArray(fileCells()[1]?.source) ? fileCells()[1].source.join('') : fileCells()[1]?.source))
    .toBe(env('HDSP_USER_EDIT'));
  expect(await dialogs()).toEqual([]);
});

test('scenario 4: the user closes the notebook mid-task; the agent edits its file, reopening shows it', async ({
  page
}) => {
  const dialogs = await watchDialogs(page);
  await openUserNotebook(page);
  await ask(page, 'add a cell with the largest x');
  await request('agent-read'); // the agent has read the open notebook

  // The user saves and closes the notebook; the agent's insert comes after.
  await page.notebook.activate(NOTEBOOK());
  expect(await page.notebook.save()).toBe(true);
  expect(await page.notebook.close(false)).toBe(true);
  await expect(page.locator('.jp-NotebookPanel')).toHaveCount(0);
  await request('release-insert');
  await completed(page);

  // Opened again (from the file browser), the notebook shows the agent's cell
  // at the end, marked.
  await page.sidebar.openTab('filebrowser');
  expect(await page.notebook.openByPath(`/${NOTEBOOK()}`)).toBe(true);
  await expect(cells(page)).toHaveCount(USER_CELLS().length + 1);
  const agent = cells(page).last();
  await expect(agent.locator('.jp-InputArea-editor')).toContainText(env('HDSP_CLOSED_INSERT'));
  await expect(agent).toHaveClass(/\bhdsp-agent-cell\b/);
  await expect(cells(page).first()).not.toHaveClass(/\bhdsp-agent-cell\b/);
  expect((await dialogs()).filter(text => /changed on disk|File Changed/i.test(text))).toEqual([]);
});
