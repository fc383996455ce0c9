#!/usr/bin/env bash
# Two `leap-ref serve` processes behind nginx on loopback, as docs/serving.md describes:
#   1. installs nginx (Debian's nginx-light, through scripts/setup.sh) when it is missing;
#   2. starts two servers on free loopback ports and waits until each says it is ready;
#   3. starts nginx in front of them (round-robin, or sticky by X-Session-Id so that a
#      conversation keeps hitting the slot that caches its prefix, SSE unbuffered);
#   4. sends traffic through nginx and checks it: plain and streamed chat, sessions that
#      stick to one backend, requests spread over both, /health through the proxy;
#   5. stops everything (SIGTERM; each server must exit 0) and prints a summary.
# Usage: scripts/serve-cluster.sh [MODEL.gguf]   (default: the lfm2-tiny test fixture)
# The binary is $LEAP_REF_BIN, else the debug build's (built when missing).
# Set KEEP_RUNNING=1 to leave the cluster up until Ctrl-C (for trying it by hand).
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'serve-cluster: %s\n' "$*" >&2; }

MODEL="${1:-Tests/Fixtures/models/lfm2-tiny.gguf}"
if [ -z "${LEAP_REF_BIN:-}" ]; then
    swift build --product leap-ref >/dev/null
    LEAP_REF_BIN="$(swift build --show-bin-path)/leap-ref"
fi

if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ]; then
    say "nginx is missing; installing what the tests need with scripts/setup.sh"
    ./scripts/setup.sh
fi
NGINX="$(command -v nginx || echo /usr/sbin/nginx)"

work=$(mktemp -d /tmp/leap-ref-cluster.XXXXXX)
pids=()
cleanup() {
    status=$?
    if [ -f "$work/nginx.pid" ]; then "$NGINX" -p "$work" -c "$work/nginx.conf" -s quit 2>/dev/null || true; fi
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    rm -rf "$work"
    exit $status
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# 2. Two servers, each on its own free port; wait for their "ready" lines.
ports=()
for i in 0 1; do
    port=$(free_port)
    ports+=("$port")
    "$LEAP_REF_BIN" serve --model "$MODEL" --host 127.0.0.1 --port "$port" --parallel 2 --metrics \
        >"$work/server$i.log" 2>&1 &
    pids+=("$!")
done
for i in 0 1; do
    for _ in $(seq 1 600); do
        grep -q "ready: " "$work/server$i.log" && break
        if ! kill -0 "${pids[$i]}" 2>/dev/null; then
            say "server $i exited:"
            cat "$work/server$i.log" >&2
            exit 1
        fi
        sleep 0.5
    done
    grep -q "ready: " "$work/server$i.log" || { say "server $i not ready after 300 s"; exit 1; }
done
say "servers ready on 127.0.0.1:${ports[0]} and 127.0.0.1:${ports[1]}"

# 3. nginx in front.
proxy_port=$(free_port)
user_line=""
if [ "$(id -u)" = 0 ]; then user_line="user root;"; fi
mkdir -p "$work/tmp"
cat >"$work/nginx.conf" <<EOF
$user_line
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log warn;
events { worker_connections 256; }
http {
    access_log $work/nginx-access.log;
    client_body_temp_path $work/tmp;
    proxy_temp_path $work/tmp;
    # A conversation carries X-Session-Id: the same id always reaches the same server,
    # whose slots hold its prompt cache. Requests without one go round-robin.
    upstream leap_ref_sticky {
        hash \$http_x_session_id consistent;
        server 127.0.0.1:${ports[0]} max_fails=3 fail_timeout=10s;
        server 127.0.0.1:${ports[1]} max_fails=3 fail_timeout=10s;
        keepalive 16;
    }
    upstream leap_ref_spread {
        server 127.0.0.1:${ports[0]} max_fails=3 fail_timeout=10s;
        server 127.0.0.1:${ports[1]} max_fails=3 fail_timeout=10s;
        keepalive 16;
    }
    map \$http_x_session_id \$leap_pool { "" leap_ref_spread; default leap_ref_sticky; }
    server {
        listen 127.0.0.1:$proxy_port;
        client_max_body_size 8m;
        location / {
            proxy_pass http://\$leap_pool;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;          # server-sent events go out token by token
            proxy_read_timeout 600s;
            proxy_next_upstream error timeout http_503;
            add_header X-Upstream \$upstream_addr always;
        }
    }
}
EOF
"$NGINX" -p "$work" -c "$work/nginx.conf" -t 2>"$work/nginx-test.log" || { cat "$work/nginx-test.log" >&2; exit 1; }
"$NGINX" -p "$work" -c "$work/nginx.conf"
for _ in $(seq 1 100); do [ -f "$work/nginx.pid" ] && break; sleep 0.1; done
say "nginx on 127.0.0.1:$proxy_port"

if [ "${KEEP_RUNNING:-0}" = 1 ]; then
    say "try: curl http://127.0.0.1:$proxy_port/v1/chat/completions -H 'Content-Type: application/json' -d '{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}'"
    say "Ctrl-C stops everything"
    wait "${pids[0]}"
fi

# 4. Traffic through nginx, checked.
python3 - "$proxy_port" "${ports[0]}" "${ports[1]}" <<'PY'
import json, sys, urllib.request
proxy, a, b = sys.argv[1:]
base = f"http://127.0.0.1:{proxy}"

def post(path, body, session=None):
    headers = {"Content-Type": "application/json"}
    if session:
        headers["X-Session-Id"] = session
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers=headers)
    with urllib.request.urlopen(req, timeout=300) as r:
        return r.headers.get("X-Upstream"), r.read().decode()

