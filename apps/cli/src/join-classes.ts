/**
 * The classes `switchyard runtime join` can serve, in a module of their own:
 * the command line is checked against them before the runtime's code loads.
 */
export const JOIN_CLASSES = ['demo', 'everything'] as const;

export type JoinClass = (typeof JOIN_CLASSES)[number];

export function isJoinClass(name: string): name is JoinClass {
  return (JOIN_CLASSES as readonly string[]).includes(name);
}
