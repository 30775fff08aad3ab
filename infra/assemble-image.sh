#!/bin/sh
# Assembles the runtime file tree of the Everdict image into OUT, from a repository root that
# has been installed, built and pruned (`npm ci && npm run build && npm prune --omit=dev`).
# infra/Dockerfile's build stage runs exactly this, and test/infra/image-tree.test.ts runs it
# and starts every service from OUT, so the image and its test cannot drift apart.
#
#   sh infra/assemble-image.sh OUT        (from the repository root; OUT must not exist or be empty)
#
# What runs, and nothing else:
# - manifests, the production node_modules (root and any a workspace keeps nested), the CLI shim;
# - each workspace's compiled sources (dist/src, not the compiled tests) and the store's migrations;
# - the JSON Schemas the validators load;
# - rabbitmq/definitions.json, the broker topology every service asserts at start;
# - infra/config (the sample fleet config, its connectors included, and model scripts: the embedded node's
#   default) and the healthcheck;
# - the operator console's built static files (console/dist, served by intake under /ui; intake
#   finds them by walking up to console/package.json, so both are copied).
set -eu

out=${1:?usage: assemble-image.sh OUT}
[ -f package.json ] && [ -d node_modules ] || { echo "assemble-image.sh: run from an installed repository root" >&2; exit 1; }

mkdir -p "$out/infra" "$out/rabbitmq"
cp -a package.json package-lock.json bin schemas node_modules "$out/"
cp -a rabbitmq/definitions.json "$out/rabbitmq/"
cp -a infra/healthcheck.mjs infra/config "$out/infra/"
# The console is built by `npm run build`; an image without it serves /ui as 503, so a build that
# produced no console is refused here rather than shipped.
[ -f console/dist/index.html ] || { echo "assemble-image.sh: console/dist/index.html is missing (run npm run build)" >&2; exit 1; }
mkdir -p "$out/console"
cp -a console/package.json console/dist "$out/console/"
for ws in libs/* services/* cli; do
  [ -f "$ws/package.json" ] || continue
  mkdir -p "$out/$ws"
  cp -a "$ws/package.json" "$out/$ws/"
  if [ -d "$ws/dist/src" ]; then
    mkdir -p "$out/$ws/dist"
    cp -a "$ws/dist/src" "$out/$ws/dist/"
  fi
  for extra in migrations node_modules; do
    if [ -d "$ws/$extra" ]; then cp -a "$ws/$extra" "$out/$ws/"; fi
  done
done
