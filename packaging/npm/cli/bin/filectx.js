#!/usr/bin/env node
// `filectx`: runs the filectx binary of the platform package (see ../lib/binary.js).
'use strict';
require('../lib/launch.js').launch('filectx');
