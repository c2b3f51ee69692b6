import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, resolve } from 'node:path';

/**
 * Why a stdio class's `command` cannot be spawned on this node, or
 * undefined when it is there: a path (with a slash) is taken from `cwd`, a
 * name is looked up on `pathVar` (the PATH of the server's environment,
 * where spawn looks; a relative entry of it from `cwd` too). `cwd` is the
 * directory the server is spawned in: spawn changes to it first. Not guaranteed: that the server then starts, nor that
 * what is there now is there at the next start.
 */
export function commandProblem(command: string, pathVar: string | undefined, cwd: string): string | undefined {
  if (command.includes('/')) {
    const file = resolve(cwd, command);
    return executableFile(file) ? undefined : `${file} is no executable file`;
  }
  const dirs = (pathVar ?? '').split(delimiter).filter((dir) => dir !== '');
  return dirs.some((dir) => executableFile(resolve(cwd, dir, command))) ? undefined : `${command} is not on its PATH`;
}

function executableFile(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}
