// Where this machine's filectx binaries are: an override in the environment, else the bin/
// folder of the platform package that npm installed beside @filectx/cli (one of its
// optionalDependencies, chosen by its `os` and `cpu` fields; nothing is downloaded at install or
// run time). @filectx/client uses `binaryPath('filectxd')` to start the daemon.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

/** The platform packages, by `${process.platform}-${process.arch}`. */
const PLATFORM_PACKAGES = {
  'linux-x64': '@filectx/cli-linux-x64',
};

/** The environment variable that names each binary instead (a path, or a name on PATH). */
const OVERRIDES = {
  filectx: 'FILECTX_BINARY',
  filectxd: 'FILECTX_DAEMON',
};

/** No binary can be found for this machine; `message` says why and what to do. */
class MissingBinaryError extends Error {
  constructor(message) {
    super(message);
    this.name = 'MissingBinaryError';
  }
}

/** The platform package for this machine, or `undefined` when none is published. */
function platformPackage(platform = process.platform, arch = process.arch) {
  return PLATFORM_PACKAGES[`${platform}-${arch}`];
}

/**
 * The path of `name` (`filectx` or `filectxd`) to run: `FILECTX_BINARY` (for filectx) or
 * `FILECTX_DAEMON` (for filectxd) when set and not empty, else `bin/NAME` in the platform
 * package. Throws `MissingBinaryError` when this machine has no platform package or it is not
 * installed.
 */
function binaryPath(name) {
  const variable = OVERRIDES[name];
  if (variable === undefined) throw new TypeError(`unknown filectx binary ${JSON.stringify(name)}`);
  const override = process.env[variable];
  if (override) return override;
  const platform = `${process.platform}-${process.arch}`;
  const pkg = platformPackage();
  if (pkg === undefined) {
    throw new MissingBinaryError(
      `@filectx/cli has no ${name} binary for ${platform} (only for ${Object.keys(PLATFORM_PACKAGES).join(', ')}). ` +
        `Build it from the source (cargo install --path client/rust; cargo install --path daemon) and set ${variable} to it.`,
    );
  }
  let folder;
  try {
    folder = path.dirname(require.resolve(`${pkg}/package.json`));
  } catch {
    throw new MissingBinaryError(
      `the ${name} binary for ${platform} comes in the package ${pkg}, which is not installed ` +
        `(installed with --omit=optional or --no-optional?). Install it with ` +
        `\`npm install ${pkg}@${require('../package.json').version}\`, or set ${variable} to a ${name} binary.`,
    );
  }
  const binary = path.join(folder, 'bin', name);
  if (!fs.existsSync(binary)) {
    throw new MissingBinaryError(`${pkg} is installed at ${folder} but has no bin/${name}: reinstall it, or set ${variable}.`);
  }
  return binary;
}

module.exports = { binaryPath, platformPackage, MissingBinaryError, PLATFORM_PACKAGES };
