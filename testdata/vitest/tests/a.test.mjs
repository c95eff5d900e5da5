// See testdata/nodekit/kit.js.
import { createRequire } from 'node:module';
import { test, expect, beforeAll, afterAll } from 'vitest';

const require = createRequire(import.meta.url);
require('../../nodekit/kit.js')(require('ownerjournal')).suite(0, 'a', { test, expect, beforeAll, afterAll });
