// The harness itself: JupyterLab loads in the system's chromium with the server
// extension behind it, and the page's own authenticated fetch reaches hdsp/status.
import { expect, test } from '@jupyterlab/galata';

test('JupyterLab loads and the page reaches hdsp/status', async ({ page, baseURL }) => {
  await expect(page.locator('#jp-main-dock-panel')).toBeVisible();

  const status = await page.evaluate(async () => {
    const settings = (window as any).jupyterapp.serviceManager.serverSettings;
    const response = await settings.fetch.call(window, settings.baseUrl + 'hdsp/status', {
      ...settings.init
    });
    return { code: response.status, body: await response.json() };
  });
  expect(status.code).toBe(200);
  expect(status.body.daemon).toBe('running');
  expect(status.body.status.serverVersion).toBeTruthy();

  // Without the credentials the page has, the same URL is refused.
  // (Node's own fetch: Playwright's request contexts carry the token header.)
  const refused = await fetch(`${baseURL}/hdsp/status`);
  expect(refused.status).toBe(403);
});
