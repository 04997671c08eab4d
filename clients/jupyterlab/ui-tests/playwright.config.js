// Browser tests of hdsp's JupyterLab panel. The processes they need (the fake
// model, hdspd, JupyterLab) are started by tests/jupyterlab/test_browser.py, which
// runs one spec at a time with their addresses in the environment:
//   HDSP_LAB_URL     JupyterLab's base URL, without the trailing slash
//   HDSP_LAB_TOKEN   its token (sent as an Authorization header, as API clients do)
//   HDSP_CONTROL_DIR a directory where a spec asks the Python side for things
//                    (a file `restart-hdspd` asks it to kill and restart hdspd)
//   HDSP_UI_OUTPUT   where Playwright writes its traces and screenshots
//   CHROMIUM         the browser (Debian's chromium; Playwright's download cannot work here)
const base = require('@jupyterlab/galata/lib/playwright-config');

const output = process.env.HDSP_UI_OUTPUT || 'test-results';

module.exports = {
  ...base,
  testDir: './tests',
  outputDir: output,
  reporter: [['list']],
  retries: 0,
  workers: 1,
  timeout: 90000,
  expect: { timeout: 30000 },
  use: {
    ...base.use,
    baseURL: process.env.HDSP_LAB_URL || 'http://127.0.0.1:8888',
    extraHTTPHeaders: process.env.HDSP_LAB_TOKEN
      ? { Authorization: `token ${process.env.HDSP_LAB_TOKEN}` }
      : {},
    // A trace (every action's DOM and screenshot) costs CPU all through each
    // spec and is read only by someone debugging here: HDSP_UI_TRACE=1 keeps
    // it for a spec that fails.
    trace: process.env.HDSP_UI_TRACE ? 'retain-on-failure' : 'off',
    video: 'off',
    screenshot: 'only-on-failure',
    launchOptions: {
      executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
      args: ['--no-sandbox', '--disable-dev-shm-usage']
    }
  },
  projects: [{ name: 'chromium', use: { browserName: 'chromium' } }]
};
