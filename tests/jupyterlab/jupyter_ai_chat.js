// Jupyter AI's chat in a real browser: open a chat, ask the hdsp persona, wait
// for its answer. Run by tests/jupyterlab/test_jupyter_ai.py, which starts the
// processes and passes their addresses in the environment:
//   LAB_URL (ending in /), LAB_TOKEN, CHAT (a .chat file's path), PROMPT,
//   EXPECT (text the persona's answer must show), CHROMIUM, SCREENSHOT.
// Prints the chat's messages; exits non-zero, saying why, when the answer
// does not come.
const { chromium } = require('playwright-core');

(async () => {
  const env = process.env;
  const browser = await chromium.launch({
    executablePath: env.CHROMIUM,
    args: ['--no-sandbox']
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  let code = 0;
  try {
    await page.goto(`${env.LAB_URL}lab/tree/${env.CHAT}?token=${env.LAB_TOKEN}`);
    const input = page.locator('.jp-chat-input-container textarea').first();
    await input.waitFor({ state: 'visible', timeout: 90_000 });
    // The persona picker under the input names the persona the message goes to.
    await page
      .locator('.jp-chat-input-container')
      .getByText('hdsp', { exact: true })
      .first()
      .waitFor({ timeout: 60_000 });
    await input.click();
    await input.fill(env.PROMPT);
    await input.press('Enter');
    const answer = page
      .locator('.jp-chat-message')
      .filter({ hasText: 'hdsp' })
      .filter({ hasText: env.EXPECT });
    await answer.first().waitFor({ timeout: 90_000 });
  } catch (error) {
    console.error(String(error));
    code = 1;
  }
  await page.screenshot({ path: env.SCREENSHOT });
  const messages = await page.locator('.jp-chat-message').allInnerTexts();
  console.log(messages.join('\n---\n'));
  await browser.close();
  process.exit(code);
})();
