#!/usr/bin/env bash
# Install lineage-agent as a systemd service on this node, or stage the same tree below a
# directory (--root) for an image or a package build.
#
#   install.sh [--root DIR] [--source PROJECT_DIR_OR_WHEEL] [--python PYTHON]
#              [--python-env EXISTING_VENV] [--unit-dir DIR] [--no-systemctl]
#              [--extras s3,gcs,azure]
#
# What it does, each step only when needed (running it again changes nothing):
#   - the system user and group lineage-agent: a sysusers.d entry, and on a live system
#     (not --root) the user itself;
#   - a tmpfiles.d entry that sets owner and mode of /etc/lineage-agent and its config at boot
#     (what makes a staged tree right once sysusers has created the user);
#   - a virtual environment in /opt/lineage-agent/venv with the agent pip-installed from
#     --source (default: the project this script belongs to), reinstalled when the source
#     changes; --python-env links an existing environment instead (development, tests);
#   - the unit lineage-agent.service: in /etc/systemd/system on this system (the
#     administrator's place), in /usr/lib/systemd/system when staging a tree with --root (the
#     place of units a package or image ships, which /etc/systemd/system overrides);
#     --unit-dir chooses another directory, as the target system will see it;
#   - the extras of the stores the config's spark.event_log_dirs name (s3:// and s3a://: s3,
#     gs://: gcs, abfs[s]://: azure), asked of the installed agent (`config extras`) and added
#     to the environment; --extras LIST installs those instead (--extras '' none);
#   - /etc/lineage-agent/config.yaml from config/file.yaml, kept if it exists;
#   - systemctl daemon-reload and enable (not start), on a live systemd system only.
#
# No signing key: the agent makes the node's key at its first start (signing.key_path, by
# default /var/lib/lineage-agent/ed25519.key, mode 0600) and logs its key id
# (signing_key_created), so every node built from one image gets a key of its own.
#
# --root and the Python the environment runs on: a virtual environment is not a copy of
# Python; it runs the interpreter it was made with, at that absolute path. A staged
# environment is therefore made with the image's own interpreter, found inside DIR
# (DIR/usr/bin/python3, or --python naming one inside DIR), and its links and pyvenv.cfg are
# rewritten to the path that interpreter has in the image (/usr/bin/python3). The build
# host's Python (a pyenv or /usr/local build, say) is refused: the image would not have it
# and the service would fail with status 203/EXEC. Stage into the image's root file system
# (it must hold Python 3.11 or newer, runnable on this machine), or run install.sh inside
# the image build (a Dockerfile RUN, a chroot, Packer) without --root.
set -euo pipefail
# The environment and the unit must be readable by the service user whatever root's umask is;
# the config gets an explicit mode below.
umask 022

readonly UNIT_NAME=lineage-agent.service
readonly SERVICE_USER=lineage-agent
readonly SPARK_GROUP=spark
PROJECT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
readonly PROJECT_DIR

say() { printf 'install: %s\n' "$*"; }
die() { printf 'install: error: %s\n' "$*" >&2; exit 1; }

usage() {
  echo "usage: install.sh [--root DIR] [--source PROJECT_DIR_OR_WHEEL] [--python PYTHON]"
  echo "                  [--python-env EXISTING_VENV] [--unit-dir DIR] [--no-systemctl]"
  echo "                  [--extras s3,gcs,azure]"
  echo
  echo "  --root DIR       stage the tree below DIR (an image's root file system or a package"
  echo "                   build) instead of installing into this system"
  echo "  --source PATH    project directory or wheel to install (default: this checkout)"
  echo "  --python PYTHON  interpreter of the new environment, 3.11 or newer (default: python3;"
  echo "                   with --root, DIR/usr/bin/python3: a staged environment runs the"
  echo "                   image's own Python, never the build host's, which is refused)"
  echo "  --python-env ENV link an existing environment instead (development and tests)"
  echo "  --unit-dir DIR   where the unit goes, as the target system sees it (default:"
  echo "                   /etc/systemd/system here, /usr/lib/systemd/system with --root)"
  echo "  --no-systemctl   no daemon-reload or enable (a container build)"
  echo "  --extras LIST    the libraries of stores installed with the agent: s3 (s3://, s3a://),"
  echo "                   gcs (gs://), azure (abfs[s]://); '' for none. Without it, those the"
  echo "                   config's spark.event_log_dirs name (the config kept, or the one"
  echo "                   installed), added to those installed before"
  echo
  echo "No signing key is installed or staged: the agent makes the node's key at its first"
  echo "start (signing.key_path, default /var/lib/lineage-agent/ed25519.key, mode 0600)."
}

