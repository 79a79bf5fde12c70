#!/usr/bin/env bash
# Debian packages the tests need beyond the virtual environment, installed when missing
# (as root, as on CI machines): Java for PySpark, systemd-analyze for the unit checks,
# PostgreSQL and its JDBC driver for the JDBC scenarios (tests/pg.py starts a throwaway server),
# Debian's python3.11 with venv and util-linux's setpriv for running the agent as another user
# (tests/otheruser.py: the checkout may be unreadable to that user), and Prometheus's promtool
# for the alert rules under deploy/ (tests/test_alerts.py).
set -euo pipefail
need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
command -v kill >/dev/null 2>&1 || need+=(procps)
compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null || need+=(postgresql)
[[ -f /usr/share/java/postgresql.jar ]] || need+=(libpostgresql-jdbc-java)
[[ -x /usr/bin/python3.11 ]] || need+=(python3.11)
/usr/bin/python3.11 -c 'import ensurepip' >/dev/null 2>&1 || need+=(python3.11-venv)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "missing Debian packages: ${need[*]} (run as root or install them)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
