import { z } from 'zod';
/** Options of the scheduler replica (`switchyard-scheduler`). */
export declare const schedulerConfigSchema: z.ZodObject<{
    logLevel: z.ZodDefault<z.ZodEnum<{
        error: "error";
        fatal: "fatal";
        warn: "warn";
        info: "info";
        debug: "debug";
        trace: "trace";
        silent: "silent";
    }>>;
    drainDelayMs: z.ZodDefault<z.ZodNumber>;
    host: z.ZodDefault<z.ZodString>;
    port: z.ZodDefault<z.ZodNumber>;
    replicaId: z.ZodDefault<z.ZodString>;
    advertiseUrl: z.ZodOptional<z.ZodURL>;
    election: z.ZodPrefault<z.ZodObject<{
        backend: z.ZodDefault<z.ZodEnum<{
            file: "file";
            memory: "memory";
            kubernetes: "kubernetes";
        }>>;
        leaseFile: z.ZodOptional<z.ZodString>;
        namespace: z.ZodDefault<z.ZodString>;
        leaseName: z.ZodDefault<z.ZodString>;
        leaseDurationMs: z.ZodDefault<z.ZodNumber>;
        renewDeadlineMs: z.ZodDefault<z.ZodNumber>;
        retryPeriodMs: z.ZodDefault<z.ZodNumber>;
        jitterFactor: z.ZodDefault<z.ZodNumber>;
        kubeconfig: z.ZodOptional<z.ZodString>;
    }, z.core.$strip>>;
    joinTokens: z.ZodDefault<z.ZodArray<z.ZodString>>;
    joinTokenFile: z.ZodOptional<z.ZodString>;
    maxRuntimes: z.ZodDefault<z.ZodNumber>;
    tunnel: z.ZodPrefault<z.ZodObject<{
        pingIntervalMs: z.ZodDefault<z.ZodNumber>;
    }, z.core.$strip>>;
    epoch: z.ZodPrefault<z.ZodObject<{
        cycleIntervalMs: z.ZodDefault<z.ZodNumber>;
        cycleTimeoutMs: z.ZodDefault<z.ZodNumber>;
        staleAfterMs: z.ZodDefault<z.ZodNumber>;
    }, z.core.$strip>>;
}, z.core.$strip>;
export type SchedulerConfig = z.output<typeof schedulerConfigSchema>;
/** Fills values computed from others: advertiseUrl from port. */
export declare function deriveSchedulerConfig(config: SchedulerConfig): SchedulerConfig;
