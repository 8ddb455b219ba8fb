#!/usr/bin/env bash
# What a reverse proxy's buffering does to client TTFT: the same load against
# Sluice directly and through nginx (Debian package, installed if missing) in
# three configurations, all on loopback:
#   naive         location / { proxy_pass ...; }   nginx defaults: proxy_buffering on, HTTP/1.0
#                 (Sluice's X-Accel-Buffering: no header turns buffering off per response)
#   naive-buffered  the same plus proxy_ignore_headers X-Accel-Buffering: what the defaults do
#                 to a server that does not send that header
#   deploy        the project's deploy/nginx.conf
# Writes $OUT/nginx-{direct,naive,naive-buffered,deploy}.json.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
CONCURRENCY=${CONCURRENCY:-4}
REQUESTS=${REQUESTS:-24}
MAX_TOKENS=${MAX_TOKENS:-64}
SPORT=${SPORT:-18184}
NPORT=${NPORT:-18185}
header

if ! command -v nginx >/dev/null; then
	echo "installing nginx-light (Debian)" >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx-light >/dev/null
fi
echo "nginx: $(nginx -v 2>&1)"
TMP=$(mktemp -d)
trap 'cleanup; rm -rf "$TMP"' EXIT INT TERM

# nginx_conf SERVER_BLOCK_FILE: a whole nginx.conf around one server block,
# every path inside $TMP.
nginx_conf() {
	{
		[[ $EUID == 0 ]] && echo "user root;"
		cat <<CONF
worker_processes 1;
pid $TMP/nginx.pid;
error_log $TMP/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $TMP/body;
    proxy_temp_path $TMP/proxy;
CONF
		sed 's/^/    /' "$1"
		echo "}"
	} >"$TMP/nginx.conf"
}

naive_block() {
	cat <<CONF
server {
    listen 127.0.0.1:$NPORT;
    location / {
        proxy_pass http://127.0.0.1:$SPORT;
        $1
    }
}
CONF
}

start_nginx() {
	nginx -t -q -p "$TMP" -c "$TMP/nginx.conf"
	nginx -p "$TMP" -c "$TMP/nginx.conf" -g 'daemon off;' &
	NGINX_PID=$!
	PIDS+=("$NGINX_PID")
	wait_ready "http://127.0.0.1:$NPORT" "$NGINX_PID"
}

# Each configuration gets its own prompts (--seed): a prompt Sluice has seen
# would come from its prefix cache and flatter whichever run came later.
SEED=1
measure() { # NAME URL
	SEED=$((SEED + 1))
	local args=(--url "$2" --concurrency "$CONCURRENCY" --requests "$REQUESTS" --max-tokens "$MAX_TOKENS"
		--seed "$SEED" --label "$1" --out "$OUT/nginx-$1.json")
	echo "+ sluice bench ${args[*]}"
	"$SLUICE" bench "${args[@]}"
}

start_sluice "$SPORT" nginx-sluice
warm "http://127.0.0.1:$SPORT"
measure direct "http://127.0.0.1:$SPORT"

for cfg in naive naive-buffered deploy; do
	case $cfg in
	naive) naive_block "" >"$TMP/server.conf" ;;
	naive-buffered) naive_block "proxy_ignore_headers X-Accel-Buffering;" >"$TMP/server.conf" ;;
	deploy) sed -e "s/listen 80;/listen 127.0.0.1:$NPORT;/" -e "s/server 127.0.0.1:8080;/server 127.0.0.1:$SPORT;/" \
		deploy/nginx.conf >"$TMP/server.conf" ;;
	esac
	nginx_conf "$TMP/server.conf"
	start_nginx
	measure "$cfg" "http://127.0.0.1:$NPORT"
	stop_server "$NGINX_PID"
done
