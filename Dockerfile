# One image for every Switchyard app; the command picks the app:
#   docker run switchyard apps/scheduler/src/main.ts
#   docker run switchyard apps/gateway/src/main.ts
#   docker run --init switchyard apps/runtime/src/main.ts --config /etc/switchyard/config/config.yaml
# (--init: an init as PID 1 reaps the orphans of stdio servers' trees, which
# the runtime, Node, would keep as zombies; the runtime chart shares the pod's
# process namespace for the same reason.)
# TypeScript runs directly on Node 24 (type stripping), so there is no build
# step; the image ships Node's module compile cache instead (see below).

FROM node:24-slim AS deps
WORKDIR /app
# npm links the workspaces (libs/*, apps/*) into node_modules, so it needs
# their folders, not only the manifests: this layer is rebuilt whenever any
# source changes.
COPY package.json package-lock.json ./
COPY libs/ ./libs/
COPY apps/ ./apps/
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund

FROM node:24-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY --from=deps --chown=root:root /app/node_modules ./node_modules
COPY --chown=root:root package.json ./
COPY --chown=root:root libs/ ./libs/
COPY --chown=root:root apps/ ./apps/
# Node's module compile cache, filled by loading every app once as the app
# user (Node uses only a cache of the user running it): the apps then start
# without the type stripper, sooner and with 15-30 MB less RSS each. Entries
# are checked against the files' contents; read-only once filled (the charts
# also mount the root filesystem read-only).
ENV NODE_COMPILE_CACHE=/app/.node-compile-cache
RUN mkdir "$NODE_COMPILE_CACHE" && chown 10001:10001 "$NODE_COMPILE_CACHE"
# Files stay root-owned and read-only to the app user; the charts mount /tmp.
# The app user has no passwd entry, so HOME would be /, which it cannot write:
# stdio servers inherit HOME, where npx and uvx keep their caches.
ENV HOME=/tmp
USER 10001:10001
RUN for app in scheduler gateway runtime; do node "apps/$app/src/main.ts" --help > /dev/null; done \
  && chmod -R a-w "$NODE_COMPILE_CACHE"
ENTRYPOINT ["node"]
CMD ["apps/gateway/src/main.ts"]
