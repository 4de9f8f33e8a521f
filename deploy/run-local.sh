#!/usr/bin/env bash
# The distributed shape on one machine: one gateway (gunicorn), two workers, beat.
# Needs Redis on 127.0.0.1:6379. Ctrl-C (or SIGTERM) stops everything within seconds, and
# so does any one of the processes ending: it is never left half running.
set -euo pipefail
export VANCETOPE_REDIS_URL="${VANCETOPE_REDIS_URL:-redis://127.0.0.1:6379/0}"
export VANCETOPE_DATA_DIR="${VANCETOPE_DATA_DIR:-./.vancetope-distributed}"
export VANCETOPE_STORE_URL="${VANCETOPE_STORE_URL:-sqlite:///$VANCETOPE_DATA_DIR/vancetope.db}"
PORT="${PORT:-8000}"
mkdir -p "$VANCETOPE_DATA_DIR"

token_file="$VANCETOPE_DATA_DIR/token"
if [ ! -s "$token_file" ]; then
    vancetope admin tenant create local --id local --exist-ok --quiet > /dev/null
    vancetope admin user create --tenant local local --id local --exist-ok --quiet > /dev/null
    (umask 077 && vancetope admin token create --tenant local --user local \
        --label run-local.sh --quiet > "$token_file")
fi

pids=()
stop_all() {
    trap - EXIT INT TERM
    # SIGTERM: the gateway closes its sockets with 1001 and exits; the workers finish the
    # turns they run (warm shutdown). Whatever is still there after 20 s is killed.
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 200); do
        kill -0 "${pids[@]}" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "${pids[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
}
trap stop_all EXIT
trap 'echo "run-local.sh: stopping" >&2; exit 130' INT
trap 'echo "run-local.sh: stopping" >&2; exit 143' TERM

# Each process in a process group of its own (job control), so that Ctrl-C reaches only
# this script, which passes it on as SIGTERM: the graceful stop of each of them.
set -m
gunicorn --worker-class vancetope_gateway.serving.GatewayWorker --workers 2 --threads 64 \
    --bind "127.0.0.1:$PORT" --timeout 0 --graceful-timeout 5 'vancetope_gateway.wsgi:app' &
pids+=($!)
for n in 1 2; do
    celery -A workers.main worker --loglevel=WARNING --prefetch-multiplier=1 \
        --concurrency 2 -n "worker$n@%h" & pids+=($!)
done
celery -A workers.main beat --loglevel=WARNING & pids+=($!)

echo "gateway on ws://127.0.0.1:$PORT/ws; connect with:"
echo "    vancetope chat --url ws://127.0.0.1:$PORT/ws --token \$(cat $token_file)"
status=0
wait -n || status=$?
echo "run-local.sh: a process ended (exit $status); stopping the others" >&2
exit "$status"
