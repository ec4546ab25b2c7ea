#!/usr/bin/env bash
# The project's own MariaDB: private data dir under .db/, 127.0.0.1, a non-default port,
# ROW binlog with full row images. Never touches a server the machine happens to run.
#   scripts/db.sh up      start (initialising the data dir and the binlake user once)
#   scripts/db.sh down    stop it by its own PID
#   scripts/db.sh env     print `export ...` of its port (BINLAKE_DB_PORT, which `up` read) and
#                         the binlake user's password (BINLAKE_SOURCE_PASSWORD, the demo config's
#                         source.password_env)
# BINLAKE_DB_DIR and BINLAKE_DB_PORT place another server; BINLAKE_DB_SETTINGS (my.cnf lines,
# `name=value` one a line) follow the defaults below and so override them: the tests' throwaway
# servers (tests/integration/servers.py) are this script with other settings.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${BINLAKE_DB_DIR:-$root/.db}"
port="${BINLAKE_DB_PORT:-13306}"
cnf="$dir/my.cnf"
sock="$dir/mysqld.sock"

write_cnf() {
  mkdir -p "$dir/data" "$dir/binlog"
  cat >"$cnf" <<CNF
[mariadbd]
datadir=$dir/data
socket=$sock
pid-file=$dir/mysqld.pid
port=$port
bind-address=127.0.0.1
skip-name-resolve
log-error=$dir/error.log
server_id=1
log-bin=$dir/binlog/mysql-bin
binlog_format=ROW
binlog_row_image=FULL
binlog_row_metadata=FULL
max_binlog_size=4M
local_infile=1
innodb_buffer_pool_size=512M
innodb_flush_log_at_trx_commit=2
sync_binlog=0
max_connections=500
character-set-server=utf8mb4
collation-server=utf8mb4_general_ci
${BINLAKE_DB_SETTINGS:-}
[client]
socket=$sock
port=$port
CNF
}

admin() { mariadb --defaults-file="$cnf" -uroot "$@"; }

up() {
  command -v mariadbd >/dev/null || { echo "mariadb-server is not installed: run 'make setup'" >&2; exit 1; }
  if [ -f "$dir/mysqld.pid" ] && kill -0 "$(cat "$dir/mysqld.pid")" 2>/dev/null; then
    echo "MariaDB already running on 127.0.0.1:$port"; return
  fi
  write_cnf
  local fresh=0
  if [ ! -d "$dir/data/mysql" ]; then
    mariadb-install-db --defaults-file="$cnf" --user=root --auth-root-authentication-method=normal \
      --skip-test-db >"$dir/install.log" 2>&1
    fresh=1
  fi
  mariadbd --defaults-file="$cnf" --user=root >/dev/null 2>&1 &
  for _ in $(seq 1 100); do
    mariadb-admin --defaults-file="$cnf" -uroot ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  mariadb-admin --defaults-file="$cnf" -uroot ping >/dev/null
  if [ "$fresh" = 1 ] || [ ! -f "$dir/password" ]; then
    # A random password per data dir: nothing secret is ever committed.
    head -c 18 /dev/urandom | base64 | tr -d '/+=' >"$dir/password"
    chmod 600 "$dir/password"
    admin <<SQL
CREATE USER IF NOT EXISTS 'binlake'@'127.0.0.1' IDENTIFIED BY '$(cat "$dir/password")';
ALTER USER 'binlake'@'127.0.0.1' IDENTIFIED BY '$(cat "$dir/password")';
GRANT ALL PRIVILEGES ON *.* TO 'binlake'@'127.0.0.1';
CREATE USER IF NOT EXISTS 'binlake_ro'@'127.0.0.1' IDENTIFIED BY '$(cat "$dir/password")';
GRANT SELECT ON *.* TO 'binlake_ro'@'127.0.0.1';
FLUSH PRIVILEGES;
SQL
  fi
  echo "MariaDB up on 127.0.0.1:$port (data dir $dir)"
}

down() {
  [ -f "$dir/mysqld.pid" ] || { echo "MariaDB not running"; return; }
  local pid; pid="$(cat "$dir/mysqld.pid")"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  echo "MariaDB stopped"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  env) echo "export BINLAKE_DB_PORT=$port BINLAKE_SOURCE_PASSWORD=$(cat "$dir/password")" ;;
  sql) shift; admin "$@" ;;
  *) echo "usage: $0 up|down|env|sql" >&2; exit 2 ;;
esac