root=/
source_path=$PROJECT_DIR
python=
python_env=
unit_dir=
use_systemctl=1
extras=
extras_set=0  # --extras given: those, not the config's
while (($#)); do
  case $1 in
    --root) root=${2:?--root needs a directory}; shift 2 ;;
    --source) source_path=${2:?--source needs a project directory or a wheel}; shift 2 ;;
    --python) python=${2:?--python needs an interpreter}; shift 2 ;;
    --python-env) python_env=${2:?--python-env needs a virtual environment}; shift 2 ;;
    --unit-dir) unit_dir=${2:?--unit-dir needs a directory}; shift 2 ;;
    --no-systemctl) use_systemctl=0; shift ;;
    --extras) extras=${2?--extras needs a list such as s3,gcs}; extras_set=1; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) printf 'install: error: unknown argument: %s\n' "$1" >&2; usage >&2; exit 2 ;;
  esac
done

[[ -d $root ]] || die "--root $root: no such directory"
# The optional dependencies of pyproject.toml that bring a store's library.
for extra in ${extras//,/ }; do
  case $extra in
    s3 | gcs | azure) ;;
    *) die "--extras $extras: unknown extra '$extra' (known: s3, gcs, azure)" ;;
  esac
done
[[ -z $extras || -z $python_env ]] ||
  die "--extras installs into the environment install.sh makes; with --python-env, install" \
    "them into $python_env itself (pip install 'edge-lineage-agent[$extras]')"
root=$(cd "$root" && pwd -P)
live=0  # installing into the running system (not staging a tree)
[[ $root == / ]] && live=1
prefix=${root%/}  # "" for /, so "$prefix/etc" is /etc
if ((live)) && ((EUID != 0)); then
  die "installing into / needs root; use --root DIR to stage the files into a directory"
fi

readonly target_venv=/opt/lineage-agent/venv  # where the environment runs from
readonly venv=$prefix$target_venv
readonly confdir=$prefix/etc/lineage-agent
readonly config=$confdir/config.yaml
# The config the service will read: the one kept, or the example installed below.
if [[ -e $config ]]; then installing_config=$config; else installing_config=$PROJECT_DIR/config/file.yaml; fi
readonly installing_config
if [[ -z $unit_dir ]]; then
  # A package or an image ships its units in /usr/lib; /etc/systemd/system is the
  # administrator's (drop-ins, overrides), where a local install puts its unit.
  if ((live)); then unit_dir=/etc/systemd/system; else unit_dir=/usr/lib/systemd/system; fi
