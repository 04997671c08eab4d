// Scenario 6: hdspd restarted while the panel is open; the panel reconnects by
// itself and says so (CONTRACT.md: the `hdsp-connection` banner's data-state).
import { expect, test } from '@jupyterlab/galata';
import * as fs from 'fs';
import * as path from 'path';

test('the panel follows an hdspd restart by itself', async ({ page }) => {
  await page.evaluate(async () => {
    await (window as any).jupyterapp.commands.execute('hdsp:open-panel');
  });
  const panel = page.getByTestId('hdsp-panel');
  await expect(panel).toBeVisible();
  const banner = page.getByTestId('hdsp-connection');
  await expect(banner).toHaveAttribute('data-state', 'connected');

  // Ask the Python side to kill hdspd and start it again.
  fs.writeFileSync(path.join(process.env.HDSP_CONTROL_DIR!, 'restart-hdspd'), '');
  await expect(banner).toHaveAttribute('data-state', /reconnecting|down/);
  await expect(banner).toHaveAttribute('data-state', 'connected', { timeout: 60000 });
  await expect(banner).toContainText(/connected/i);
  await page.screenshot({ path: path.join(process.env.HDSP_UI_OUTPUT!, 'scenario-6.png') });
});
