// The ownerjournal end-to-end Vitest project (see package.json). The
// globalSetup line (with createRequire) is all a project needs; the rest
// serves the Go tests in e2e/.
import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

export default defineConfig({
  test: {
    globalSetup: [require.resolve('ownerjournal/vitest')],
    include: ['tests/*.test.mjs'],
    maxWorkers: 2,
    fileParallelism: true,
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