fi
[[ $unit_dir == /* ]] || die "--unit-dir $unit_dir: expected an absolute path (as the target system sees it)"
readonly unit=$prefix${unit_dir%/}/$UNIT_NAME
readonly sysusers=$prefix/usr/lib/sysusers.d/lineage-agent.conf
readonly tmpfiles=$prefix/usr/lib/tmpfiles.d/lineage-agent.conf

# Writes $2 to $1 (mode $3) unless the file already holds exactly that text.
put_file() {
  local path=$1 text=$2 mode=$3
  if [[ -f $path ]] && [[ $(<"$path") == "$text" ]]; then
    say "$path is up to date"
    return
  fi
  mkdir -p "$(dirname "$path")"
  local tmp
  tmp=$(mktemp "$path.XXXXXX")
  printf '%s\n' "$text" >"$tmp"
  chmod "$mode" "$tmp"
  mv -f "$tmp" "$path"
  say "wrote $path"
}

# --- user and group -------------------------------------------------------------------------
# The sysusers.d entry describes the user for systemd-sysusers (images, first boot); on a live
# system the user is also created right away, with the classic tools that every distribution
# has.
put_file "$sysusers" "# The system user of lineage-agent.service (created by deploy/install.sh).
u $SERVICE_USER - \"OpenLineage lineage agent\" /var/lib/lineage-agent /usr/sbin/nologin" 0644
if ((live)); then
  if getent group "$SERVICE_USER" >/dev/null; then
    say "group $SERVICE_USER exists"
  else
    groupadd --system "$SERVICE_USER"
    say "created group $SERVICE_USER"
  fi
  if getent passwd "$SERVICE_USER" >/dev/null; then
    say "user $SERVICE_USER exists"
  else
    useradd --system --gid "$SERVICE_USER" --home-dir /var/lib/lineage-agent --no-create-home \
      --shell /usr/sbin/nologin --comment "OpenLineage lineage agent" "$SERVICE_USER"
    say "created user $SERVICE_USER"
  fi
  if ! getent group "$SPARK_GROUP" >/dev/null; then
    say "warning: group $SPARK_GROUP does not exist; the unit's SupplementaryGroups=$SPARK_GROUP" \
      "will fail its start. Name the group that owns the event logs in a drop-in" \
      "(systemctl edit lineage-agent)."
  fi
else
  say "staging into $root: no user created (systemd-sysusers creates it from $sysusers)"
fi

# --- virtual environment --------------------------------------------------------------------
# A fingerprint of what was installed, so that a second run with the same source skips pip.
source_fingerprint() {
  if [[ -f $1 ]]; then
    sha256sum "$1" | cut -d' ' -f1
  elif [[ -d $1 ]]; then
    (cd "$1" && find pyproject.toml README.md agent -type f ! -path '*/__pycache__/*' \
      ! -name '*.pyc' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
  else
    die "--source $1: no such project directory or wheel"
  fi
}

# The interpreter of a staged environment: the image's own (see the top of this file), as an
# absolute path inside the staged tree. Sets `python`; refuses one outside the tree.
staged_python() {
  if [[ -z $python && $(readlink "$venv/bin/python3" 2>/dev/null) == /* ]]; then
    python=$prefix$(readlink "$venv/bin/python3")  # what an earlier run made it with
  fi
  if [[ -z $python ]]; then
    python=$prefix/usr/bin/python3
    [[ -x $python ]] ||
      die "--root $root: no $python: a staged environment runs the image's own Python at" \
        "the same path, and this tree has none. Stage into the image's root file system" \
        "(with Python 3.11 or newer), give --python an interpreter inside $root, or run" \
        "install.sh inside the image build without --root"
  fi
  local where
  where=$(cd "$(dirname "$python")" 2>/dev/null && pwd -P) || die "--python $python: not found"
  python=$where/$(basename "$python")
  [[ $python == "$prefix"/* ]] ||
    die "--python $python is not inside --root $root: the staged environment would run this" \
      "build host's interpreter, which the image does not have (the service would fail with" \
      "status 203/EXEC). Give --python the image's own interpreter, inside $root"
}

# A virtual environment is not relocatable: its python links and the `home` of its pyvenv.cfg
# name the interpreter it was made with, scripts start with #!<its path>/bin/python and byte
# code records source paths. A staged one is made with the image's interpreter inside the
# tree; `venv_paths image` rewrites all of them to the paths they have in the image, and
# `venv_paths build` points links and home back into the tree for pip to run here.
venv_paths() {
  local mode=$1 link target script first
  for link in "$venv"/bin/python*; do
    [[ -L $link ]] || continue
    target=$(readlink "$link")
    if [[ $mode == image && $target == "$prefix"/* ]]; then
      ln -sfn "${target#"$prefix"}" "$link"
    elif [[ $mode == build && $target == /* && $target != "$prefix"/* ]]; then
      ln -sfn "$prefix$target" "$link"
    fi
  done
  if [[ $mode == build ]]; then
    sed -i -E "\#^home = $prefix/#! s#^home = /#home = $prefix/#" "$venv/pyvenv.cfg"
    return
  fi
  "$venv/bin/python" -m compileall -q -f -s "$prefix" -p / "$venv/lib" >/dev/null
  sed -i -E "s#^(home|executable|command) = $prefix/#\1 = /#; s# $venv\$# $target_venv#" \
    "$venv/pyvenv.cfg"
  for script in "$venv"/bin/*; do
    [[ -f $script && ! -L $script ]] || continue
    IFS= read -r first <"$script" || continue
    if [[ $first == "#!$venv/bin/"* ]]; then
      sed -i "1s|^#!$venv/bin/|#!$target_venv/bin/|" "$script"
    elif [[ $script == */activate* ]]; then
      sed -i "s|$venv|$target_venv|g" "$script"
    fi
  done
}

