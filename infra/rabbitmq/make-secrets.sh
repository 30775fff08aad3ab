#!/bin/sh
# Creates the compose stack's broker passwords, one random secret per service, in ./secrets/
# (git-ignored; the folder mode 700, the files 644 so the non-root service containers can read their bind-mounted copy). Existing files are kept; delete one and re-run to rotate it, then
# `docker compose restart rabbitmq <service>`.
set -eu
dir="$(dirname "$0")/../../secrets"
mkdir -p "$dir" && chmod 700 "$dir"
for service in intake turn_worker gate execution_coordinator reconciler; do
  file="$dir/amqp_$service"
  [ -s "$file" ] && continue
  (umask 022 && head -c 24 /dev/urandom | base64 | tr -d '/+=\n' > "$file")
  echo "wrote $file"
done
