#!/usr/bin/env node
// `filectxd`: runs the filectxd binary of the platform package (see ../lib/binary.js).
'use strict';
require('../lib/launch.js').launch('filectxd');