# The agent and $extras pip-installed into the environment made here, unless its stamp says
# that source with those extras is there already (sets `installed` when it installs).
install_env() {
  want=$(source_fingerprint "$source_path")${extras:+ [$extras]}
  if [[ -x $venv/bin/lineage-agent && -f $stamp && $(<"$stamp") == "$want" ]]; then
    say "$venv is up to date with $source_path"
  else
    installed=1
    if [[ ! -e $venv/pyvenv.cfg ]]; then
      "$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
        die "$python: lineage-agent needs Python 3.11 or newer"
      "$python" -m venv "$venv"
      say "created $venv"
    fi
    pip=("$venv/bin/python" -m pip install --quiet --upgrade --disable-pip-version-check
      --root-user-action=ignore)
    spec=$source_path${extras:+[$extras]}
    if ((live)); then
      "${pip[@]}" "$spec"
    else
      venv_paths build
      "${pip[@]}" --no-compile "$spec"
      venv_paths image
      say "$venv runs the image's ${python#"$prefix"} (made with $python)"
    fi
    printf '%s\n' "$want" >"$stamp"
  fi
}

if [[ -n $python_env ]]; then
  python_env=$(cd "$python_env" 2>/dev/null && pwd -P) || die "--python-env: no such directory"
  [[ -x $python_env/bin/lineage-agent ]] ||
    die "--python-env $python_env: no bin/lineage-agent in it (pip install the project there first)"
  if [[ -L $venv ]] && [[ $(readlink "$venv") == "$python_env" ]]; then
    say "$venv links to $python_env"
  elif [[ -e $venv && ! -L $venv ]]; then
    die "$venv is a real environment; remove it (uninstall.sh) before linking $python_env"
  else
    mkdir -p "$(dirname "$venv")"
    ln -sfn "$python_env" "$venv"
    say "linked $venv -> $python_env"
  fi
  agent=("$venv/bin/python" -I -m agent)  # -I: never the agent/ of the working directory
  # Not this script's environment: it says what the config needs that is missing there.
  if ((!extras_set)) && missing=$("${agent[@]}" config extras --missing "$installing_config" 2>/dev/null) &&
    [[ -n $missing ]]; then
    say "note: $installing_config names stores whose libraries $python_env lacks: install" \
      "them there (pip install 'edge-lineage-agent[$missing]')"
  fi
