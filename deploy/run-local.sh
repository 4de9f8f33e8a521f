#!/usr/bin/env bash
# The distributed shape on one machine: one gateway (gunicorn), two workers, beat.
# Needs Redis on 127.0.0.1:6379. Ctrl-C stops everything.
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
trap 'kill "${pids[@]}" 2>/dev/null; wait' EXIT INT TERM
gunicorn --worker-class vancetope_gateway.serving.GatewayWorker --workers 2 --threads 64 --bind "127.0.0.1:$PORT" \
    --timeout 0 'vancetope_gateway.wsgi:app' & pids+=($!)
for n in 1 2; do
    celery -A workers.main worker --loglevel=WARNING --prefetch-multiplier=1 \
        --concurrency 2 -n "worker$n@%h" & pids+=($!)
done
celery -A workers.main beat --loglevel=WARNING \
    --schedule "$VANCETOPE_DATA_DIR/celerybeat-schedule" & pids+=($!)

echo "gateway on ws://127.0.0.1:$PORT/ws; connect with:"
echo "    vancetope chat --url ws://127.0.0.1:$PORT/ws --token \$(cat $token_file)"
wait
