// What the specs share: asking the Python side (tests/jupyterlab/test_browser.py)
// for things through files in HDSP_CONTROL_DIR, opening the panel, timing the
// first streamed token, and screenshots.
import { expect, Page } from '@jupyterlab/galata';
import * as fs from 'fs';
import * as path from 'path';

const control = () => process.env.HDSP_CONTROL_DIR!;

/** Ask the Python side for `name` (with an optional body) and wait until it is done. */
export async function request(name: string, body = ''): Promise<string> {
  fs.writeFileSync(path.join(control(), name), body);
  const done = path.join(control(), `${name}.done`);
  await expect
    .poll(() => fs.existsSync(done), { message: `the Python side did not do ${name}`, timeout: 60000 })
    .toBe(true);
  return fs.readFileSync(done, 'utf8');
}

/** Open the hdsp panel and wait until it is connected to hdspd. */
export async function openPanel(page: Page): Promise<void> {
  await page.waitForFunction(() => (window as any).jupyterapp?.commands?.hasCommand('hdsp:open-panel'));
  // After the layout is restored: a restored layout would otherwise show another
  // sidebar over the panel (a page loaded without Galata's fixture restores one).
  await page.evaluate(async () => {
    const app = (window as any).jupyterapp;
    await app.restored;
    await app.commands.execute('hdsp:open-panel');
  });
  await expect(page.getByTestId('hdsp-panel')).toBeVisible();
  await expect(page.getByTestId('hdsp-connection')).toHaveAttribute('data-state', 'connected');
}

/**
 * Start a task from the panel: the prompt typed, Send clicked. In the page, a
 * MutationObserver notes when the first streamed text shows; `firstTokenMs`
 * reads the time from the click to it.
 */
export async function startTask(page: Page, prompt: string): Promise<{ firstTokenMs: () => Promise<number> }> {
  await page.getByTestId('hdsp-new-task').click();
  await page.getByTestId('hdsp-prompt').fill(prompt);
  await page.evaluate(() => {
    const w = window as any;
    w.__hdspSent = null;
    w.__hdspFirstToken = null;
    const send = document.querySelector('[data-testid="hdsp-send"]')!;
    send.addEventListener('click', () => (w.__hdspSent = performance.now()), { capture: true, once: true });
    const streamed = () =>
      Array.from(
        document.querySelectorAll('[data-testid="hdsp-message"][data-say="text"][data-partial="true"]')
      ).some(e => (e.textContent ?? '').trim().length > 0);
    const observer = new MutationObserver(() => {
      if (w.__hdspFirstToken === null && streamed()) {
        w.__hdspFirstToken = performance.now();
        observer.disconnect();
      }
    });
    observer.observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
  });
  await page.getByTestId('hdsp-send').click();
  return {
    firstTokenMs: async () => {
      await page.waitForFunction(() => (window as any).__hdspFirstToken !== null);
      return page.evaluate(() => (window as any).__hdspFirstToken - (window as any).__hdspSent);
    }
  };
}

/** The open task's id, from the selected item of the task list. */
export async function openTaskId(page: Page): Promise<string> {
  const selected = page.locator('[data-testid="hdsp-task-item"].hdsp-selected');
  await expect(selected).toHaveCount(1);
  return (await selected.getAttribute('data-task-id'))!;
}

/**
 * A screenshot of the page: into HDSP_SCREENSHOT_DIR when it is set (`make
 * screenshots` sets it to clients/jupyterlab/screenshots, for the README), else
 * next to Playwright's output.
 */
export async function screenshot(page: Page, name: string): Promise<void> {
  const dir = process.env.HDSP_SCREENSHOT_DIR || process.env.HDSP_UI_OUTPUT!;
  fs.mkdirSync(dir, { recursive: true });
  // The sidebar as wide as a person would drag it to read a task (shell's
  // left | main | right split), then the picture of the panel.
  await page.evaluate(() => (window as any).jupyterapp.shell._hsplitPanel?.setRelativeSizes([0.5, 0.5, 0]));
  await page.getByTestId('hdsp-panel').screenshot({ path: path.join(dir, `${name}.png`) });
}

/** The messages of the open task as the page shows them, in order. */
export async function conversation(page: Page): Promise<{ ts: string; kind: string; text: string }[]> {
  return page.locator('[data-testid="hdsp-conversation"] [data-testid="hdsp-message"]').evaluateAll(nodes =>
    nodes.map(n => ({
      ts: n.getAttribute('data-ts') ?? '',
      kind: `${n.getAttribute('data-type')}:${n.getAttribute('data-say') ?? n.getAttribute('data-ask')}`,
      // The message's own text, not the labels of its history actions.
      text: (() => {
        const copy = n.cloneNode(true) as Element;
        copy.querySelectorAll('.hdsp-history-actions').forEach(a => a.remove());
        return (copy.textContent ?? '').trim();
      })()
    }))
  );
}
