// @ts-check
// The same suite with Playwright's own `webServer` in place of ownerjournal,
// for `make bench` (bench/cmd/benchdriver, the pw-* figures): Playwright
// starts one e2e-server for the run (OJ_E2E_SERVER on OJ_PW_WEBSERVER_PORT,
// in the root OWNERJOURNAL_ROOT that the driver made) and stops it at the
// end; nothing recovers what a SIGKILLed run leaves.
const { defineConfig } = require('@playwright/test');
const base = require('./playwright.config.js');

const port = process.env.OJ_PW_WEBSERVER_PORT;
if (!port || !process.env.OJ_E2E_SERVER || !process.env.OWNERJOURNAL_ROOT) {
  throw new Error('playwright.webserver.config.js needs OJ_PW_WEBSERVER_PORT, OJ_E2E_SERVER and OWNERJOURNAL_ROOT');
}
const url = `http://127.0.0.1:${port}`;

module.exports = defineConfig({
  ...base,
  globalSetup: require.resolve('./global-setup.js'),
  globalTeardown: require.resolve('./global-teardown.js'),
  webServer: {
    command: `'${process.env.OJ_E2E_SERVER}' --addr 127.0.0.1:${port}`,
    url: `${url}/healthz`,
    reuseExistingServer: false,
  },
  use: { baseURL: url },
});
