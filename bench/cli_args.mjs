// cli_args.mjs — the command line of the bench scripts (bench/web_vs_tfjs, bench/model_vs_web):
// node:util's parseArgs, plus what a user of webtune's own CLI expects of them. `--help` (or
// `-h`) prints the usage on stdout and exits 0; an unknown flag, a flag missing its value or a
// positional argument a script takes none of prints one line saying so and the usage on stderr
// and exits 2 (webtune's usage-error status, README.md "Exit codes"), instead of node's stack
// trace.

import { parseArgs } from 'node:util';

/**
 * parseArgs({ ...config, args: argv }) for the script `name`, `usage` being its synopsis (one or
 * more lines, without a trailing newline). Returns parseArgs's { values, positionals }; exits the
 * process as the file comment says on --help and on a malformed command line.
 */
export function parseCommandLine(name, config, usage, argv = process.argv.slice(2)) {
  // Only before a "--" that ends the flags: after it, "--help" would be a positional.
  const flags = argv.includes('--') ? argv.slice(0, argv.indexOf('--')) : argv;
  if (flags.includes('--help') || flags.includes('-h')) {
    console.log(usage);
    process.exit(0);
  }
  try {
    return parseArgs({ ...config, args: argv });
  } catch (e) {
    // parseArgs's messages name the flag and say how to pass a value that starts with "-".
    console.error(`${name}: ${e.message}\n${usage}`);
    process.exit(2);
  }
}
