/** No binary can be found for this machine; `message` says why and what to do. */
export declare class MissingBinaryError extends Error {}

/** The platform packages, by `${process.platform}-${process.arch}`. */
export declare const PLATFORM_PACKAGES: Readonly<Record<string, string>>;

/** The platform package for this machine (default: this one), or `undefined` when none is published. */
export declare function platformPackage(platform?: string, arch?: string): string | undefined;

/**
 * The path of `name` to run: `FILECTX_BINARY` (filectx) or `FILECTX_DAEMON` (filectxd) when set,
 * else `bin/NAME` in the platform package. Throws `MissingBinaryError` when it is not installed.
 */
export declare function binaryPath(name: 'filectx' | 'filectxd'): string;
