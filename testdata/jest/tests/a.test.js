'use strict';
// See testdata/nodekit/kit.js.
require('../../nodekit/kit.js')(require('ownerjournal')).suite(0, 'a', { test, expect, beforeAll, afterAll });
