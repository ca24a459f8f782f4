// Runs one of the binaries with this process's arguments, stdin, stdout and stderr, passes on
// the signals that end it, and ends as it ended (its exit code, or the same signal).
'use strict';

const { spawn } = require('node:child_process');
const { binaryPath, MissingBinaryError } = require('./binary.js');

const FORWARDED = ['SIGINT', 'SIGTERM', 'SIGHUP'];

function launch(name) {
  let binary;
  try {
    binary = binaryPath(name);
  } catch (error) {
    if (!(error instanceof MissingBinaryError)) throw error;
    process.stderr.write(`${name}: ${error.message}\n`);
    process.exit(1);
  }
  const child = spawn(binary, process.argv.slice(2), { stdio: 'inherit' });
  const forward = (signal) => child.kill(signal);
  for (const signal of FORWARDED) process.on(signal, forward);
  child.once('error', (error) => {
    process.stderr.write(`${name}: cannot run ${binary}: ${error.message}\n`);
    process.exit(1);
  });
  child.once('exit', (code, signal) => {
    for (const forwarded of FORWARDED) process.off(forwarded, forward);
    if (signal !== null) {
      process.kill(process.pid, signal);
      return;
    }
    process.exit(code ?? 1);
  });
}

module.exports = { launch };
