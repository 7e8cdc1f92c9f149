#!/usr/bin/env bash
# with_redis.sh COMMAND...: runs COMMAND with KOLO_BACKEND=gloo against a redis-server of its
# own (the Gloo backend's rendezvous store, docs/gloo.md), started on a free loopback port and
# stopped when COMMAND ends, however it ends. Exits with COMMAND's status.
set -uo pipefail
server=$(command -v redis-server) || { echo "with_redis.sh: redis-server not found (apt-get install redis-server)" >&2; exit 2; }
dir=$(mktemp -d /tmp/kolo-redis.XXXXXX)
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 143' TERM INT
# A port the kernel just handed out and released is very likely free; if redis cannot bind it
# (taken meanwhile), try another.
for attempt in 1 2 3 4 5; do
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$server" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
            --logfile "$dir/redis.log" --daemonize no &
  pid=$!
  for _ in $(seq 1 100); do
    if ! kill -0 "$pid" 2>/dev/null; then break; fi
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      export KOLO_BACKEND=gloo KOLO_GLOO_REDIS="127.0.0.1:$port"
      "$@"
      exit $?
    fi
    sleep 0.05
  done
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=""
done
echo "with_redis.sh: could not start redis-server (log: $(cat "$dir/redis.log" 2>/dev/null | tail -3))" >&2
exit 2
