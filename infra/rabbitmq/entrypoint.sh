#!/bin/sh
# RabbitMQ for the compose stack: starts the broker (which imports rabbitmq/definitions.json and
# compose-users.json — the five service users, with no password), then gives each service user
# its password from /run/secrets/amqp_<service>, and only then reports ready
# (/tmp/everdict-users-ready, which the healthcheck requires).
#
# It runs at every broker start, so a re-import of the definitions (which clears the hashes) never
# leaves a user without its password, and rotating one is: write the new secret file, restart
# rabbitmq (or run the change_password line below by hand), restart that service.
# Passwords reach rabbitmqctl as an argument inside this container only; never logged.
set -eu
rm -f /tmp/everdict-users-ready
docker-entrypoint.sh rabbitmq-server &
server=$!
trap 'kill -TERM "$server" 2>/dev/null || true' TERM INT

until rabbitmqctl -q await_startup >/dev/null 2>&1; do
  kill -0 "$server" 2>/dev/null || exit 1
  sleep 1
done
for service in intake turn-worker gate execution-coordinator reconciler; do
  secret="/run/secrets/amqp_$(echo "$service" | tr '-' '_')"
  if [ ! -s "$secret" ]; then
    echo "everdict: $secret is missing or empty: no password for everdict-$service (run infra/rabbitmq/make-secrets.sh)" >&2
    kill -TERM "$server"
    exit 1
  fi
  rabbitmqctl -q change_password "everdict-$service" "$(cat "$secret")"
done
touch /tmp/everdict-users-ready
echo "everdict: broker users ready"
wait "$server"
