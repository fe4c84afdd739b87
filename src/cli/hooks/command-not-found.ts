import type { Hook } from '@oclif/core';
import { closestCommand } from '../suggest.js';

/**
 * `svc keys lisst`: names the command that was probably meant. In a terminal, @oclif/plugin-not-found asks
 * "Did you mean svc keys list?" and runs it on yes. Anywhere else (a script, CI, a pipe) nothing may wait
 * for an answer, and the plugin would then print only "run svc help": so we print the suggestion and exit
 * 127 (a shell's "command not found"), with `--json` as the error envelope on stdout. The plugin is not in
 * `oclif.plugins` for this reason: oclif runs every plugin's hook for the event side by side, and two
 * answers to one typo would interleave.
 */
const hook: Hook.CommandNotFound = async function (options) {
  if (process.stdin.isTTY && process.stdout.isTTY && !options.argv?.includes('--json')) {
    const { default: prompt } = await import('@oclif/plugin-not-found');
    return prompt.call(this, options);
  }
  const { config } = options;
  const separator = config.topicSeparator;
  const shown = (id: string) => `${config.bin} ${id.replaceAll(':', separator)}`;
  const visible = config.commands.filter((command) => !command.hidden);
  const ids = [...visible.map((command) => command.id), ...visible.flatMap((command) => command.aliases)];
  const suggestion = closestCommand(options.id, ids);
  const message = `${shown(options.id)} is not a ${config.bin} command.${
    suggestion ? ` Did you mean ${shown(suggestion)}?` : ''
  } Run ${config.bin} help for the list of commands.`;
  if (options.argv?.includes('--json')) {
    const error = {
      code: 'command_not_found',
      message,
      ...(suggestion ? { suggestion: shown(suggestion) } : {}),
    };
    process.stdout.write(`${JSON.stringify({ error }, null, 2)}\n`);
    this.exit(127);
  }
  this.error(message, { exit: 127 });
};

export default hook;
