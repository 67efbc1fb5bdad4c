#!/usr/bin/env bash
# http-ab.sh: main httpd against the sharded-epoll variants at K=8 and 4, nginx beside; perf profiles at K=8 (see README.md)
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
ulimit -n 200000
W=$PWD/www
mkconf() { cat > /tmp/ng.conf <<C
worker_processes $1; master_process on; daemon off; user root root; pid /tmp/ng$2.pid; error_log /tmp/ngerr.log warn;
worker_rlimit_nofile 100000;
events { worker_connections 100000; }
http { types { text/html html; } access_log off; sendfile on; tcp_nopush on; tcp_nodelay on; keepalive_timeout 65; keepalive_requests 1000000;
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
  env "${envs[@]}" setsid taskset -c 0-$((K-1)) "${cmd[@]}" > /tmp/srv.log 2>&1 &
  local pid=$!; sleep 0.5
  taskset -c ${WC:-8-15} ./wrk -t${WT:-8} -c$((100*K)) -d1 http://127.0.0.1:$P/index.html > /dev/null 2>&1
  local pp=
  if [ -n "$PERF" ]; then ./perf record -q -a -C 0-$((K-1)) -F 1999 -o $OUT/perf-$label.data -- sleep 2.5 >/dev/null 2>&1 & pp=$!; fi
  local out=$(taskset -c ${WC:-8-15} ./wrk -t${WT:-8} -c$((100*K)) -d3 http://127.0.0.1:$P/index.html 2>&1)
  [ -n "$pp" ] && wait $pp
  kill -TERM -$pid 2>/dev/null; sleep 0.3; kill -KILL -$pid 2>/dev/null; wait $pid 2>/dev/null
  echo "K=$K $label rps=$(echo "$out" | awk '/Requests\/sec/{print $2}') non2xx=$(echo "$out" | grep -c Non-2xx) $(grep MIGR /tmp/srv.log | tail -1)"
}
for round in ${ROUNDS:-1 2}; do for K in ${KS:-8 4}; do
  one $K nginx -- ./nginx -p /tmp -c /tmp/ng.conf
  one $K old X=1 -- ./httpd-oldm -p @P@ -r $W -v $K
  one $K shard X=1 -- ./httpd-x -p @P@ -r $W -v $K
  one $K nomig X_NOMIG=1 -- ./httpd-x -p @P@ -r $W -v $K
  one $K own-rare X_OWN=1 X_RARE=1 -- ./httpd-x -p @P@ -r $W -v $K
  one $K nomig-own-rare X_NOMIG=1 X_OWN=1 X_RARE=1 -- ./httpd-x -p @P@ -r $W -v $K
done; done | tee $OUT/http.txt
K=${PK:-8}
PERF=1 one $K old X=1 -- ./httpd-oldm -p @P@ -r $W -v $K | tee -a $OUT/http.txt
PERF=1 one $K nginx -- ./nginx -p /tmp -c /tmp/ng.conf | tee -a $OUT/http.txt
for l in old nginx; do ./perf report -i $OUT/perf-$l.data --stdio --sort sym 2>/dev/null | grep "%" | head -80 > $OUT/prof-$l.txt; ./perf report -i $OUT/perf-$l.data --stdio --sort comm,dso 2>/dev/null | grep "%" | head -20 >> $OUT/prof-$l.txt; rm -f $OUT/perf-$l.data; done
ls -la $OUT
