'use strict';
// See testdata/nodekit/kit.js.
require('../../nodekit/kit.js')(require('ownerjournal')).suite(1, 'b', { test, expect, beforeAll, afterAll });
