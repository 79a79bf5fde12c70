#!/usr/bin/env bash
# Debian packages the tests need beyond the virtual environment (installed once, as root).
set -euo pipefail
need=()
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
if ((${#need[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "missing Debian packages: ${need[*]} (run as root or install them)" >&2
    exit 1
  fi
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