def chat(content, session=None, stream=False):
    body = {"messages": [{"role": "user", "content": content}], "temperature": 0, "max_tokens": 8, "stream": stream}
    upstream, text = post("/v1/chat/completions", body, session)
    if stream:
        events = [l[6:] for l in text.split("\n") if l.startswith("data: ")]
        assert events[-1] == "[DONE]", events[-1:]
        reply = "".join((json.loads(e)["choices"][0]["delta"].get("content") or "") for e in events[:-1] if json.loads(e)["choices"])
    else:
        reply = json.loads(text)["choices"][0]["message"]["content"]
    return upstream, reply

with urllib.request.urlopen(base + "/health", timeout=60) as r:
    assert r.status == 200
# Plain and streamed give the same greedy text through the proxy.
_, plain = chat("Hello through nginx")
_, streamed = chat("Hello through nginx", stream=True)
assert plain == streamed, (plain, streamed)
# A session sticks to one server.
for session in ("alice", "bob", "carol", "dave"):
    ups = {chat(f"Turn {i} of {session}", session)[0] for i in range(3)}
    assert len(ups) == 1, (session, ups)
# Requests without a session reach both servers.
seen = {chat(f"Anonymous request {i}")[0] for i in range(12)}
assert seen == {f"127.0.0.1:{a}", f"127.0.0.1:{b}"}, seen

def count(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("leapref_completions_total "):
                return int(float(line.split()[1]))
served = [count(a), count(b)]
assert sum(served) == 2 + 12 + 12 and min(served) > 0, served
print(f"serve-cluster: ok: 26 completions through nginx, {served[0]} on :{a} and {served[1]} on :{b}; sessions stuck to one server")
PY

# 5. Graceful stop: every server exits 0 on SIGTERM.
"$NGINX" -p "$work" -c "$work/nginx.conf" -s quit
for i in 0 1; do
    kill -TERM "${pids[$i]}"
    if wait "${pids[$i]}"; then :; else
        say "server $i exited with status $? after SIGTERM"
        cat "$work/server$i.log" >&2
        exit 1
    fi
done
pids=()
say "stopped: nginx and both servers (exit 0)"
