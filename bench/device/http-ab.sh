#!/usr/bin/env bash
# http-ab.sh: httpd before (httpd-main) and after (httpd-new) the kept file and the per-vcore I/O counts, the pthread build, nginx with and without open_file_cache; K = 8, 4, 2 (see README.md)
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
W=$PWD/www
mkconf() { local ofc=""; [ "$3" = ofc ] && ofc="open_file_cache max=1000 inactive=20s; open_file_cache_valid 1s;"
cat > /tmp/ng.conf <<C
worker_processes $1; master_process on; daemon off; user root root; pid /tmp/ng$2.pid; error_log /tmp/ngerr.log warn;
worker_rlimit_nofile 100000;
events { worker_connections 100000; }
http { types { text/html html; } access_log off; sendfile on; tcp_nopush on; tcp_nodelay on; keepalive_timeout 65; keepalive_requests 1000000; $ofc
 client_body_temp_path /tmp/cb; proxy_temp_path /tmp/pt; fastcgi_temp_path /tmp/ft; uwsgi_temp_path /tmp/ut; scgi_temp_path /tmp/st;
 server { listen 127.0.0.1:$2; root $W; location / { } } }
C
}
one() { # K label env... -- cmd... (@P@ = the port)
  local K=$1 label=$2; shift 2
  local P=$((20000 + RANDOM % 20000))
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local cmd=(); for a in "$@"; do cmd+=("${a//@P@/$P}"); done
  [ "$label" = nginx ] && mkconf $K $P
  [ "$label" = nginx-ofc ] && mkconf $K $P ofc
  env "${envs[@]}" setsid taskset -c 0-$((K-1)) "${cmd[@]}" > /tmp/srv.log 2>&1 &
  local pid=$!; sleep 0.5
  taskset -c 8-15 ./wrk -t8 -c$((100*K)) -d1 http://127.0.0.1:$P/index.html > /dev/null 2>&1
  local out=$(taskset -c 8-15 ./wrk -t8 -c$((100*K)) -d3 http://127.0.0.1:$P/index.html 2>&1)
  kill -TERM -$pid 2>/dev/null; sleep 0.3; kill -KILL -$pid 2>/dev/null; wait $pid 2>/dev/null
  echo "K=$K $label rps=$(echo "$out" | awk '/Requests\/sec/{print $2}') non2xx=$(echo "$out" | grep -c Non-2xx)"
}
ulimit -n 100000 2>/dev/null
for round in 1 2; do for K in ${KS:-8 4 2}; do
  one $K nginx -- ./nginx -p /tmp -c /tmp/ng.conf
  one $K main X=1 -- ./httpd-main -p @P@ -r $W -v $K
  one $K new X=1 -- ./httpd-new -p @P@ -r $W -v $K
  one $K nginx-ofc -- ./nginx -p /tmp -c /tmp/ng.conf
  one $K pthread X=1 -- ./httpd-pthread-new -p @P@ -r $W
done; done | tee $OUT/http3.txt
