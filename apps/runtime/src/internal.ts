// What sibling packages take from the runtime app: `switchyard runtime join
// --config` serves the classes of a runtime config file, read and checked as
// the app reads it.
export { classesOfFile } from './classes.ts';
export type { ClassesOfFile } from './classes.ts';
