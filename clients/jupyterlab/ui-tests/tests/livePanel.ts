// What the live-edit specs through the panel share (issue 17, without real-time
// collaboration): open a notebook the Python side wrote, run its first cell (the
// user builds `df`), and send a prompt from the panel with that notebook open.
import { expect, Page } from '@jupyterlab/galata';
import * as fs from 'fs';
import * as path from 'path';

import { openPanel } from './control';

/** Open `path` (below the server's root) in the main area and wait for its kernel. */
export async function openNotebook(page: Page, path: string): Promise<void> {
  await page.waitForFunction(() => (window as any).jupyterapp?.commands?.hasCommand('docmanager:open'));
  await page.evaluate(async p => {
    const app = (window as any).jupyterapp;
    await app.restored;
    const widget = await app.commands.execute('docmanager:open', { path: p });
    await widget.context.ready;
    await widget.sessionContext.ready;
  }, path);
  await expect(page.locator('.jp-NotebookPanel .jp-Cell').first()).toBeVisible();
}

/** The source of cell `index` of the current notebook, as its model has it. */
export async function cellSource(page: Page, index: number): Promise<string> {
  return page.evaluate(
    i => (window as any).jupyterapp.shell.currentWidget.content.model.sharedModel.cells[i]?.getSource() ?? null,
    index
  );
}

/** The number of cells of the current notebook. */
export async function cellCount(page: Page): Promise<number> {
  return page.evaluate(() => (window as any).jupyterapp.shell.currentWidget.content.model.sharedModel.cells.length);
}

/** Make cell `index` the active one (a click on its prompt area, not its editor). */
export async function activateCell(page: Page, index: number): Promise<void> {
  await page.evaluate(i => {
    (window as any).jupyterapp.shell.currentWidget.content.activeCellIndex = i;
  }, index);
}

/** Open the panel and send `prompt` as a new task, writes and runs auto-approved. */
export async function sendFromPanel(page: Page, prompt: string): Promise<void> {
  await openPanel(page);
  await page.getByTestId('hdsp-new-task').click();
  await page.getByTestId('hdsp-prompt').click(); // focus: the chips read the notebook again
  await expect(page.locator('[data-testid="hdsp-context-chip"][data-kind="notebook"]')).toBeVisible();
  for (const key of ['alwaysAllowWrite', 'alwaysAllowExecute']) {
    await page.locator(`[data-testid="hdsp-auto-approve"] input[data-key="${key}"]`).check();
  }
  await page.getByTestId('hdsp-prompt').fill(prompt);
  await page.getByTestId('hdsp-send').click();
  await expect(page.getByTestId('hdsp-task-state').or(page.getByTestId('hdsp-error'))).toBeVisible();
  await expect(page.getByTestId('hdsp-error')).toHaveCount(0);
}

/** No dialog is open (JupyterLab's "File Changed" would be one). */
export async function noDialog(page: Page): Promise<void> {
  await expect(page.locator('.jp-Dialog')).toHaveCount(0);
}

/** A picture of the whole window (the open notebook beside the panel), as control.ts's `screenshot` places it. */
export async function windowShot(page: Page, name: string): Promise<void> {
  const dir = process.env.HDSP_SCREENSHOT_DIR || process.env.HDSP_UI_OUTPUT!;
  fs.mkdirSync(dir, { recursive: true });
  await page.screenshot({ path: path.join(dir, `${name}.png`) });
}

/**
 * Note every dialog JupyterLab shows from now on (its text); the function
 * returned gives them (none must come: "File Changed" would be one).
 */
export async function watchDialogs(page: Page): Promise<() => Promise<string[]>> {
  await page.evaluate(() => {
    const w = window as any;
    w.__hdspDialogs = [];
    const seen = new WeakSet<Element>();
    const note = () =>
      document.querySelectorAll('.jp-Dialog').forEach(d => {
        if (!seen.has(d)) {
          seen.add(d);
          w.__hdspDialogs.push((d.textContent ?? '').trim());
        }
      });
    new MutationObserver(note).observe(document.body, { childList: true, subtree: true });
  });
  return () => page.evaluate(() => (window as any).__hdspDialogs as string[]);
}

/** What of a cell a file and the page must agree on. */
export function essence(cell: any): any {
  const text = (v: unknown) => (Array.isArray(v) ? v.join('') : v);
  return {
    type: cell.cell_type,
    source: text(cell.source),
    count: cell.execution_count ?? null,
    outputs: (cell.outputs ?? []).map((o: any) => [o.output_type, text(o.text) ?? text(o.data?.['text/plain']) ?? null])
  };
}

/** The cells of the notebook at `path` as this page's model holds them. */
export async function pageCells(page: Page, path: string): Promise<any[]> {
  return page.evaluate(p => {
    const app = (window as any).jupyterapp;
    const panel = [...app.shell.widgets('main')].find((w: any) => w.context?.path === p);
    return panel.context.model.toJSON().cells;
  }, path);
}

/** The cells of the notebook at `path` (in the workspace) as its file holds them. */
export function fileCells(path: string): any[] {
  return JSON.parse(fs.readFileSync(`${process.env.HDSP_WORKSPACE}/${path}`, 'utf8')).cells;
}
