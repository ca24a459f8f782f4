// Runs a command (the rest of the command line) in a network namespace of its own whose only
// interface is loopback, so nothing the harness under test does can leave this machine: the
// scripted model, the daemon and Claude Code all run inside it (the daemon's Unix socket is a
// file, which works across namespaces). As root: `unshare --net`; otherwise with a user
// namespace as well (`unshare --user --map-root-user --net`). When neither works the command
// is not run, unless FILECTX_HARNESS_NO_NETNS=1 says to run it without the namespace (then
// only the proxy settings and the model's refusals keep traffic local).
//
//   node lib/isolate.mjs node --test claude.test.mjs

import { spawnSync } from 'node:child_process';

const command = process.argv.slice(2);
if (command.length === 0) {
  console.error('usage: node lib/isolate.mjs COMMAND [ARG…]');
  process.exit(2);
}

const inside = 'ip link set lo up && exec "$@"';
const env = { ...process.env, FILECTX_HARNESS_NETNS: '1' };
function attempt(unshare) {
  return spawnSync('unshare', [...unshare, '--', 'sh', '-c', inside, 'sh', ...command], { stdio: 'inherit', env });
}

// A probe first, so that a namespace that cannot be made is told apart from a failing command.
function works(unshare) {
  const probe = spawnSync('unshare', [...unshare, '--', 'sh', '-c', 'ip link set lo up'], { stdio: 'ignore' });
  return probe.status === 0;
}

if (process.env.FILECTX_HARNESS_NETNS === '1') {
  // Already inside.
  const result = spawnSync(command[0], command.slice(1), { stdio: 'inherit' });
  process.exit(result.status ?? 1);
}
for (const unshare of [['--net'], ['--user', '--map-root-user', '--net']]) {
  if (works(unshare)) {
    const result = attempt(unshare);
    process.exit(result.status ?? 1);
  }
}
if (process.env.FILECTX_HARNESS_NO_NETNS === '1') {
  console.error('isolate: no network namespace could be made; running without one (FILECTX_HARNESS_NO_NETNS=1)');
  const result = spawnSync(command[0], command.slice(1), { stdio: 'inherit', env: { ...process.env } });
  process.exit(result.status ?? 1);
}
console.error(
  'isolate: no network namespace could be made (`unshare --net` and `unshare --user --map-root-user --net` ' +
    'both failed, or `ip` is missing); the harness test runs only where nothing can leave loopback. ' +
    'Set FILECTX_HARNESS_NO_NETNS=1 to run it anyway.',
);
process.exit(1);
