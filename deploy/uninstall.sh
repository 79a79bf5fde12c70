#!/usr/bin/env bash
# Remove lineage-agent from this node, or from a tree staged with install.sh --root.
#
#   uninstall.sh [--root DIR] [--unit-dir DIR] [--purge] [--no-systemctl]
#
# Stops and disables the service (live systemd system only), removes the unit (from
# /etc/systemd/system and /usr/lib/systemd/system, where install.sh puts it, or --unit-dir) and
# /opt/lineage-agent. Keeps the configuration and the state (delivery ledger, event-log
# positions and the node's signing key, all in /var/lib/lineage-agent) unless --purge, which
# also removes /etc/lineage-agent, /var/lib/lineage-agent and the sysusers.d and tmpfiles.d
# entries. The system user stays either way: files it owned elsewhere keep a name, and a
# reinstall gets the same ids (remove it with `userdel lineage-agent` if you must). Running
# it again changes nothing.
set -euo pipefail

readonly UNIT_NAME=lineage-agent.service

say() { printf 'uninstall: %s\n' "$*"; }
die() { printf 'uninstall: error: %s\n' "$*" >&2; exit 1; }
usage() { echo "usage: uninstall.sh [--root DIR] [--unit-dir DIR] [--purge] [--no-systemctl]"; }

root=/
purge=0
unit_dir=
use_systemctl=1
while (($#)); do
  case $1 in
    --root) root=${2:?--root needs a directory}; shift 2 ;;
    --purge) purge=1; shift ;;
    --unit-dir) unit_dir=${2:?--unit-dir needs a directory}; shift 2 ;;
    --no-systemctl) use_systemctl=0; shift ;;
    -h | --help) usage; exit 0 ;;
    *) printf 'uninstall: error: unknown argument: %s\n' "$1" >&2; usage >&2; exit 2 ;;
  esac
done

[[ -d $root ]] || die "--root $root: no such directory"
root=$(cd "$root" && pwd -P)
live=0
[[ $root == / ]] && live=1
prefix=${root%/}
if ((live)) && ((EUID != 0)); then
  die "removing from / needs root; use --root DIR for a staged tree"
fi

# Where install.sh puts the unit: /etc/systemd/system here, /usr/lib/systemd/system in a
# staged tree, or the --unit-dir it was given.
units=("$prefix/etc/systemd/system/$UNIT_NAME" "$prefix/usr/lib/systemd/system/$UNIT_NAME")
if [[ -n $unit_dir ]]; then
  [[ $unit_dir == /* ]] || die "--unit-dir $unit_dir: expected an absolute path (as the target system sees it)"
  units=("$prefix${unit_dir%/}/$UNIT_NAME")
fi
readonly dropins=$prefix/etc/systemd/system/$UNIT_NAME.d
readonly optdir=$prefix/opt/lineage-agent
readonly confdir=$prefix/etc/lineage-agent
readonly statedir=$prefix/var/lib/lineage-agent
readonly sysusers=$prefix/usr/lib/sysusers.d/lineage-agent.conf
readonly tmpfiles=$prefix/usr/lib/tmpfiles.d/lineage-agent.conf

systemd_live=0
if ((use_systemctl && live)) && [[ -d /run/systemd/system ]]; then
  systemd_live=1
fi

# Removes a file, a link or a whole tree; never follows a link (the venv may be one).
remove() {
  if [[ -e $1 || -L $1 ]]; then
    rm -rf -- "$1"
    say "removed $1"
  else
    say "$1 is already gone"
  fi
}

if ((systemd_live)); then
  # Stop first: SIGTERM drains the queue and saves state (TimeoutStopSec in the unit).
  if systemctl is-active --quiet "$UNIT_NAME"; then
    systemctl stop "$UNIT_NAME"
    say "stopped $UNIT_NAME"
  fi
  if systemctl is-enabled --quiet "$UNIT_NAME" 2>/dev/null; then
    systemctl disable "$UNIT_NAME"
    say "disabled $UNIT_NAME"
  fi
elif ((!use_systemctl)); then
  say "--no-systemctl: not running systemctl"
else
  say "not a live systemd system: not running systemctl"
fi

for unit in "${units[@]}"; do
  if [[ -e $unit || -L $unit || -n $unit_dir ]]; then
    remove "$unit"
  fi
done
# The wants/ link `enable` made; normally gone after disable, but a staged tree has no systemctl.
wants=$prefix/etc/systemd/system/multi-user.target.wants/$UNIT_NAME
if [[ -L $wants ]]; then
  remove "$wants"
fi
remove "$optdir"

if ((purge)); then
  remove "$dropins"
  remove "$confdir"
  remove "$statedir"
  remove "$sysusers"
  remove "$tmpfiles"
else
  for kept in "$confdir" "$statedir" "$dropins"; do
    if [[ -e $kept ]]; then
      say "keeping $kept (--purge removes it)"
    fi
  done
fi

if ((systemd_live)); then
  systemctl daemon-reload
fi
say "done"