else
  if [[ -L $venv ]]; then
    die "$venv is a link (--python-env); remove it (uninstall.sh) first"
  fi
  if [[ -d $source_path ]]; then
    source_path=$(cd "$source_path" && pwd -P)
  elif [[ -f $source_path ]]; then
    source_path=$(cd "$(dirname "$source_path")" && pwd -P)/$(basename "$source_path")
  fi
  if ((live)); then
    python=${python:-python3}
  else
    staged_python
  fi
  stamp=$venv/.lineage-agent-source
  if ((!extras_set)) && [[ -f $stamp ]]; then
    # Without --extras, those installed before stay; the config's are added below.
    extras=$(sed -n 's/^[^ ]* \[\(.*\)\]$/\1/p' "$stamp")
  fi
  installed=0
  install_env
  if ((live)); then
    agent=("$venv/bin/python" -I -m agent)
  else
    # The staged environment, run here with the interpreter inside the tree and left as it
    # is: a throwaway environment whose home is that interpreter and whose lib is the staged
    # one. (Not bin/lineage-agent: its #! line names the path in the image.)
    shadow=$(mktemp -d)
    trap 'rm -rf "$shadow"' EXIT
    mkdir "$shadow/bin"
    ln -s "$python" "$shadow/bin/python"
    ln -s "$venv/lib" "$shadow/lib"
    printf 'home = %s\ninclude-system-site-packages = false\n' "$(dirname "$python")" \
      >"$shadow/pyvenv.cfg"
    agent=("$shadow/bin/python" -I -m agent)
  fi
  if ((!extras_set)); then
    # The agent reads the config as the service will (its own parser, the file alone).
    # A config that does not load is named by the check below.
    if needed=$("${agent[@]}" config extras "$installing_config" 2>/dev/null); then
      all=$(printf '%s\n' ${extras//,/ } ${needed//,/ } | LC_ALL=C sort -u | paste -sd, -)
      if [[ $all != "$(printf '%s\n' ${extras//,/ } | LC_ALL=C sort -u | paste -sd, -)" ]]; then
        say "$installing_config names stores that need the extras [$needed]: installing them"
        extras=$all
        install_env
      fi
    else
      say "warning: cannot tell which extras $installing_config needs: it does not load;" \
        "give --extras to install them"
    fi
  fi
  if ((installed)); then
    say "installed $("${agent[@]}" --version) from $source_path into $venv"
  fi
fi

# --- unit -----------------------------------------------------------------------------------
put_file "$unit" "$(<"$PROJECT_DIR/systemd/$UNIT_NAME")" 0644

# --- configuration directory and config -----------------------------------------------------
# The directory is root:lineage-agent 0750 and the config root:lineage-agent 0640: the service
# reads them, nobody else does. systemd never changes owner or mode of a
# ConfigurationDirectory; the unit's ConfigurationDirectoryMode matches so that it does not
# warn. In a staged tree the user does not exist yet and this machine's ids mean nothing
# there, so the files keep the owner of whoever runs this and the tmpfiles.d entry sets owner
# and mode at boot, after systemd-sysusers has created the user. The signing key is no file of
# this script's: the agent makes it in its state directory at its first start.
put_file "$tmpfiles" "# Owner and mode of lineage-agent's files (written by deploy/install.sh).
z /etc/lineage-agent 0750 root $SERVICE_USER -
z /etc/lineage-agent/config.yaml 0640 root $SERVICE_USER -" 0644
set_owner() {
  if ((live)) && [[ $(stat -c %U:%G "$2") != "$1" ]]; then
    chown "$1" "$2"
    say "owner of $2 set to $1"
  fi
}
if ((!live)); then
  say "staging into $root: files stay owned by $(id -un); no chown"
fi
if [[ ! -d $confdir ]]; then
  mkdir -p "$confdir"
  say "created $confdir"
fi
if [[ $(stat -c %a "$confdir") != 750 ]]; then
  chmod 0750 "$confdir"
fi
set_owner "root:$SERVICE_USER" "$confdir"

if [[ -e $config ]]; then
  say "keeping existing config $config"
else
  install -m 0640 "$PROJECT_DIR/config/file.yaml" "$config"
  set_owner "root:$SERVICE_USER" "$config"
  say "wrote $config (file transport; see $PROJECT_DIR/config/ for other examples)"
fi

# The same checks the service makes before it starts (key, endpoints, CA bundle, events file);
# a staged tree is checked with its own files in place of the system's. A key still to be made
# is one of the notes.
check=("${agent[@]}" config check "$config")
((live)) || check+=(--root "$root")
if checked=$("${check[@]}"); then
  # What only the service's user or environment can tell (a token variable, say).
  printf '%s\n' "$checked" | sed -n 's/^note: /install: note: /p'
else
  say "warning: $config does not pass 'lineage-agent config check'; the service will refuse" \
    "to start (exit 78) until it is fixed"
fi

# --- systemd --------------------------------------------------------------------------------
if ((!use_systemctl)); then
  say "--no-systemctl: not running systemctl"
elif ((!live)); then
  say "staging into $root: not running systemctl"
elif [[ ! -d /run/systemd/system ]]; then
  say "systemd is not running here: not running systemctl"
else
  systemctl daemon-reload
  if systemctl is-enabled --quiet "$UNIT_NAME"; then
    say "$UNIT_NAME is enabled"
  else
    systemctl enable "$UNIT_NAME"
    say "enabled $UNIT_NAME"
  fi
  say "start it with: systemctl start lineage-agent (after checking $config)"
fi
say "done"
