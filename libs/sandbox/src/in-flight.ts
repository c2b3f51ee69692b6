import type { Clock } from '@switchyard/clock';
import type { Answer } from './answer.ts';

/**
 * Requests being answered that end by themselves (tool calls and the like,
 * not streams that last as long as their client), so that a closing host
 * can let them finish first.
 */
export class InFlight {
  #count = 0;
  #onIdle: (() => void) | undefined;

  get count(): number {
    return this.#count;
  }

  /** Counts `answer` from now until its response is over (its release), or until it fails. */
  async answer(answer: () => Promise<Answer>): Promise<Answer> {
    this.#count++;
    let answered: Answer;
    try {
      answered = await answer();
    } catch (error) {
      this.#end();
      throw error;
    }
    let released = false;
    return {
      response: answered.response,
      release: () => {
        answered.release();
        if (!released) this.#end();
        released = true;
      },
    };
  }

  /** Counts `work` until it settles. */
  async settle(work: Promise<void>): Promise<void> {
    this.#count++;
    try {
      await work;
    } finally {
      this.#end();
    }
  }

  /** Resolves once nothing is in flight, or after `graceMs`, whichever comes first. */
  idle(clock: Clock, graceMs: number): Promise<void> {
    if (this.#count === 0 || graceMs <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = clock.setTimeout(() => this.#onIdle?.(), graceMs);
      this.#onIdle = () => {
        this.#onIdle = undefined;
        timer.cancel();
        resolve();
      };
    });
  }

  #end(): void {
    if (--this.#count === 0) this.#onIdle?.();
  }
}
